/**
 * How the SQLite backend runs its primitives on one connection: each
 * synchronously, a write inside one `BEGIN IMMEDIATE` transaction whose
 * listeners hear of it once it commits; and the change feed of other
 * connections' and processes' commits, through `PRAGMA data_version`.
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";
import { BackendError, McpStateError } from "../../errors.ts";
import { Listeners } from "../_shared.ts";
import type { Statements } from "./_statements.ts";

/** How often `PRAGMA data_version` is polled while anyone listens, in ms. */
const FEED_POLL_MS = 50;

/** Runs calls and transactions on one connection, and tells its listeners of the commits. */
export class Connection {
  readonly #db: DatabaseSync;
  readonly #q: Statements;
  readonly #busyMs: number;
  #closed = false;
  readonly #listeners = new Listeners();
  /** Whether other connections may write the database (a file, not `:memory:`). */
  readonly #shared: boolean;
  /** The listener keys of the handles the open transaction wrote, notified once it commits. */
  #written: string[] = [];
  #feedTimer: ReturnType<typeof setInterval> | undefined;
  #seenVersion: unknown;

  /**
   * @param db The connection.
   * @param q Its statements.
   * @param busyMs Its busy timeout, for the message when it runs out.
   */
  constructor(db: DatabaseSync, q: Statements, busyMs: number) {
    this.#db = db;
    this.#q = q;
    this.#busyMs = busyMs;
    this.#shared = db.prepare("SELECT file FROM pragma_database_list WHERE name = 'main'").get()
      ?.file !== "";
  }

  /** Runs `fn` synchronously on the open connection; its result or error as a promise. */
  run<T>(fn: () => T): Promise<T> {
    try {
      if (this.#closed) throw new BackendError("The SQLite backend is closed; open a new one.");
      return Promise.resolve(fn());
    } catch (e) {
      return Promise.reject(this.#driverError(e));
    }
  }

  /** {@link Connection.run} inside one `BEGIN IMMEDIATE` transaction. */
  write<T>(fn: () => T): Promise<T> {
    return this.run(() => this.tx(fn));
  }

  /**
   * Runs `fn` in one `BEGIN IMMEDIATE` transaction; rolls back when it throws.
   * Once it commits, the listeners of the handles it wrote are called.
   */
  tx<T>(fn: () => T): T {
    this.#q.begin.run();
    let out: T;
    try {
      out = fn();
      this.#q.commit.run();
    } catch (e) {
      this.#written = [];
      if (this.#db.isTransaction) this.#q.rollback.run();
      throw e;
    }
    const written = this.#written;
    this.#written = [];
    for (const key of written) this.#listeners.notifyKey(key);
    return out;
  }

  /** Notes that the open transaction wrote `(user, handle)`, for its listeners. */
  wrote(user: string, handle: string): void {
    if (this.#listeners.has(user, handle)) this.#written.push(Listeners.key(user, handle));
  }

  /**
   * Adds a listener of `(user, handle)`; while there is one, other
   * connections' commits are polled for (unless the database is in memory).
   *
   * @returns Its remover.
   */
  subscribe(user: string, handle: string, listener: () => void): Promise<() => void> {
    return this.run(() => {
      const remove = this.#listeners.add(user, handle, listener);
      if (this.#shared && this.#feedTimer === undefined) {
        this.#seenVersion = this.#q.dataVersion.get()?.data_version;
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

  /**
   * Refuses every later call and stops the feed.
   *
   * @returns Whether it was open.
   */
  close(): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    this.#stopFeed();
    return true;
  }

  /** Calls every listener when another connection has committed since the last poll. */
  #poll(): void {
    try {
      const v = this.#q.dataVersion.get()?.data_version;
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
}
