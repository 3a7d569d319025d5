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
import type { HandleStore } from "./types.ts";
import type { Telemetry } from "./telemetry.ts";

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

/** Default of {@link ListenLimits.maxStreams}: open listen streams, all users together. */
export const DEFAULT_MAX_LISTEN_STREAMS = 1000;

/** Default of {@link ListenLimits.maxStreamsPerUser}: open listen streams of one user. */
export const DEFAULT_MAX_LISTEN_STREAMS_PER_USER = 16;

/** Default of {@link ListenLimits.maxWatchesPerUser}: handles one user watches at once. */
export const DEFAULT_MAX_WATCHES_PER_USER = 256;

/**
 * Bounds on live updates, so that no user can take every subscription slot or
 * make the server watch without end. Each is named after its `serve` flag.
 */
export interface ListenLimits {
  /** Open `subscriptions/listen` streams, all users together. Default 1,000. */
  maxStreams?: number;
  /** Open `subscriptions/listen` streams of one user. Default 16. */
  maxStreamsPerUser?: number;
  /** Distinct handles one user watches at once, over all their streams. Default 256. */
  maxWatchesPerUser?: number;
}

/** The name of a limit of {@link ListenLimits}: the `serve` flag that sets it, without dashes. */
export type ListenLimitName =
  | "max-listen-streams"
  | "max-listen-streams-per-user"
  | "max-watches-per-user";

/**
 * A subscription refused by {@link LiveUpdates.follow} because it would pass
 * a limit; nothing was followed. The message says which limit and what to do.
 */
export class ListenLimitError extends RangeError {
  /** The JSON-RPC error code of the refusal: -32000, a server error. */
  readonly code: number = -32000;
  /** The limit that would be passed. */
  readonly limit: ListenLimitName;
  /** Its value. */
  readonly max: number;

  /**
   * Creates the refusal.
   *
   * @param limit The limit that would be passed.
   * @param max Its value.
   * @param message What happened and what to do next.
   */
  constructor(limit: ListenLimitName, max: number, message: string) {
    super(message);
    this.name = "ListenLimitError";
    this.limit = limit;
    this.max = max;
  }
}

interface Follower {
  user: string;
  count: number;
  stop: AbortController;
  /** Settles once the watch has read its first version (or ended). */
  ready: PromiseWithResolvers<void>;
}

/**
 * Follows handles for open subscriptions and calls `emit(uri, user)` each
 * time one changes after it was first read — a new version, or its deletion
 * or expiry (then once, and the follow ends). One watch per `(user, handle)`
 * however many subscriptions share it; handles are per user, so two users'
 * handles of one name are two watches, each emitted for its own user only.
 * Counts open streams and watched handles against {@link ListenLimits}.
 */
export class LiveUpdates {
  readonly #store: HandleStore;
  readonly #emit: (uri: string, user: string) => void;
  readonly #followers = new Map<string, Follower>();
  readonly #maxStreams: number;
  readonly #maxStreamsPerUser: number;
  readonly #maxWatchesPerUser: number;
  #streams = 0;
  readonly #userStreams = new Map<string, number>();
  readonly #userWatches = new Map<string, number>();
  #closed = false;
  readonly #unobserve: (() => void) | undefined;

  /**
   * Creates the follower set of one serving entry.
   *
   * @param store The store to watch.
   * @param emit Delivers `notifications/resources/updated` for a URI to the
   *   subscriptions of `user`, and of no one else.
   * @param limits Bounds on open streams and watched handles.
   * @param telemetry Metrics whose `mcpstate_listen_streams` and
   *   `mcpstate_watched_handles` gauges read this set until it closes.
   */
  constructor(
    store: HandleStore,
    emit: (uri: string, user: string) => void,
    limits: ListenLimits = {},
    telemetry?: Telemetry,
  ) {
    this.#store = store;
    this.#emit = emit;
    this.#maxStreams = limits.maxStreams ?? DEFAULT_MAX_LISTEN_STREAMS;
    this.#maxStreamsPerUser = limits.maxStreamsPerUser ?? DEFAULT_MAX_LISTEN_STREAMS_PER_USER;
    this.#maxWatchesPerUser = limits.maxWatchesPerUser ?? DEFAULT_MAX_WATCHES_PER_USER;
    this.#unobserve = telemetry?.metrics?.observeLive(this);
  }

  /** Open `subscriptions/listen` streams, all users together. */
  get streams(): number {
    return this.#streams;
  }

  /** Handles watched: distinct `(user, handle)` pairs, however many subscriptions share each. */
  get watchedHandles(): number {
    return this.#followers.size;
  }

