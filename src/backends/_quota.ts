/**
 * Per-user quotas as the backends apply them (private to the package): the
 * limits a write carries in its context, the usage a backend keeps, and the
 * one check every backend runs inside the atomic step of the write.
 *
 * @module
 */

import type { QuotaLimits, Usage } from "../backend.ts";
import { QuotaExceeded } from "../errors.ts";

/** The length of a fixed rate window, in ms. */
export const MINUTE_MS = 60_000;

/** What a write adds to its user's usage: handles, bytes, and whether it counts as a write. */
export interface UsageDelta {
  /** +1 for a new live handle, 0 otherwise. */
  handles: number;
  /** New state size minus old, in UTF-8 bytes. */
  bytes: number;
}

/**
 * The writes of the minute `now` falls in, from a counter kept as
 * `(minute, writes)`: a counter of an earlier minute counts as 0.
 *
 * @param minute The minute the counter belongs to (`floor(ms / 60000)`).
 * @param writes Its count.
 * @param now Epoch ms.
 * @returns The writes of the current minute.
 */
export function writesAt(minute: number, writes: number, now: number): number {
  return minute === Math.floor(now / MINUTE_MS) ? writes : 0;
}

/**
 * Throws {@link QuotaExceeded} when a write with `delta` would break one of
 * `limits`, given the usage before it. A write that adds nothing to a
 * quantity is never refused over it (deleting and shrinking always work,
 * also when a limit was lowered below the usage).
 *
 * @param limits The store's limits.
 * @param before The user's usage before the write.
 * @param delta What the write adds.
 * @param now Epoch ms (store clock), for the rate window.
 * @throws {QuotaExceeded} naming the first quota broken: handles, bytes, rate.
 */
export function checkQuota(
  limits: QuotaLimits,
  before: Usage,
  delta: UsageDelta,
  now: number,
): void {
  const { maxHandles, maxBytes, writesPerMinute } = limits;
  if (
    maxHandles !== undefined && delta.handles > 0 && before.handles + delta.handles > maxHandles
  ) {
    throw new QuotaExceeded("handles", maxHandles, before.handles);
  }
  if (maxBytes !== undefined && delta.bytes > 0 && before.bytes + delta.bytes > maxBytes) {
    throw new QuotaExceeded("bytes", maxBytes, before.bytes);
  }
  if (writesPerMinute !== undefined && before.writesThisMinute >= writesPerMinute) {
    throw new QuotaExceeded(
      "writes_per_minute",
      writesPerMinute,
      before.writesThisMinute,
      retryAfterSeconds(now),
    );
  }
}

/**
 * Whole seconds from `now` until the next minute of the rate window starts (at least 1).
 *
 * @param now Epoch ms.
 * @returns The seconds to wait.
 */
export function retryAfterSeconds(now: number): number {
  return Math.max(1, Math.ceil((MINUTE_MS - (now % MINUTE_MS)) / 1000));
}
