/**
 * Helpers shared by the backends (private to the package).
 *
 * @module
 */

/**
 * The listing order: `updatedAt` descending, then `handle` ascending.
 *
 * @param a One position.
 * @param b Another.
 * @returns Negative when `a` comes first.
 */
export function compareListOrder(
  a: { updatedAt: number; handle: string },
  b: { updatedAt: number; handle: string },
): number {
  if (a.updatedAt !== b.updatedAt) return b.updatedAt - a.updatedAt;
  return a.handle < b.handle ? -1 : a.handle > b.handle ? 1 : 0;
}

/**
 * Listeners of {@link Backend.subscribe}, by `(user, handle)`: backends add
 * to it, and call {@link Listeners.notify} after their own commits and when
 * their engine's feed reports another writer's.
 */
export class Listeners {
  #by = new Map<string, Set<() => void>>();

  /** The registry key of `(user, handle)`. */
  static key(user: string, handle: string): string {
    return JSON.stringify([user, handle]);
  }

  /** How many `(user, handle)` pairs have at least one listener. */
  get size(): number {
    return this.#by.size;
  }

  /**
   * Adds a listener.
   *
   * @returns An idempotent remover.
   */
  add(user: string, handle: string, listener: () => void): () => void {
    const key = Listeners.key(user, handle);
    let set = this.#by.get(key);
    if (!set) this.#by.set(key, set = new Set());
    const fn = () => listener();
    set.add(fn);
    let live = true;
    return () => {
      if (!live) return;
      live = false;
      set.delete(fn);
      if (set.size === 0 && this.#by.get(key) === set) this.#by.delete(key);
    };
  }

  /** Whether `(user, handle)` has a listener. */
  has(user: string, handle: string): boolean {
    return this.#by.has(Listeners.key(user, handle));
  }

  /** Calls the listeners of `(user, handle)` (by registry key); a throwing listener is ignored. */
  notifyKey(key: string): void {
    for (const fn of [...(this.#by.get(key) ?? [])]) {
      try {
        fn();
      } catch { /* a listener must not throw; ignore one that does */ }
    }
  }

  /** Calls the listeners of `(user, handle)`. */
  notify(user: string, handle: string): void {
    if (this.#by.size > 0) this.notifyKey(Listeners.key(user, handle));
  }

  /** Calls every listener (an engine feed that cannot tell which handle changed). */
  notifyAll(): void {
    for (const key of [...this.#by.keys()]) this.notifyKey(key);
  }
}