  /**
   * Follows `handles` of `user` until `signal` aborts. Acknowledge the
   * subscription only once the returned promise settles: from then on, every
   * change is heard (a change before it would be taken for the starting
   * version).
   *
   * The subscription counts as one open stream of `user` until `signal`
   * aborts (unless `options.stream` is `false`: a 2025-era
   * `resources/subscribe` names one handle and holds no stream), and its
   * handles count as watched by `user` while any subscription follows them.
   * The check and the count happen at once, before this returns.
   *
   * @param user The subscriber's user; only that user's handles are watched.
   * @param handles The handles to follow.
   * @param signal Ends this subscription's share of the follow.
   * @param options `stream: false` for a subscription that is not a stream.
   * @returns Settles when every handle's watch has read its starting version,
   *   or after {@link READY_BOUND_MS} at the latest (a backend that does not
   *   answer must not hold the subscription, or a stdio connection, forever).
   *   Rejects with {@link ListenLimitError}, having followed nothing, when the
   *   subscription would pass a limit.
   */
  follow(
    user: string,
    handles: readonly string[],
    signal: AbortSignal,
    options: { stream?: boolean } = {},
  ): Promise<void> {
    if (this.#closed || signal.aborted) return Promise.resolve();
    const unique = new Set(handles);
    const stream = options.stream ?? true;
    const refusal = this.#refusal(user, unique, stream);
    if (refusal) return Promise.reject(refusal);
    if (stream) {
      this.#streams++;
      this.#userStreams.set(user, (this.#userStreams.get(user) ?? 0) + 1);
      signal.addEventListener("abort", () => {
        this.#streams--;
        adjust(this.#userStreams, user, -1);
      }, { once: true });
    }
    const ready: Promise<void>[] = [];
    for (const handle of unique) {
      const key = JSON.stringify([user, handle]);
      let f = this.#followers.get(key);
      if (!f) {
        f = { user, count: 0, stop: new AbortController(), ready: Promise.withResolvers<void>() };
        this.#followers.set(key, f);
        adjust(this.#userWatches, user, 1);
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
    this.#unobserve?.();
    for (const [key, f] of this.#followers) this.#drop(key, f);
  }

  /** The limit a new subscription would pass, or `undefined`; the user's own limits first. */
  #refusal(user: string, handles: Set<string>, stream: boolean): ListenLimitError | undefined {
    const mine = this.#userStreams.get(user) ?? 0;
    if (stream && mine >= this.#maxStreamsPerUser) {
      return new ListenLimitError(
        "max-listen-streams-per-user",
        this.#maxStreamsPerUser,
        `You have ${mine} subscriptions/listen streams open, the most one user may have (--max-listen-streams-per-user ${this.#maxStreamsPerUser}). Close one first, or name several resources in one stream.`,
      );
    }
    let added = 0;
    for (const handle of handles) {
      if (!this.#followers.has(JSON.stringify([user, handle]))) added++;
    }
    const watched = this.#userWatches.get(user) ?? 0;
    if (added > 0 && watched + added > this.#maxWatchesPerUser) {
      return new ListenLimitError(
        "max-watches-per-user",
        this.#maxWatchesPerUser,
        `You watch ${watched} handles and this subscription adds ${added}: one user may watch at most ${this.#maxWatchesPerUser} at once (--max-watches-per-user ${this.#maxWatchesPerUser}). Close a subscription you no longer need first.`,
      );
    }
    if (stream && this.#streams >= this.#maxStreams) {
      return new ListenLimitError(
        "max-listen-streams",
        this.#maxStreams,
        `This server has ${this.#streams} subscriptions/listen streams open, its limit for all users together (--max-listen-streams ${this.#maxStreams}). Try again later.`,
      );
    }
    return undefined;
  }

  #drop(key: string, f: Follower): void {
    f.ready.resolve();
    f.stop.abort();
    if (this.#followers.get(key) === f) {
      this.#followers.delete(key);
      adjust(this.#userWatches, f.user, -1);
    }
  }

  async #run(user: string, handle: string, key: string, f: Follower): Promise<void> {
    const uri = resourceUri(handle);
    let seen = false;
    for (let attempt = 0; !f.stop.signal.aborted; attempt++) {
      try {
        for await (const _ of this.#store.watch(handle, { user, signal: f.stop.signal })) {
          attempt = 0;
          if (seen) this.#emit(uri, user);
          seen = true;
          f.ready.resolve();
        }
        break;
      } catch (e) {
        if (e instanceof McpStateError && e.code !== "backend_error") {
          // Revoked or expired: tell a subscriber that has seen it, then stop.
          if (seen) this.#emit(uri, user);
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

/** Adds `by` to a per-user count, forgetting users whose count is back to 0. */
function adjust(counts: Map<string, number>, user: string, by: number): void {
  const n = (counts.get(user) ?? 0) + by;
  if (n > 0) counts.set(user, n);
  else counts.delete(user);
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
