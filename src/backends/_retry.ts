/**
 * Waiting and trying again, for the backends (private to the package): one
 * jittered backoff, the loop that repeats a call while its error says "busy,
 * try again", and the optimistic loop that repeats a read-compute-commit
 * attempt until it wins a race.
 *
 * @module
 */

/**
 * Full jitter: a random delay below `min(capMs, baseMs × 2^attempt)`.
 *
 * @param attempt How many attempts failed before this wait, from 0.
 * @param baseMs The bound of the first wait.
 * @param capMs The largest bound.
 * @returns The delay in milliseconds.
 */
export function jitterMs(attempt: number, baseMs: number, capMs: number): number {
  return Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
}

/**
 * Waits {@link jitterMs}: by default below 2 ms, 4 ms, 8 ms … up to 100 ms.
 *
 * @param attempt How many attempts failed before this wait, from 0.
 * @param baseMs The bound of the first wait.
 * @param capMs The largest bound.
 */
export function backoff(attempt: number, baseMs = 2, capMs = 100): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, jitterMs(attempt, baseMs, capMs)));
}

/**
 * Runs `fn` until it returns, again after a {@link backoff} each time it throws
 * an error that `retryable` accepts, as long as `deadline` has not passed;
 * then its last error propagates.
 *
 * @param fn The call.
 * @param retryable Whether an error means "try again".
 * @param deadline Epoch ms after which an error is final.
 * @returns What `fn` returned.
 */
export function retryWhile<T>(
  fn: () => Promise<T>,
  retryable: (e: unknown) => boolean,
  deadline: number,
): Promise<T> {
  return optimistic(async () => {
    try {
      return await fn();
    } catch (e) {
      if (retryable(e) && Date.now() < deadline) return AGAIN;
      throw e;
    }
  }, backoff);
}

/**
 * {@link retryWhile} for a synchronous driver (`node:sqlite`): the waits block
 * the thread.
 *
 * @param fn The call.
 * @param retryable Whether an error means "try again".
 * @param deadline Epoch ms after which an error is final.
 * @returns What `fn` returned.
 */
export function retryWhileSync<T>(
  fn: () => T,
  retryable: (e: unknown) => boolean,
  deadline: number,
): T {
  for (let attempt = 0;; attempt++) {
    try {
      return fn();
    } catch (e) {
      if (!retryable(e) || Date.now() >= deadline) throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, jitterMs(attempt, 2, 100));
    }
  }
}

/** What an attempt of {@link optimistic} answers when it lost a race and must run again. */
export const AGAIN: unique symbol = Symbol("again");

/**
 * The optimistic loop: runs `attempt(0)`, `attempt(1)` … until one answers
 * something other than {@link AGAIN}, and waits `pause(n)` after attempt `n`
 * lost (a pause gives up by throwing).
 *
 * @param attempt One read-compute-commit attempt.
 * @param pause The wait between attempts.
 * @returns The first answer that is not {@link AGAIN}.
 */
export async function optimistic<T>(
  attempt: (n: number) => Promise<T | typeof AGAIN>,
  pause: (n: number) => Promise<void> | void,
): Promise<T> {
  for (let n = 0;; n++) {
    const out = await attempt(n);
    if (out !== AGAIN) return out;
    await pause(n);
  }
}

/**
 * A pause for {@link optimistic} that backs off as {@link backoff} does until
 * `timeoutMs` from now have passed, and then throws `giveUp()`.
 *
 * @param timeoutMs How long the loop may go on.
 * @param giveUp The error that ends it.
 * @returns The pause.
 */
export function untilTimeout(timeoutMs: number, giveUp: () => Error): (n: number) => Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return (n) => {
    if (Date.now() >= deadline) return Promise.reject(giveUp());
    return backoff(n);
  };
}
