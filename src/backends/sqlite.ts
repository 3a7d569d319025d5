/**
 * The SQLite backend (`sqlite:///…`), through the `node:sqlite` module built
 * into Deno: no FFI, no download, so a compiled binary stays dependency-free.
 *
 * - Each primitive runs one `BEGIN IMMEDIATE` transaction, synchronously:
 *   it is atomic within the process and across processes, and a second
 *   process on the same file waits (busy timeout) instead of failing.
 * - WAL journal; `synchronous=FULL` by default, so an acknowledged write
 *   survives `kill -9` and power loss. `?synchronous=normal` survives
 *   `kill -9` but may lose the last commits on power loss, for a higher
 *   write rate.
 * - Listing reads covering indexes only: it never touches a state.
 * - The changelog lives in a `changes` table keyed by
 *   `(user, handle, version)`; an entry is inserted, and the handle's log
 *   trimmed to the retention, in the same transaction as its write.
 * - A revoked handle moves to a `trash` table, so every live query (read,
 *   save, list, sweep) reads `handles` exactly as before; its changelog
 *   stays where it is and comes back with it.
 * - Advisory leases live in a `leases` table beside the records, which they
 *   never touch; taking one is one upsert in a `BEGIN IMMEDIATE` transaction.
 * - Change feed: listeners hear of this object's own commits at once, and of
 *   other connections' and processes' commits through `PRAGMA data_version`,
 *   polled every 50 ms while anyone listens.
 * - A database written by the Python mcpstate 0.2 (times in REAL epoch
 *   seconds) is migrated in place to millisecond columns the first time it
 *   is opened; one written by mcpstate 0.3 before history gains the
 *   changelog and trash tables the same way, and every older one the
 *   leases table.
 *
 * @example Open through a URL
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { SqliteBackend } from "@mcpstate/core/sqlite";
 * // Files: "sqlite:///~/.mcpstate/state.db" (the default), "sqlite:////abs/path.db?synchronous=normal".
 * const backend = await SqliteBackend.fromUrl("sqlite:///:memory:");
 * await using store = new HandleStore(backend);
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * ```
 *
 * @example Bring your own connection
 * ```ts
 * import { DatabaseSync } from "node:sqlite";
 * import { HandleStore } from "@mcpstate/core";
 * import { SqliteBackend } from "@mcpstate/core/sqlite";
 * const db = new DatabaseSync(":memory:");
 * const store = new HandleStore(new SqliteBackend(db));
 * await store.mint("note", { text: "hi" }, { user: "alice" });
 * await store.close();
 * db.close(); // an injected connection stays the caller's to close
 * ```
 *
 * @module
 */

