/**
 * The wire forms the tools answer beyond the store's own (`toPayload`): a
 * handle without the caller's own lease, a snapshot without its state, and a
 * `stale_write` kept within the read budget.
 *
 * @module
 */

import type { StaleWrite } from "../../errors.ts";
import { jsonSize, outline } from "../../outline.ts";
import type { HandleInfo, Snapshot } from "../../types.ts";
import { toPayload } from "../../wire.ts";

/**
 * The wire form of a snapshot or info for the caller `writer`: `active_lease`
 * only when someone else holds the lease — the caller's own is no news to
 * it, and leaving it out keeps results exactly the Python 0.2 keys for a
 * single writer.
 *
 * @param s A snapshot or info.
 * @param writer The caller's writer label.
 * @returns The payload.
 */
export function payloadFor(
  s: HandleInfo | Snapshot<unknown>,
  writer: string | null | undefined,
): Record<string, unknown> {
  return withoutOwnLease(toPayload(s), s, writer);
}

/**
 * A read's wire form without the caller's own lease (as {@link payloadFor} does).
 *
 * @param payload The wire form; changed in place.
 * @param info The handle it describes.
 * @param writer The caller's writer label.
 * @returns `payload`.
 */
export function withoutOwnLease(
  payload: Record<string, unknown>,
  info: HandleInfo,
  writer: string | null | undefined,
): Record<string, unknown> {
  if (info.activeLease && info.activeLease.holder === (writer || "unknown")) {
    delete payload.active_lease;
  }
  return payload;
}

/**
 * A snapshot's meta without its state.
 *
 * @param s The snapshot.
 * @returns Its info.
 */
export function infoOnly(s: Snapshot): HandleInfo {
  const { state: _state, ...info } = s;
  return info;
}

/**
 * Keeps a `stale_write` within the read budget: a `current` state over it
 * becomes its outline (`outline`, `truncated: true`, `size_bytes`), and
 * `changes` over it are left out (`changes: null`, `changes_truncated`).
 *
 * @param e The error; its details are changed in place.
 * @param budget The read budget in bytes.
 */
export function withinBudget(e: StaleWrite, budget: number): void {
  const current = e.details.current as Record<string, unknown> | undefined;
  if (current && "state" in current) {
    const read = outline(current.state, budget);
    if (read.truncated) {
      const { state: _, ...meta } = current;
      e.details.current = {
        ...meta,
        outline: read.outline,
        truncated: true,
        size_bytes: read.sizeBytes,
      };
    }
  }
  if (Array.isArray(e.details.changes) && jsonSize(e.details.changes) > budget) {
    e.details.changes = null;
    e.details.changes_truncated = true;
  }
}
