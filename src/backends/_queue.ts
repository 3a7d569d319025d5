/**
 * A queue per key (private to the package): calls on one key run one after
 * another, calls on different keys at once. The backends whose writes are
 * optimistic (Deno KV, Redis's compare-and-set) queue the writes of one
 * record in a process, so that only other processes make them retry.
 *
 * @module
 */

/** Runs the calls on one key one after another. */
export class KeyedQueue {
  #tails = new Map<string, Promise<void>>();

  /**
   * Runs `fn` once every call queued on `key` before it has settled.
   *
   * @param key The key.
   * @param fn The call.
   * @returns What `fn` returns.
   */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#tails.get(key);
    let run: Promise<T>;
    // With nothing queued on the key, `fn` starts at once: no hop of the event loop first.
    try {
      run = prev ? prev.then(() => fn()) : fn();
    } catch (e) {
      run = Promise.reject(e);
    }
    const tail = run.then(() => {}, () => {});
    this.#tails.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}
