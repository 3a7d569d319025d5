/**
 * The PostgreSQL backend (`postgres://…`, `postgresql://…`), for teams that
 * already run PostgreSQL and want their agents' state beside their other data,
 * with its backups, replicas and point-in-time recovery.
 *
 * Every handle is one row keyed by `(user_id, handle)`, and every primitive
 * takes its atomicity from the engine: `save` without history is one
 * conditional `UPDATE`, `update` runs in a transaction that holds the row
 * lock (`SELECT … FOR UPDATE`), mint collisions are caught by the primary key
 * (`INSERT … ON CONFLICT DO NOTHING`), and an idempotency record is written in
 * the same transaction as the write it remembers. Listing reads an index on
 * `(user_id, updated_at)` that carries every metadata column, so it never
 * reads a state.
 *
 * The changelog is a table of its own, `changes`, keyed by
 * `(user_id, handle, version)`: a mint's entry is inserted by the same
 * statement as the row, and an update's entry, with the retention trim, by
 * the statement that writes the new row inside the row-locking transaction.
 * A revoked handle stays in `handles` with `trashed_until` set, its changelog
 * beside it, until the undo window closes: every live query leaves such rows
 * out (listing through a partial index), and the primary key keeps its handle
 * from being minted again.
 *
 * Advisory leases are rows of a `leases` table beside the records, which they
 * never touch: taking one is one `INSERT … ON CONFLICT DO UPDATE … WHERE`.
 * The change feed is `LISTEN`/`NOTIFY`: every write of a record calls
 * `pg_notify` on a channel of the schema's own, in the write's statement or
 * transaction, so the event is delivered exactly when the write commits, to
 * every instance that listens.
 *
 * The backend creates and migrates its own tables — `handles`, `changes`,
 * `idempotency`, `leases` and `meta` (which holds the schema version) — in one
 * PostgreSQL schema, `mcpstate` unless told otherwise. Migrations run in a
 * transaction under `pg_advisory_xact_lock`, so any number of instances may
 * start at the same moment; stop instances of an older mcpstate before
 * starting a newer one on the same schema, as they would not know the newer
 * layout. Going from schema version 1 to 2 rebuilds the listing index, and
 * calls wait while it builds, which on a large table takes a while. Expired
 * rows, trashed rows past their undo window and their changelogs are
 * reclaimed by the store's own periodic sweep.
 *
 * URL form: `postgres://[user[:password]@]host[:port]/database[?schema=name]`.
 * `schema` (letters, digits and `_`, at most 63) picks the PostgreSQL schema;
 * every other query parameter goes to the driver (`sslmode=require`, `max=20`
 * for the pool size, `connect_timeout=5`, `prepare=false` behind a
 * transaction-mode pooler, or a server setting such as
 * `statement_timeout=10000`).
 *
 * While the server is down or restarting, calls fail with `backend_error`
 * ("PostgreSQL is unreachable or restarting …") — at once when connections
 * are refused, within the connect timeout (10 seconds unless the URL says
 * otherwise) when the host does not answer — and they succeed again as soon
 * as the server is back. A call cut off mid-way may or may not have been
 * applied, so the message tells the caller to re-read before changing the
 * handle again, or to repeat the call with the same idempotency key.
 *
 * @example From a URL
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 *
 * await using store = await HandleStore.fromUrl(
 *   "postgres://app:secret@db.internal:5432/app?schema=agents&sslmode=require",
 * );
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * ```
 *
 * @example With a client you configure yourself
 * ```ts ignore
 * import postgres from "npm:postgres@3.4.9";
 * import { HandleStore } from "@mcpstate/core";
 * import { PostgresBackend } from "@mcpstate/core/postgres";
 *
 * const sql = postgres("postgres://app@db.internal/app", { max: 20 });
 * const store = new HandleStore(new PostgresBackend(sql, { schema: "agents" }));
 * // … use the store …
 * await store.close(); // leaves `sql` open: it is yours
 * await sql.end();
 * ```
 *
 * @module
 */

import postgres from "postgres";
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
import { BackendError, InvalidArgument, McpStateError, redact } from "../errors.ts";
import { Listeners } from "./_shared.ts";

/** The schema version this module creates and understands. */
export const POSTGRES_SCHEMA_VERSION = 3;

/** The PostgreSQL schema used when none is named. */
export const DEFAULT_POSTGRES_SCHEMA = "mcpstate";

const SCHEMA_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** First half of the advisory lock key that serialises migrations ("mcps"). */
const LOCK_CLASS = 0x6d637073;

/** The largest `NOTIFY` payload sent; a longer one (the limit is 8,000 bytes) becomes `"*"`. */
const MAX_PAYLOAD_BYTES = 7_900;

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

/** Options of {@link PostgresBackend}. */
export interface PostgresBackendOptions {
  /**
   * The PostgreSQL schema that holds the tables (created when absent): letters,
   * digits and `_`, at most 63 characters. Default `mcpstate`.
   */
  schema?: string;
  /**
   * Whether {@link PostgresBackend.close} also ends the client. Default
   * `false`: a client you pass in stays yours. {@link PostgresBackend.fromUrl}
   * sets it, since it opened the client.
   */
  closeClient?: boolean;
}

/** What a backend needs of a client or an open transaction. */
type Queryable = postgres.ISql;

/** Thrown inside a transaction to roll it back and return `value`. */
class Rollback<T> extends Error {
  constructor(readonly value: T) {
    super("rollback");
  }
}

// Columns of a record, in the order recordOf reads them. Positional rows
// (`.values()`) keep the backend independent of any column-name transform the
// caller configured on an injected client.
const RECORD_COLUMNS =
  "handle, kind, state, version, created_at, updated_at, expires_at, last_writer";
const META_COLUMNS = "handle, kind, version, created_at, updated_at, expires_at, last_writer";

/**
 * Stores handles in PostgreSQL through the `postgres` driver (postgres.js),
 * with pooled connections.
 *
 * The `state` column is `text`, not `jsonb`. The store hands over compact
 * JSON text that must come back byte for byte, and `jsonb` keeps a parsed
 * form instead: it re-orders keys (shorter first), keeps only the last of
 * duplicate keys, rewrites numbers (`1e308` comes back as 1 followed by 308
 * zeros, `1.0E+2` as `100`), adds spaces, and refuses `\u0000` and lone
 * surrogate escapes such as `\ud800` outright. `json` would keep the text,
 * but the server parses it on every write and the driver parses it again on
 * every read. `text` stores exactly what it is given at no cost; the store
 * has validated the JSON already. Changelog entries are `text` for the same
 * reason.
 *
 * Times are `bigint` epoch milliseconds and versions `bigint`; both are read
 * back as JavaScript numbers whatever type parsers the client has.
 *
 * @example
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { PostgresBackend } from "@mcpstate/core/postgres";
 *
 * const backend = await PostgresBackend.fromUrl("postgres://app@db.internal/app?schema=agents");
 * await using store = new HandleStore(backend);
 * ```
 */
