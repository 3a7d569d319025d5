/**
 * How the SQLite backend runs its primitives on one connection: reads
 * synchronously; writes inside `BEGIN IMMEDIATE` transactions whose
 * listeners hear of them once they are durable; and the change feed of other
 * connections' and processes' commits, through `PRAGMA data_version`.
 *
 * Group commit (on a file the backend opened, `synchronous=full`): the
 * connection runs with `synchronous=NORMAL`, so a commit writes its WAL
 * frames without an fsync, and the connection then syncs the `-wal` file
 * itself with an asynchronous `fdatasync` (off the event loop) before it
 * acknowledges the commit's writes. Writes that arrive while that sync runs
 * queue, and go together into the next transaction, each inside its own
 * `SAVEPOINT` (one that throws rolls back alone), sharing the next sync.
 * Writes that arrive in the same turn of the event loop share a transaction
 * too: the first one schedules the commit for the end of the turn
 * (`setImmediate`), so that a burst of writes is seen as one.
 *
 * Single-flight writes sync inline: handing the `fdatasync` to a thread and
 * back costs a write tens of microseconds, as much as the sync itself on a
 * fast disk, and buys nothing when no other write is waiting. So once
 * {@link QUIET_RUN} batches in a row held one write each with none queued
 * behind their sync, the connection syncs the next one-write batch on the
 * event loop (as `synchronous=FULL` does), which blocks the loop for one
 * sync; the first batch of two or more writes, or a write queued behind a
 * sync, takes it back to the asynchronous sync.
 *
 * Why an acknowledged write survives power loss as with `synchronous=FULL`:
 * in WAL mode FULL differs from NORMAL only by syncing the WAL at each
 * commit; here every write is acknowledged only after an `fdatasync` of the
 * WAL that started after its commit, which makes its frames (and the WAL
 * header) durable. A checkpoint under NORMAL syncs the WAL before it copies
 * frames into the database and the database after, as under FULL, and the
 * WAL restarts only after a complete checkpoint, so a restart never drops
 * an acknowledged frame. `kill -9` loses nothing committed either way (the
 * frames are in the OS's cache). A read through this connection of a handle
 * whose write is committed but not yet synced waits for that sync, so it
 * never sees a write that power loss could take back; another process may
 * (it reads the WAL), and a listing may show its metadata.
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";
import { setImmediate } from "node:timers";
import { BackendError, McpStateError } from "../../errors.ts";
import { Listeners, messageOf } from "../_shared.ts";
import type { Statements } from "./_statements.ts";

/** How often `PRAGMA data_version` is polled while anyone listens, in ms. */
const FEED_POLL_MS = 50;

/**
 * Group commit: one-write batches in a row, with no write queued behind
 * their sync, after which a one-write batch syncs inline (see the module doc).
 */
export const QUIET_RUN = 8;

/** A write waiting for its transaction, and then for the sync that makes it durable. */
interface Queued {
  fn: () => unknown;
  resolve: (value: unknown) => void;
  reject: (e: unknown) => void;
  /** Its outcome, once its transaction has run. */
  outcome?: { ok: true; value: unknown } | { ok: false; error: unknown };
  /** Whether it has been answered. */
  settled?: boolean;
}

/** Runs calls and transactions on one connection, and tells its listeners of the commits. */
export class Connection {
  readonly #db: DatabaseSync;
  readonly #q: Statements;
  readonly #busyMs: number;
  #closed = false;
  readonly #listeners = new Listeners();
  /** Whether other connections may write the database (a file, not `:memory:`). */
  readonly #shared: boolean;
  /** The listener keys of the handles the open transaction wrote, notified once it is durable. */
  #written: string[] = [];
  #feedTimer: ReturnType<typeof setInterval> | undefined;
  #seenVersion: unknown;
  /** Group commit: the `-wal` file's path (`undefined`: SQLite syncs each commit itself). */
  readonly #walPath: string | undefined;
  #wal: Deno.FsFile | undefined;
  /** Writes waiting for the next transaction. */
  #queue: Queued[] = [];
  /** The sync in flight, and the keys of the handles whose writes it makes durable. */
  #syncing: Promise<void> | undefined;
  #unsynced = new Set<string>();
  /** Whether the commit of the queue is scheduled for the end of this turn of the event loop. */
  #scheduled = false;
  /** One-write batches in a row with nothing queued behind their sync (see {@link QUIET_RUN}). */
  #quiet = 0;

