/**
 * Per-user usage on PostgreSQL (quotas): a `usage` table of one row per
 * user, kept right by a trigger on `handles` whoever writes (with or without
 * quotas, an import, a sweep, the trash, an older release), and checked
 * inside the write's own transaction.
 *
 * - A row exists only for users whose usage a quota-enforcing write needed;
 *   the trigger updates rows that exist and costs one index probe otherwise.
 * - A quota-enforcing write first takes a transaction-scoped advisory lock
 *   of its user, so those writes of one user run one at a time; it writes,
 *   reads the row (rebuilding it from the records when absent) and checks
 *   the usage before it. A write without quotas whose trigger finds no row
 *   takes the same lock shared and looks again: it never commits a change
 *   that a rebuild running beside it missed.
 * - The table, function and trigger are made by their own step, independent
 *   of the schema number, each time a backend initializes; when the trigger
 *   was missing every row is dropped, to be rebuilt on demand.
 *
 * @module
 */

import type { Queryable } from "./_pool.ts";
import type { Usage, WriteContext } from "../../backend.ts";
import { checkQuota, MINUTE_MS, type UsageDelta, writesAt } from "../_quota.ts";

/** First half of the advisory lock key of a user's usage ("mcqu"). */
const USAGE_LOCK_CLASS = 0x6d637175;

/**
 * Creates the `usage` table, its trigger function and trigger when absent.
 *
 * @param tx The initializing transaction (under the migration lock).
 * @param s The quoted schema name.
 */
export async function prepareUsage(tx: Queryable, s: string): Promise<void> {
  const [row] = await tx.unsafe(
    `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'usage_track'
       AND tgrelid = to_regclass($1::text))`,
    [`${s}.handles`],
  ).values();
  if (row?.[0] === true) return;
  await tx.unsafe(
    `CREATE TABLE IF NOT EXISTS ${s}.usage (
       user_id text COLLATE "C" PRIMARY KEY,
       handles bigint NOT NULL,
       bytes   bigint NOT NULL,
       minute  bigint NOT NULL,
       writes  bigint NOT NULL
     )`,
  );
  // Adds to a user's usage row; when the user has none, waits for a rebuild
  // beside it (the shared lock) and looks again.
  const change = (handles: string, bytes: string, user: string) =>
    `UPDATE ${s}.usage SET handles = handles + ${handles}, bytes = bytes + ${bytes}
       WHERE user_id = ${user};
     IF NOT FOUND THEN
       PERFORM pg_advisory_xact_lock_shared(${USAGE_LOCK_CLASS}, hashtext(${user}));
       UPDATE ${s}.usage SET handles = handles + ${handles}, bytes = bytes + ${bytes}
         WHERE user_id = ${user};
     END IF;`;
  await tx.unsafe(
    `CREATE OR REPLACE FUNCTION ${s}.usage_track() RETURNS trigger LANGUAGE plpgsql AS $fn$
     DECLARE
       was boolean := TG_OP <> 'INSERT' AND OLD.trashed_until IS NULL;
       now_live boolean := TG_OP <> 'DELETE' AND NEW.trashed_until IS NULL;
       d bigint;
     BEGIN
       IF was AND now_live AND OLD.user_id = NEW.user_id THEN
         d := octet_length(NEW.state) - octet_length(OLD.state);
         IF d <> 0 THEN
           ${change("0", "d", "NEW.user_id")}
         END IF;
         RETURN NULL;
       END IF;
       IF was THEN
         ${change("-1", "-octet_length(OLD.state)", "OLD.user_id")}
       END IF;
       IF now_live THEN
         ${change("1", "octet_length(NEW.state)", "NEW.user_id")}
       END IF;
       RETURN NULL;
     END
     $fn$`,
  );
  await tx.unsafe(
    `CREATE OR REPLACE TRIGGER usage_track AFTER INSERT OR UPDATE OR DELETE ON ${s}.handles
     FOR EACH ROW EXECUTE FUNCTION ${s}.usage_track()`,
  );
  // Rows kept while the trigger was missing may be wrong: rebuild them on demand.
  await tx.unsafe(`DELETE FROM ${s}.usage`);
}

/** The usage statements of schema `s` (quoted). */
export function usageStatements(s: string) {
  return {
    lock: `SELECT pg_advisory_xact_lock(${USAGE_LOCK_CLASS}, hashtext($1::text))`,
    get: `SELECT handles, bytes, minute, writes FROM ${s}.usage WHERE user_id = $1`,
    // What the row would hold, from the records (trashed rows do not count).
    compute: `SELECT count(*), coalesce(sum(octet_length(state)), 0), 0, 0 FROM ${s}.handles
              WHERE user_id = $1 AND trashed_until IS NULL`,
    build: `INSERT INTO ${s}.usage (user_id, handles, bytes, minute, writes)
            SELECT $1, count(*), coalesce(sum(octet_length(state)), 0), 0, 0 FROM ${s}.handles
            WHERE user_id = $1 AND trashed_until IS NULL
            ON CONFLICT (user_id) DO NOTHING
            RETURNING handles, bytes, minute, writes`,
    count: `UPDATE ${s}.usage
            SET writes = CASE WHEN minute = $2::bigint THEN writes + 1 ELSE 1 END, minute = $2::bigint
            WHERE user_id = $1`,
    size: `SELECT octet_length(state) FROM ${s}.handles
           WHERE user_id = $1 AND handle = $2 AND trashed_until IS NULL FOR UPDATE`,
  };
}

/** The SQL texts of usage, by name. */
export type UsageStatements = ReturnType<typeof usageStatements>;

/** A usage row as values: handles, bytes, minute, writes. */
function usageOf(row: unknown[], now: number): Usage {
  return {
    handles: Number(row[0]),
    bytes: Number(row[1]),
    writesThisMinute: writesAt(Number(row[2]), Number(row[3]), now),
  };
}

/**
 * The user's usage as of `now`: its row, or what a rebuild would put there
 * (nothing is written).
 */
export async function readUsage(
  sql: Queryable,
  q: UsageStatements,
  user: string,
  now: number,
): Promise<Usage> {
  const [row] = await sql.unsafe(q.get, [user]).values();
  if (row) return usageOf(row, now);
  const [built] = await sql.unsafe(q.compute, [user]).values();
  return usageOf(built!, now);
}

/**
 * After a write of `delta` in `tx` (whose trigger counted it), under the
 * user's advisory lock taken first: checks `ctx.quota` against the usage
 * before the write, throwing `QuotaExceeded` (the transaction rolls back),
 * and counts the write.
 */
export async function applyUsage(
  tx: Queryable,
  q: UsageStatements,
  user: string,
  ctx: WriteContext,
  delta: UsageDelta,
): Promise<void> {
  const quota = ctx.quota!;
  let [row] = await tx.unsafe(q.get, [user]).values();
  // The lock keeps every other rebuild of this user out: the insert cannot meet a row.
  row ??= (await tx.unsafe(q.build, [user]).values())[0];
  const after = usageOf(row!, ctx.now);
  checkQuota(
    quota,
    {
      handles: after.handles - delta.handles,
      bytes: after.bytes - delta.bytes,
      writesThisMinute: after.writesThisMinute,
    },
    delta,
    ctx.now,
  );
  await tx.unsafe(q.count, [user, Math.floor(ctx.now / MINUTE_MS)]);
}
