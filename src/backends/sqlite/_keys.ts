/**
 * The users' wrapped data keys on SQLite (encryption at rest, SPEC 9.2):
 * the `data_keys` table, one row a user. `create` and `rewrap` run in a
 * transaction of the connection's write queue, so two processes creating a
 * user's first key agree on one.
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type * as B from "../../backend.ts";
import type { Connection } from "./_connection.ts";

/** The statements of one connection, prepared on first use. */
class KeyStatements {
  readonly get: StatementSync;
  readonly insert: StatementSync;
  readonly rewrap: StatementSync;
  readonly delete: StatementSync;
  readonly list: StatementSync;

  constructor(db: DatabaseSync) {
    this.get = db.prepare("SELECT key_id, wrapped FROM data_keys WHERE user = ?");
    this.insert = db.prepare(
      "INSERT INTO data_keys (user, key_id, wrapped, created_ms) VALUES (?, ?, ?, ?) " +
        "ON CONFLICT (user) DO NOTHING",
    );
    this.rewrap = db.prepare(
      "UPDATE data_keys SET key_id = ?, wrapped = ? WHERE user = ? AND key_id = ? AND wrapped = ?",
    );
    this.delete = db.prepare("DELETE FROM data_keys WHERE user = ?");
    this.list = db.prepare(
      "SELECT user, key_id, wrapped FROM data_keys WHERE user > ? ORDER BY user LIMIT ?",
    );
  }
}

function keyOf(row: Record<string, unknown> | undefined): B.StoredKey | null {
  return row ? { keyId: row.key_id as string, wrapped: row.wrapped as string } : null;
}

/**
 * The key primitives of a SQLite backend.
 *
 * @param open The backend's connection and write queue (read at each call:
 *   the backend makes them after its fields).
 * @returns The primitives.
 */
export function sqliteKeys(open: () => { db: DatabaseSync; c: Connection }): B.KeyPrimitives {
  let q: KeyStatements | undefined;
  const statements = () => {
    const { db, c } = open();
    return { s: q ??= new KeyStatements(db), c };
  };
  return {
    get: (user) => {
      const { s, c } = statements();
      return c.run(() => keyOf(s.get.get(user)));
    },
    create: (user, key, now) => {
      const { s, c } = statements();
      return c.write(() => {
        s.insert.run(user, key.keyId, key.wrapped, now);
        return keyOf(s.get.get(user))!;
      });
    },
    rewrap: (user, from, to) => {
      const { s, c } = statements();
      return c.write(() =>
        Number(s.rewrap.run(to.keyId, to.wrapped, user, from.keyId, from.wrapped).changes) === 1
      );
    },
    delete: (user) => {
      const { s, c } = statements();
      return c.write(() => Number(s.delete.run(user).changes) === 1);
    },
    list: ({ after, limit }) => {
      const { s, c } = statements();
      return c.run(() =>
        s.list.all(after ?? "", limit).map((row) => ({
          user: row.user as string,
          key: keyOf(row)!,
        }))
      );
    },
  };
}
