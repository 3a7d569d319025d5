/**
 * `once`: a close function that runs its work the first time and answers
 * every later call with the same promise.
 *
 * @module
 */

/**
 * Wraps `work` so that it runs once; every call answers its one promise.
 *
 * @param work What closing does.
 * @returns The close function.
 */
export function once(work: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => running ??= work();
}
