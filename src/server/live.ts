/**
 * Live updates for the mcpstate server: each handle is an MCP resource
 * (`mcpstate://state/{handle}`), and a client's `subscriptions/listen`
 * stream hears `notifications/resources/updated` when one of its handles
 * changes on any instance — through {@link HandleStore.watch}, which follows
 * the backend's own change feed (SQLite `data_version`, Redis pub/sub from
 * the write scripts, Deno KV `watch`, PostgreSQL `LISTEN/NOTIFY`).
 *
 * @module
 */

import { McpStateError } from "../errors.ts";
import type { HandleStore } from "../store.ts";

/** The URI scheme and path of a handle's resource: `mcpstate://state/` + handle. */
export const RESOURCE_PREFIX = "mcpstate://state/";

/**
 * The resource URI of a handle.
 *
 * @param handle The handle.
 * @returns `mcpstate://state/{handle}`.
 */
export function resourceUri(handle: string): string {
  return RESOURCE_PREFIX + encodeURIComponent(handle);
}

/**
 * The handle a resource URI names, or `undefined` when it is not an mcpstate
 * resource URI.
 *
 * @param uri A resource URI.
 * @returns The handle.
 */
export function handleOfUri(uri: string): string | undefined {
  if (typeof uri !== "string" || !uri.startsWith(RESOURCE_PREFIX)) return undefined;
  try {
    const handle = decodeURIComponent(uri.slice(RESOURCE_PREFIX.length));
    return handle.length > 0 && handle.length <= 256 && !handle.includes("/") ? handle : undefined;
  } catch {
    return undefined;
  }
}

/** The longest {@link LiveUpdates.follow} waits for the watches' starting versions, in ms. */
export const READY_BOUND_MS = 10_000;

interface Follower {
  count: number;
  stop: AbortController;
  /** Settles once the watch has read its first version (or ended). */
  ready: PromiseWithResolvers<void>;
}

/**
 * Follows handles for open subscriptions and calls `emit(uri)` each time one
 * changes after it was first read — a new version, or its deletion or
 * expiry (then once, and the follow ends). One watch per `(user, handle)`
 * however many subscriptions share it.
 */
export class LiveUpdates {
  readonly #store: HandleStore;
  readonly #emit: (uri: string) => void;
  readonly #followers = new Map<string, Follower>();
  #closed = false;

  /**
   * Creates the follower set of one serving entry.
   *
   * @param store The store to watch.
   * @param emit Delivers `notifications/resources/updated` for a URI.
   */
  constructor(store: HandleStore, emit: (uri: string) => void) {
    this.#store = store;
    this.#emit = emit;
  }

  /**
   * Follows `handles` of `user` until `signal` aborts. Acknowledge the
   * subscription only once the returned promise settles: from then on, every
   * change is heard (a change before it would be taken for the starting
   * version).
   *
   * @param user The subscriber's user; only that user's handles are watched.
   * @param handles The handles to follow.
   * @param signal Ends this subscription's share of the follow.
   * @returns Settles when every handle's watch has read its starting version,
   *   or after {@link READY_BOUND_MS} at the latest (a backend that does not
   *   answer must not hold the subscription, or a stdio connection, forever).
   */
  follow(user: string, handles: readonly string[], signal: AbortSignal): Promise<void> {
    if (this.#closed || signal.aborted) return Promise.resolve();
    const ready: Promise<void>[] = [];
    for (const handle of new Set(handles)) {
      const key = JSON.stringify([user, handle]);
      let f = this.#followers.get(key);
      if (!f) {
        f = { count: 0, stop: new AbortController(), ready: Promise.withResolvers<void>() };
        this.#followers.set(key, f);
        this.#run(user, handle, key, f);
      }
      ready.push(f.ready.promise);
      const follower = f;
      follower.count++;
      signal.addEventListener("abort", () => {
        if (--follower.count === 0) this.#drop(key, follower);
      }, { once: true });
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<void>((resolve) => timer = setTimeout(resolve, READY_BOUND_MS));
    return Promise.race([Promise.all(ready), bound]).then(() => clearTimeout(timer));
  }

  /** Stops every follow. */
  close(): void {
    this.#closed = true;
    for (const [key, f] of this.#followers) this.#drop(key, f);
  }

  #drop(key: string, f: Follower): void {
    f.ready.resolve();
    f.stop.abort();
    if (this.#followers.get(key) === f) this.#followers.delete(key);
  }

  async #run(user: string, handle: string, key: string, f: Follower): Promise<void> {
    const uri = resourceUri(handle);
    let seen = false;
    for (let attempt = 0; !f.stop.signal.aborted; attempt++) {
      try {
        for await (const _ of this.#store.watch(handle, { user, signal: f.stop.signal })) {
          attempt = 0;
          if (seen) this.#emit(uri);
          seen = true;
          f.ready.resolve();
        }
        break;
      } catch (e) {
        if (e instanceof McpStateError && e.code !== "backend_error") {
          // Revoked or expired: tell a subscriber that has seen it, then stop.
          if (seen) this.#emit(uri);
          break;
        }
        // The backend is unreachable for now: try again, backing off.
        f.ready.resolve();
        await sleep(Math.min(30_000, 250 * 2 ** Math.min(attempt, 7)), f.stop.signal);
      }
    }
    this.#drop(key, f);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
