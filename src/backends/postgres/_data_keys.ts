/**
 * The users' wrapped data keys on PostgreSQL (SPEC 9.2): one row per user
 * in `data_keys`, keyed by the user. Creating is an `INSERT … ON CONFLICT
 * DO NOTHING`, then, when another process stored one first, a `SELECT` in a
 * new statement (whose snapshot sees that row committed); a rewrap is an
 * `UPDATE` that matches the key read; erase deletes the row with the
 * user's other rows (see `ERASED_TABLES` in `_erase.ts`).
 *
 * @module
 */

import type * as B from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import type { Pool, Queryable } from "./_pool.ts";

/** Times `create` tries again when the row it saw vanished (a delete between its two statements). */
const CREATE_TRIES = 8;

/**
 * Creates the `data_keys` table when absent (on a new or an existing
 * schema alike).
 *
 * @param tx The initializing transaction (under the migration lock).
 * @param s The quoted schema name.
 */
export async function prepareDataKeys(tx: Queryable, s: string): Promise<void> {
  await tx.unsafe(
    `CREATE TABLE IF NOT EXISTS ${s}.data_keys (
       user_id    text COLLATE "C" PRIMARY KEY,
       key_id     text NOT NULL,
       wrapped    text NOT NULL,
       created_at bigint NOT NULL
     )`,
  );
}

/** The statements of schema `s` (quoted). */
function statements(s: string) {
  const t = `${s}.data_keys`;
  return {
    get: `SELECT key_id, wrapped FROM ${t} WHERE user_id = $1::text`,
    insert: `INSERT INTO ${t} (user_id, key_id, wrapped, created_at)
             VALUES ($1::text, $2::text, $3::text, $4::bigint)
             ON CONFLICT (user_id) DO NOTHING RETURNING key_id, wrapped`,
    rewrap: `UPDATE ${t} SET key_id = $4::text, wrapped = $5::text
             WHERE user_id = $1::text AND key_id = $2::text AND wrapped = $3::text`,
    delete: `DELETE FROM ${t} WHERE user_id = $1::text`,
    list: `SELECT user_id, key_id, wrapped FROM ${t}
           WHERE $1::text IS NULL OR user_id > $1::text ORDER BY user_id LIMIT $2::bigint`,
  };
}

/** A stored key from a row `(key_id, wrapped)`. */
function keyOf(row: readonly unknown[]): B.StoredKey {
  return { keyId: String(row[0]), wrapped: String(row[1]) };
}

/**
 * The key primitives of a PostgreSQL backend.
 *
 * @param pool The backend's pool.
 * @param s The quoted schema name.
 * @returns The primitives.
 */
export function postgresKeys(pool: Pool, s: string): B.KeyPrimitives {
  const q = statements(s);
  const get = (sql: Queryable, user: string) =>
    sql.unsafe(q.get, [user]).values().then(([row]) => (row ? keyOf(row) : null));
  return {
    get: (user) => pool.read((sql) => get(sql, user)),
    create: (user, key, now) =>
      pool.op(async (sql) => {
        for (let i = 0; i < CREATE_TRIES; i++) {
          const [row] = await sql.unsafe(q.insert, [user, key.keyId, key.wrapped, now]).values();
          if (row) return keyOf(row);
          // A new statement: its snapshot sees the row that won the conflict.
          const stored = await get(sql, user);
          if (stored) return stored;
        }
        throw new BackendError(
          "The user's data key was created and deleted again repeatedly while storing it; try again.",
        );
      }),
    rewrap: (user, from, to) =>
      pool.op(async (sql) => {
        const res = await sql.unsafe(q.rewrap, [
          user,
          from.keyId,
          from.wrapped,
          to.keyId,
          to.wrapped,
        ]);
        return res.count === 1;
      }),
    delete: (user) => pool.op(async (sql) => (await sql.unsafe(q.delete, [user])).count > 0),
    list: ({ after, limit }) =>
      pool.read(async (sql) => {
        const rows = await sql.unsafe(q.list, [after ?? null, limit]).values();
        return rows.map((r) => ({ user: String(r[0]), key: keyOf([r[1], r[2]]) }));
      }),
  };
}
