/**
 * The SQLite backend's schema: its tables and indexes, the in-place
 * migrations from every older layout, and the connection settings.
 *
 * @module
 */

import type { DatabaseSync, SQLInputValue, SQLOutputValue } from "node:sqlite";
import { BackendError, McpStateError } from "../../errors.ts";
import { retryWhileSync } from "../_retry.ts";
import { messageOf } from "../_shared.ts";
import type { SqliteSynchronous } from "./_url.ts";

/**
 * The schema version this backend writes to `PRAGMA user_version`. The
 * Python mcpstate 0.2 layout (REAL epoch seconds, no `user_version`) counts
 * as version 1; version 2 is the millisecond layout without history;
 * version 3 adds the `changes` and `trash` tables; version 4 the `leases`
 * table; version 5 drops the listing index by kind (one listing index is
 * rewritten per save instead of two); version 6 adds the `log_tail` column
 * (a small record's newest changelog entries, kept in its row). Older files
 * are brought forward in place when opened.
 */
export const SQLITE_SCHEMA_VERSION = 6;

/**
 * The columns of a record, one per line: the `handles` table's, which the
 * `trash` table repeats before its own `trashed_until`.
 */
const RECORD_COLUMNS = `
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_writer TEXT,`;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS handles (${RECORD_COLUMNS}
  PRIMARY KEY (user, handle)
);
CREATE INDEX IF NOT EXISTS handles_by_user_updated
  ON handles (user, updated_ms DESC, handle, kind, version, created_ms, expires_ms, last_writer);
