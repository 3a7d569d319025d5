/**
 * How the PostgreSQL backend runs its calls: on a pool that is migrated
 * before the first call, replaced after a connection failure when the
 * backend opened it, with transactions that a lost connection cannot turn
 * into an uncatchable error.
 *
 * @module
 */

import type postgres from "postgres";
import { closedError, isConnectionError, toBackendError } from "./_errors.ts";

/** What a backend needs of a client or an open transaction. */
export type Queryable = postgres.ISql;

/** Thrown inside a transaction to roll it back and return `value`. */
export class Rollback<T> extends Error {
  /** @param value What the transaction answers. */
  constructor(readonly value: T) {
    super("rollback");
  }
}

/** The client of a backend, and how each call runs on it. */
export class Pool {
  #sql: postgres.Sql;
  /** Opens a fresh pool: set for clients `fromUrl` opened, which may be replaced. */
  reopen: (() => postgres.Sql) | undefined;
  /** Called with the fresh pool after a replacement. */
  onReplace: ((sql: postgres.Sql) => void) | undefined;
  readonly #migrate: (tx: Queryable) => Promise<void>;
  #replacedAt = -Infinity;
  readonly #retiring = new Set<Promise<void>>();
  #ready: Promise<void> | undefined;
  #initialized = false;
  #closed = false;

  /**
   * @param sql The client.
   * @param migrate Creates or migrates the tables, in a transaction.
   */
  constructor(sql: postgres.Sql, migrate: (tx: Queryable) => Promise<void>) {
    this.#sql = sql;
    this.#migrate = migrate;
  }

  /** The current client. */
  get sql(): postgres.Sql {
    return this.#sql;
  }

  /** Whether {@link Pool.close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Runs the migration in one transaction (see `PostgresBackend.initialize`). */
  async initialize(): Promise<void> {
    if (this.#closed) throw closedError();
    const sql = this.#sql;
    try {
      await this.begin(sql, this.#migrate);
      this.#initialized = true;
    } catch (e) {
      if (isConnectionError(e)) this.#replace(sql);
      throw toBackendError(e, true);
    }
  }

  /** Runs one call: migrates first if needed, and turns driver failures into `backend_error`. */
  async op<T>(fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
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
   * Runs one read-only call like {@link Pool.op}, and once more on a fresh
   * client when the first try met a dead connection: after a server restart
   * the pool may still hold sockets that only fail when next used, and a
   * read is safe to repeat. A second failure is the call's `backend_error`.
   */
  async read<T>(fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
    try {
      return await this.op(fn);
    } catch (e) {
      if (this.#closed || !isConnectionError((e as { cause?: unknown }).cause)) throw e;
      return await this.op(fn);
    }
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
  async begin<T>(sql: postgres.Sql, fn: (tx: Queryable) => Promise<T>): Promise<T> {
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
   * Refuses every later call; ends the client when `end` is set; waits for
   * the pools that were replaced to end.
   */
  async close(end: boolean): Promise<void> {
    this.#closed = true;
    if (end) await this.#sql.end({ timeout: 5 });
    await Promise.all(this.#retiring);
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
    if (!this.reopen || this.#closed || failed !== this.#sql || now - this.#replacedAt < 1000) {
      return;
    }
    this.#replacedAt = now;
    this.#sql = this.reopen();
    this.onReplace?.(this.#sql);
    const ending: Promise<void> = failed.end({ timeout: 2 }).catch(() => {}).finally(() =>
      this.#retiring.delete(ending)
    );
    this.#retiring.add(ending);
  }
}
