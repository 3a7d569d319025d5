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
 * - A database written by the Python mcpstate 0.2 (times in REAL epoch
 *   seconds) is migrated in place to millisecond columns the first time it
 *   is opened.
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
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  ListQuery,
  Replayed,
  SaveOutcome,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { BackendError, InvalidArgument, McpStateError, redact } from "../errors.ts";
import { filePathOf } from "../url.ts";

export type {
  Backend,
  Change,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  ListQuery,
  Replayed,
  SaveOutcome,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";

/**
 * The schema version this backend writes to `PRAGMA user_version`. The
 * Python mcpstate 0.2 layout (REAL epoch seconds, no `user_version`) counts
 * as version 1.
 */
export const SQLITE_SCHEMA_VERSION = 2;

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

const URL_OPTIONS = "synchronous=full|normal";
const META = "handle, kind, version, created_ms, updated_ms, expires_ms, last_writer";
const SWEEP_BATCH = 500;

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
`;

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
      db.exec("PRAGMA journal_mode = WAL");
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
    this.#sweepUser = p(
      "DELETE FROM handles WHERE rowid IN (SELECT rowid FROM handles " +
        `WHERE user = ? AND expires_ms <= ? LIMIT ${SWEEP_BATCH})`,
    );
    this.#sweepAll = p(
      "DELETE FROM handles WHERE rowid IN (SELECT rowid FROM handles " +
        `WHERE expires_ms <= ? LIMIT ${SWEEP_BATCH})`,
    );
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
      if (inserted) this.#remember(user, ctx, record);
      return { inserted };
    });
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<HandleRecord | null> {
    return this.#run(() => this.#readRow(user, handle));
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
      const next = change(current && { ...current });
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
        if (current) this.#updateRow.run(...values, user, handle);
        else this.#insertRow.run(user, handle, ...values);
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
      const removed = Number(this.#delete.run(user, handle).changes) === 1;
      if (removed) this.#remember(user, ctx, null);
      return { removed };
    });
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
      // holds the write lock for long against another process.
      let total = 0;
      for (;;) {
        const n = this.#tx(() =>
          Number(
            (user === null
              ? this.#sweepAll.run(expiredAtOrBefore)
              : this.#sweepUser.run(user, expiredAtOrBefore)).changes,
          )
        );
        total += n;
        if (n < SWEEP_BATCH) break;
      }
      while (this.#tx(() => Number(this.#sweepIdem.run(now).changes)) >= SWEEP_BATCH);
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
      const values = [
        record.kind,
        record.state,
        record.version,
        record.createdAt,
        record.updatedAt,
        record.expiresAt,
        record.lastWriter,
      ] as const;
      if (current) {
        this.#updateRow.run(...values, user, record.handle);
        return "replaced";
      }
      this.#insertRow.run(user, record.handle, ...values);
      return "inserted";
    });
  }

  /** Closes the connection when this backend owns it. Idempotent. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
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

  /** Runs `fn` in one `BEGIN IMMEDIATE` transaction; rolls back when it throws. */
  #tx<T>(fn: () => T): T {
    this.#begin.run();
    try {
      const out = fn();
      this.#commit.run();
      return out;
    } catch (e) {
      if (this.#db.isTransaction) this.#rollback.run();
      throw e;
    }
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

/** Creates the schema, or brings an older one (Python mcpstate 0.2) forward in place. */
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
      const columns = new Set(
        db.prepare("SELECT name FROM pragma_table_info('handles')").all().map((r) => r.name),
      );
      if (columns.has("created_at") && !columns.has("created_ms")) {
        db.function("mcpstate_compact_json", { deterministic: true }, compactJson);
        db.exec(MIGRATE_FROM_V1);
      } else if (columns.size > 0 && !columns.has("created_ms")) {
        throw new BackendError(
          'This SQLite file has a "handles" table that mcpstate did not create. Point mcpstate at another file.',
        );
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

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