import {
  DatabaseSync,
  type SQLInputValue,
  type SQLOutputValue,
  type StatementSync,
} from "node:sqlite";
import { dirname } from "node:path";
import type {
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  SaveOutcome,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { Listeners } from "./_shared.ts";
import { BackendError, InvalidArgument, McpStateError, redact } from "../errors.ts";
import { filePathOf } from "./_file_url.ts";

export type {
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  Retention,
  SaveOutcome,
  Step,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";

/**
 * The schema version this backend writes to `PRAGMA user_version`. The
 * Python mcpstate 0.2 layout (REAL epoch seconds, no `user_version`) counts
 * as version 1; version 2 is the millisecond layout without history;
 * version 3 adds the `changes` and `trash` tables; version 4 the `leases`
 * table. Older files are brought forward in place when opened.
 */
export const SQLITE_SCHEMA_VERSION = 4;

/** How commits reach the disk. */
export type SqliteSynchronous = "full" | "normal";

/** Options of {@link SqliteBackend}. */
export interface SqliteBackendOptions {
  /**
   * `"full"` (default): every commit is synced to disk before it returns and
   * survives power loss. `"normal"`: survives a crash of the process, may
   * lose the last commits on power loss; several times the write rate.
   */
  synchronous?: SqliteSynchronous;
  /** How long a write waits for another connection's lock, in ms. Default 10,000. */
  busyTimeoutMs?: number;
  /**
   * Whether {@link SqliteBackend.close} closes the connection. Default
   * `false` for an injected connection; `fromUrl` opens its own and sets it.
   */
  closeDatabase?: boolean;
}

/** At most this many leases in force are scanned per user for a page (see `leases`). */
const LEASE_SCAN_MAX = 500;
const URL_OPTIONS = "synchronous=full|normal";
const META = "handle, kind, version, created_ms, updated_ms, expires_ms, last_writer";
const SWEEP_BATCH = 500;
/** How often `PRAGMA data_version` is polled while anyone listens, in ms. */
const FEED_POLL_MS = 50;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS handles (
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_writer TEXT,
  PRIMARY KEY (user, handle)
);
CREATE INDEX IF NOT EXISTS handles_by_user_updated
  ON handles (user, updated_ms DESC, handle, kind, version, created_ms, expires_ms, last_writer);
CREATE INDEX IF NOT EXISTS handles_by_user_kind_updated
  ON handles (user, kind, updated_ms DESC, handle, version, created_ms, expires_ms, last_writer);
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
CREATE TABLE IF NOT EXISTS trash (
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_writer TEXT,
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

/** The columns of the tables schemas 3 and 4 add, to recognize a foreign table of the same name. */
const ADDED_TABLES: Record<string, string> = {
  changes: "user handle version at text",
  trash:
    "user handle kind state version created_ms updated_ms expires_ms last_writer trashed_until",
  leases: "user handle holder expires_at",
};

/** Copies a Python 0.2 table (REAL seconds) into the current layout (INTEGER ms). */
const MIGRATE_FROM_V1 = `
CREATE TABLE handles_v2 (
  user TEXT NOT NULL,
  handle TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_writer TEXT,
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

/** Keeps handles in one SQLite database file (or in memory). */
export class SqliteBackend implements Backend {
  readonly #db: DatabaseSync;
  readonly #closeDb: boolean;
  readonly #busyMs: number;
  #closed = false;
  readonly #lists = new Map<string, StatementSync>();
  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  readonly #rollback: StatementSync;
  readonly #read: StatementSync;
  readonly #insert: StatementSync;
  readonly #saveKeep: StatementSync;
  readonly #saveSet: StatementSync;
  readonly #updateRow: StatementSync;
  readonly #insertRow: StatementSync;
  readonly #delete: StatementSync;
  readonly #idemGet: StatementSync;
  readonly #idemPut: StatementSync;
  readonly #sweepUser: StatementSync;
  readonly #sweepAll: StatementSync;
  readonly #sweepIdem: StatementSync;
  readonly #versionOf: StatementSync;
  readonly #usersFirst: StatementSync;
  readonly #usersAfter: StatementSync;
  readonly #logAdd: StatementSync;
  readonly #logTrim: StatementSync;
  readonly #logDrop: StatementSync;
  readonly #logDropOrphan: StatementSync;
  readonly #logRead: StatementSync;
  readonly #inTrash: StatementSync;
  readonly #toTrash: StatementSync;
  readonly #fromTrash: StatementSync;
  readonly #trashDelete: StatementSync;
  readonly #sweepTrashUser: StatementSync;
  readonly #sweepTrashAll: StatementSync;
  readonly #leaseTake: StatementSync;
  readonly #leaseOf: StatementSync;
  readonly #leaseDrop: StatementSync;
  readonly #leasesIn: StatementSync;
  readonly #leaseOne: StatementSync;
  readonly #leasesOfUser: StatementSync;
  readonly #readLeased: StatementSync;
  readonly #sweepLeases: StatementSync;
  readonly #dataVersion: StatementSync;
  readonly #listeners = new Listeners();
  /** Whether other connections may write the database (a file, not `:memory:`). */
  readonly #shared: boolean;
  /** The listener keys of the handles the open transaction wrote, notified once it commits. */
  #written: string[] = [];
  #feedTimer: ReturnType<typeof setInterval> | undefined;
  #seenVersion: unknown;

  /**
   * Opens a backend from a URL: `sqlite:///~/.mcpstate/state.db` (under the
   * home directory), `sqlite:////abs/path.db`, `sqlite:///relative.db` (from
   * the working directory) or `sqlite:///:memory:`, with an optional
   * `?synchronous=full|normal` (default `full`). The parent directory of the
   * file is created.
   *
   * @param url The URL.
   * @returns The open backend; it owns its connection and closes it on {@link SqliteBackend.close}.
   * @throws {InvalidArgument} for a malformed URL or an unknown option (credentials redacted).
   * @throws {BackendError} when the file cannot be opened or is not an mcpstate database.
   */
  static fromUrl(url: string): Promise<SqliteBackend> {
    try {
      const { path, synchronous } = parseSqliteUrl(url);
      if (path !== ":memory:") Deno.mkdirSync(dirname(path), { recursive: true });
      let db: DatabaseSync;
      try {
        db = new DatabaseSync(path);
      } catch (e) {
        throw new BackendError(
          `Cannot open the SQLite database "${path}": ${
            messageOf(e)
          }. Check the path and its permissions.`,
          { cause: e },
        );
      }
      try {
        return Promise.resolve(new SqliteBackend(db, { synchronous, closeDatabase: true }));
      } catch (e) {
        db.close();
        throw e;
      }
    } catch (e) {
      if (e instanceof McpStateError) return Promise.reject(e);
      return Promise.reject(
        new BackendError(`Cannot open the SQLite database: ${messageOf(e)}`, { cause: e }),
      );
    }
  }

  /**
   * Wraps an open connection: switches it to WAL, sets the busy timeout and
   * the `synchronous` level, and creates or migrates the schema.
   *
   * @param db An open `node:sqlite` connection.
   * @param options Durability, busy timeout, and whether `close` closes `db`.
   * @throws {BackendError} when the database holds a newer or a foreign schema.
   */
  constructor(db: DatabaseSync, options: SqliteBackendOptions = {}) {
    this.#db = db;
    this.#closeDb = options.closeDatabase ?? false;
    const sync = options.synchronous ?? "full";
    if (sync !== "full" && sync !== "normal") {
      throw new InvalidArgument(`synchronous must be "full" or "normal".`);
    }
    const busy = options.busyTimeoutMs ?? 10_000;
    if (!Number.isSafeInteger(busy) || busy < 0) {
      throw new InvalidArgument("busyTimeoutMs must be a whole number of milliseconds.");
    }
    this.#busyMs = busy;
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
    const p = (sql: string) => db.prepare(sql);
    this.#begin = p("BEGIN IMMEDIATE");
    this.#commit = p("COMMIT");
    this.#rollback = p("ROLLBACK");
    this.#read = returnArrays(p(
      "SELECT kind, state, version, created_ms, updated_ms, expires_ms, last_writer " +
        "FROM handles WHERE user = ? AND handle = ?",
    ));
    this.#insert = p(
      "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
        "expires_ms, last_writer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) " +
        "ON CONFLICT (user, handle) DO NOTHING",
    );
    const save = (expires: string) =>
      p(
        `UPDATE handles SET state = ?, version = version + 1, updated_ms = ?, ${expires}` +
          "last_writer = ? WHERE user = ? AND handle = ? AND version = ? " +
          "AND (expires_ms IS NULL OR expires_ms > ?) " +
          "RETURNING kind, version, created_ms, expires_ms",
      );
    this.#saveKeep = save("");
    this.#saveSet = save("expires_ms = ?, ");
    this.#updateRow = p(
      "UPDATE handles SET kind = ?, state = ?, version = ?, created_ms = ?, updated_ms = ?, " +
        "expires_ms = ?, last_writer = ? WHERE user = ? AND handle = ?",
    );
    this.#insertRow = p(
      "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
        "expires_ms, last_writer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    this.#delete = p("DELETE FROM handles WHERE user = ? AND handle = ?");
    this.#idemGet = p(
      "SELECT fingerprint, result FROM idempotency " +
        "WHERE user = ? AND scope = ? AND key = ? AND expires_ms > ?",
    );
    this.#idemPut = p(
      "INSERT OR REPLACE INTO idempotency (user, scope, key, fingerprint, result, expires_ms) " +
        "VALUES (?, ?, ?, ?, ?, ?)",
    );
    // The swept rows come back, so that their changelogs go in the same transaction.
    const sweep = (table: string, column: string, user: string) =>
      returnArrays(p(
        `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} ` +
          `WHERE ${user}${column} <= ? LIMIT ${SWEEP_BATCH}) RETURNING user, handle`,
      ));
    this.#sweepUser = sweep("handles", "expires_ms", "user = ? AND ");
    this.#sweepAll = sweep("handles", "expires_ms", "");
    this.#sweepTrashUser = sweep("trash", "trashed_until", "user = ? AND ");
    this.#sweepTrashAll = sweep("trash", "trashed_until", "");
    this.#logAdd = p(
      "INSERT OR REPLACE INTO changes (user, handle, version, at, text) VALUES (?, ?, ?, ?, ?)",
    );
    this.#logTrim = p(
      "DELETE FROM changes WHERE user = ? AND handle = ? AND (version <= ? OR at < ?)",
    );
    this.#logDrop = p("DELETE FROM changes WHERE user = ? AND handle = ?");
    // A trashed record's changelog, unless a live record of that handle owns it now.
    this.#logDropOrphan = p(
      "DELETE FROM changes WHERE user = ?1 AND handle = ?2 " +
        "AND NOT EXISTS (SELECT 1 FROM handles WHERE user = ?1 AND handle = ?2)",
    );
    // One statement, so the live check and the entries come from one snapshot.
    this.#logRead = returnArrays(p(
      "SELECT version, at, text FROM changes WHERE user = ?1 AND handle = ?2 AND version > ?3 " +
        "AND EXISTS (SELECT 1 FROM handles WHERE user = ?1 AND handle = ?2) ORDER BY version",
    ));
    this.#inTrash = p("SELECT 1 AS x FROM trash WHERE user = ? AND handle = ?");
    this.#toTrash = p(
      "INSERT OR REPLACE INTO trash (user, handle, kind, state, version, created_ms, " +
        "updated_ms, expires_ms, last_writer, trashed_until) SELECT user, handle, kind, state, " +
        "version, created_ms, updated_ms, expires_ms, last_writer, ? FROM handles " +
        "WHERE user = ? AND handle = ?",
    );
    this.#fromTrash = returnArrays(p(
      "SELECT kind, state, version, created_ms, updated_ms, expires_ms, last_writer " +
        "FROM trash WHERE user = ? AND handle = ? AND trashed_until > ?",
    ));
    this.#trashDelete = p("DELETE FROM trash WHERE user = ? AND handle = ?");
    this.#versionOf = p("SELECT version FROM handles WHERE user = ? AND handle = ?");
    const users = (start: string) =>
      p(
        "WITH RECURSIVE u(user, n) AS (" +
          `SELECT (SELECT min(user) FROM handles ${start}), 1 ` +
          "UNION ALL SELECT (SELECT min(user) FROM handles WHERE user > u.user), n + 1 " +
          "FROM u WHERE u.user IS NOT NULL AND n < ?" +
          ") SELECT user FROM u WHERE user IS NOT NULL",
      );
    this.#usersFirst = users("");
    this.#usersAfter = users("WHERE user > ?");
    this.#sweepIdem = p(
      "DELETE FROM idempotency WHERE rowid IN (SELECT rowid FROM idempotency " +
        `WHERE expires_ms <= ? LIMIT ${SWEEP_BATCH})`,
    );
    // Stores the lease unless another holder's is still in force.
    this.#leaseTake = p(
      "INSERT INTO leases (user, handle, holder, expires_at) VALUES (?1, ?2, ?3, ?4) " +
        "ON CONFLICT (user, handle) DO UPDATE SET holder = excluded.holder, " +
        "expires_at = excluded.expires_at " +
        "WHERE leases.holder = excluded.holder OR leases.expires_at <= ?5 " +
        "RETURNING holder, expires_at",
    );
    this.#leaseOf = p("SELECT holder, expires_at FROM leases WHERE user = ? AND handle = ?");
    this.#leaseDrop = p(
      "DELETE FROM leases WHERE user = ? AND handle = ? AND holder = ? RETURNING expires_at",
    );
    this.#leasesIn = returnArrays(p(
      "SELECT handle, holder, expires_at FROM leases WHERE user = ? " +
        "AND handle IN (SELECT value FROM json_each(?)) AND expires_at > ?",
    ));
    // A get: the record and its lease in force, in one statement.
    this.#readLeased = returnArrays(p(
      "SELECT h.kind, h.state, h.version, h.created_ms, h.updated_ms, h.expires_ms, " +
        "h.last_writer, l.holder, l.expires_at FROM handles h LEFT JOIN leases l " +
        "ON l.user = h.user AND l.handle = h.handle AND l.expires_at > ?3 " +
        "WHERE h.user = ?1 AND h.handle = ?2",
    ));
    // A page of handles: the user's leases in force are few (they lapse within
    // minutes, and sweeps drop them), so one range scan of the primary key
    // beats a lookup per handle; past LEASE_SCAN_MAX rows, the lookups win.
    this.#leasesOfUser = returnArrays(p(
      "SELECT handle, holder, expires_at FROM leases WHERE user = ? AND expires_at > ? " +
        `LIMIT ${LEASE_SCAN_MAX + 1}`,
    ));
    // One handle: a primary-key lookup, without json_each.
    this.#leaseOne = returnArrays(p(
      "SELECT handle, holder, expires_at FROM leases " +
        "WHERE user = ? AND handle = ? AND expires_at > ?",
    ));
    this.#sweepLeases = p(
      "DELETE FROM leases WHERE rowid IN (SELECT rowid FROM leases " +
        `WHERE expires_at <= ? LIMIT ${SWEEP_BATCH})`,
    );
    this.#dataVersion = p("PRAGMA data_version");
    this.#shared = db.prepare("SELECT file FROM pragma_database_list WHERE name = 'main'").get()
      ?.file !== "";
  }

  /** The connection this backend runs on. */
  get database(): DatabaseSync {
    return this.#db;
  }

  /** {@inheritDoc Backend.insert} */
  insert(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<{ inserted: boolean } | Replayed> {
    return this.#write(() => {
      const replay = this.#replay(user, ctx);
      if (replay) return replay;
      // A trashed handle stays taken until it is restored or swept.
      if (this.#inTrash.get(user, record.handle)) return { inserted: false };
      const { changes } = this.#insert.run(
        user,
        record.handle,
        record.kind,
        record.state,
        record.version,
        record.createdAt,
        record.updatedAt,
        record.expiresAt,
        record.lastWriter,
      );
      const inserted = Number(changes) === 1;
      if (inserted) {
        if (ctx.entry) {
          // A new record starts a new log.
          this.#logDrop.run(user, record.handle);
          this.#logAdd.run(user, record.handle, ctx.entry.version, ctx.entry.at, ctx.entry.text);
        }
        this.#remember(user, ctx, record);
        this.#wrote(user, record.handle);
      }
      return { inserted };
    });
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<HandleRecord | null> {
    return this.#run(() => this.#readRow(user, handle));
  }

  /** {@inheritDoc Backend.readLeased} */
  readLeased(
    user: string,
    handle: string,
    now: number,
  ): Promise<{ record: HandleRecord | null; lease: LeaseRecord | null }> {
    return this.#run(() => {
      const row = this.#readLeased.get(user, handle, now) as Row | undefined;
      if (!row) return { record: null, lease: null };
      const c = cells(row);
      const lease = c[7] == null ? null : { holder: c[7] as string, expiresAt: c[8] as number };
      return { record: recordOf(handle, row), lease };
    });
  }

  /** {@inheritDoc Backend.save} */
  save(
    user: string,
    handle: string,
    write: ConditionalWrite,
    ctx: WriteContext,
  ): Promise<SaveOutcome | Replayed> {
    return this.#write((): SaveOutcome | Replayed => {
      const replay = this.#replay(user, ctx);
      if (replay) return replay;
      // One conditional UPDATE: version and expiry are checked by the statement itself.
      const row = write.expiresAt === "keep"
        ? this.#saveKeep.get(
          write.state,
          write.updatedAt,
          write.lastWriter,
          user,
          handle,
          write.expectVersion,
          ctx.now,
        )
        : this.#saveSet.get(
          write.state,
          write.updatedAt,
          write.expiresAt,
          write.lastWriter,
          user,
          handle,
          write.expectVersion,
          ctx.now,
        );
      if (!row) return { ok: false, current: this.#readRow(user, handle) };
      const record: HandleRecord = {
        handle,
        kind: row.kind as string,
        state: write.state,
        version: row.version as number,
        createdAt: row.created_ms as number,
        updatedAt: write.updatedAt,
        expiresAt: row.expires_ms as number | null,
        lastWriter: write.lastWriter,
      };
      this.#remember(user, ctx, record);
      this.#wrote(user, handle);
      return { ok: true, record };
    });
  }

  /** {@inheritDoc Backend.update} */
  update(
    user: string,
    handle: string,
    change: Change,
    ctx: WriteContext,
  ): Promise<UpdateOutcome | Replayed> {
    return this.#write((): UpdateOutcome | Replayed => {
      const replay = this.#replay(user, ctx);
      if (replay) return replay;
      const current = this.#readRow(user, handle);
      // A throwing change propagates out of #write, which rolls back.
      const step = change(current && { ...current });
      const next = step?.record ?? null;
      if (next) {
        const values = [
          next.kind,
          next.state,
          next.version,
          next.createdAt,
          next.updatedAt,
          next.expiresAt,
          next.lastWriter,
        ] as const;
        if (current) {
          this.#updateRow.run(...values, user, handle);
        } else {
          // A record made from nothing has no history before it.
          this.#logDrop.run(user, handle);
          this.#insertRow.run(user, handle, ...values);
        }
        if (step?.entry) this.#append(user, handle, step.entry, ctx);
        this.#wrote(user, handle);
      }
      const record = next ? { ...next, handle } : current;
      this.#remember(user, ctx, record);
      return { record, written: next !== null };
    });
  }

  /** {@inheritDoc Backend.remove} */
  remove(
    user: string,
    handle: string,
    ctx: WriteContext,
  ): Promise<{ removed: boolean } | Replayed> {
    return this.#write(() => {
      const replay = this.#replay(user, ctx);
      if (replay) return replay;
      // To the trash: the record moves, its changelog stays where it is.
      if (ctx.trashUntil !== undefined) this.#toTrash.run(ctx.trashUntil, user, handle);
      const removed = Number(this.#delete.run(user, handle).changes) === 1;
      if (removed) {
        if (ctx.trashUntil === undefined) this.#logDrop.run(user, handle);
        this.#remember(user, ctx, null);
        this.#wrote(user, handle);
      }
      return { removed };
    });
  }

  /** {@inheritDoc Backend.untrash} */
  untrash(user: string, handle: string, ctx: WriteContext): Promise<HandleRecord | null> {
    return this.#write(() => {
      if (this.#versionOf.get(user, handle)) return null;
      const row = this.#fromTrash.get(user, handle, ctx.now) as Row | undefined;
      if (!row) return null;
      const record = recordOf(handle, row);
      this.#insertRow.run(
        user,
        handle,
        record.kind,
        record.state,
        record.version,
        record.createdAt,
        record.updatedAt,
        record.expiresAt,
        record.lastWriter,
      );
      this.#trashDelete.run(user, handle);
      this.#wrote(user, handle);
      return record;
    });
  }

  /** {@inheritDoc Backend.changes} */
  changes(user: string, handle: string, afterVersion: number): Promise<ChangeEntry[]> {
    return this.#run(() =>
      (this.#logRead.all(user, handle, afterVersion) as Row[]).map((r): ChangeEntry => {
        const row = cells(r);
        return { version: row[0] as number, at: row[1] as number, text: row[2] as string };
      })
    );
  }

  /** {@inheritDoc Backend.list} */
  list(user: string, q: ListQuery): Promise<HandleMeta[]> {
    return this.#run(() => {
      const args: (string | number)[] = [user];
      let key = "";
      if (q.kind !== undefined) {
        key += "k";
        args.push(q.kind);
      }
      if (q.liveAt !== undefined) {
        key += "l";
        args.push(q.liveAt);
      }
      if (q.after !== undefined) {
        key += "a";
        args.push(q.after.updatedAt, q.after.updatedAt, q.after.handle);
      }
      args.push(q.limit);
      let stmt = this.#lists.get(key);
      if (!stmt) {
        stmt = returnArrays(this.#db.prepare(listSql(key)));
        this.#lists.set(key, stmt);
      }
      return (stmt.all(...args) as Row[]).map((r): HandleMeta => {
        const row = cells(r);
        return {
          handle: row[0] as string,
          kind: row[1] as string,
          version: row[2] as number,
          createdAt: row[3] as number,
          updatedAt: row[4] as number,
          expiresAt: row[5] as number | null,
          lastWriter: row[6] as string | null,
        };
      });
    });
  }

  /** {@inheritDoc Backend.sweep} */
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    return this.#run(() => {
      // Batches, each its own short transaction, so that a large backlog never
      // holds the write lock for long against another process; each batch
      // deletes its records' changelogs in the same transaction.
      const batch = (swept: Row[], drop: StatementSync, live = false) => {
        for (const r of swept) {
          const [u, h] = cells(r);
          drop.run(u as string, h as string);
          if (live) this.#wrote(u as string, h as string);
        }
        return swept.length;
      };
      let total = 0;
      for (;;) {
        const n = this.#tx(() =>
          batch(
            (user === null
              ? this.#sweepAll.all(expiredAtOrBefore)
              : this.#sweepUser.all(user, expiredAtOrBefore)) as Row[],
            this.#logDrop,
            true,
          )
        );
        total += n;
        if (n < SWEEP_BATCH) break;
      }
      while (
        this.#tx(() =>
          batch(
            (user === null
              ? this.#sweepTrashAll.all(now)
              : this.#sweepTrashUser.all(user, now)) as Row[],
            this.#logDropOrphan,
          )
        ) >= SWEEP_BATCH
      );
      while (this.#tx(() => Number(this.#sweepIdem.run(now).changes)) >= SWEEP_BATCH);
      while (this.#tx(() => Number(this.#sweepLeases.run(now).changes)) >= SWEEP_BATCH);
      return total;
    });
  }

  /** {@inheritDoc Backend.listUsers} */
  listUsers(query: { after?: string; limit: number }): Promise<string[]> {
    return this.#run(() => {
      if (query.limit < 1) return [];
      // Skips from user to user through the primary key: one index seek per user.
      const rows = query.after === undefined
        ? this.#usersFirst.all(query.limit)
        : this.#usersAfter.all(query.after, query.limit);
      return rows.map((r) => r.user as string);
    });
  }

  /** {@inheritDoc Backend.restore} */
  restore(
    user: string,
    record: HandleRecord,
    _ctx: WriteContext,
  ): Promise<"inserted" | "replaced" | "kept"> {
    return this.#write(() => {
      const current = this.#versionOf.get(user, record.handle);
      if (current && (current.version as number) >= record.version) return "kept";
      // Its history is unknown. A trashed copy of the handle stays in the trash
      // (restorable once no live record holds the handle), without its log.
      this.#logDrop.run(user, record.handle);
      const values = [
        record.kind,
        record.state,
        record.version,
        record.createdAt,
        record.updatedAt,
        record.expiresAt,
        record.lastWriter,
      ] as const;
      if (current) this.#updateRow.run(...values, user, record.handle);
      else this.#insertRow.run(user, record.handle, ...values);
      this.#wrote(user, record.handle);
      return current ? "replaced" : "inserted";
    });
  }

  /** {@inheritDoc Backend.acquireLease} */
  acquireLease(
    user: string,
    handle: string,
    lease: LeaseRecord,
    now: number,
  ): Promise<LeaseOutcome> {
    return this.#write((): LeaseOutcome => {
      const taken = this.#leaseTake.get(user, handle, lease.holder, lease.expiresAt, now);
      // Nothing returned: another holder's lease is in force; the same transaction reads it.
      const row = taken ?? this.#leaseOf.get(user, handle)!;
      return {
        acquired: taken !== undefined,
        lease: { holder: row.holder as string, expiresAt: row.expires_at as number },
      };
    });
  }

  /** {@inheritDoc Backend.releaseLease} */
  releaseLease(user: string, handle: string, holder: string, now: number): Promise<boolean> {
    return this.#write(() => {
      const row = this.#leaseDrop.get(user, handle, holder);
      return row !== undefined && (row.expires_at as number) > now;
    });
  }

  /** {@inheritDoc Backend.leases} */
  leases(user: string, handles: readonly string[], now: number): Promise<Map<string, LeaseRecord>> {
    return this.#run(() => {
      const out = new Map<string, LeaseRecord>();
      if (handles.length === 0) return out;
      let rows: Row[];
      if (handles.length === 1) {
        rows = this.#leaseOne.all(user, handles[0]!, now) as Row[];
      } else {
        rows = this.#leasesOfUser.all(user, now) as Row[];
        if (rows.length > LEASE_SCAN_MAX) {
          rows = this.#leasesIn.all(user, JSON.stringify(handles), now) as Row[];
        } else {
          const wanted = new Set(handles);
          rows = rows.filter((r) => wanted.has(cells(r)[0] as string));
        }
      }
      for (const r of rows) {
        const [h, holder, expiresAt] = cells(r);
        out.set(h as string, { holder: holder as string, expiresAt: expiresAt as number });
      }
      return out;
    });
  }

  /**
   * {@inheritDoc Backend.subscribe}
   *
   * Writes through this object are heard of once they commit; those of other
   * connections and processes through `PRAGMA data_version`, polled every
   * 50 ms while at least one listener exists (an in-memory database has no
   * other connection, so it is not polled).
   */
  subscribe(user: string, handle: string, listener: () => void): Promise<() => void> {
    return this.#run(() => {
      const remove = this.#listeners.add(user, handle, listener);
      if (this.#shared && this.#feedTimer === undefined) {
        this.#seenVersion = this.#dataVersion.get()?.data_version;
        const timer = setInterval(() => this.#poll(), FEED_POLL_MS);
        Deno.unrefTimer(timer);
        this.#feedTimer = timer;
      }
      return () => {
        remove();
        if (this.#listeners.size === 0) this.#stopFeed();
      };
    });
  }

  /** Closes the connection when this backend owns it. Idempotent. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    this.#stopFeed();
    this.#lists.clear();
    if (this.#closeDb && this.#db.isOpen) this.#db.close();
    return Promise.resolve();
  }

  /** Runs `fn` synchronously on the open connection; its result or error as a promise. */
  #run<T>(fn: () => T): Promise<T> {
    try {
      if (this.#closed) throw new BackendError("The SQLite backend is closed; open a new one.");
      return Promise.resolve(fn());
    } catch (e) {
      return Promise.reject(this.#driverError(e));
    }
  }

  /** {@link SqliteBackend.#run} inside one `BEGIN IMMEDIATE` transaction. */
  #write<T>(fn: () => T): Promise<T> {
    return this.#run(() => this.#tx(fn));
  }

  /**
   * Runs `fn` in one `BEGIN IMMEDIATE` transaction; rolls back when it throws.
   * Once it commits, the listeners of the handles it wrote are called.
   */
  #tx<T>(fn: () => T): T {
    this.#begin.run();
    let out: T;
    try {
      out = fn();
      this.#commit.run();
    } catch (e) {
      this.#written = [];
      if (this.#db.isTransaction) this.#rollback.run();
      throw e;
    }
    const written = this.#written;
    this.#written = [];
    for (const key of written) this.#listeners.notifyKey(key);
    return out;
  }

  /** Notes that the open transaction wrote `(user, handle)`, for its listeners. */
  #wrote(user: string, handle: string): void {
    if (this.#listeners.has(user, handle)) this.#written.push(Listeners.key(user, handle));
  }

  /** Calls every listener when another connection has committed since the last poll. */
  #poll(): void {
    try {
      const v = this.#dataVersion.get()?.data_version;
      if (v === this.#seenVersion) return;
      this.#seenVersion = v;
      this.#listeners.notifyAll();
    } catch {
      // An injected connection its owner closed: nothing more will commit through it.
      if (!this.#db.isOpen) this.#stopFeed();
    }
  }

  #stopFeed(): void {
    clearInterval(this.#feedTimer);
    this.#feedTimer = undefined;
  }

  #driverError(e: unknown): unknown {
    if (e instanceof McpStateError || !(e instanceof Error)) return e;
    if (/database is locked|SQLITE_BUSY/i.test(e.message)) {
      return new BackendError(
        `The SQLite database stayed locked by another connection for more than ${this.#busyMs} ms. Nothing was written; try again.`,
        { cause: e },
      );
    }
    return e;
  }

  #readRow(user: string, handle: string): HandleRecord | null {
    const row = this.#read.get(user, handle) as Row | undefined;
    return row ? recordOf(handle, row) : null;
  }

  #replay(user: string, ctx: WriteContext): Replayed | undefined {
    const c = ctx.idempotency;
    if (!c) return undefined;
    const row = this.#idemGet.get(user, c.scope, c.key, ctx.now);
    if (!row) return undefined;
    const result = row.result === null ? null : JSON.parse(row.result as string) as HandleRecord;
    return { replayed: true, fingerprint: row.fingerprint as string, result };
  }

  #remember(user: string, ctx: WriteContext, result: HandleRecord | null): void {
    const c = ctx.idempotency;
    if (!c) return;
    this.#idemPut.run(
      user,
      c.scope,
      c.key,
      c.fingerprint,
      result && JSON.stringify(result),
      c.expiresAt,
    );
  }

  /** Appends `entry` to the handle's changelog, first dropping what the retention no longer keeps. */
  #append(user: string, handle: string, entry: ChangeEntry, ctx: WriteContext): void {
    const r = ctx.retention;
    if (r) this.#logTrim.run(user, handle, entry.version - r.maxEntries, ctx.now - r.maxAgeMs);
    this.#logAdd.run(user, handle, entry.version, entry.at, entry.text);
  }
}

