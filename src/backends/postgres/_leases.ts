/**
 * Leases in PostgreSQL (private to the package): one row a lease, taken by
 * an upsert that keeps another holder's lease in force.
 *
 * @module
 */

import type { LeaseOutcome, LeaseRecord } from "../../backend.ts";
import { AGAIN, optimistic } from "../_retry.ts";
import type { Pool } from "./_pool.ts";
import { leaseOf } from "./_rows.ts";
import type { Statements } from "./_statements.ts";

export function acquireLease(
  pool: Pool,
  q: Statements,
  user: string,
  handle: string,
  lease: LeaseRecord,
  now: number,
): Promise<LeaseOutcome> {
  const params = [user, handle, lease.holder, lease.expiresAt, now];
  return pool.op((sql) =>
    optimistic(async () => {
      const [taken] = await sql.unsafe(q.acquire, params).values();
      if (taken) return { acquired: true, lease: leaseOf(taken) };
      // Another holder's lease was in force. A new statement sees it even
      // when it was committed after the upsert's snapshot; when it has been
      // released or lapsed since, the upsert is tried again at once.
      const [held] = await sql.unsafe(q.leaseOf, [user, handle]).values();
      if (held && Number(held[1]) > now) return { acquired: false, lease: leaseOf(held) };
      return AGAIN;
    }, () => {})
  );
}

/** {@inheritDoc LeasePrimitives.release} */
export function releaseLease(
  pool: Pool,
  q: Statements,
  user: string,
  handle: string,
  holder: string,
  now: number,
): Promise<boolean> {
  return pool.op(async (sql) => {
    const [row] = await sql.unsafe(q.release, [user, handle, holder, now]).values();
    return row?.[0] === true;
  });
}

/** {@inheritDoc LeasePrimitives.of} */
export function leasesOf(
  pool: Pool,
  q: Statements,
  user: string,
  handles: readonly string[],
  now: number,
): Promise<Map<string, LeaseRecord>> {
  return pool.read(async (sql) => {
    const out = new Map<string, LeaseRecord>();
    if (handles.length === 0) return out;
    const rows = await sql.unsafe(q.leases, [user, JSON.stringify(handles), now]).values();
    for (const r of rows) out.set(String(r[0]), leaseOf(r.slice(1)));
    return out;
  });
}
