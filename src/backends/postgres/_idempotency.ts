/**
 * The PostgreSQL backend's idempotency records: the claim, the replay and
 * the result, in the transaction of the write they remember.
 *
 * @module
 */

import type { HandleRecord, Replayed, WriteContext } from "../../backend.ts";
import type { Pool, Queryable } from "./_pool.ts";
import type { Statements } from "./_statements.ts";

/**
 * Runs a write that carries an idempotency key, in one transaction: first
 * the claim on `(user, scope, key)` — an insert that waits for any other
 * transaction holding the same key, so a retry racing its first attempt
 * sees the first attempt's result — then the write, then its result.
 *
 * @param pool The backend's pool.
 * @param q The backend's statements.
 * @param user The user.
 * @param ctx The write's context, with its claim.
 * @param fn The write; `remember` stores its result.
 * @returns What `fn` returned, or the replay of the first attempt.
 */
export function idempotent<T>(
  pool: Pool,
  q: Statements,
  user: string,
  ctx: WriteContext,
  fn: (tx: Queryable, remember: (r: HandleRecord | null) => Promise<void>) => Promise<T>,
): Promise<T | Replayed> {
  const c = ctx.idempotency!;
  const key = [user, c.scope, c.key];
  return pool.op((sql) =>
    pool.begin<T | Replayed>(sql, async (tx) => {
      const claim = await tx.unsafe(q.claim, [...key, c.fingerprint, c.expiresAt, ctx.now]);
      if (claim.count === 0) {
        const [row] = await tx.unsafe(q.replay, key).values();
        if (!row) throw new Error("The idempotency record vanished while it was read.");
        const result = row[1] == null ? null : JSON.parse(String(row[1])) as HandleRecord;
        return { replayed: true, fingerprint: String(row[0]), result };
      }
      return await fn(tx, async (r) => {
        await tx.unsafe(q.remember, [
          ...key,
          r === null ? null : JSON.stringify(r),
          r === null ? null : r.handle,
        ]);
      });
    })
  );
}
