/**
 * The PostgreSQL backend's change feed: `LISTEN` on the schema's channel,
 * which every write of a record notifies (see `_statements.ts`).
 *
 * @module
 */

import type postgres from "postgres";
import { Listeners } from "../_shared.ts";

/** The listeners of one backend and the `LISTEN` that calls them. */
export class Feed {
  readonly #channel: string;
  readonly #listeners = new Listeners();
  #closed = false;
  /** The `LISTEN`, on the pool it was started on (started by the first subscribe). */
  #listen: { sql: postgres.Sql; ready: Promise<postgres.ListenMeta | undefined> } | undefined;

  /** @param channel The schema's channel. */
  constructor(channel: string) {
    this.#channel = channel;
  }

  /**
   * Adds a listener, and starts the `LISTEN` on `sql` unless it runs there.
   *
   * @returns Its remover, once the `LISTEN` is in place (or has failed: its
   *   retries then call every listener when they succeed).
   */
  async subscribe(
    sql: postgres.Sql,
    user: string,
    handle: string,
    listener: () => void,
  ): Promise<() => void> {
    const remove = this.#listeners.add(user, handle, listener);
    await this.#start(sql);
    return remove;
  }

  /** Moves a running `LISTEN` to a fresh pool (the old pool's ends with it). */
  moveTo(sql: postgres.Sql): void {
    if (this.#listen) void this.#start(sql);
  }

  /**
   * Stops calling listeners; with `unlisten`, also ends the `LISTEN` (on a
   * client that stays open), without waiting for it.
   */
  close(unlisten: boolean): void {
    this.#closed = true;
    const listen = this.#listen;
    this.#listen = undefined;
    // Not awaited: while the server is away, UNLISTEN would wait for it.
    if (unlisten) listen?.ready.then((m) => m?.unlisten()).catch(() => {});
  }

  /** Starts the `LISTEN` on `sql`, unless it runs there already. */
  #start(sql: postgres.Sql): Promise<unknown> {
    if (this.#listen?.sql !== sql) {
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
      this.#listen = { sql, ready };
    }
    return this.#listen.ready;
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
}
