/**
 * Per-user usage on Deno KV (quotas). One key per user,
 * `[…, "u", user, "q"]`, holds `{ h, b }` (live handles, bytes of their
 * states) or `0`, which means "unknown: count again"; `[…, "u", user, "w"]`
 * holds the rate counter `{ m, w }` (minute of the store clock, writes).
 *
 * - A write under quotas reads both keys with its head, counts the user's
 *   heads when the usage is unknown, checks the limits, and commits the new
 *   usage with its record in one atomic commit that checks both keys'
 *   versionstamps: writes of one user under quotas never both pass a check
 *   the other's write would have failed.
 * - Every other write of a record (one without quotas, an import, a sweep)
 *   sets the usage to `0` in its own commit, one blind mutation: a check
 *   running beside it fails its commit and counts again. The marker expires
 *   after 10 minutes (absent means unknown too), so it leaves nothing behind.
 *
 * @module
 */

import type { QuotaLimits, Usage } from "../../backend.ts";
import { checkQuota, MINUTE_MS, type UsageDelta, writesAt } from "../_quota.ts";
import type { Head } from "./_codec.ts";
import type { KvIo } from "./_io.ts";

/** The usage value: counts, or `0` for unknown. */
export type UsageValue = { h: number; b: number } | 0;
/** The rate counter value. */
export interface RateValue {
  /** Minute of the store clock, `floor(ms / 60000)`. */
  m: number;
  /** Writes counted in it. */
  w: number;
}

/** The usage key of user key part `u`. */
export function usageKey(db: KvIo, u: Deno.KvKeyPart): Deno.KvKey {
  return [...db.keys.p, "u", u, "q"];
}

/** The rate key of user key part `u`. */
export function rateKey(db: KvIo, u: Deno.KvKeyPart): Deno.KvKey {
  return [...db.keys.p, "u", u, "w"];
}

/**
 * Marks the usage of `u` unknown in the commit `op` (a write without
 * quotas). The marker expires by itself: an absent key means unknown as
 * well, and a check against either fails once another marker is set.
 */
export function staleUsage(db: KvIo, op: Deno.AtomicOperation, u: Deno.KvKeyPart): void {
  op.set(usageKey(db, u), 0, { expireIn: 10 * MINUTE_MS });
}

/** The usage and rate entries of a user, as one write read them. */
export interface UsageRead {
  /** The usage entry. */
  q: Deno.KvEntryMaybe<UsageValue>;
  /** The rate entry. */
  w: Deno.KvEntryMaybe<RateValue>;
}

/** Reads the usage and rate entries of `u`. */
export async function readUsageEntries(db: KvIo, u: Deno.KvKeyPart): Promise<UsageRead> {
  const [q, w] = await db.io(() =>
    db.kv.getMany<[UsageValue, RateValue]>([usageKey(db, u), rateKey(db, u)])
  );
  return { q, w };
}

/** Handles and bytes from the entries read, counting the user's heads when unknown. */
async function countsOf(
  db: KvIo,
  u: Deno.KvKeyPart,
  read: UsageRead,
): Promise<{ h: number; b: number }> {
  const v = read.q.value;
  if (v) return v;
  let h = 0, b = 0;
  for (const row of await db.range<Head>({ prefix: [...db.keys.p, "u", u, "h"] })) {
    h++;
    b += row.value.z;
  }
  return { h, b };
}

/** The usage of `u` as of `now` (nothing is written). */
export async function usageOf(db: KvIo, u: Deno.KvKeyPart, now: number): Promise<Usage> {
  const read = await readUsageEntries(db, u);
  const { h, b } = await countsOf(db, u, read);
  const w = read.w.value;
  return { handles: h, bytes: b, writesThisMinute: w ? writesAt(w.m, w.w, now) : 0 };
}

/**
 * Checks a write of `delta` against `quota` (throwing `QuotaExceeded`) and
 * returns what its commit adds: checks of both entries read, the new usage
 * and, when `count`, the write counted in the current minute.
 */
export async function planUsage(
  db: KvIo,
  u: Deno.KvKeyPart,
  read: UsageRead,
  quota: QuotaLimits | undefined,
  delta: UsageDelta,
  now: number,
  count = true,
): Promise<(op: Deno.AtomicOperation) => void> {
  const { h, b } = await countsOf(db, u, read);
  const minute = Math.floor(now / MINUTE_MS);
  const rate = read.w.value;
  const writes = rate ? writesAt(rate.m, rate.w, now) : 0;
  if (quota) checkQuota(quota, { handles: h, bytes: b, writesThisMinute: writes }, delta, now);
  return (op) => {
    op.check(read.q).set(usageKey(db, u), { h: h + delta.handles, b: b + delta.bytes });
    if (count) {
      op.check(read.w).set(rateKey(db, u), { m: minute, w: writes + 1 }, {
        expireIn: 2 * MINUTE_MS,
      });
    }
  };
}
