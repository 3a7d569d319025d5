/**
 * The users' wrapped data keys on Redis (SPEC 9.2), standalone and Cluster:
 * `P{T}:k`, a string holding the JSON `[keyId, wrapped]`, in the user's hash
 * slot under its tag, so that erase's scan of `P{T}:*` deletes it with the
 * user's other keys (see `_erase.ts`). Creating and rewrapping are one
 * script each (atomic on the key); listing scans every primary for
 * `P{*}:k` and orders the users by code unit.
 *
 * @module
 */

import type * as B from "../../backend.ts";
import { decodeName } from "./_codec.ts";
import type { Connection } from "./_connection.ts";
import type { KeySpace } from "./_keys.ts";
import { script } from "./_prelude.ts";

/**
 * Stores ARGV[1] at KEYS[1] unless a value is there. Replies `{stored, value}`:
 * whether it stored, and the value there after the call.
 */
const CREATE = script(`
local v = redis.call('GET', KEYS[1])
if v then return {0, v} end
redis.call('SET', KEYS[1], ARGV[1])
return {1, ARGV[1]}
`);

/** Replaces KEYS[1] by ARGV[2] when it holds ARGV[1]; replies 1 when it did. */
const REWRAP = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
`);

/** Deletes KEYS[1] (a script, so that the replica wait follows it); replies how many went. */
const DELETE = script(`return redis.call('DEL', KEYS[1])`);

/** The stored text of a key. */
function textOf(key: B.StoredKey): string {
  return JSON.stringify([key.keyId, key.wrapped]);
}

/** The key a stored text holds. */
function keyOf(text: string): B.StoredKey {
  const [keyId, wrapped] = JSON.parse(text) as [string, string];
  return { keyId, wrapped };
}

/** The data key primitives of the Redis backend. */
export class RedisDataKeys implements B.KeyPrimitives {
  readonly #conn: Connection;
  readonly #k: KeySpace;
  /** Matches `P{T}:k`, capturing the encoded user `T`. */
  readonly #dataKey: RegExp;

  /**
   * @param conn The backend's connection.
   * @param keys Its key names.
   */
  constructor(conn: Connection, keys: KeySpace) {
    this.#conn = conn;
    this.#k = keys;
    this.#dataKey = keys.nameRegExp((p) => p + "\\{([^}]*)\\}:k");
  }

  /** `P{T}:k`, the data key of `user`. */
  #key(user: string): string {
    return `${this.#k.base(user)}k`;
  }

  /** {@inheritDoc KeyPrimitives.get} */
  async get(user: string): Promise<B.StoredKey | null> {
    const key = this.#key(user);
    const text = await this.#conn.cmd(() => this.#conn.client.get(key));
    return text === null ? null : keyOf(text);
  }

  /** {@inheritDoc KeyPrimitives.create} */
  async create(user: string, key: B.StoredKey, _now: number): Promise<B.StoredKey> {
    const reply = await this.#conn.run(
      CREATE,
      [this.#key(user)],
      [textOf(key)],
      (r) => Number((r as unknown[])[0]) === 1,
    ) as [number, string];
    return keyOf(String(reply[1]));
  }

  /** {@inheritDoc KeyPrimitives.rewrap} */
  async rewrap(user: string, from: B.StoredKey, to: B.StoredKey): Promise<boolean> {
    const args = [textOf(from), textOf(to)];
    const reply = await this.#conn.run(REWRAP, [this.#key(user)], args, (r) => Number(r) === 1);
    return Number(reply) === 1;
  }

  /** {@inheritDoc KeyPrimitives.delete} */
  async delete(user: string): Promise<boolean> {
    const reply = await this.#conn.run(DELETE, [this.#key(user)], [], (r) => Number(r) === 1);
    return Number(reply) === 1;
  }

  /**
   * {@inheritDoc KeyPrimitives.list}
   *
   * Each page scans every primary for the data keys (an administrative
   * call, `keys rotate`), then reads the page's keys; a key deleted between
   * the scan and the read is skipped and the next user read in its place.
   */
  async list(
    query: { after?: string; limit: number },
  ): Promise<{ user: string; key: B.StoredKey }[]> {
    const { after, limit } = query;
    const users: string[] = [];
    for (const key of await this.#conn.scanKeys(this.#k.pattern("k"))) {
      const m = this.#dataKey.exec(key);
      if (!m) continue;
      let user: string;
      try {
        user = decodeName(m[1]!);
      } catch {
        continue; // not a name this backend encoded
      }
      // Only a key named exactly as this user's is one (another text decoding alike is not).
      if (this.#key(user) === key && (after === undefined || user > after)) users.push(user);
    }
    users.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const out: { user: string; key: B.StoredKey }[] = [];
    const c = this.#conn.client;
    for (let i = 0; i < users.length && out.length < limit; i += limit) {
      const batch = users.slice(i, i + limit);
      const texts = await this.#conn.cmd(() => Promise.all(batch.map((u) => c.get(this.#key(u)))));
      batch.forEach((user, n) => {
        const text = texts[n];
        if (text != null && out.length < limit) out.push({ user, key: keyOf(text) });
      });
    }
    return out;
  }
}