export class PostgresBackend implements Backend {
  /**
   * Always `false`: PostgreSQL has no native TTL, so the store's periodic
   * sweep deletes rows (with their changelogs) once `expiresAt` plus the grace
   * period has passed, and trashed rows once their undo window has closed.
   */
  readonly reclaimsExpired = false;

  #sql: postgres.Sql;
  readonly #schema: string;
  readonly #closeClient: boolean;
  /** Opens a fresh pool: set for clients `fromUrl` opened, which may be replaced. */
  #reopen: (() => postgres.Sql) | undefined;
  #replacedAt = -Infinity;
  readonly #retiring = new Set<Promise<void>>();
  readonly #q: Statements;
  readonly #listSql = new Map<number, string>();
  #ready: Promise<void> | undefined;
  #initialized = false;
  #closed = false;
  readonly #channel: string;
  readonly #listeners = new Listeners();
  /** The change feed's `LISTEN`, on the pool it was started on (started by the first subscribe). */
  #feed: { sql: postgres.Sql; ready: Promise<postgres.ListenMeta | undefined> } | undefined;

  /**
   * Wraps a postgres.js client. Nothing is sent until the first call (or
   * {@link PostgresBackend.initialize}), which creates or migrates the tables.
   * The client is used as it is; a pool that {@link PostgresBackend.fromUrl}
   * opens is also replaced by a fresh one after a connection failure, which
   * works around postgres.js 3.4.9 leaving a connection whose socket closed
   * mid-write unable to send again.
   *
   * @param sql A `postgres()` client; its pool is shared by every call.
   * @param options The schema; whether `close()` also ends the client.
   * @throws {InvalidArgument} when the schema name is not valid.
   */
  constructor(sql: postgres.Sql, options: PostgresBackendOptions = {}) {
    const schema = options.schema ?? DEFAULT_POSTGRES_SCHEMA;
    checkSchema(schema);
    this.#sql = sql;
    this.#schema = schema;
    this.#closeClient = options.closeClient ?? false;
    this.#channel = channelOf(schema);
    this.#q = statements(`"${schema}"`, this.#channel);
  }

  /**
   * Opens a pooled client from a URL, creates or migrates the tables, and
   * returns the backend. `?schema=name` picks the PostgreSQL schema (default
   * `mcpstate`); every other query parameter goes to the driver. Unless the URL
   * says otherwise, connecting gives up after 10 seconds and reconnection
   * attempts back off to at most one per second, so calls made while the
   * server is away fail within a bounded time and calls after it returns
   * succeed.
   *
   * @param url `postgres://…` or `postgresql://…`.
   * @returns The open backend; its `close()` ends the pool.
   * @throws {InvalidArgument} for a malformed URL or schema (credentials redacted).
   * @throws {BackendError} when PostgreSQL cannot be reached or refuses the schema.
   */
  static async fromUrl(url: string): Promise<PostgresBackend> {
    const { connection, schema, params } = parseUrl(url);
    const options: postgres.Options<Record<string, postgres.PostgresType>> = {
      onnotice: () => {},
      fetch_types: false,
      connection: { application_name: "mcpstate", default_transaction_isolation: "read committed" },
    };
    if (!params.has("connect_timeout")) options.connect_timeout = 10;
    if (!params.has("backoff")) {
      options.backoff = (attempt) => Math.min(0.05 * 2 ** attempt, 1) * (0.5 + Math.random() / 2);
    }
    const open = () => postgres(connection, options);
    let sql: postgres.Sql;
    try {
      sql = open();
    } catch (e) {
      throw new InvalidArgument(
        `Malformed PostgreSQL URL "${redact(url).slice(0, 200)}" (${
          redact(e instanceof Error ? e.message : String(e))
        }). Write postgres://user[:password]@host[:port]/database[?schema=name].`,
        { field: "backend" },
      );
    }
    const backend = new PostgresBackend(sql, { schema, closeClient: true });
    backend.#reopen = open;
    try {
      await backend.initialize();
    } catch (e) {
      await backend.close().catch(() => {});
      throw e;
    }
    return backend;
  }

  /** The PostgreSQL schema that holds this backend's tables. */
  get schema(): string {
    return this.#schema;
  }

