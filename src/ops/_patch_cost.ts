/**
 * Work counters of `applyOps`, kept so that tests can check its cost by
 * counting instead of timing. Not part of the public API.
 *
 * @module
 */

/** What `applyOps` has done since the counters were last reset. */
export const patchCost: {
  /** Containers copied before a write. */
  copies: number;
  /** List items encoded for `add_to_set` indexes. */
  indexedItems: number;
} = { copies: 0, indexedItems: 0 };

/** Sets every counter back to 0. */
export function resetPatchCost(): void {
  patchCost.copies = 0;
  patchCost.indexedItems = 0;
}
