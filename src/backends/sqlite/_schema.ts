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
 * table; version 5 drops the listing index by kind; version 6 adds the
 * `log_tail` column; version 7 puts every column of the record tables
 * before the state (see {@link SCHEMA}), gives each kept idempotency result
 * its handle, and adds the `data_keys` table. Older files are brought
 * forward in place when opened.
 */
export const SQLITE_SCHEMA_VERSION = 7;

/**
 * A record's metadata columns, one per line: the `handles` table's and the
 * `trash` table's first columns.
 */
const RECORD_HEAD = `
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  kind TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_writer TEXT,
  schema_version INTEGER,
  forked_from TEXT,
  preview TEXT,`;

/**
 * The tables that version 7 rebuilds, by name: their columns in order.
 * SQLite reads a row's columns in order, and a column stored after a large
 * value is reached only by walking that value's overflow pages: so the
 * state (and a kept result, which holds one) comes last, and a listing with
 * previews, the changelog tail's read or a sweep never touches it.
 */
const REBUILT: Record<string, string> = {
  handles: `${RECORD_HEAD}
  log_tail TEXT,
  state TEXT NOT NULL,
  PRIMARY KEY (user, handle)`,
  trash: `${RECORD_HEAD}
  trashed_until INTEGER NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (user, handle)`,
  // `handle`: the handle whose write the result is (for a mint, the new one).
  idempotency: `
  user TEXT NOT NULL,
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  handle TEXT,
  fingerprint TEXT NOT NULL,
  expires_ms INTEGER NOT NULL,
  result TEXT,
  PRIMARY KEY (user, scope, key)`,
};

/**
 * The schema: a table's columns never follow its large value (the state, a
 * kept result), and `data_keys` holds each user's wrapped data key.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS handles (${REBUILT.handles}
);
CREATE INDEX IF NOT EXISTS handles_by_user_updated
  ON handles (user, updated_ms DESC, handle, kind, version, created_ms, expires_ms, last_writer);
CREATE INDEX IF NOT EXISTS handles_by_expiry
  ON handles (expires_ms) WHERE expires_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency (${REBUILT.idempotency}
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
CREATE TABLE IF NOT EXISTS trash (${REBUILT.trash}
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
CREATE TABLE IF NOT EXISTS data_keys (
  user TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  wrapped TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
`;

/** The columns of the tables schemas 3 and 4 add, to recognize a foreign table of the same name. */
const ADDED_TABLES: Record<string, string> = {
  changes: "user handle version at text",
  trash:
    "user handle kind state version created_ms updated_ms expires_ms last_writer trashed_until",
  leases: "user handle holder expires_at",
};

/** Columns of schema 7 that no older table has as such: how a copy fills them. */
const DERIVED: Record<string, string> = {
  // A kept result is its record's JSON (or `NULL` for a delete's).
  handle: "CASE WHEN json_valid(result) THEN json_extract(result, '$.handle') END",
};

/** The Python 0.2 columns (REAL seconds, `json.dumps` text), copied into ms and compact JSON. */
const FROM_PYTHON: Record<string, string> = {
  state: "mcpstate_compact_json(state)",
  created_ms: "CAST(ROUND(created_at * 1000) AS INTEGER)",
  updated_ms: "CAST(ROUND(updated_at * 1000) AS INTEGER)",
  expires_ms:
    "CASE WHEN expires_at IS NULL THEN NULL ELSE CAST(ROUND(expires_at * 1000) AS INTEGER) END",
};

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
 * `BEGIN IMMEDIATE` transaction (a second process waits for it, then finds
 * the file migrated): the record tables and the idempotency table are
 * rebuilt in the current column order, every row copied (Python 0.2's REAL
 * seconds into milliseconds, its JSON into the compact form), and the
 * tables, indexes and columns an older file lacks are added.
 */
function migrate(db: DatabaseSync): void {
  const version = () => db.prepare("PRAGMA user_version").get()?.user_version as number;
  if (version() === SQLITE_SCHEMA_VERSION) return;
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
        db.prepare("SELECT name FROM pragma_table_info(?)").all(table).map((r) => r.name as string);
      const handles = new Set(columnsOf("handles"));
      const python = handles.has("created_at") && !handles.has("created_ms");
      if (python) db.function("mcpstate_compact_json", { deterministic: true }, compactJson);
      else if (handles.size > 0 && !handles.has("created_ms")) {
        throw new BackendError(
          'This SQLite file has a "handles" table that mcpstate did not create. Point mcpstate at another file.',
        );
      }
      // A table of one of the new names with other columns was not made by mcpstate.
      for (const [table, expected] of Object.entries(ADDED_TABLES)) {
        const own = columnsOf(table).filter((c) =>
          c !== "schema_version" && c !== "preview" && c !== "forked_from"
        );
        if (own.length > 0 && own.join(" ") !== expected) {
          throw new BackendError(
            `This SQLite file has a "${table}" table that mcpstate did not create. Point mcpstate at another file.`,
          );
        }
      }
      for (const table of Object.keys(REBUILT)) {
        rebuild(db, table, columnsOf(table), python && table === "handles" ? FROM_PYTHON : {});
      }
      db.exec(SCHEMA);
      db.exec(`PRAGMA user_version = ${SQLITE_SCHEMA_VERSION}`);
    }
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}

/**
 * Rebuilds an older `table` (its columns `have`) in the current column
 * order, inside the migration's transaction: every row is copied, a column
 * the old table lacks is filled from {@link DERIVED} or left `NULL`, and
 * `from` gives columns computed from others. Its indexes (dropped with the
 * old table) are made again by {@link SCHEMA}; so are its triggers
 * (`prepareUsage`, which then recounts usage).
 */
function rebuild(db: DatabaseSync, table: string, have: string[], from: Record<string, string>) {
  if (have.length === 0) return;
  const old = new Set(have);
  const columns = REBUILT[table]!.split("\n").map((l) => l.trim().split(" ")[0]!)
    .filter((c) => c !== "" && c !== "PRIMARY");
  const values = columns.map((c) => from[c] ?? (old.has(c) ? c : DERIVED[c] ?? "NULL"));
  db.exec(`CREATE TABLE ${table}_v7 (${REBUILT[table]}\n)`);
  db.exec(
    `INSERT INTO ${table}_v7 (${columns.join(", ")}) SELECT ${values.join(", ")} FROM ${table}`,
  );
  db.exec(`DROP TABLE ${table}`);
  db.exec(`ALTER TABLE ${table}_v7 RENAME TO ${table}`);
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
