/**
 * The Redis backend's change feed: every script that changes a record
 * publishes its handle on the user's channel, and a second connection, opened
 * on first use, subscribes to the channels of the users that have listeners.
 *
 * @module
 */

import { Cluster } from "ioredis";
import { Listeners } from "../_shared.ts";
import { decodeHandle } from "./_codec.ts";
import type { Connection, RedisClient } from "./_connection.ts";

/** A user's change channel while it has listeners: `ready` settles with its SUBSCRIBE. */
interface Channel {
  user: string;
  listeners: number;
  ready: Promise<void>;
}

/** The listeners of one backend, and the subscriber connection that calls them. */
export class Feed {
  readonly #conn: Connection;
  readonly #listeners = new Listeners();
  /** The subscriber connection, opened by the first `subscribe`. */
  #sub: Promise<RedisClient> | undefined;
  /** Channels subscribed (or being subscribed), by name. */
  readonly #channels = new Map<string, Channel>();
  /** Channels left while the subscriber was down (ioredis would resubscribe them). */
  readonly #stale = new Set<string>();
  /** Feed deliveries held until the client is ready (`"all"`: every listener). */
  #held: Set<string> | "all" | undefined;

  /** @param conn The backend's connection, which the subscriber duplicates. */
  constructor(conn: Connection) {
    this.#conn = conn;
  }

  /** Calls the listeners of `(user, handle)`: this backend's own write committed. */
  notify(user: string, handle: string): void {
    this.#listeners.notify(user, handle);
  }

  /**
   * Adds a listener of `(user, handle)`, which hears of writes on channel
   * `name` (the user's), subscribed to on first use.
   *
   * @returns Its remover, once the channel is subscribed.
   */
  async subscribe(
    name: string,
    user: string,
    handle: string,
    listener: () => void,
  ): Promise<() => void> {
    let ch = this.#channels.get(name);
    if (!ch) {
      const ready = this.#subscriber().then((sub) => sub.subscribe(name)).then(() => {});
      const made: Channel = ch = { user, listeners: 0, ready };
      this.#channels.set(name, made);
      ready.catch(() => {
        if (this.#channels.get(name) === made) this.#channels.delete(name);
      });
    }
    const channel = ch;
    channel.listeners++;
    const removeListener = this.#listeners.add(user, handle, listener);
    let live = true;
    const remove = () => {
      if (!live) return;
      live = false;
      removeListener();
      if (--channel.listeners === 0 && this.#channels.get(name) === channel) {
        this.#channels.delete(name);
        this.#sub?.then((sub) => sub.unsubscribe(name)).catch(() => this.#stale.add(name));
      }
    };
    try {
      await channel.ready;
    } catch (e) {
      remove();
      throw this.#conn.fail(e);
    }
    return remove;
  }

  /** The subscriber connection (a duplicate of the client), opened on first use. */
  #subscriber(): Promise<RedisClient> {
    return this.#sub ??= this.#openSubscriber().catch((e) => {
      this.#sub = undefined;
      throw e;
    });
  }

  async #openSubscriber(): Promise<RedisClient> {
    const c = this.#conn.client;
    const sub = c instanceof Cluster
      ? c.duplicate([], { lazyConnect: true })
      : c.duplicate({ lazyConnect: true });
    sub.on("error", () => {/* surfaced per call as backend_error */});
    sub.on("message", (name: string, enc: string) => {
      const ch = this.#channels.get(name);
      if (!ch) return;
      let handle: string;
      try {
        handle = decodeHandle(enc);
      } catch {
        return; // not one of ours
      }
      this.#deliver(Listeners.key(ch.user, handle));
    });
    let connected = false;
    sub.on("ready", () => {
      if (connected) void this.#resync(sub);
      connected = true;
    });
    try {
      await sub.connect();
    } catch (e) {
      sub.disconnect();
      throw e;
    }
    return sub;
  }

  /**
   * After the subscriber reconnected (ioredis resubscribes by itself): once
   * the channels are live again, every listener is called once, so watchers
   * re-read what they may have missed meanwhile.
   */
  async #resync(sub: RedisClient): Promise<void> {
    const stale = [...this.#stale].filter((name) => !this.#channels.has(name));
    this.#stale.clear();
    if (stale.length > 0) sub.unsubscribe(...stale).catch(() => {});
    try {
      // Answered after ioredis's own resubscription, on the same connection.
      const names = [...this.#channels.keys()];
      if (names.length > 0) await sub.subscribe(...names);
    } catch {
      return; // dropped again: the next reconnect resyncs
    }
    this.#deliver("all");
  }

  /**
   * Calls the listeners of a registry key (or all) from the feed, at once
   * when the client is ready, else once it is: their re-reads need it.
   */
  #deliver(key: string | "all"): void {
    if (this.#conn.closed) return;
    if (this.#held === undefined && this.#conn.client.status === "ready") {
      if (key === "all") this.#listeners.notifyAll();
      else this.#listeners.notifyKey(key);
      return;
    }
    if (this.#held === undefined) {
      this.#held = new Set();
      this.#conn.client.once("ready", () => {
        const held = this.#held;
        this.#held = undefined;
        if (held === "all") this.#listeners.notifyAll();
        else for (const k of held ?? []) this.#listeners.notifyKey(k);
      });
    }
    if (key === "all") this.#held = "all";
    else if (this.#held !== "all") this.#held.add(key);
  }

  /** Disconnects the subscriber. */
  async close(): Promise<void> {
    const sub = this.#sub;
    this.#sub = undefined;
    await sub?.then((s) => s.disconnect(), () => {});
  }
}