function recordOf(handle: string, r: Row): HandleRecord {
  const row = cells(r);
  return {
    handle,
    kind: row[0] as string,
    state: row[1] as string,
    version: row[2] as number,
    createdAt: row[3] as number,
    updatedAt: row[4] as number,
    expiresAt: row[5] as number | null,
    lastWriter: row[6] as string | null,
  };
}

/** A row as `node:sqlite` returns it: an object, or an array after `setReturnArrays(true)`. */
type Row = Record<string, SQLOutputValue> | SQLOutputValue[];

/**
 * Asks a statement for rows as arrays, which skips building an object per
 * row (`setReturnArrays` exists at runtime but not in the bundled types).
 */
function returnArrays(stmt: StatementSync): StatementSync {
  const s = stmt as unknown as { setReturnArrays?: (on: boolean) => void };
  if (typeof s.setReturnArrays === "function") s.setReturnArrays(true);
  return stmt;
}

/** The cells of a row in column order, whichever form it came in. */
function cells(row: Row): SQLOutputValue[] {
  return Array.isArray(row) ? row : Object.values(row);
}

/** The listing query for a combination of filters: `k`ind, `l`ive, `a`fter. */
function listSql(key: string): string {
  const where = ["user = ?"];
  if (key.includes("k")) where.push("kind = ?");
  if (key.includes("l")) where.push("(expires_ms IS NULL OR expires_ms > ?)");
  // `updated_ms <= ?` bounds the index range; the OR settles ties by handle.
  if (key.includes("a")) where.push("updated_ms <= ? AND (updated_ms < ? OR handle > ?)");
  const index = key.includes("k") ? "handles_by_user_kind_updated" : "handles_by_user_updated";
  return `SELECT ${META} FROM handles INDEXED BY ${index} WHERE ${where.join(" AND ")} ` +
    "ORDER BY updated_ms DESC, handle ASC LIMIT ?";
}

