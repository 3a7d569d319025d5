/**
 * The PostgreSQL backend's class: its primitives over the prepared
 * statements, the pool and the change feed.
 *
 * @module
 */
import type postgres from "postgres";
import type * as B from "../../backend.ts";
import { forkedFromText, type ListDialect, listFilters, listSql } from "../_sql.ts";
import { closedError } from "./_errors.ts";
import { Feed } from "./_feed.ts";
import { idempotent } from "./_idempotency.ts";
import { Pool, type Queryable, Rollback } from "./_pool.ts";
import {
  auditParams,
  channelOf,
  entryParams,
  leasedOutcome,
  leaseOf,
  metaOf,
  payloadOf,
  recordOf,
  recordParams,
} from "./_rows.ts";
import { migrate } from "./_schema.ts";
import {
  applyUsage,
  prepareUsage,
  readUsage,
  type UsageStatements,
  usageStatements,
} from "./_usage.ts";
import { endGrant, GrantStatements, prepareGrants, putGrant } from "./_grants.ts";
import { acquireLease, leasesOf, releaseLease } from "./_leases.ts";
import type { PostgresBackendOptions } from "./_options.ts";
import type { UsageDelta } from "../_quota.ts";
import { utf8Length } from "../../json.ts";
import { Guesses } from "./_guesses.ts";
import { postgresErasure } from "./_erase.ts";
import { postgresKeys, prepareDataKeys } from "./_data_keys.ts";
import { postgresContent } from "./_content.ts";
import { listDialect, type Statements, statements } from "./_statements.ts";
import { checkSchema, DEFAULT_POSTGRES_SCHEMA, openClient } from "./_url.ts";

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
export class PostgresBackend implements B.Backend {
  /**
   * Always `false`: PostgreSQL has no native TTL, so the store's periodic
   * sweep deletes rows (with their changelogs) once `expiresAt` plus the grace
   * period has passed, and trashed rows once their undo window has closed.
   */
  readonly reclaimsExpired = false;

