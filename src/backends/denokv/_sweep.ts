/**
 * The Deno KV backend's `sweep`: expired records, idempotency records past
 * their expiry, trash past its undo window, the chunk sets of crashed
 * writers, and lapsed leases.
 *
 * @module
 */

import type { LeaseRecord } from "../../backend.ts";
import { AGAIN, backoff, optimistic } from "../_retry.ts";
import { afterCommit, collect } from "./_bodies.ts";
import type { Head, IdemValue, IndexEntry, Intent, Trashed } from "./_codec.ts";
import { dropRecord } from "./_heads.ts";
import { dropIdem } from "./_idempotency.ts";
import type { KvIo } from "./_io.ts";
import { samePart } from "./_keys.ts";
import { staleUsage } from "./_usage.ts";

/** Commits `sweep` tries per record before it leaves one that keeps changing to the next sweep. */
const SWEEP_ATTEMPTS = 10;

/** See `Backend.sweep`; `orphanAgeMs` is the age of a crashed writer's chunk set. */
export async function sweep(
  db: KvIo,
  orphanAgeMs: number,
  user: string | null,
  expiredAtOrBefore: number,
  now: number,
): Promise<number> {
  const n = db.keys.p.length;
  const u = user === null ? null : db.keys.user(user);
  let count = 0;
  // 1. Expired records.
  if (u !== null) {
    const rows = await db.range<IndexEntry>({ prefix: [...db.keys.p, "u", u, "i"] });
    for (const row of rows) {
      const e = row.value.e;
      if (e !== null && e <= expiredAtOrBefore) {
        if (await reclaim(db, u, row.key[n + 4]!, expiredAtOrBefore, null)) count++;
      }
    }
  } else {
    const due = await db.range<number>(
      { prefix: [...db.keys.p, "xh"] },
      { batchSize: 500 },
      (e) => (e.key[n + 1] as number) > expiredAtOrBefore,
    );
    for (const row of due) {
      if (await reclaim(db, row.key[n + 2]!, row.key[n + 3]!, expiredAtOrBefore, row)) count++;
    }
  }
  // 2. Idempotency records past their expiry.
  const idems = u !== null
    ? (await db.range<IdemValue>({ prefix: [...db.keys.p, "u", u, "k"] }))
      .filter((e) => e.value.t <= now)
      .map((e) => ({ key: e.key, t: e.value.t }))
    : (await db.range<number>(
      { prefix: [...db.keys.p, "xk"] },
      { batchSize: 500 },
      (e) => (e.key[n + 1] as number) > now,
    )).map((e) => ({
      key: [...db.keys.p, "u", e.key[n + 2]!, "k", e.key[n + 3]!, e.key[n + 4]!],
      t: e.key[n + 1] as number,
    }));
  for (const { key, t } of idems) await dropIdem(db, key, t, now);
  // 3. Trashed records past their undo window, with their chunks and changelogs.
  if (u !== null) {
    const rows = await db.range<Trashed>({ prefix: [...db.keys.p, "u", u, "t"] });
    for (const row of rows) {
      if (row.value.t <= now) await purge(db, u, row.key[n + 3]!, now, null);
    }
  } else {
    const due = await db.range<number>(
      { prefix: [...db.keys.p, "xt"] },
      { batchSize: 500 },
      (e) => (e.key[n + 1] as number) > now,
    );
    for (const row of due) await purge(db, row.key[n + 2]!, row.key[n + 3]!, now, row);
  }
  // 4. Chunk sets of writers that crashed before their head swap, and
  //    collections (chunks, changelog runs) a commit handed over.
  const cutoff = Date.now() - orphanAgeMs;
  const intents = await db.range<Intent>(
    { prefix: [...db.keys.p, "xw"] },
    { batchSize: 500 },
    (e) => (e.key[n + 1] as number) > cutoff,
  );
  for (const e of intents) {
    if (u !== null && !samePart(e.key[n + 2]!, u)) continue;
    await collect(db, e.key, e.versionstamp, e.value);
  }
  // 5. Lapsed leases of one user (every lease key also expires by itself).
  if (u !== null) {
    const rows = await db.range<LeaseRecord>({ prefix: [...db.keys.p, "u", u, "l"] });
    for (const row of rows) {
      if (row.value.expiresAt <= now) await db.commit((op) => op.check(row).delete(row.key));
    }
  }
  return count;
}

/** Deletes one record if it is still expired at `before`; drops a stale expiry-index row. */
export async function reclaim(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  before: number,
  dueRow: Deno.KvEntry<number> | null,
): Promise<boolean> {
  return await optimistic(async (attempt) => {
    const head = await db.get<Head>(db.keys.head(u, h));
    const old = head.value;
    if (!old || old.e === null || old.e > before) {
      if (dueRow && old?.e !== dueRow.key[db.keys.p.length + 1]) {
        await db.commit((op) => {
          op.check(head).check(dueRow).delete(dueRow.key);
        });
      }
      return false;
    }
    let after: Deno.KvKey[] = [];
    const res = await db.commit((op) => {
      op.check(head);
      after = dropRecord(db, op, u, h, old, true);
      staleUsage(db, op, u);
    });
    if (res.ok) {
      await afterCommit(db, after, res.versionstamp);
      return true;
    }
    return attempt + 1 < SWEEP_ATTEMPTS ? AGAIN : false;
  }, backoff);
}

/** Purges one trashed record if its undo window ended by `now`; drops a stale trash-index row. */
export async function purge(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  now: number,
  dueRow: Deno.KvEntry<number> | null,
): Promise<void> {
  await optimistic(async (attempt) => {
    const trash = await db.get<Trashed>(db.keys.trash(u, h));
    const t = trash.value;
    if (!t || t.t > now) {
      if (dueRow && t?.t !== dueRow.key[db.keys.p.length + 1]) {
        await db.commit((op) => {
          op.check(trash).check(dueRow).delete(dueRow.key);
        });
      }
      return;
    }
    let after: Deno.KvKey[] = [];
    const res = await db.commit((op) => {
      op.check(trash);
      op.delete(db.keys.trash(u, h));
      op.delete(db.keys.trashExpiry(t.t, u, h));
      after = dropRecord(db, op, u, h, t.h, false);
    });
    if (res.ok) {
      await afterCommit(db, after, res.versionstamp);
      return;
    }
    return attempt + 1 < SWEEP_ATTEMPTS ? AGAIN : undefined;
  }, backoff);
}