/**
 * Creates the schema, or brings an older one forward in place, in one
 * transaction: version 1 (Python mcpstate 0.2, REAL seconds) is copied into
 * millisecond columns; versions 1 and 2 gain the `changes` and `trash`
 * tables, and versions 1 to 3 the `leases` table (new tables only: no
 * existing row or index is rewritten).
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
        if (columns.length > 0 && columns.join(" ") !== expected) {
          throw new BackendError(
            `This SQLite file has a "${table}" table that mcpstate did not create. Point mcpstate at another file.`,
          );
        }
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
 * Parses a `sqlite://` URL.
 *
 * @param url The URL.
 * @returns The file path (or `:memory:`) and the durability level.
 * @throws {InvalidArgument} when the URL is malformed or has an unknown option.
 */
function parseSqliteUrl(url: string): { path: string; synchronous: SqliteSynchronous } {
  if (typeof url !== "string" || !/^sqlite:\/\//i.test(url)) {
    throw new InvalidArgument(
      `Not a SQLite URL: "${
        redact(String(url)).slice(0, 200)
      }". Write sqlite:///~/file.db, sqlite:////absolute/path.db or sqlite:///:memory:.`,
      { field: "backend" },
    );
  }
  let parsed: { path: string; params: URLSearchParams };
  try {
    parsed = filePathOf(url, url.slice(0, "sqlite".length));
  } catch (e) {
    if (e instanceof McpStateError) throw e;
    throw new InvalidArgument(
      `Malformed sqlite URL "${redact(url).slice(0, 200)}" (${
        messageOf(e)
      }): write sqlite:///~/file.db, sqlite:////absolute/path.db or sqlite:///:memory:.`,
      { field: "backend" },
    );
  }
  let synchronous: SqliteSynchronous = "full";
  for (const [name, value] of parsed.params) {
    if (name !== "synchronous") {
      throw new InvalidArgument(
        `Unknown option "${
          name.slice(0, 40)
        }" in the sqlite URL. The allowed options are: ${URL_OPTIONS}.`,
        { field: "backend" },
      );
    }
    const v = value.toLowerCase();
    if (v !== "full" && v !== "normal") {
      throw new InvalidArgument(
        `synchronous=${
          value.slice(0, 20)
        } is not supported in the sqlite URL. The allowed options are: ${URL_OPTIONS}.`,
        { field: "backend" },
      );
    }
    synchronous = v;
  }
  return { path: parsed.path, synchronous };
}

/**
 * `PRAGMA journal_mode = WAL`. While another connection is creating the same
 * new file, SQLite answers it "database is locked" at once, without the busy
 * handler (seen with two servers starting together): retried, with short
 * jittered sleeps, until the busy timeout.
 */
function enableWal(db: DatabaseSync, busyMs: number): void {
  const deadline = Date.now() + busyMs;
  for (let attempt = 0;; attempt++) {
    try {
      db.exec("PRAGMA journal_mode = WAL");
      return;
    } catch (e) {
      if (!/locked|busy/i.test(messageOf(e)) || Date.now() >= deadline) throw e;
      const ms = Math.min(100, 2 ** attempt) * (0.5 + Math.random());
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
    }
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