  readonly #pool: Pool;
  readonly #schema: string;
  readonly #closeClient: boolean;
  readonly #q: Statements;
  readonly #u: UsageStatements;
  readonly #g: GrantStatements;
  readonly #dialect: ListDialect;
  readonly #lists = new Map<number, string>();
  readonly #feed: Feed;
  /** Records this backend last read or wrote: see `postgres/_guesses.ts`. */
  readonly #guesses = new Guesses();
  /** {@inheritDoc Backend.erasure} */
  readonly erasure: B.ErasurePrimitives = postgresErasure(() => ({
    pool: this.#pool,
    s: `"${this.#schema}"`,
    channel: channelOf(this.#schema),
    forget: (user, handle) => this.#guesses.set(user, handle, null),
  }));

  /** {@inheritDoc Backend.keys} */
  readonly keys: B.KeyPrimitives;
  /** {@inheritDoc Backend.content} */
  readonly content: B.ContentPrimitives;

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
    this.#schema = schema;
    this.#closeClient = options.closeClient ?? false;
    const channel = channelOf(schema);
    this.#q = statements(`"${schema}"`, channel);
    this.#u = usageStatements(`"${schema}"`);
    this.#g = new GrantStatements(`"${schema}"`);
    this.#dialect = listDialect(`"${schema}"`);
    this.#feed = new Feed(channel);
    this.#pool = new Pool(sql, async (tx) => {
      await migrate(tx, schema);
      await prepareUsage(tx, `"${schema}"`);
      await prepareGrants(tx, `"${schema}"`);
      await prepareDataKeys(tx, `"${schema}"`);
    });
    this.keys = postgresKeys(this.#pool, `"${schema}"`);
    this.content = postgresContent(
      this.#pool,
      `"${schema}"`,
      (user, handle) => this.#guesses.set(user, handle, null),
    );
    // The old pool's LISTEN ends with it: the feed moves to the new pool.
    this.#pool.onReplace = (fresh) => this.#feed.moveTo(fresh);
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
    const { sql, open, schema } = openClient(url);
    const backend = new PostgresBackend(sql, { schema, closeClient: true });
    backend.#pool.reopen = open;
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
  initialize(): Promise<void> {
    return this.#pool.initialize();
  }

  /** {@inheritDoc Backend.insert} */
  insert(
    user: string,
    record: B.HandleRecord,
    ctx: B.WriteContext,
  ): Promise<B.InsertOutcome | B.Replayed> {
    const params: unknown[] = [user, ...recordParams(record)];
    // With an entry, one statement inserts the row and, only when it went in,
    // the entry: both or neither. So with the lease.
    const lease = ctx.lease;
    const q = this.#q;
    const text = ctx.entry
      ? (lease ? q.insertLoggedLeased : q.insertLogged)
      : (lease ? q.insertLeased : q.insert);
    if (ctx.entry) params.push(ctx.entry.version, ctx.entry.at, ctx.entry.text);
    params.push(payloadOf(user, record.handle));
    if (lease) params.push(lease.holder, lease.expiresAt, ctx.now);
    // Always the last three parameters.
    params.push(record.schemaVersion ?? null, record.preview ?? null, forkedFromText(record));
    const insert = async (sql: Queryable): Promise<B.InsertOutcome | undefined> => {
      const [row] = await sql.unsafe(text, params as never[]).values();
      if (!row) return undefined;
      return leasedOutcome({ inserted: true }, ctx, row.slice(1));
    };
    if (ctx.quota) {
      return this.#guarded(user, ctx, async (tx, remember) => {
        const out = await insert(tx);
        if (!out) throw new Rollback({ inserted: false });
        if (remember) await remember(record);
        return { out, delta: { handles: 1, bytes: utf8Length(record.state) } };
      });
    }
    if (!ctx.idempotency) {
      return this.#pool.op(async (sql) => {
        const out = await insert(sql);
        if (out) this.#guesses.set(user, record.handle, record);
        return out ?? { inserted: false };
      });
    }
    return this.#idempotent(user, ctx, async (tx, remember) => {
      const out = await insert(tx);
      // A collision is not remembered: the store retries with a new handle.
      if (!out) throw new Rollback({ inserted: false });
      await remember(record);
      return out;
    });
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<B.HandleRecord | null> {
    return this.#pool.read(async (sql) => {
      const [row] = await sql.unsafe(this.#q.read, [user, handle]).values();
      const record = row ? recordOf(row) : null;
      this.#guesses.set(user, handle, record);
      return record;
    });
  }

  /** {@inheritDoc Backend.leases} */
  readonly leases: B.LeasePrimitives = {
    acquire: (user, handle, lease, now) =>
      acquireLease(this.#pool, this.#q, user, handle, lease, now),
    release: (user, handle, holder, now) =>
      releaseLease(this.#pool, this.#q, user, handle, holder, now),
    of: (user, handles, now) => leasesOf(this.#pool, this.#q, user, handles, now),
    readLeased: (user, handle, now) => {
      return this.#pool.read(async (sql) => {
        const [row] = await sql.unsafe(this.#q.readLeased, [user, handle, now]).values();
        const record = row ? recordOf(row) : null;
        this.#guesses.set(user, handle, record);
        if (!row) return { record: null, lease: null };
        return { record, lease: row[11] == null ? null : leaseOf(row.slice(11)) };
      });
    },
  };

  /** {@inheritDoc Backend.save} */
  save(
    user: string,
    handle: string,
    write: B.ConditionalWrite,
    ctx: B.WriteContext,
  ): Promise<B.SaveOutcome | B.Replayed> {
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
    const lease = ctx.lease;
    if (lease) params.push(lease.holder, lease.expiresAt, ctx.now);
    // Always the last two parameters.
    params.push(write.schemaVersion ?? null, write.preview ?? null);
    const text = lease ? this.#q.saveLeased : this.#q.save;
    const saved = (row: readonly unknown[]): B.SaveOutcome =>
      leasedOutcome({ ok: true as const, record: recordOf(row) }, ctx, row.slice(12));
    // In a transaction: no row (the write does not apply) rolls back with the
    // record as it stands.
    const savedOrRollback = async (tx: Queryable, row: readonly unknown[] | undefined) => {
      if (row) return saved(row);
      const [cur] = await tx.unsafe(this.#q.read, [user, handle]).values();
      throw new Rollback<B.SaveOutcome>({ ok: false, current: cur ? recordOf(cur) : null });
    };
    if (ctx.quota) {
      return this.#guarded(user, ctx, async (tx, remember) => {
        // The old size, then the save (the size is the state it replaces when
        // the version matches), then the grant's lock, after the row's (see
        // postgres/_grants.ts).
        const [[size], [row]] = await Promise.all([
          tx.unsafe(this.#u.size, [user, handle]).values().execute(),
          tx.unsafe(text, params).values().execute(),
          this.#g.check(tx, ctx),
        ]);
        const out = await savedOrRollback(tx, row);
        if (remember) await remember(out.ok ? out.record : null);
        const bytes = utf8Length(write.state) - Number(size?.[0] ?? 0);
        return { out, delta: { handles: 0, bytes } };
      });
    }
    if (!ctx.idempotency && ctx.grant) {
      // Through a grant: the conditional UPDATE and the check in one
      // transaction, the grant's lock after the row's (see postgres/_grants.ts).
      return this.#pool.op((sql) =>
        this.#pool.begin(sql, async (tx) => {
          const [[row]] = await Promise.all([
            tx.unsafe(text, params).values().execute(),
            this.#g.check(tx, ctx),
          ]);
          if (row) return saved(row);
          const [cur] = await tx.unsafe(this.#q.read, [user, handle]).values();
          return { ok: false as const, current: cur ? recordOf(cur) : null };
        })
      );
    }
    if (!ctx.idempotency) {
      return this.#pool.op(async (sql) => {
        const [row] = await sql.unsafe(text, params).values();
        if (row) {
          const out = saved(row);
          if (out.ok) this.#guesses.set(user, handle, out.record);
          return out;
        }
        // The conditional UPDATE changed nothing, so this read needs no
        // transaction around it: as a new statement it sees the latest
        // committed row, including the winner's write it may have waited for.
        const [cur] = await sql.unsafe(this.#q.read, [user, handle]).values();
        const current = cur ? recordOf(cur) : null;
        this.#guesses.set(user, handle, current);
        return { ok: false, current };
      });
    }
    return this.#idempotent(user, ctx, async (tx, remember) => {
      const [[row]] = await Promise.all([
        tx.unsafe(text, params).values().execute(),
        this.#g.check(tx, ctx),
      ]);
      const out = await savedOrRollback(tx, row);
      await remember(out.ok ? out.record : null);
      return out;
    });
  }

  /**
   * {@inheritDoc Backend.update}
   *
   * With a record of the handle seen by this backend (read or written last),
   * no idempotency key, quota or grant: the step is first computed from that
   * record and written in one statement, one round trip, while the row is
   * still that record; a handle not seen yet is read first, with a plain
   * statement. Otherwise (or when the row is not that record) in a
   * transaction that locks the row, reads it and writes the step.
   */
  async update(
    user: string,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    if (!ctx.quota && !ctx.idempotency && !ctx.grant) {
      // A handle this backend has not seen: one plain read, then the guessed
      // statement (two round trips, not the locked transaction's five or six).
      const guess = this.#guesses.get(user, handle) ??
        (this.#guesses.unseen(user, handle) ? await this.read(user, handle) : undefined);
      if (guess) {
        const out = await this.#guesses.write(
          this.#pool,
          this.#q,
          user,
          handle,
          guess,
          change,
          ctx,
        );
        if (out) return out;
      }
    }
    const out = await this.#locked(user, handle, change, ctx);
    if (!("replayed" in out)) this.#guesses.set(user, handle, out.record);
    return out;
  }

  /** {@link PostgresBackend.update} in a transaction that locks the row first. */
  #locked(
    user: string,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    let prior: B.HandleRecord | null = null;
    // What `change` threw: the caller's own failure, passed on as it is
    // (not as a driver's) once the transaction is rolled back.
    let thrown: { e: unknown } | undefined;
    const step = async (
      tx: Queryable,
      remember?: (r: B.HandleRecord | null) => Promise<void>,
    ): Promise<B.UpdateOutcome> => {
      // The row lock is held until the transaction ends: concurrent updaters
      // queue here and each one reads the row its predecessor committed. Then
      // the grant's lock, held as long (see postgres/_grants.ts).
      const [[row]] = await Promise.all([
        tx.unsafe(this.#q.lock, [user, handle]).values().execute(),
        this.#g.check(tx, ctx),
      ]);
      const current = row ? recordOf(row) : null;
      prior = current;
      // A change that throws ends the transaction here: nothing is written.
      let next: ReturnType<B.Change>;
      try {
        next = change(current ? { ...current } : null);
      } catch (e) {
        thrown = { e };
        throw new Rollback<B.UpdateOutcome>({ record: null, written: false });
      }
      const record = next?.record ?? null;
      const writes: Promise<unknown>[] = [];
      if (next && record && current) {
        const params: unknown[] = [user, ...recordParams(record)];
        if (next.entry) params.push(...entryParams(next.entry, ctx));
        params.push(record.schemaVersion ?? null, record.preview ?? null, forkedFromText(record));
        writes.push(tx.unsafe(next.entry ? this.#q.writeLogged : this.#q.write, params as never[]));
        writes.push(tx.unsafe(this.#q.notify, [payloadOf(user, handle)]));
      } else if (next && record) {
        // No live row to change: the step creates one, unless the handle is
        // taken (by a trashed row).
        const params: unknown[] = [user, ...recordParams(record)];
        if (next.entry) params.push(next.entry.version, next.entry.at, next.entry.text);
        params.push(
          payloadOf(user, handle),
          record.schemaVersion ?? null,
          record.preview ?? null,
          forkedFromText(record),
        );
        const res = await tx.unsafe(
          next.entry ? this.#q.insertLogged : this.#q.insert,
          params as never[],
        );
        if (res.count !== 1) throw new Rollback<B.UpdateOutcome>({ record: null, written: false });
      }
      if (remember) writes.push(remember(record ?? current));
      // The lease goes with the write, in the same transaction.
      const lease = record !== null ? ctx.lease : undefined;
      const held = lease &&
        tx.unsafe(this.#q.acquireHeld, [user, handle, lease.holder, lease.expiresAt, ctx.now])
          .values();
      // Pipelined on the transaction's connection.
      const [, [cols]] = await Promise.all([Promise.all(writes), held ?? Promise.resolve([])]);
      const out = { record: record ?? current, written: record !== null };
      return cols ? leasedOutcome(out, ctx, cols as unknown as unknown[]) : out;
    };
    const out = ctx.quota
      ? this.#guarded(user, ctx, async (tx, remember) => {
        const out = await step(tx, remember);
        if (!out.written || !out.record) return { out, delta: null };
        const before = prior as B.HandleRecord | null;
        const bytes = utf8Length(out.record.state) - (before ? utf8Length(before.state) : 0);
        return { out, delta: { handles: before ? 0 : 1, bytes } };
      })
      : ctx.idempotency
      ? this.#idempotent(user, ctx, step)
      : this.#pool.op((sql) => this.#pool.begin(sql, (tx) => step(tx)));
    return out.then((r) => {
      if (thrown) throw thrown.e;
      return r;
    });
  }

  /** {@inheritDoc Backend.remove} */
  remove(
    user: string,
    handle: string,
    ctx: B.WriteContext,
  ): Promise<{ removed: boolean } | B.Replayed> {
    const key = [user, handle];
    const payload = payloadOf(user, handle);
    this.#guesses.set(user, handle, null);
    if (ctx.trashUntil !== undefined) {
      // Into the trash: the row stays, its changelog with it; one statement.
      const params = [user, handle, ctx.trashUntil, payload];
      if (!ctx.idempotency) {
        return this.#pool.op(async (sql) => {
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
    if (!ctx.idempotency) return this.#pool.op((sql) => this.#pool.begin(sql, drop));
    return this.#idempotent(user, ctx, async (tx) => {
      const res = await drop(tx);
      if (!res.removed) throw new Rollback(res);
      return res;
    });
  }

  /** {@inheritDoc Backend.untrash} */
  untrash(user: string, handle: string, ctx: B.WriteContext): Promise<B.HandleRecord | null> {
    if (ctx.quota) {
      // The store passes no idempotency claim with a restore.
      return this.#guarded(user, ctx, async (tx) => {
        const params = [user, handle, ctx.now, payloadOf(user, handle)];
        const [row] = await tx.unsafe(this.#q.untrash, params).values();
        if (!row) return { out: null, delta: null };
        const record = recordOf(row);
        return { out: record, delta: { handles: 1, bytes: utf8Length(record.state) } };
      }) as Promise<B.HandleRecord | null>;
    }
    return this.#pool.op(async (sql) => {
      const params = [user, handle, ctx.now, payloadOf(user, handle)];
      const [row] = await sql.unsafe(this.#q.untrash, params).values();
      return row ? recordOf(row) : null;
    });
  }

  /** {@inheritDoc Backend.transfer} */
  readonly transfer: B.TransferPrimitives = {
    /**
     * One transaction, locking as `postgres/_grants.ts` says: the grant locks
     * of both keys, then both records' rows, the old owner's first; then the
     * row and its changelog move, the entry is written under the new owner,
     * and the old owner's grants end (their rows locked last).
     */
    move: (user, handle, to, ctx, step = {}) => {
      const { audit, keep } = step;
      const move = async (
        tx: Queryable,
      ): Promise<{ out: B.TransferOutcome; delta: UsageDelta | null }> => {
        // A second transfer of the same row waits here and then finds it gone.
        const [, [row], [taken]] = await Promise.all([
          this.#g.lock(tx, [user, handle], [to, handle]),
          tx.unsafe(this.#q.lock, [user, handle]).values().execute(),
          tx.unsafe(this.#q.lockAny, [to, handle]).values().execute(),
        ]);
        if (!row) return { out: "absent", delta: null };
        if (taken) return { out: "taken", delta: null };
        const record = recordOf(row), content = step.content;
        if (content && !await this.#reseal(tx, user, handle, record, content)) {
          return { out: "changed", delta: null };
        }
        // Entries left under the new owner's key by a row deleted long ago are orphans.
        await tx.unsafe(this.#q.dropLog, [to, handle]);
        // A row of the new owner inserted after the lock check meets the primary key.
        await tx.unsafe(this.#q.moveRecord, [user, handle, to]).catch((e) => {
          if ((e as { code?: unknown })?.code === "23505") {
            throw new Rollback<B.TransferOutcome>("taken");
          }
          throw e;
        });
        // Sent in this order: the entry (after the log it trims) before the grants.
        await Promise.all([
          tx.unsafe(this.#q.moveLog, [user, handle, to]).execute(),
          tx.unsafe(this.#q.dropLease, [user, handle]).execute(),
          tx.unsafe(this.#q.notify, [payloadOf(user, handle)]).execute(),
          // The entry's statement notifies the new owner's key itself.
          audit
            ? tx.unsafe(this.#q.audit, auditParams(to, handle, audit)).execute()
            : tx.unsafe(this.#q.notify, [payloadOf(to, handle)]).execute(),
          this.#g.endOf(tx, user, handle, ctx.now),
          keep && this.#g.put(tx, keep, ctx.now),
        ]);
        const bytes = utf8Length(content?.state ?? record.state);
        return { out: "moved", delta: { handles: 1, bytes } };
      };
      return ctx.quota
        ? this.#guarded(to, ctx, move) as Promise<B.TransferOutcome>
        : this.#pool.op((sql) => this.#pool.begin(sql, async (tx) => (await move(tx)).out));
    },
  };

  /**
   * Writes a transfer's `content` in place of the locked record's; false,
   * writing nothing, when it was made from another version or lacks an
   * entry's text.
   */
  async #reseal(
    tx: Queryable,
    user: string,
    handle: string,
    r: B.HandleRecord,
    content: B.TransferContent,
  ): Promise<boolean> {
    if (r.version !== content.version) return false;
    const entries = JSON.stringify(content.entries);
    const [missing] = await tx.unsafe(this.#q.resealMissing, [user, handle, entries]).values();
    if (missing) return false;
    await Promise.all([
      tx.unsafe(this.#q.resealLog, [user, handle, entries]).execute(),
      tx.unsafe(this.#q.resealRecord, [user, handle, content.state, content.preview ?? null])
        .execute(),
    ]);
    return true;
  }

  /** {@inheritDoc Backend.changes} */
  changes(user: string, handle: string, afterVersion: number): Promise<B.ChangeEntry[]> {
    return this.#pool.read(async (sql) => {
      const rows = await sql.unsafe(this.#q.changes, [user, handle, afterVersion]).values();
      return rows.map((r) => ({ version: Number(r[0]), at: Number(r[1]), text: String(r[2]) }));
    });
  }

  /** {@inheritDoc Backend.list} */
  list(user: string, q: B.ListQuery): Promise<B.HandleMeta[]> {
    const { shape, values } = listFilters(q);
    const key = q.previews ? -1 - shape : shape;
    let text = this.#lists.get(key);
    if (text === undefined) {
      const dialect = q.previews ? listDialect(`"${this.#schema}"`, true) : this.#dialect;
      this.#lists.set(key, text = listSql(shape, dialect));
    }
    return this.#pool.read(async (sql) => {
      const rows = await sql.unsafe(text, [user, q.limit, ...values]).values();
      // After the metadata: `forked_from`, then (with previews) the preview.
      return rows.map((r) => {
        const meta = r[7] == null
          ? metaOf(r)
          : { ...metaOf(r), forkedFrom: JSON.parse(String(r[7])) as B.ForkPoint };
        return r[8] == null ? meta : { ...meta, preview: String(r[8]) };
      });
    });
  }

  /** {@inheritDoc Backend.trash} */
  readonly trash: B.TrashPrimitives = {
    list: (user, q) => {
      const a = q.after;
      return this.#pool.read(async (sql) => {
        const params = [user, a?.trashUntil ?? null, a?.handle ?? "", q.limit];
        const rows = await sql.unsafe(this.#q.listTrash, params).values();
        return rows.map((r) => ({ ...metaOf(r), trashUntil: Number(r[7]) }));
      });
    },
    until: (user, handle) => {
      return this.#pool.read(async (sql) => {
        const [row] = await sql.unsafe(this.#q.trashedUntil, [user, handle]).values();
        return row ? Number(row[0]) : null;
      });
    },
  };

  /** {@inheritDoc Backend.sweep} */
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    return this.#pool.op(async (sql) => {
      const [row] = user === null
        ? await sql.unsafe(this.#q.sweepAll, [expiredAtOrBefore, now]).values()
        : await sql.unsafe(this.#q.sweepUser, [expiredAtOrBefore, now, user]).values();
      return Number(row?.[0] ?? 0);
    });
  }

  /** {@inheritDoc Backend.records} */
  readonly records: B.RecordPrimitives = {
    users: (query) => {
      return this.#pool.read(async (sql) => {
        const rows = await sql.unsafe(this.#q.users, [query.after ?? "", query.limit]).values();
        return rows.map((r) => String(r[0]));
      });
    },
    import: (user, record, _ctx) => {
      const key = [user, record.handle];
      return this.#pool.op((sql) =>
        this.#pool.begin(sql, async (tx) => {
          // The lock tells a trashed row (overwritten as if absent) from a live
          // one, and keeps writers off the handle until the changelog is gone.
          const [[prev], [row]] = await Promise.all([
            tx.unsafe(this.#q.lockAny, key).values(),
            tx.unsafe(this.#q.importRecord, [
              user,
              ...recordParams(record),
              record.schemaVersion ?? null,
              record.preview ?? null,
              forkedFromText(record),
            ]).values(),
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
    },
  };

  /** {@inheritDoc Backend.grants} */
  readonly grants: B.GrantPrimitives = {
    /**
     * One transaction, locking as `postgres/_grants.ts` says: the handle's
     * grant lock, the record's version step and entry, then the parent's row
     * and the grant's.
     */
    put: (grant, now, audit) => putGrant(this.#pool, this.#q, this.#g, grant, now, audit),
    read: (idOrAlias) => this.#pool.read((sql) => this.#g.read(sql, idOrAlias)),
    /**
     * One transaction, locking as `postgres/_grants.ts` says: the handle's
     * grant lock, the record's version step and entry, then the grants' rows.
     * An `unshare` that ends nothing (the grants had ended already) leaves no
     * entry.
     */
    end: (grant, now, audit) => endGrant(this.#pool, this.#q, this.#g, grant, now, audit),
    of: (owner, handle) => this.#pool.read((sql) => this.#g.of(sql, owner, handle)),
    to: (to) => this.#pool.read((sql) => this.#g.to(sql, to)),
    /** One `DELETE` (it waits for a write that holds a grant's row). */
    sweep: (before) => this.#pool.op((sql) => this.#g.sweep(sql, before)),
  };

  /** {@inheritDoc Backend.quotas} */
  readonly quotas: B.QuotaPrimitives = {
    /**
     * One row read; a user without a row yet is counted from the records.
     */
    usage: (user, now) => this.#pool.op((sql) => readUsage(sql, this.#u, user, now)),
  };

  /** {@inheritDoc Backend.feed} */
  readonly feed: B.FeedPrimitives = {
    /**
     * The first call starts a `LISTEN` on the schema's channel, on a connection
     * postgres.js keeps for it and re-opens after a failure; every listener is
     * called each time it listens again, since events may have been missed
     * meanwhile. After an outage the feed moves to the fresh pool with the calls.
     * Behind a transaction-mode pooler (PgBouncer) `LISTEN` hears nothing, and
     * a watch relies on its `pollMs` re-reads.
     */
    subscribe: async (user, handle, listener) => {
      if (this.#pool.closed) throw closedError();
      return await this.#feed.subscribe(this.#pool.sql, user, handle, listener);
    },
  };

  /** {@inheritDoc Backend.close} */
  async close(): Promise<void> {
    if (this.#pool.closed) return;
    this.#feed.close(!this.#closeClient);
    await this.#pool.close(this.#closeClient);
  }

  /**
   * A write under quotas: one transaction that first takes the user's usage
   * lock (after the idempotency claim, when there is one), runs `fn`, and
   * checks and counts the write by the delta it reports (`null`: nothing written).
   */
  #guarded<T>(
    user: string,
    ctx: B.WriteContext,
    fn: (
      tx: Queryable,
      remember?: (r: B.HandleRecord | null) => Promise<void>,
    ) => Promise<{ out: T; delta: UsageDelta | null }>,
  ): Promise<T | B.Replayed> {
    const body = async (tx: Queryable, remember?: (r: B.HandleRecord | null) => Promise<void>) => {
      await tx.unsafe(this.#u.lock, [user]);
      const { out, delta } = await fn(tx, remember);
      if (delta) await applyUsage(tx, this.#u, user, ctx, delta);
      return out;
    };
    if (ctx.idempotency) return this.#idempotent(user, ctx, body);
    return this.#pool.op((sql) => this.#pool.begin(sql, (tx) => body(tx)));
  }

  /** A write that carries an idempotency key: see {@link idempotent}. */
  #idempotent<T>(
    user: string,
    ctx: B.WriteContext,
    fn: (tx: Queryable, remember: (r: B.HandleRecord | null) => Promise<void>) => Promise<T>,
  ): Promise<T | B.Replayed> {
    return idempotent(this.#pool, this.#q, user, ctx, fn);
  }
}
