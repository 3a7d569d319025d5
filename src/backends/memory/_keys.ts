/**
 * The users' wrapped data keys on the memory backend (encryption at rest,
 * SPEC 9.2): one map entry a user, each call one synchronous step.
 *
 * @module
 */

import type * as B from "../../backend.ts";

/**
 * The key primitives of a memory backend.
 *
 * @returns The primitives over a map of their own.
 */
export function memoryKeys(): B.KeyPrimitives {
  const keys = new Map<string, B.StoredKey>();
  const same = (a: B.StoredKey, b: B.StoredKey) => a.keyId === b.keyId && a.wrapped === b.wrapped;
  return {
    get: (user) => Promise.resolve(copy(keys.get(user))),
    create: (user, key) => {
      if (!keys.has(user)) keys.set(user, { keyId: key.keyId, wrapped: key.wrapped });
      return Promise.resolve(copy(keys.get(user))!);
    },
    rewrap: (user, from, to) => {
      const stored = keys.get(user);
      if (!stored || !same(stored, from)) return Promise.resolve(false);
      keys.set(user, { keyId: to.keyId, wrapped: to.wrapped });
      return Promise.resolve(true);
    },
    delete: (user) => Promise.resolve(keys.delete(user)),
    list: ({ after, limit }) => {
      const users = [...keys.keys()].filter((u) => after === undefined || u > after).sort();
      return Promise.resolve(
        users.slice(0, limit).map((user) => ({ user, key: copy(keys.get(user))! })),
      );
    },
  };
}

function copy(key: B.StoredKey | undefined): B.StoredKey | null {
  return key ? { keyId: key.keyId, wrapped: key.wrapped } : null;
}
