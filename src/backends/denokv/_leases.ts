/**
 * Leases in Deno KV (private to the package): one entry a lease, which Deno
 * KV expires once it lapses; taken alone or inside a write's commit.
 *
 * @module
 */

import type { LeaseOutcome, LeaseRecord, WriteContext } from "../../backend.ts";
import { AGAIN, optimistic } from "../_retry.ts";
import { GET_MANY_MAX } from "./_feed.ts";
import type { KvIo } from "./_io.ts";
import type { Keys } from "./_keys.ts";

/** The lease entry a write reads when it takes `ctx.lease` (`null`: none asked). */
export function leaseEntry(
  db: KvIo,
  user: string,
  handle: string,
  ctx: WriteContext,
): Promise<Deno.KvEntryMaybe<LeaseRecord> | null> {
  if (!ctx.lease) return Promise.resolve(null);
  return db.get<LeaseRecord>(db.keys.lease(user, handle));
}

/**
 * Adds `ctx.lease` to a write's commit when it can be taken (the rule of
 * {@link acquireLease}, checked against the entry `lz` read
 * before), and answers its outcome; `undefined` when none was asked.
 */
export function takeLease(
  keys: Keys,
  op: Deno.AtomicOperation,
  user: string,
  handle: string,
  lz: Deno.KvEntryMaybe<LeaseRecord> | null,
  ctx: WriteContext,
): LeaseOutcome | undefined {
  const lease = ctx.lease;
  if (!lease || !lz) return undefined;
  const l = lz.value;
  // Checked either way, so the answer is the lease as the write committed it.
  op.check(lz);
  if (l && l.holder !== lease.holder && l.expiresAt > ctx.now) {
    return { acquired: false, lease: { holder: l.holder, expiresAt: l.expiresAt } };
  }
  const value: LeaseRecord = { holder: lease.holder, expiresAt: lease.expiresAt };
  op.set(keys.lease(user, handle), value, {
    expireIn: Math.max(1, Math.round(value.expiresAt - ctx.now)),
  });
  return { acquired: true, lease: { ...value } };
}

/** {@inheritDoc LeasePrimitives.acquire} */
export async function acquireLease(
  db: KvIo,
  user: string,
  handle: string,
  lease: LeaseRecord,
  now: number,
): Promise<LeaseOutcome> {
  const key = db.keys.lease(user, handle);
  const value: LeaseRecord = { holder: lease.holder, expiresAt: lease.expiresAt };
  return await optimistic(async () => {
    const cur = await db.get<LeaseRecord>(key);
    const l = cur.value;
    if (l && l.holder !== value.holder && l.expiresAt > now) {
      return { acquired: false, lease: { holder: l.holder, expiresAt: l.expiresAt } };
    }
    const res = await db.commit((op) => {
      op.check(cur).set(key, value, { expireIn: Math.max(1, Math.round(value.expiresAt - now)) });
    });
    if (res.ok) return { acquired: true, lease: { ...value } };
    return AGAIN;
  }, db.contended(handle));
}

/** {@inheritDoc LeasePrimitives.release} */
export async function releaseLease(
  db: KvIo,
  user: string,
  handle: string,
  holder: string,
  now: number,
): Promise<boolean> {
  const key = db.keys.lease(user, handle);
  return await optimistic(async () => {
    const cur = await db.get<LeaseRecord>(key);
    if (cur.value?.holder !== holder) return false;
    const res = await db.commit((op) => op.check(cur).delete(key));
    if (res.ok) return cur.value.expiresAt > now;
    return AGAIN;
  }, db.contended(handle));
}

/** {@inheritDoc LeasePrimitives.of} */
export async function leasesOf(
  db: KvIo,
  user: string,
  handles: readonly string[],
  now: number,
): Promise<Map<string, LeaseRecord>> {
  const batches: string[][] = [];
  for (let i = 0; i < handles.length; i += GET_MANY_MAX) {
    batches.push(handles.slice(i, i + GET_MANY_MAX));
  }
  const out = new Map<string, LeaseRecord>();
  await Promise.all(batches.map(async (batch) => {
    const keys = batch.map((h) => db.keys.lease(user, h));
    const rows = await db.io(() => db.kv.getMany<LeaseRecord[]>(keys));
    rows.forEach(({ value: l }, i) => {
      if (l && l.expiresAt > now) {
        out.set(batch[i]!, { holder: l.holder, expiresAt: l.expiresAt });
      }
    });
  }));
  return out;
}
