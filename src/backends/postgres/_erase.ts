/**
 * Erasing a user on PostgreSQL (SPEC 9.1), in one READ COMMITTED
 * transaction:
 *
 * 1. the user's usage lock (the first lock of every quota-enforcing write,
 *    see `_usage.ts`), so that the lock order stays the one of
 *    `_grants.ts`;
 * 2. every row of the user's records, live, expired and trashed, locked
 *    `FOR UPDATE`: a write of the user in flight commits first, and one that
 *    comes later waits, then finds its row gone and writes nothing;
 * 3. one statement, on a snapshot taken after those locks, deletes the
 *    grants on, to and by the user with the re-shares under them, and the
 *    user's rows of every other table: a write that committed before it is
 *    wholly seen (its record, changelog entry and idempotency record), and a
 *    new record inserted after it begins anew;
 * 4. the usage row (the record deletions' trigger updated it first), and
 *    one notification per erased handle.
 *
 * @module
 */

import type * as B from "../../backend.ts";
import { goneGrants } from "../_erase_sql.ts";
import type { Pool } from "./_pool.ts";
import { payloadOf } from "./_rows.ts";
import { usageStatements } from "./_usage.ts";

/**
 * Every table of the backend's schema that holds users' data, and the
 * column naming the user whose row it is (`null`: the grants table, whose
 * rows {@link goneGrants} picks). A test compares it, with
 * {@link KEPT_TABLES}, with the schema's tables, so a table added fails
 * until erasing knows it.
 */
export const ERASED_TABLES: Readonly<Record<string, string | null>> = {
  handles: "user_id",
  changes: "user_id",
  idempotency: "user_id",
  leases: "user_id",
  usage: "user_id",
  data_keys: "user_id",
  grants: null,
};

/** The tables of the schema that hold no user's data: the schema version. */
export const KEPT_TABLES: readonly string[] = ["meta"];

/** The statements of schema `s` (quoted) notifying `channel`. */
function statements(s: string, channel: string) {
  const gone = goneGrants(`${s}.grants`, (n, type) => `$${n}::${type}`);
  const rest = Object.entries(ERASED_TABLES)
    .filter(([t, column]) => column !== null && t !== "handles" && t !== "usage")
    .map(([t, column], i) => `x${i} AS (DELETE FROM ${s}.${t} WHERE ${column} = $1::text)`);
  return {
    lockUsage: usageStatements(s).lock,
    lockRecords: `SELECT 1 FROM ${s}.handles WHERE user_id = $1::text FOR UPDATE`,
    count: `${gone} SELECT (SELECT count(*) FROM ${s}.handles WHERE user_id = $1::text), ` +
      `(SELECT count(*) FROM gone)`,
    drop: `${gone}, g AS (DELETE FROM ${s}.grants WHERE grant_id IN (SELECT id FROM gone) ` +
      `RETURNING 1), ${rest.join(", ")}, ` +
      `h AS (DELETE FROM ${s}.handles WHERE user_id = $1::text RETURNING handle) ` +
      `SELECT (SELECT count(*) FROM g), (SELECT coalesce(json_agg(handle), '[]') FROM h)::text`,
    dropUsage: `DELETE FROM ${s}.usage WHERE user_id = $1::text`,
    notify: `SELECT pg_notify('${channel}', p) FROM json_array_elements_text($1::text::json) AS p`,
  };
}

/** What erasing needs of a PostgreSQL backend. */
export interface PostgresErasing {
  /** The backend's pool. */
  pool: Pool;
  /** The quoted schema name. */
  s: string;
  /** The change feed's channel. */
  channel: string;
  /** Forgets what the backend remembers of `(user, handle)` (its guesses). */
  forget: (user: string, handle: string) => void;
}

/**
 * The erasure primitives of a PostgreSQL backend.
 *
 * @param open What they run on (read at each call).
 * @returns The primitives.
 */
export function postgresErasure(open: () => PostgresErasing): B.ErasurePrimitives {
  let q: ReturnType<typeof statements> | undefined;
  const setup = () => {
    const o = open();
    return { o, q: q ??= statements(o.s, o.channel) };
  };
  return {
    count: (user) => {
      const { o, q } = setup();
      return o.pool.read(async (sql) => {
        const [row] = await sql.unsafe(q.count, [user]).values();
        return { handles: Number(row?.[0] ?? 0), grants: Number(row?.[1] ?? 0) };
      });
    },
    erase: (user) => {
      const { o, q } = setup();
      return o.pool.op((sql) =>
        o.pool.begin(sql, async (tx) => {
          await tx.unsafe(q.lockUsage, [user]);
          await tx.unsafe(q.lockRecords, [user]);
          const [row] = await tx.unsafe(q.drop, [user]).values();
          await tx.unsafe(q.dropUsage, [user]);
          // As JSON text: the driver's array parsing depends on the client's type parsers.
          const handles = JSON.parse(String(row?.[1] ?? "[]")) as string[];
          if (handles.length > 0) {
            const payloads = [...new Set(handles)].map((h) => payloadOf(user, h));
            await tx.unsafe(q.notify, [JSON.stringify(payloads)]);
          }
          for (const h of handles) o.forget(user, h);
          return { handles: handles.length, grants: Number(row?.[0] ?? 0) };
        })
      );
    },
  };
}