CREATE INDEX IF NOT EXISTS handles_by_expiry
  ON handles (expires_ms) WHERE expires_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency (
  user TEXT NOT NULL,
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  result TEXT,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (user, scope, key)
);
CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency (expires_ms);
CREATE TABLE IF NOT EXISTS changes (
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  version INTEGER NOT NULL,
  at INTEGER NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (user, handle, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trash (${RECORD_COLUMNS}
  trashed_until INTEGER NOT NULL,
  PRIMARY KEY (user, handle)
);
CREATE INDEX IF NOT EXISTS trash_by_until ON trash (trashed_until);
CREATE TABLE IF NOT EXISTS leases (
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  holder TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (user, handle)
);
CREATE INDEX IF NOT EXISTS leases_by_expiry ON leases (expires_at);
`;

/**
 * The numbered steps after {@link SCHEMA} is in place: step `n` runs on a
 * file whose version was below `n`, in order, in the migration's transaction.
 * Each is idempotent (a file created new runs them all too).
 */
const STEPS: readonly (readonly [number, string])[] = [
  // Version 5: a listing filtered by kind walks the one listing index (it
  // covers `kind`), so a save rewrites one listing entry instead of two.
  [5, "DROP INDEX IF EXISTS handles_by_user_kind_updated;"],
  // Version 6: a small record keeps its newest changelog entries in its row
  // (see _log.ts): a column added in place, no row rewritten.
  [6, "ALTER TABLE handles ADD COLUMN log_tail TEXT;"],
];

/** The columns of the tables schemas 3 and 4 add, to recognize a foreign table of the same name. */
const ADDED_TABLES: Record<string, string> = {
  changes: "user handle version at text",
  trash:
    "user handle kind state version created_ms updated_ms expires_ms last_writer trashed_until",
  leases: "user handle holder expires_at",
};

/** Copies a Python 0.2 table (REAL seconds) into the current layout (INTEGER ms). */
const MIGRATE_FROM_V1 = `
CREATE TABLE handles_v2 (${RECORD_COLUMNS}
  PRIMARY KEY (user, handle)
);
INSERT INTO handles_v2
  SELECT user, handle, kind, mcpstate_compact_json(state), version,
    CAST(ROUND(created_at * 1000) AS INTEGER),
    CAST(ROUND(updated_at * 1000) AS INTEGER),
    CASE WHEN expires_at IS NULL THEN NULL ELSE CAST(ROUND(expires_at * 1000) AS INTEGER) END,
    last_writer
  FROM handles;
DROP TABLE handles;
ALTER TABLE handles_v2 RENAME TO handles;
`;

/**
 * Readies a connection: the busy timeout, WAL, the `synchronous` level, and
 * the schema, created or migrated.
 *
 * @param db The connection.
 * @param sync The durability level.
 * @param busy The busy timeout, ms.
 * @throws {BackendError} when the database holds a newer or a foreign schema,
 *   or cannot be prepared.
 */
export function prepareDatabase(db: DatabaseSync, sync: SqliteSynchronous, busy: number): void {
  try {
    // The busy timeout first, so that everything below waits for other processes.
    db.exec(`PRAGMA busy_timeout = ${busy}`);
    enableWal(db, busy);
    db.exec(`PRAGMA synchronous = ${sync === "full" ? "FULL" : "NORMAL"}`);
    // macOS fsync() does not flush the drive's cache; F_FULLFSYNC does.
    if (sync === "full" && Deno.build.os === "darwin") db.exec("PRAGMA fullfsync = ON");
    db.exec("PRAGMA journal_size_limit = 67108864");
    migrate(db);
  } catch (e) {
    if (e instanceof McpStateError) throw e;
    throw new BackendError(`Cannot prepare the SQLite database: ${messageOf(e)}`, { cause: e });
  }
}

/**
 * Creates the schema, or brings an older one forward in place, in one
 * transaction: version 1 (Python mcpstate 0.2, REAL seconds) is copied into
 * millisecond columns; versions 1 and 2 gain the `changes` and `trash`
 * tables, and versions 1 to 3 the `leases` table (new tables only: no
 * existing row or index is rewritten); then the numbered {@link STEPS}.
 */
function migrate(db: DatabaseSync): void {
  const version = () => db.prepare("PRAGMA user_version").get()?.user_version as number;
  if (version() === SQLITE_SCHEMA_VERSION) {
    addSchemaVersion(db);
    return addPreview(db);
  }
  db.exec("BEGIN IMMEDIATE");
  try {
    // Another process may have migrated while this one waited for the lock.
    const v = version();
    if (v > SQLITE_SCHEMA_VERSION) {
      throw new BackendError(
        `This SQLite database has schema version ${v}, newer than this mcpstate understands (${SQLITE_SCHEMA_VERSION}). Upgrade mcpstate to open it.`,
      );
    }
    if (v < SQLITE_SCHEMA_VERSION) {
      const columnsOf = (table: string) =>
        db.prepare("SELECT name FROM pragma_table_info(?)").all(table).map((r) => r.name);
      const handles = new Set(columnsOf("handles"));
      if (handles.has("created_at") && !handles.has("created_ms")) {
        db.function("mcpstate_compact_json", { deterministic: true }, compactJson);
        db.exec(MIGRATE_FROM_V1);
      } else if (handles.size > 0 && !handles.has("created_ms")) {
        throw new BackendError(
          'This SQLite file has a "handles" table that mcpstate did not create. Point mcpstate at another file.',
        );
      }
      // A table of one of the new names with other columns was not made by mcpstate.
      for (const [table, expected] of Object.entries(ADDED_TABLES)) {
        const columns = columnsOf(table);
        const own = columns.filter((c) =>
          c !== "schema_version" && c !== "preview" && c !== "forked_from"
        );
        if (own.length > 0 && own.join(" ") !== expected) {
          throw new BackendError(
            `This SQLite file has a "${table}" table that mcpstate did not create. Point mcpstate at another file.`,
          );
        }
      }
      db.exec(SCHEMA);
      for (const [step, sql] of STEPS) if (v < step) db.exec(sql);
      db.exec(`PRAGMA user_version = ${SQLITE_SCHEMA_VERSION}`);
    }
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
  addSchemaVersion(db);
  addPreview(db);
}

/**
 * Adds the `preview` column (a line describing the state, kept beside the
 * metadata; `NULL` for a record written before previews existed) to the
 * record tables that lack it: in place, no row rewritten. The listing index
 * leaves it out, so a write rewrites no more of the index than before.
 */
function addPreview(db: DatabaseSync): void {
  const missing = () =>
    SCHEMA_VERSION_TABLES.filter((t) =>
      !db.prepare("SELECT name FROM pragma_table_info(?)").all(t).some((r) => r.name === "preview")
    );
  if (missing().length === 0) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    // Another process may have added it while this one waited for the lock.
    for (const t of missing()) db.exec(`ALTER TABLE ${t} ADD COLUMN preview TEXT`);
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}

/** The tables that hold records, each with the column of a record's schema version. */
const SCHEMA_VERSION_TABLES = ["handles", "trash"];

/**
 * Adds the `schema_version` column (a typed kind's version, `NULL` for a
 * state written without one) and the `forked_from` column (a fork's
 * lineage, `NULL` for a handle that is no fork) to the record tables that
 * lack them. Columns added in place: no row is rewritten, and older rows
 * read as `NULL`.
 */
function addSchemaVersion(db: DatabaseSync): void {
  const missing = () =>
    SCHEMA_VERSION_TABLES.filter((t) =>
      !db.prepare("SELECT name FROM pragma_table_info(?)").all(t).some((r) =>
        r.name === "forked_from"
      )
    );
  if (missing().length === 0) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    // Another process may have added it while this one waited for the lock.
    for (const t of missing()) {
      const has = (c: string) =>
        db.prepare("SELECT name FROM pragma_table_info(?)").all(t).some((r) => r.name === c);
      if (!has("schema_version")) db.exec(`ALTER TABLE ${t} ADD COLUMN schema_version INTEGER`);
      // A fork's lineage (`{"handle":…,"version":…}`), `NULL` for a handle that is no fork.
      db.exec(`ALTER TABLE ${t} ADD COLUMN forked_from TEXT`);
    }
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}

/**
 * Rewrites Python's `json.dumps` text (spaces after separators, `\uXXXX`
 * escapes) as the compact form the store writes, so that a patch that
 * changes nothing is still recognized. Text that does not parse (Python's
 * `NaN`), or that may hold an integer beyond 2^53 (16 digits or more in a
 * row, which a round trip through a JS number would round), is kept as it is.
 */
function compactJson(text: SQLOutputValue): SQLInputValue {
  if (typeof text !== "string" || /\d{16}/.test(text)) return text;
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

/**
 * `PRAGMA journal_mode = WAL`. While another connection is creating the same
 * new file, SQLite answers it "database is locked" at once, without the busy
 * handler (seen with two servers starting together): retried, with short
 * jittered sleeps, until the busy timeout.
 */
function enableWal(db: DatabaseSync, busyMs: number): void {
  retryWhileSync(
    () => db.exec("PRAGMA journal_mode = WAL"),
    (e) => /locked|busy/i.test(messageOf(e)),
    Date.now() + busyMs,
  );
}