  /**
   * @param db The connection.
   * @param q Its statements.
   * @param busyMs Its busy timeout, for the message when it runs out.
   * @param groupCommit Whether writes are group-committed with an asynchronous
   *   sync of the `-wal` file (the connection runs `synchronous=NORMAL`; see
   *   the module doc). Ignored for an in-memory database.
   */
  constructor(db: DatabaseSync, q: Statements, busyMs: number, groupCommit = false) {
    this.#db = db;
    this.#q = q;
    this.#busyMs = busyMs;
    const file = db.prepare("SELECT file FROM pragma_database_list WHERE name = 'main'").get()
      ?.file as string | undefined;
    this.#shared = file !== "" && file !== undefined;
    if (groupCommit && this.#shared) this.#walPath = `${file}-wal`;
  }

  /** Whether writes are group-committed (see the module doc). */
  get groupCommit(): boolean {
    return this.#walPath !== undefined;
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

  /**
   * Runs `fn` on the open connection once the write of `(user, handle)` that
   * the sync in flight covers, if any, is durable.
   */
  read<T>(user: string, handle: string, fn: () => T): Promise<T> {
    if (this.#syncing && this.#unsynced.has(Listeners.key(user, handle))) {
      return this.#syncing.then(() => this.run(fn), () => this.run(fn));
    }
    return this.run(fn);
  }

  /**
   * Runs `fn` inside a `BEGIN IMMEDIATE` transaction and answers once it is
   * durable. Without group commit: its own transaction, at once. With it: in
   * the transaction committed at the end of this turn of the event loop with
   * the other writes of the turn when no sync is in flight, else in the next
   * one; beside other writes inside a `SAVEPOINT` of its own (see the module
   * doc).
   */
  write<T>(fn: () => T): Promise<T> {
    if (this.#walPath === undefined) return this.run(() => this.tx(fn));
    if (this.#closed) return this.run(fn);
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (this.#syncing || this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        if (!this.#syncing && this.#queue.length > 0) this.#next();
      });
    });
  }

  /**
   * Makes every commit of this connection so far durable (with group commit,
   * SQLite does not sync a commit itself): for the writes that run their own
   * transactions through {@link Connection.tx}.
   */
  durable(): Promise<void> {
    if (this.#walPath === undefined) return Promise.resolve();
    return this.#sync();
  }

  /** Resolves once no write is queued or being synced. */
  async idle(): Promise<void> {
    while (this.#syncing || this.#scheduled) {
      if (this.#syncing) await this.#syncing.catch(() => {});
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Runs every queued write in one transaction, each in its own savepoint
   * (one alone needs none), then syncs the WAL and answers them; writes
   * queued meanwhile go next. This is {@link Connection.#commitQueued},
   * guarded: should a statement that ends a savepoint or the transaction
   * throw, the transaction is rolled back and every write of the batch not
   * yet answered gets the error.
   */
  #next(): void {
    const batch = this.#queue;
    this.#queue = [];
    try {
      this.#commitQueued(batch);
    } catch (e) {
      this.#written = [];
      this.#unsynced = new Set();
      try {
        if (this.#db.isTransaction) this.#q.rollback.run();
      } catch { /* the error below is the one to report */ }
      const error = rolledBack(e);
      for (const w of batch) if (!w.settled) (w.settled = true, w.reject(error));
      if (!this.#syncing && this.#queue.length > 0) this.#next();
    }
  }

  #commitQueued(batch: Queued[]): void {
    const keys = new Set<string>();
    const written: string[] = [];
    let open = false;
    const fail = (w: Queued, error: unknown) => (w.outcome = { ok: false, error });
    for (let i = 0; i < batch.length; i++) {
      const w = batch[i]!;
      try {
        if (!open) {
          this.#q.begin.run();
          open = true;
        }
      } catch (e) {
        // The lock stayed taken past the busy timeout: the rest of the batch would wait as long.
        const error = this.#driverError(e);
        for (let j = i; j < batch.length; j++) fail(batch[j]!, error);
        break;
      }
      // A write alone in its transaction needs no savepoint: the rollback undoes only it.
      const alone = batch.length === 1;
      if (!alone) this.#q.savepoint.run();
      const mark = this.#written.length;
      try {
        w.outcome = { ok: true, value: w.fn() };
        if (!alone) this.#q.release.run();
      } catch (e) {
        this.#written.length = mark;
        fail(w, this.#driverError(e));
        if (alone) {
          if (this.#db.isTransaction) this.#q.rollback.run();
          open = false;
        } else if (this.#db.isTransaction) {
          this.#q.rollbackTo.run();
          this.#q.release.run();
        } else {
          // SQLite rolled the whole transaction back (an I/O error, a full
          // disk): the writes before this one in it are undone too.
          for (let j = 0; j < i; j++) {
            if (batch[j]!.outcome?.ok) fail(batch[j]!, rolledBack(e));
          }
          this.#written = [];
          keys.clear();
          open = false;
          continue;
        }
      }
      if (w.outcome?.ok) {
        for (const k of this.#written.slice(mark)) keys.add(k);
      }
    }
    if (open) {
      try {
        this.#q.commit.run();
        written.push(...this.#written);
      } catch (e) {
        if (this.#db.isTransaction) this.#q.rollback.run();
        for (const w of batch) if (w.outcome?.ok) fail(w, this.#driverError(e));
        keys.clear();
      }
    }
    this.#written = [];
    if (!batch.some((w) => w.outcome?.ok)) {
      // Nothing committed: nothing to wait for.
      for (const w of batch) settle(w);
      if (this.#queue.length > 0) this.#next();
      return;
    }
    if (batch.length > 1) this.#quiet = 0;
    else if (this.#quiet >= QUIET_RUN) {
      // Single-flight: sync on the event loop, nothing can be waiting.
      try {
        this.#walFile().syncDataSync();
      } catch (e) {
        return this.#syncFailed(batch, e);
      }
      return this.#synced(batch, written);
    }
    this.#unsynced = keys;
    const syncing = this.#sync().then(
      () => this.#synced(batch, written),
      (e) => this.#syncFailed(batch, e),
    ).finally(() => {
      this.#syncing = undefined;
      this.#unsynced = new Set();
      if (this.#queue.length === 0) this.#quiet++;
      else (this.#quiet = 0, this.#next());
    });
    this.#syncing = syncing;
  }

  /** Answers a batch whose commit is durable, and tells the listeners of what it wrote. */
  #synced(batch: Queued[], written: string[]): void {
    for (const w of batch) settle(w);
    for (const key of written) this.#listeners.notifyKey(key);
  }

  /** Answers a batch whose sync failed: its committed writes may or may not be on disk. */
  #syncFailed(batch: Queued[], e: unknown): void {
    const error = new BackendError(
      `Syncing the SQLite write-ahead log to disk failed (${
        messageOf(e)
      }): the write may or may not be on disk. Read the handle again before retrying.`,
      { cause: e },
    );
    for (const w of batch) {
      if (w.outcome?.ok) w.outcome = { ok: false, error };
      settle(w);
    }
  }

  /** The `-wal` file, opened once. */
  #walFile(): Deno.FsFile {
    return this.#wal ??= Deno.openSync(this.#walPath!, { read: true });
  }

  /** `fdatasync` of the `-wal` file, off the event loop. */
  async #sync(): Promise<void> {
    await this.#walFile().syncData();
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

  /** Notes that the open transaction wrote `(user, handle)`, for its listeners and its readers. */
  wrote(user: string, handle: string): void {
    if (this.#walPath !== undefined || this.#listeners.has(user, handle)) {
      this.#written.push(Listeners.key(user, handle));
    }
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

  /** Closes the `-wal` file once the last sync has run (after {@link Connection.close}). */
  async release(): Promise<void> {
    await this.idle();
    this.#wal?.close();
    this.#wal = undefined;
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

/** Answers a queued write with its outcome. */
function settle(w: Queued): void {
  if (w.settled) return;
  w.settled = true;
  const o = w.outcome;
  if (o?.ok) w.resolve(o.value);
  else w.reject(o?.error);
}

/** The error of a write that SQLite rolled back with a later write of its transaction. */
function rolledBack(cause: unknown): BackendError {
  return new BackendError(
    `SQLite rolled back the transaction this write shared (${
      messageOf(cause)
    }). Nothing was written; try again.`,
    { cause },
  );
}
