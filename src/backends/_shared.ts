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
