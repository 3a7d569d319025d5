/**
 * The users' wrapped data keys on Deno KV (SPEC 9.2): one entry
 * `[P, "dk", u]` per user, holding `{ user, keyId, wrapped }` (the name
 * too, since `u` may be a digest). A prefix of their own, not the user's
 * `[P, "u", u]`, so that listing reads only them; erase deletes the entry
 * with the user's others (see `_erase.ts`). Every write is one atomic
 * commit checked on the versionstamp read: `null` for a creation, the
 * entry's for a rewrap or a deletion; a failed check reads again.
 *
 * @module
 */

import type * as B from "../../backend.ts";
import type { KvIo } from "./_io.ts";
import { samePart } from "./_keys.ts";

/** What `[P, "dk", u]` holds. */
interface DataKeyEntry {
  /** The user's name. */
  user: string;
  /** The id of the key-encryption key that wrapped it. */
  keyId: string;
  /** The wrapped key. */
  wrapped: string;
}

/** The data key primitives of the Deno KV backend. */
export class KvDataKeys implements B.KeyPrimitives {
  readonly #db: KvIo;

  /** @param db The backend's KV. */
  constructor(db: KvIo) {
    this.#db = db;
  }

  /** `[P, "dk", u]`, the entry of `user`. */
  #key(user: string): Deno.KvKey {
    return [...this.#db.keys.p, "dk", this.#db.keys.user(user)];
  }

  /** {@inheritDoc KeyPrimitives.get} */
  async get(user: string): Promise<B.StoredKey | null> {
    const e = await this.#db.get<DataKeyEntry>(this.#key(user));
    return e.value === null ? null : keyOf(e.value);
  }

  /** {@inheritDoc KeyPrimitives.create} */
  async create(user: string, key: B.StoredKey, _now: number): Promise<B.StoredKey> {
    const k = this.#key(user);
    const value: DataKeyEntry = { user, keyId: key.keyId, wrapped: key.wrapped };
    const pause = this.#db.contended(`the data key of ${user}`);
    for (let attempt = 0;; attempt++) {
      const e = await this.#db.get<DataKeyEntry>(k);
      if (e.value !== null) return keyOf(e.value);
      const res = await this.#db.commit((op) => {
        op.check({ key: k, versionstamp: null }).set(k, value);
      });
      if (res.ok) return keyOf(value);
      await pause(attempt);
    }
  }

  /** {@inheritDoc KeyPrimitives.rewrap} */
  async rewrap(user: string, from: B.StoredKey, to: B.StoredKey): Promise<boolean> {
    const k = this.#key(user);
    const pause = this.#db.contended(`the data key of ${user}`);
    for (let attempt = 0;; attempt++) {
      const e = await this.#db.get<DataKeyEntry>(k);
      if (e.value === null || e.value.keyId !== from.keyId || e.value.wrapped !== from.wrapped) {
        return false;
      }
      const res = await this.#db.commit((op) => {
        op.check(e).set(k, { user, keyId: to.keyId, wrapped: to.wrapped });
      });
      if (res.ok) return true;
      await pause(attempt);
    }
  }

  /** {@inheritDoc KeyPrimitives.delete} */
  async delete(user: string): Promise<boolean> {
    const k = this.#key(user);
    const pause = this.#db.contended(`the data key of ${user}`);
    for (let attempt = 0;; attempt++) {
      const e = await this.#db.get<DataKeyEntry>(k);
      if (e.versionstamp === null) return false;
      const res = await this.#db.commit((op) => {
        op.check(e).delete(k);
      });
      if (res.ok) return true;
      await pause(attempt);
    }
  }

  /**
   * {@inheritDoc KeyPrimitives.list}
   *
   * Users come in the order of their key parts (a long name's part is its
   * digest); `after` is placed by its own part.
   */
  async list(
    query: { after?: string; limit: number },
  ): Promise<{ user: string; key: B.StoredKey }[]> {
    const { after, limit } = query;
    if (limit <= 0) return [];
    const prefix = [...this.#db.keys.p, "dk"];
    const from = after === undefined ? undefined : this.#db.keys.user(after);
    const entries = await this.#db.range<DataKeyEntry>(
      from === undefined ? { prefix } : { prefix, start: [...prefix, from] },
      { limit: limit + 1 },
    );
    const n = prefix.length;
    return entries
      .filter((e) => from === undefined || !samePart(e.key[n]!, from))
      .slice(0, limit)
      .map((e) => ({ user: e.value.user, key: keyOf(e.value) }));
  }
}

/** The stored key of an entry. */
function keyOf(e: DataKeyEntry): B.StoredKey {
  return { keyId: e.keyId, wrapped: e.wrapped };
}
