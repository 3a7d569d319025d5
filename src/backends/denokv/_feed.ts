/**
 * The Deno KV backend's change feed: `kv.watch` on the head key of every
 * watched handle, and this backend's own commits at once. On a local KV file
 * `kv.watch` never hears another OS process's commits (measured with Deno
 * 2.9), so unless the KV is a KV Connect endpoint the watched heads'
 * versionstamps are also polled while anyone listens.
 *
 * @module
 */

import { Listeners } from "../_shared.ts";
import type { KvIo } from "./_io.ts";

/** Keys per `getMany` call: Deno KV's limit. */
export const GET_MANY_MAX = 10;
/** How often (ms) the heads of watched handles are polled for other processes' commits. */
const FEED_POLL_MS = 100;

/** A watched head: its key, the last versionstamp seen, and the `kv.watch` stream on it. */
interface Watched {
  key: Deno.KvKey;
  /** The last versionstamp seen (`null`: no head); `undefined` until the first read. */
  vs?: string | null;
  /** Settles once `vs` is first read. */
  ready: Promise<void>;
  /** Cancels the stream. */
  stop: () => Promise<void>;
}

/** The listeners of one backend and the watches that call them. */
export class Feed {
  readonly #db: KvIo;
  /** Whether watched heads are polled (not on KV Connect, whose `kv.watch` sees every instance). */
  readonly #poll: boolean;
  readonly #listeners = new Listeners();
  /** Watched heads, by {@link Listeners.key}. */
  readonly #watched = new Map<string, Watched>();
  #feedTimer: ReturnType<typeof setInterval> | undefined;
  #feedPoll: Promise<void> | undefined;

  /**
   * @param db The backend's KV.
   * @param poll Whether to poll the watched heads (every KV but KV Connect).
   */
  constructor(db: KvIo, poll: boolean) {
    this.#db = db;
    this.#poll = poll;
  }

  /**
   * Adds a listener of `(user, handle)` and watches its head.
   *
   * @returns Its remover, once the head's versionstamp was first read.
   */
  async subscribe(user: string, handle: string, listener: () => void): Promise<() => void> {
    const id = Listeners.key(user, handle);
    const remove = this.#listeners.add(user, handle, listener);
    const w = this.#watched.get(id) ?? this.#watch(id, user, handle);
    const unsubscribe = () => {
      remove();
      if (!this.#listeners.has(user, handle) && this.#watched.get(id) === w) this.#unwatch(id);
    };
    try {
      await w.ready;
    } catch (e) {
      unsubscribe();
      throw e;
    }
    return unsubscribe;
  }

  /** Starts watching the head of `(user, handle)`: its versionstamp now, then its `kv.watch` stream. */
  #watch(id: string, user: string, handle: string): Watched {
    const key = this.#db.keys.head(this.#db.keys.user(user), this.#db.keys.handle(handle));
    let reader: ReadableStreamDefaultReader<Deno.KvEntryMaybe<unknown>[]> | undefined;
    let stopped = false;
    const w: Watched = {
      key,
      ready: this.#db.get(key).then((e) => {
        w.vs = e.versionstamp;
        if (stopped) return;
        reader = this.#db.kv.watch([key]).getReader();
        (async () => {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) return;
            this.#seen(id, w, value[0]!.versionstamp);
          }
        })().catch(() => {/* the KV closed, or the stream broke: the store's poll remains */});
      }),
      stop: async () => {
        stopped = true;
        await reader?.cancel().catch(() => {});
      },
    };
    this.#watched.set(id, w);
    if (this.#poll && this.#feedTimer === undefined) {
      const timer = setInterval(() => {
        this.#feedPoll ??= this.#pollHeads().finally(() => this.#feedPoll = undefined);
      }, FEED_POLL_MS);
      Deno.unrefTimer(timer);
      this.#feedTimer = timer;
    }
    return w;
  }

  #unwatch(id: string): void {
    const w = this.#watched.get(id);
    this.#watched.delete(id);
    void w?.stop();
    if (this.#watched.size === 0) this.#stopFeed();
  }

  #stopFeed(): void {
    clearInterval(this.#feedTimer);
    this.#feedTimer = undefined;
  }

  /** Reads the watched heads' versionstamps, 10 keys a call, all calls at once. */
  async #pollHeads(): Promise<void> {
    const ws = [...this.#watched].filter(([, w]) => w.vs !== undefined);
    const calls: Promise<void>[] = [];
    for (let i = 0; i < ws.length; i += GET_MANY_MAX) {
      const batch = ws.slice(i, i + GET_MANY_MAX);
      calls.push(
        this.#db.kv.getMany(batch.map(([, w]) => w.key)).then(
          (rows) => rows.forEach((e, j) => this.#seen(batch[j]![0], batch[j]![1], e.versionstamp)),
          () => {/* locked by another process, or closing: the next poll tries again */},
        ),
      );
    }
    await Promise.all(calls);
  }

  /** Notifies the listeners of a watched head whose versionstamp moved. */
  #seen(id: string, w: Watched, vs: string | null): void {
    if (w.vs === vs) return;
    w.vs = vs;
    this.#listeners.notifyKey(id);
  }

  /**
   * Notifies the listeners of `(user, handle)` of this object's own commit to
   * its head: `res` is the commit (`null`: the head was deleted), so the feed
   * does not report the same versionstamp again.
   */
  changed(
    user: string,
    handle: string,
    res: Deno.KvCommitResult | Deno.KvCommitError | null,
  ): void {
    if (this.#listeners.size === 0) return;
    const w = this.#watched.get(Listeners.key(user, handle));
    if (w && w.vs !== undefined && res?.ok !== false) w.vs = res ? res.versionstamp : null;
    this.#listeners.notify(user, handle);
  }

  /** Stops every watch and the poll. */
  async close(): Promise<void> {
    this.#stopFeed();
    const watched = [...this.#watched.values()];
    this.#watched.clear();
    await Promise.all(watched.map((w) => w.stop()));
    await this.#feedPoll;
  }
}
