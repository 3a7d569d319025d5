/**
 * A cache bounded by the bytes of what it holds (private to the backends
 * and the store).
 *
 * @module
 */

/**
 * Keeps values up to `maxEntryBytes` each and `maxTotalBytes` in all,
 * dropping the oldest stored first.
 */
export class ByteCappedCache<V> {
  readonly #entries = new Map<string, V>();
  readonly #maxEntryBytes: number;
  readonly #maxTotalBytes: number;
  readonly #sizeOf: (value: V) => number;
  #bytes = 0;

  /**
   * @param maxEntryBytes The largest value kept (a larger one is not stored).
   * @param maxTotalBytes The most kept in all.
   * @param sizeOf The size of a value, in the unit of the bounds.
   */
  constructor(maxEntryBytes: number, maxTotalBytes: number, sizeOf: (value: V) => number) {
    this.#maxEntryBytes = maxEntryBytes;
    this.#maxTotalBytes = maxTotalBytes;
    this.#sizeOf = sizeOf;
  }

  /** Forgets every entry. */
  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  /** The value stored for `key`, if any. */
  get(key: string): V | undefined {
    return this.#entries.get(key);
  }

  /**
   * Stores `value` for `key` as the newest entry (`null`: forgets the key),
   * then drops the oldest entries while the total is over its bound.
   *
   * @returns `value`.
   */
  set<T extends V | null>(key: string, value: T): T {
    const old = this.#entries.get(key);
    if (old !== undefined) {
      this.#entries.delete(key);
      this.#bytes -= this.#sizeOf(old);
    }
    if (value !== null && this.#sizeOf(value) <= this.#maxEntryBytes) {
      this.#entries.set(key, value);
      this.#bytes += this.#sizeOf(value);
      if (this.#bytes <= this.#maxTotalBytes) return value;
      for (const [k, v] of this.#entries) {
        if (this.#bytes <= this.#maxTotalBytes) break;
        this.#entries.delete(k);
        this.#bytes -= this.#sizeOf(v);
      }
    }
    return value;
  }
}