  /**
   * Creates the schema and tables when absent and brings an older layout up
   * to {@link POSTGRES_SCHEMA_VERSION}, in one transaction under an advisory
   * lock: instances that start together wait for each other, and all of them
   * succeed. Calls run it by themselves the first time; call it to fail early.
   *
   * @throws {BackendError} when PostgreSQL is unreachable, the database is not
   * UTF-8, or the schema was written by a newer version of mcpstate.
   */
  async initialize(): Promise<void> {
    if (this.#closed) throw closedError();
    const sql = this.#sql;
    try {
      await this.#begin(sql, (tx) => this.#migrate(tx));
      this.#initialized = true;
    } catch (e) {
      if (isConnectionError(e)) this.#replace(sql);
      throw toBackendError(e, true);
    }
  }

  async #migrate(tx: Queryable): Promise<void> {
    const s = `"${this.#schema}"`;
    await tx.unsafe("SELECT pg_advisory_xact_lock($1::int, $2::int)", [
      LOCK_CLASS,
      hash32(this.#schema),
    ]);
    const [info] = await tx.unsafe(
      `SELECT current_setting('server_encoding'),
              EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1::text),
              to_regclass($2::text) IS NOT NULL`,
      [this.#schema, `${s}.meta`],
    ).values();
    const [encoding, hasSchema, hasMeta] = info ?? [];
    if (encoding !== "UTF8" && encoding !== "SQL_ASCII") {
      throw new BackendError(
        `The database's encoding is ${
          String(encoding)
        }; mcpstate needs UTF8 to keep every JSON string exactly. Use a database created with ENCODING 'UTF8'.`,
      );
    }
    // Existence is checked first so that a role without CREATE on the
    // database can use a schema a DBA created for it.
    if (!hasSchema) await tx.unsafe(`CREATE SCHEMA ${s}`);
    if (!hasMeta) {
      await tx.unsafe(`CREATE TABLE ${s}.meta (key text PRIMARY KEY, value text NOT NULL)`);
    }
    const [row] = await tx.unsafe(
      `SELECT value FROM ${s}.meta WHERE key = 'schema_version'`,
    ).values();
    const current = row ? Number(row[0]) : 0;
    if (!Number.isSafeInteger(current) || current > POSTGRES_SCHEMA_VERSION) {
      throw new BackendError(
        `The PostgreSQL schema "${this.#schema}" is at version ${
          String(row?.[0])
        }, newer than this mcpstate understands (${POSTGRES_SCHEMA_VERSION}). Upgrade mcpstate, or point it at another schema with ?schema=.`,
      );
    }
    for (let v = current; v < POSTGRES_SCHEMA_VERSION; v++) {
      for (const statement of MIGRATIONS[v]!(s)) await tx.unsafe(statement);
    }
    if (current < POSTGRES_SCHEMA_VERSION) {
      await tx.unsafe(
        `INSERT INTO ${s}.meta (key, value) VALUES ('schema_version', $1::text)
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
        [String(POSTGRES_SCHEMA_VERSION)],
      );
    }
  }

  /** {@inheritDoc Backend.insert} */
  insert(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<{ inserted: boolean } | Replayed> {
    const params = [user, ...recordParams(record)];
    // With an entry, one statement inserts the row and, only when it went in,
    // the entry: both or neither.
    const text = ctx.entry ? this.#q.insertLogged : this.#q.insert;
    if (ctx.entry) params.push(ctx.entry.version, ctx.entry.at, ctx.entry.text);
    params.push(payloadOf(user, record.handle));
    if (!ctx.idempotency) {
      return this.#op(async (sql) => {
        const res = await sql.unsafe(text, params);
        return { inserted: res.count === 1 };
      });
    }
    return this.#idempotent(user, ctx, async (tx, remember) => {
      const res = await tx.unsafe(text, params);
      // A collision is not remembered: the store retries with a new handle.
      if (res.count !== 1) throw new Rollback({ inserted: false });
      await remember(record);
      return { inserted: true };
    });
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<HandleRecord | null> {
    return this.#op(async (sql) => {
      const [row] = await sql.unsafe(this.#q.read, [user, handle]).values();
      return row ? recordOf(row) : null;
    });
  }

  /** {@inheritDoc Backend.readLeased} */
  readLeased(
    user: string,
    handle: string,
    now: number,
  ): Promise<{ record: HandleRecord | null; lease: LeaseRecord | null }> {
    return this.#op(async (sql) => {
      const [row] = await sql.unsafe(this.#q.readLeased, [user, handle, now]).values();
      if (!row) return { record: null, lease: null };
      return { record: recordOf(row), lease: row[8] == null ? null : leaseOf(row.slice(8)) };
    });
  }

  /** {@inheritDoc Backend.save} */
  save(
    user: string,
    handle: string,
    write: ConditionalWrite,
    ctx: WriteContext,
  ): Promise<SaveOutcome | Replayed> {
    const keep = write.expiresAt === "keep";
    const params = [
      user,
      handle,
      write.state,
      write.updatedAt,
      keep,
      keep ? null : write.expiresAt,
      write.lastWriter,
      write.expectVersion,
      ctx.now,
      payloadOf(user, handle),
    ];
    if (!ctx.idempotency) {
      return this.#op(async (sql) => {
        const [row] = await sql.unsafe(this.#q.save, params).values();
        if (row) return { ok: true, record: recordOf(row) };
        // The conditional UPDATE changed nothing, so this read needs no
        // transaction around it: as a new statement it sees the latest
        // committed row, including the winner's write it may have waited for.
        const [cur] = await sql.unsafe(this.#q.read, [user, handle]).values();
        return { ok: false, current: cur ? recordOf(cur) : null };
      });
    }
    return this.#idempotent(user, ctx, async (tx, remember) => {
      const [row] = await tx.unsafe(this.#q.save, params).values();
      if (!row) {
        const [cur] = await tx.unsafe(this.#q.read, [user, handle]).values();
        throw new Rollback<SaveOutcome>({ ok: false, current: cur ? recordOf(cur) : null });
      }
      const record = recordOf(row);
      await remember(record);
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
    const step = async (
      tx: Queryable,
      remember?: (r: HandleRecord | null) => Promise<void>,
    ): Promise<UpdateOutcome> => {
      // The row lock is held until the transaction ends: concurrent updaters
      // queue here and each one reads the row its predecessor committed.
      const [row] = await tx.unsafe(this.#q.lock, [user, handle]).values();
      const current = row ? recordOf(row) : null;
      // A change that throws ends the transaction here: nothing is written.
      const next = change(current ? { ...current } : null);
      const record = next?.record ?? null;
      const writes: Promise<unknown>[] = [];
      if (next && record && current) {
        const params: unknown[] = [user, ...recordParams(record)];
        if (next.entry) params.push(...entryParams(next.entry, ctx));
        writes.push(tx.unsafe(next.entry ? this.#q.writeLogged : this.#q.write, params as never[]));
        writes.push(tx.unsafe(this.#q.notify, [payloadOf(user, handle)]));
      } else if (next && record) {
        // No live row to change: the step creates one, unless the handle is
        // taken (by a trashed row).
        const params: unknown[] = [user, ...recordParams(record)];
        if (next.entry) params.push(next.entry.version, next.entry.at, next.entry.text);
        params.push(payloadOf(user, handle));
        const res = await tx.unsafe(
          next.entry ? this.#q.insertLogged : this.#q.insert,
          params as never[],
        );
        if (res.count !== 1) throw new Rollback<UpdateOutcome>({ record: null, written: false });
      }
      if (remember) writes.push(remember(record ?? current));
      await Promise.all(writes); // pipelined on the transaction's connection
      return { record: record ?? current, written: record !== null };
    };
    if (!ctx.idempotency) return this.#op((sql) => this.#begin(sql, (tx) => step(tx)));
    return this.#idempotent(user, ctx, step);
  }

  /** {@inheritDoc Backend.remove} */
  remove(
    user: string,
    handle: string,
    ctx: WriteContext,
  ): Promise<{ removed: boolean } | Replayed> {
    const key = [user, handle];
    const payload = payloadOf(user, handle);
    if (ctx.trashUntil !== undefined) {
      // Into the trash: the row stays, its changelog with it; one statement.
      const params = [user, handle, ctx.trashUntil, payload];
      if (!ctx.idempotency) {
        return this.#op(async (sql) => {
          const res = await sql.unsafe(this.#q.trash, params);
          return { removed: res.count > 0 };
        });
      }
      return this.#idempotent(user, ctx, async (tx) => {
        const res = await tx.unsafe(this.#q.trash, params);
        // The claim already holds a null result, which is what a removal returns.
        if (res.count === 0) throw new Rollback({ removed: false });
        return { removed: true };
      });
    }
    // The changelog goes in a second statement of the same transaction: its
    // snapshot is taken after the row's deletion waited for any writer that
    // held the row, so that writer's entry goes too.
    const drop = async (tx: Queryable): Promise<{ removed: boolean }> => {
      const [res] = await Promise.all([
        tx.unsafe(this.#q.remove, [...key, payload]),
        tx.unsafe(this.#q.removeLog, key),
      ]);
      return { removed: res.count > 0 };
    };
    if (!ctx.idempotency) return this.#op((sql) => this.#begin(sql, drop));
    return this.#idempotent(user, ctx, async (tx) => {
      const res = await drop(tx);
      if (!res.removed) throw new Rollback(res);
      return res;
    });
  }

  /** {@inheritDoc Backend.untrash} */
  untrash(user: string, handle: string, ctx: WriteContext): Promise<HandleRecord | null> {
    return this.#op(async (sql) => {
      const params = [user, handle, ctx.now, payloadOf(user, handle)];
      const [row] = await sql.unsafe(this.#q.untrash, params).values();
      return row ? recordOf(row) : null;
    });
  }

  /** {@inheritDoc Backend.changes} */
  changes(user: string, handle: string, afterVersion: number): Promise<ChangeEntry[]> {
    return this.#op(async (sql) => {
      const rows = await sql.unsafe(this.#q.changes, [user, handle, afterVersion]).values();
      return rows.map((r) => ({ version: Number(r[0]), at: Number(r[1]), text: String(r[2]) }));
    });
  }

  /** {@inheritDoc Backend.list} */
  list(user: string, q: ListQuery): Promise<HandleMeta[]> {
    const params: unknown[] = [user, q.limit];
    let shape = 0;
    if (q.kind !== undefined) (shape |= 1, params.push(q.kind));
    if (q.liveAt !== undefined) (shape |= 2, params.push(q.liveAt));
    if (q.after) (shape |= 4, params.push(q.after.updatedAt, q.after.handle));
    let text = this.#listSql.get(shape);
    if (text === undefined) {
      this.#listSql.set(shape, text = listStatement(`"${this.#schema}"`, shape));
    }
    return this.#op(async (sql) => {
      const rows = await sql.unsafe(text, params as never[]).values();
      return rows.map(metaOf);
    });
  }

  /** {@inheritDoc Backend.sweep} */
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    return this.#op(async (sql) => {
      const [row] = user === null
        ? await sql.unsafe(this.#q.sweepAll, [expiredAtOrBefore, now]).values()
        : await sql.unsafe(this.#q.sweepUser, [expiredAtOrBefore, now, user]).values();
      return Number(row?.[0] ?? 0);
    });
  }

  /** {@inheritDoc Backend.listUsers} */
  listUsers(query: { after?: string; limit: number }): Promise<string[]> {
    return this.#op(async (sql) => {
      const rows = await sql.unsafe(this.#q.users, [query.after ?? "", query.limit]).values();
      return rows.map((r) => String(r[0]));
    });
  }

  /** {@inheritDoc Backend.restore} */
  restore(
    user: string,
    record: HandleRecord,
    _ctx: WriteContext,
  ): Promise<"inserted" | "replaced" | "kept"> {
    const key = [user, record.handle];
    return this.#op((sql) =>
      this.#begin(sql, async (tx) => {
        // The lock tells a trashed row (overwritten as if absent) from a live
        // one, and keeps writers off the handle until the changelog is gone.
        const [[prev], [row]] = await Promise.all([
          tx.unsafe(this.#q.lockAny, key).values(),
          tx.unsafe(this.#q.restore, [user, ...recordParams(record)]).values(),
        ]);
        if (row === undefined) return "kept";
        // A new statement: it sees every entry committed before the lock.
        await Promise.all([
          tx.unsafe(this.#q.dropLog, key),
          tx.unsafe(this.#q.notify, [payloadOf(user, record.handle)]),
        ]);
        return row[0] === true || prev?.[0] === true ? "inserted" : "replaced";
      })
    );
  }

  /** {@inheritDoc Backend.acquireLease} */
  acquireLease(
    user: string,
    handle: string,
    lease: LeaseRecord,
    now: number,
  ): Promise<LeaseOutcome> {
    const params = [user, handle, lease.holder, lease.expiresAt, now];
    return this.#op(async (sql) => {
      for (;;) {
        const [taken] = await sql.unsafe(this.#q.acquire, params).values();
        if (taken) return { acquired: true, lease: leaseOf(taken) };
        // Another holder's lease was in force. A new statement sees it even
        // when it was committed after the upsert's snapshot; when it has been
        // released or lapsed since, the upsert is tried again.
        const [held] = await sql.unsafe(this.#q.leaseOf, [user, handle]).values();
        if (held && Number(held[1]) > now) return { acquired: false, lease: leaseOf(held) };
      }
    });
  }

  /** {@inheritDoc Backend.releaseLease} */
  releaseLease(user: string, handle: string, holder: string, now: number): Promise<boolean> {
    return this.#op(async (sql) => {
      const [row] = await sql.unsafe(this.#q.release, [user, handle, holder, now]).values();
      return row?.[0] === true;
    });
  }

  /** {@inheritDoc Backend.leases} */
  leases(user: string, handles: readonly string[], now: number): Promise<Map<string, LeaseRecord>> {
    return this.#op(async (sql) => {
      const out = new Map<string, LeaseRecord>();
      if (handles.length === 0) return out;
      const rows = await sql.unsafe(this.#q.leases, [user, JSON.stringify(handles), now]).values();
      for (const r of rows) out.set(String(r[0]), leaseOf(r.slice(1)));
      return out;
    });
  }

  /**
   * {@inheritDoc Backend.subscribe}
   *
   * The first call starts a `LISTEN` on the schema's channel, on a connection
   * postgres.js keeps for it and re-opens after a failure; every listener is
   * called each time it listens again, since events may have been missed
   * meanwhile. After an outage the feed moves to the fresh pool with the calls.
   * Behind a transaction-mode pooler (PgBouncer) `LISTEN` hears nothing, and
   * a watch relies on its `pollMs` re-reads.
   */
  async subscribe(user: string, handle: string, listener: () => void): Promise<() => void> {
    if (this.#closed) throw closedError();
    const remove = this.#listeners.add(user, handle, listener);
    await this.#listen();
    return remove;
  }

  /** {@inheritDoc Backend.close} */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const feed = this.#feed;
    this.#feed = undefined;
    if (this.#closeClient) await this.#sql.end({ timeout: 5 });
    else {
      // Not awaited: while the server is away, UNLISTEN would wait for it.
      feed?.ready.then((m) => m?.unlisten()).catch(() => {});
    }
    await Promise.all(this.#retiring);
  }

  /** Starts the change feed on the current pool, unless it runs there already. */
  #listen(): Promise<unknown> {
    const sql = this.#sql;
    if (this.#feed?.sql !== sql) {
      // postgres.js calls `onlisten` after each LISTEN, the first one included,
      // and retries a failed first one by itself. Every LISTEN but a first one
      // that succeeded at once may have missed events.
      let missed = false;
      const onlisten = () => (missed ? this.#heard("*") : (missed = true));
      const ready = sql.listen(this.#channel, (p) => this.#heard(p), onlisten)
        .catch(() => {
          missed = true;
          return undefined;
        });
      this.#feed = { sql, ready };
    }
    return this.#feed.ready;
  }

  /** Calls the listeners a notification names: those of one handle, or all for `"*"`. */
  #heard(payload: string): void {
    if (this.#closed) return;
    try {
      const [user, handle] = payload === "*" ? [] : JSON.parse(payload);
      if (typeof user === "string" && typeof handle === "string") {
        return this.#listeners.notify(user, handle);
      }
    } catch { /* not a payload of ours: call everyone */ }
    this.#listeners.notifyAll();
  }

  /** Runs one call: migrates first if needed, and turns driver failures into `backend_error`. */
  async #op<T>(fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
    if (this.#closed) throw closedError();
    if (!this.#initialized) {
      this.#ready ??= this.initialize().finally(() => (this.#ready = undefined));
      await this.#ready;
    }
    const sql = this.#sql;
    try {
      return await fn(sql);
    } catch (e) {
      if (isConnectionError(e)) this.#replace(sql);
      throw toBackendError(e);
    }
  }

  /**
   * After a connection failure, swaps a pool this backend opened for a fresh
   * one (at most once a second) and ends the old one once its running calls
   * are done. postgres.js 3.4.9 can leave a connection whose socket closed
   * while a write was queued unable to send anything again (every later
   * connect attempt on it times out); a fresh pool makes recovery clean when
   * the server returns. An injected client is left as it is.
   */
  #replace(failed: postgres.Sql): void {
    const now = performance.now();
    if (!this.#reopen || this.#closed || failed !== this.#sql || now - this.#replacedAt < 1000) {
      return;
    }
    this.#replacedAt = now;
    this.#sql = this.#reopen();
    // The old pool's LISTEN ends with it: the feed moves to the new pool.
    if (this.#feed) void this.#listen();
    const ending: Promise<void> = failed.end({ timeout: 2 }).catch(() => {}).finally(() =>
      this.#retiring.delete(ending)
    );
    this.#retiring.add(ending);
  }

  /**
   * Runs `fn` in a READ COMMITTED transaction; a {@link Rollback} rolls it
   * back and returns its value.
   *
   * When a statement fails because the connection is gone, the error is
   * returned at once and the transaction's callback is left pending for good
   * instead of rejecting: postgres.js would answer a rejection with a
   * `ROLLBACK` on the dead connection, and its write scheduler then throws an
   * uncatchable TypeError on the closed socket, taking the process down. The
   * server rolls back a transaction whose session ended, so nothing is lost.
   */
  async #begin<T>(sql: postgres.Sql, fn: (tx: Queryable) => Promise<T>): Promise<T> {
    let abandon: (e: unknown) => void = () => {};
    const abandoned = new Promise<never>((_, reject) => (abandon = reject));
    const run = sql.begin("isolation level read committed", async (tx) => {
      try {
        return await fn(tx);
      } catch (e) {
        if (!isConnectionError(e)) throw e;
        abandon(e);
        return await new Promise<never>(() => {});
      }
    }) as Promise<T>;
    run.catch(() => {}); // when the connection closes, `abandoned` has the error already
    try {
      return await Promise.race([run, abandoned]);
    } catch (e) {
      if (e instanceof Rollback) return e.value as T;
      throw e;
    }
  }

  /**
   * Runs a write that carries an idempotency key, in one transaction: first
   * the claim on `(user, scope, key)` — an insert that waits for any other
   * transaction holding the same key, so a retry racing its first attempt
   * sees the first attempt's result — then the write, then its result.
   */
  #idempotent<T>(
    user: string,
    ctx: WriteContext,
    fn: (tx: Queryable, remember: (r: HandleRecord | null) => Promise<void>) => Promise<T>,
  ): Promise<T | Replayed> {
    const c = ctx.idempotency!;
    const key = [user, c.scope, c.key];
    return this.#op((sql) =>
      this.#begin<T | Replayed>(sql, async (tx) => {
        const claim = await tx.unsafe(this.#q.claim, [...key, c.fingerprint, c.expiresAt, ctx.now]);
        if (claim.count === 0) {
          const [row] = await tx.unsafe(this.#q.replay, key).values();
          if (!row) throw new Error("The idempotency record vanished while it was read.");
          const result = row[1] == null ? null : JSON.parse(String(row[1])) as HandleRecord;
          return { replayed: true, fingerprint: String(row[0]), result };
        }
        return await fn(tx, async (r) => {
          await tx.unsafe(this.#q.remember, [...key, r === null ? null : JSON.stringify(r)]);
        });
      })
    );
  }
}

/** The SQL texts of one schema, built once. */
interface Statements {
  read: string;
  readLeased: string;
  lock: string;
  lockAny: string;
  insert: string;
  insertLogged: string;
  save: string;
  write: string;
  writeLogged: string;
  remove: string;
  removeLog: string;
  dropLog: string;
  trash: string;
  untrash: string;
  changes: string;
  sweepAll: string;
  sweepUser: string;
  claim: string;
  replay: string;
  remember: string;
  users: string;
  restore: string;
  notify: string;
  acquire: string;
  leaseOf: string;
  release: string;
  leases: string;
}

/**
 * The SQL texts of one schema. Every statement that writes a record also
 * notifies `channel` with its last parameter, the payload, once per written
 * row; inside `update` and `restore` the `notify` statement does it.
 */
function statements(s: string, channel: string): Statements {
  const h = `${s}.handles`, c = `${s}.changes`, i = `${s}.idempotency`, l = `${s}.leases`;
  const live = "trashed_until IS NULL";
  const notify = (param: string) => `pg_notify('${channel}', ${param})`;
  const sweep = (byUser: string) =>
    `WITH idem AS (DELETE FROM ${i} WHERE expires_at <= $2::bigint),
     expired AS (DELETE FROM ${h} WHERE expires_at <= $1::bigint AND ${live}${byUser}
                 RETURNING user_id, handle),
     trashed AS (DELETE FROM ${h} WHERE trashed_until <= $2::bigint${byUser}
                 RETURNING user_id, handle),
     gone AS (SELECT user_id, handle FROM expired UNION ALL SELECT user_id, handle FROM trashed),
     log AS (DELETE FROM ${c} AS e USING gone
             WHERE e.user_id = gone.user_id AND e.handle = gone.handle),
     lapsed AS (DELETE FROM ${l} WHERE expires_at <= $2::bigint)
     SELECT count(*)::int, CASE WHEN count(*) > 0 THEN ${notify("'*'")} END FROM expired`;
  return {
    read: `SELECT ${RECORD_COLUMNS} FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live}`,
    readLeased: `SELECT ${RECORD_COLUMNS.split(", ").map((c) => `r.${c}`).join(", ")},
                 l.holder, l.expires_at
                 FROM ${h} AS r LEFT JOIN ${l} AS l ON l.user_id = r.user_id
                   AND l.handle = r.handle AND l.expires_at > $3::bigint
                 WHERE r.user_id = $1 AND r.handle = $2 AND r.${live}`,
    lock: `SELECT ${RECORD_COLUMNS} FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live}
           FOR UPDATE`,
    lockAny: `SELECT trashed_until IS NOT NULL FROM ${h} WHERE user_id = $1 AND handle = $2
              FOR UPDATE`,
    // A trashed row holds its handle too: the primary key stops the insert.
    insert: `WITH ins AS (
               INSERT INTO ${h} (user_id, ${RECORD_COLUMNS})
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
               ON CONFLICT (user_id, handle) DO NOTHING
               RETURNING 1
             )
             SELECT ${notify("$10")} FROM ins`,
    // The entry goes in only with the row. An entry left by an older instance
    // that deleted a row without its changelog is overwritten, never in the way.
    insertLogged: `WITH ins AS (
                     INSERT INTO ${h} (user_id, ${RECORD_COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                     ON CONFLICT (user_id, handle) DO NOTHING
                     RETURNING user_id, handle
                   ),
                   log AS (
                     INSERT INTO ${c} (user_id, handle, version, at, text)
                     SELECT user_id, handle, $10::bigint, $11::bigint, $12::text FROM ins
                     ON CONFLICT (user_id, handle, version) DO UPDATE
                       SET at = EXCLUDED.at, text = EXCLUDED.text
                   )
                   SELECT ${notify("$13")} FROM ins`,
    save: `WITH s AS (
             UPDATE ${h}
             SET state = $3, version = version + 1, updated_at = $4,
                 expires_at = CASE WHEN $5::boolean THEN expires_at ELSE $6::bigint END,
                 last_writer = $7
             WHERE user_id = $1 AND handle = $2 AND version = $8::bigint AND ${live}
               AND (expires_at IS NULL OR expires_at > $9::bigint)
             RETURNING ${RECORD_COLUMNS}
           )
           SELECT ${RECORD_COLUMNS}, ${notify("$10")} FROM s`,
    write: `UPDATE ${h}
            SET kind = $3, state = $4, version = $5, created_at = $6, updated_at = $7,
                expires_at = $8, last_writer = $9
            WHERE user_id = $1 AND handle = $2`,
    // The new row, the entry and the retention trim in one statement (one
    // message where three would cost a server round each). The trim leaves
    // the new version alone, so that no row is both deleted and upserted.
    writeLogged: `WITH w AS (
                    UPDATE ${h}
                    SET kind = $3, state = $4, version = $5, created_at = $6, updated_at = $7,
                        expires_at = $8, last_writer = $9
                    WHERE user_id = $1 AND handle = $2
                  ),
                  cut AS (
                    DELETE FROM ${c}
                    WHERE user_id = $1 AND handle = $2 AND version < $10::bigint
                      AND (version <= $13::bigint OR at < $14::bigint)
                  )
                  INSERT INTO ${c} (user_id, handle, version, at, text)
                  VALUES ($1, $2, $10::bigint, $11::bigint, $12::text)
                  ON CONFLICT (user_id, handle, version) DO UPDATE
                    SET at = EXCLUDED.at, text = EXCLUDED.text`,
    remove: `WITH d AS (
               DELETE FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live}
               RETURNING 1
             )
             SELECT ${notify("$3")} FROM d`,
    // Runs after `remove` in its transaction: the changelog goes when no row
    // (live or trashed) is left to own it.
    removeLog: `DELETE FROM ${c} WHERE user_id = $1 AND handle = $2
                AND NOT EXISTS (SELECT 1 FROM ${h} WHERE user_id = $1 AND handle = $2)`,
    dropLog: `DELETE FROM ${c} WHERE user_id = $1 AND handle = $2`,
    trash: `WITH t AS (
              UPDATE ${h} SET trashed_until = $3::bigint
              WHERE user_id = $1 AND handle = $2 AND ${live}
              RETURNING 1
            )
            SELECT ${notify("$4")} FROM t`,
    untrash: `WITH u AS (
                UPDATE ${h} SET trashed_until = NULL
                WHERE user_id = $1 AND handle = $2 AND trashed_until > $3::bigint
                RETURNING ${RECORD_COLUMNS}
              )
              SELECT ${RECORD_COLUMNS}, ${notify("$4")} FROM u`,
    changes: `SELECT version, at, text FROM ${c}
              WHERE user_id = $1 AND handle = $2 AND version > $3::bigint
                AND EXISTS (SELECT 1 FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live})
              ORDER BY version`,
    sweepAll: sweep(""),
    sweepUser: sweep(" AND user_id = $3"),
    // A live record stops the claim (and is then read by `replay`); an expired
    // one that no sweep has removed yet is taken over.
    claim: `INSERT INTO ${i} AS old (user_id, scope, key, fingerprint, result, expires_at)
            VALUES ($1, $2, $3, $4, NULL, $5)
            ON CONFLICT (user_id, scope, key) DO UPDATE
              SET fingerprint = EXCLUDED.fingerprint, result = NULL, expires_at = EXCLUDED.expires_at
              WHERE old.expires_at <= $6::bigint`,
    replay: `SELECT fingerprint, result FROM ${i} WHERE user_id = $1 AND scope = $2 AND key = $3`,
    remember: `UPDATE ${i} SET result = $4 WHERE user_id = $1 AND scope = $2 AND key = $3`,
    // A loose index scan over the primary key: one probe per user, however
    // many handles each has, and one more for a live row (a user whose rows
    // are all in the trash is left out). "C" collation: UTF-8 byte order.
    users: `WITH RECURSIVE u (user_id) AS (
              (SELECT user_id FROM ${h} WHERE user_id > $1::text ORDER BY user_id LIMIT 1)
              UNION ALL
              SELECT (SELECT n.user_id FROM ${h} n WHERE n.user_id > u.user_id
                      ORDER BY n.user_id LIMIT 1)
              FROM u WHERE u.user_id IS NOT NULL
            )
            SELECT user_id FROM u
            WHERE user_id IS NOT NULL
              AND EXISTS (SELECT 1 FROM ${h} l WHERE l.user_id = u.user_id AND l.${live})
            LIMIT $2::int`,
    // `xmax = 0` tells a fresh insert from an update of a conflicting row. A
    // trashed row gives way to any version and leaves the trash.
    restore: `INSERT INTO ${h} AS old (user_id, ${RECORD_COLUMNS})
              VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
              ON CONFLICT (user_id, handle) DO UPDATE
                SET kind = EXCLUDED.kind, state = EXCLUDED.state, version = EXCLUDED.version,
                    created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
                    expires_at = EXCLUDED.expires_at, last_writer = EXCLUDED.last_writer,
                    trashed_until = NULL
                WHERE old.version < EXCLUDED.version OR old.trashed_until IS NOT NULL
              RETURNING old.xmax = 0`,
    notify: `SELECT ${notify("$1")}`,
    // Stores the lease unless another holder's is still in force.
    acquire: `INSERT INTO ${l} AS old (user_id, handle, holder, expires_at)
              VALUES ($1, $2, $3, $4::bigint)
              ON CONFLICT (user_id, handle) DO UPDATE
                SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                WHERE old.holder = EXCLUDED.holder OR old.expires_at <= $5::bigint
              RETURNING holder, expires_at`,
    leaseOf: `SELECT holder, expires_at FROM ${l} WHERE user_id = $1 AND handle = $2`,
    release: `DELETE FROM ${l} WHERE user_id = $1 AND handle = $2 AND holder = $3
              RETURNING expires_at > $4::bigint`,
    leases: `SELECT handle, holder, expires_at FROM ${l}
             WHERE user_id = $1 AND handle IN (SELECT json_array_elements_text($2::text::json))
               AND expires_at > $3::bigint`,
  };
}

/** The listing query for a combination of filters (bit 1 kind, 2 live, 4 cursor). */
function listStatement(s: string, shape: number): string {
  // `trashed_until IS NULL` is the predicate of the partial index listing reads.
  const where = ["user_id = $1", "trashed_until IS NULL"];
  let n = 3;
  if (shape & 1) where.push(`kind = $${n++}`);
  if (shape & 2) where.push(`(expires_at IS NULL OR expires_at > $${n++}::bigint)`);
  if (shape & 4) {
    // `updated_at <= $u` bounds the index scan; the rest skips the rows of the
    // cursor's own millisecond up to and including the cursor's handle.
    const u = `$${n++}::bigint`, h = `$${n++}::text`;
    where.push(`updated_at <= ${u} AND (updated_at < ${u} OR handle > ${h})`);
  }
  return `SELECT ${META_COLUMNS} FROM ${s}.handles WHERE ${where.join(" AND ")}
          ORDER BY updated_at DESC, handle LIMIT $2::int`;
}

/**
 * Schema migrations: entry `v` takes the schema from version `v` to `v + 1`.
 * `user_id` and `handle` use the "C" collation, so that `handle` orders by
 * code unit (the listing order of every backend) and compares fast.
 */
const MIGRATIONS: readonly ((s: string) => string[])[] = [
  (s) => [
    `CREATE TABLE ${s}.handles (
       user_id     text COLLATE "C" NOT NULL,
       handle      text COLLATE "C" NOT NULL,
       kind        text NOT NULL,
       state       text NOT NULL,
       version     bigint NOT NULL,
       created_at  bigint NOT NULL,
       updated_at  bigint NOT NULL,
       expires_at  bigint,
       last_writer text,
       PRIMARY KEY (user_id, handle)
     )`,
    // Listing is an index-only scan of this index: it never touches a state.
    `CREATE INDEX handles_user_updated ON ${s}.handles (user_id, updated_at DESC, handle)
       INCLUDE (kind, version, created_at, expires_at, last_writer)`,
    `CREATE INDEX handles_expires ON ${s}.handles (expires_at) WHERE expires_at IS NOT NULL`,
    `CREATE TABLE ${s}.idempotency (
       user_id     text COLLATE "C" NOT NULL,
       scope       text COLLATE "C" NOT NULL,
       key         text COLLATE "C" NOT NULL,
       fingerprint text NOT NULL,
       result      text,
       expires_at  bigint NOT NULL,
       PRIMARY KEY (user_id, scope, key)
     )`,
    `CREATE INDEX idempotency_expires ON ${s}.idempotency (expires_at)`,
  ],
  // 2: the changelog and the trash. Adding a nullable column rewrites nothing;
  // the listing index is rebuilt as a partial index of the live rows, so that
  // listing stays an index-only scan that never sees a trashed row.
  (s) => [
    `ALTER TABLE ${s}.handles ADD COLUMN trashed_until bigint`,
    `DROP INDEX ${s}.handles_user_updated`,
    `CREATE INDEX handles_user_updated ON ${s}.handles (user_id, updated_at DESC, handle)
       INCLUDE (kind, version, created_at, expires_at, last_writer)
       WHERE trashed_until IS NULL`,
    `CREATE INDEX handles_trashed ON ${s}.handles (trashed_until)
       WHERE trashed_until IS NOT NULL`,
    `CREATE TABLE ${s}.changes (
       user_id text COLLATE "C" NOT NULL,
       handle  text COLLATE "C" NOT NULL,
       version bigint NOT NULL,
       at      bigint NOT NULL,
       text    text NOT NULL,
       PRIMARY KEY (user_id, handle, version)
     )`,
  ],
  // 3: advisory leases, beside the records.
  (s) => [
    `CREATE TABLE ${s}.leases (
       user_id    text COLLATE "C" NOT NULL,
       handle     text COLLATE "C" NOT NULL,
       holder     text NOT NULL,
       expires_at bigint NOT NULL,
       PRIMARY KEY (user_id, handle)
     )`,
    `CREATE INDEX leases_expires ON ${s}.leases (expires_at)`,
  ],
];

/**
 * An entry's parameters of `writeLogged`: the entry, then the retention
 * bounds (delete `version <=` the first, or `at <` the second).
 */
function entryParams(e: ChangeEntry, ctx: WriteContext): (string | number)[] {
  const r = ctx.retention;
  return [
    e.version,
    e.at,
    e.text,
    r ? e.version - r.maxEntries : 0,
    r ? ctx.now - r.maxAgeMs : Number.MIN_SAFE_INTEGER,
  ];
}

/** A record's columns after `user_id`, in the order of {@link RECORD_COLUMNS}. */
function recordParams(r: HandleRecord): (string | number | null)[] {
  return [
    r.handle,
    r.kind,
    r.state,
    r.version,
    r.createdAt,
    r.updatedAt,
    r.expiresAt,
    r.lastWriter,
  ];
}

function leaseOf(row: readonly unknown[]): LeaseRecord {
  return { holder: String(row[0]), expiresAt: Number(row[1]) };
}

/**
 * The `NOTIFY` channel of a schema's change feed: `mcpstate_<schema>`, or,
 * past PostgreSQL's 63 bytes, its first 54 characters and a hash of the schema.
 */
function channelOf(schema: string): string {
  const name = `mcpstate_${schema}`;
  if (name.length <= 63) return name;
  return `${name.slice(0, 54)}_${(hash32(schema) >>> 0).toString(16).padStart(8, "0")}`;
}

const encoder = new TextEncoder();

/** The `NOTIFY` payload of a write: `[user, handle]` as JSON, or `"*"` (everyone) when too long. */
function payloadOf(user: string, handle: string): string {
  const text = JSON.stringify([user, handle]);
  return encoder.encode(text).length <= MAX_PAYLOAD_BYTES ? text : "*";
}

function recordOf(row: readonly unknown[]): HandleRecord {
  return {
    handle: String(row[0]),
    kind: String(row[1]),
    state: String(row[2]),
    version: Number(row[3]),
    createdAt: Number(row[4]),
    updatedAt: Number(row[5]),
    expiresAt: row[6] == null ? null : Number(row[6]),
    lastWriter: row[7] == null ? null : String(row[7]),
  };
}

function metaOf(row: readonly unknown[]): HandleMeta {
  return {
    handle: String(row[0]),
    kind: String(row[1]),
    version: Number(row[2]),
    createdAt: Number(row[3]),
    updatedAt: Number(row[4]),
    expiresAt: row[5] == null ? null : Number(row[5]),
    lastWriter: row[6] == null ? null : String(row[6]),
  };
}

function checkSchema(schema: unknown): asserts schema is string {
  if (typeof schema !== "string" || !SCHEMA_RE.test(schema)) {
    throw new InvalidArgument(
      `The PostgreSQL schema name ${
        JSON.stringify(String(schema)).slice(0, 80)
      } is not valid: use 1-63 letters, digits and "_", not starting with a digit (e.g. ?schema=mcpstate).`,
      { field: "schema" },
    );
  }
}

function parseUrl(url: string): { connection: string; schema: string; params: URLSearchParams } {
  if (typeof url !== "string" || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new InvalidArgument(
      `Not a PostgreSQL URL: "${
        redact(String(url)).slice(0, 200)
      }". Write postgres://user[:password]@host[:port]/database[?schema=name].`,
      { field: "backend" },
    );
  }
  const q = url.indexOf("?");
  const base = q < 0 ? url : url.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : url.slice(q + 1));
  const schema = params.get("schema") ?? DEFAULT_POSTGRES_SCHEMA;
  checkSchema(schema);
  // postgres.js sends unknown query parameters to the server as settings;
  // `schema` is ours.
  params.delete("schema");
  const rest = params.toString();
  return { connection: rest ? `${base}?${rest}` : base, schema, params };
}

