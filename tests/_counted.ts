/**
 * Counting proxies, to check the cost of an operation by counting the reads
 * it makes instead of timing it. A budget turns a runaway (an O(n²) walk)
 * into a fast failure rather than a test that runs for minutes.
 *
 * @module
 */

/** Reads made through the proxies of one {@link Reads}. */
export class Reads {
  /** Proxy traps run so far. */
  count = 0;

  /**
   * @param budget The most reads allowed; one more throws.
   */
  constructor(readonly budget: number) {}

  /**
   * Wraps `target` so that every read of it (`get`, `has`, `ownKeys`,
   * `getOwnPropertyDescriptor`) is counted. Writes fail: the input of a pure
   * function must never be written.
   *
   * @param target The object or list to watch.
   * @returns The counting proxy.
   */
  watch<T extends object>(target: T): T {
    const tick = () => {
      if (++this.count > this.budget) {
        throw new Error(`over the budget of ${this.budget} reads`);
      }
    };
    const refuse = (): boolean => {
      throw new TypeError("the input was written to");
    };
    return new Proxy(target, {
      get(t, k, r) {
        tick();
        return Reflect.get(t, k, r);
      },
      has(t, k) {
        tick();
        return Reflect.has(t, k);
      },
      ownKeys(t) {
        tick();
        return Reflect.ownKeys(t);
      },
      getOwnPropertyDescriptor(t, k) {
        tick();
        return Reflect.getOwnPropertyDescriptor(t, k);
      },
      set: refuse,
      defineProperty: refuse,
      deleteProperty: refuse,
      setPrototypeOf: refuse,
    });
  }
}