/** FNV-1a of `text`, as a signed 32-bit integer. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of encoder.encode(text)) h = Math.imul(h ^ byte, 0x01000193);
  return h | 0;
}

function closedError(): BackendError {
  return new BackendError("The PostgreSQL backend is closed; open a new store.");
}

/** Error codes meaning "the server is not there (now)", not "the server said no". */
const UNAVAILABLE = new Set([
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, shutting down)
  "53300", // too_many_connections
]);

/** Whether `e` says the server is not there (now) rather than that it refused something. */
function isConnectionError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (UNAVAILABLE.has(code) || code.startsWith("08"));
}

/**
 * Turns a driver failure into a `backend_error` whose message says what
 * happened and what to do; mcpstate errors pass through. Every message goes
 * through `redact` (postgres.js names host and port in its connection errors,
 * never the password, but a server message may quote anything).
 */
function toBackendError(e: unknown, opening = false): McpStateError {
  if (e instanceof McpStateError) return e;
  const code = typeof (e as { code?: unknown })?.code === "string"
    ? (e as { code: string }).code
    : "";
  const text = redact(e instanceof Error ? e.message : String(e)).slice(0, 500);
  const unavailable = isConnectionError(e);
  if (opening) {
    const detail = `${text}${code && !text.includes(code) ? `, SQLSTATE ${code}` : ""}`;
    return new BackendError(
      unavailable
        ? `Could not open the PostgreSQL store: the server is unreachable or restarting (${detail}). Check that it is running and that the URL's host and port are right, then try again; nothing was changed.`
        : `Could not open the PostgreSQL store (${detail}). Check the URL's database and credentials and the role's privileges on the schema; nothing was changed.`,
      { cause: e },
    );
  }
  if (unavailable) {
    return new BackendError(
      `PostgreSQL is unreachable or restarting (${text}). Whether this call was applied is unknown: re-read the handle before changing it again, or repeat the call with the same idempotency key once the database is back.`,
      { cause: e },
    );
  }
  if (code === "54000" && /index row/.test(text)) {
    return new BackendError(
      `PostgreSQL cannot index values this long (${text}). Nothing was applied: a user id together with its writer label or idempotency key must stay under about 2,600 bytes of UTF-8.`,
      { cause: e },
    );
  }
  if (e instanceof postgres.PostgresError) {
    return new BackendError(
      `PostgreSQL refused the operation: ${text} (SQLSTATE ${code}). Nothing was applied; try again later, and tell the operator if it persists.`,
      { cause: e },
    );
  }
  return new BackendError(
    `The PostgreSQL driver failed: ${text}. Whether this call was applied is unknown: re-read the handle before changing it again.`,
    { cause: e },
  );
}
