/**
 * Erasing a user on the memory backend (SPEC 9.1): every map entry of the
 * user, and the grants on, to and by the user with the re-shares under
 * them, removed in one synchronous step (nothing awaits, so no write of the
 * user lands in between).
 *
 * @module
 */

import type * as B from "../../backend.ts";
import type { Listeners } from "../_shared.ts";

/** The maps of a memory backend that erasing reads and empties, shared, not copied. */
export interface MemoryMaps {
  /** Records by user, then handle. */
  users: Map<string, Map<string, B.HandleRecord>>;
  /** Idempotency records, keyed `[user, scope, key]` as JSON. */
  idem: Map<string, unknown>;
  /** Changelogs, keyed `[user, handle]` as JSON. */
  logs: Map<string, unknown>;
  /** Trashed records with their logs, keyed `[user, handle]` as JSON. */
  trash: Map<string, unknown>;
  /** Leases, keyed `[user, handle]` as JSON. */
  leases: Map<string, unknown>;
  /** Write rates (usage), by user. */
  rates: Map<string, unknown>;
  /** Grants by id. */
  grants: Map<string, B.GrantRecord>;
  /** Grant ids by alias. */
  aliases: Map<string, string>;
  /** The change feed's listeners. */
  listeners: Listeners;
}

/** Whether a map key (a JSON array) starts with `user`. */
function keyOf(user: string, key: string): boolean {
  return (JSON.parse(key) as unknown[])[0] === user;
}

/**
 * The grants erasing `user` removes: on the user's handles, to the user and
 * by the user, then every re-share under those.
 */
function grantsOf(m: MemoryMaps, user: string): Set<string> {
  const ids = new Set<string>();
  for (const g of m.grants.values()) {
    if (g.owner === user || g.to === user || g.by === user) ids.add(g.grant);
  }
  // Until no re-share is added: a re-share may be stored before its parent (an import).
  for (let grew = true; grew;) {
    grew = false;
    for (const g of m.grants.values()) {
      if (!ids.has(g.grant) && g.parent !== null && ids.has(g.parent)) {
        ids.add(g.grant);
        grew = true;
      }
    }
  }
  return ids;
}

/** The handles (live, expired and trashed) of `user`, with repeats when both. */
function handlesOf(m: MemoryMaps, user: string): string[] {
  const live = [...(m.users.get(user)?.keys() ?? [])];
  const trashed = [...m.trash.keys()].filter((k) => keyOf(user, k));
  return [...live, ...trashed.map((k) => (JSON.parse(k) as string[])[1]!)];
}

/**
 * The erasure primitives over a memory backend's maps.
 *
 * @param m The maps.
 * @returns The primitives.
 */
export function memoryErasure(m: MemoryMaps): B.ErasurePrimitives {
  return {
    count: (user) => {
      return Promise.resolve({
        handles: handlesOf(m, user).length,
        grants: grantsOf(m, user).size,
      });
    },
    erase: (user) => {
      const handles = handlesOf(m, user);
      const grants = grantsOf(m, user);
      for (const id of grants) {
        const g = m.grants.get(id)!;
        m.aliases.delete(g.alias);
        m.grants.delete(id);
      }
      m.users.delete(user);
      m.rates.delete(user);
      for (const map of [m.idem, m.logs, m.trash, m.leases]) {
        for (const k of [...map.keys()]) if (keyOf(user, k)) map.delete(k);
      }
      for (const h of new Set(handles)) m.listeners.notify(user, h);
      return Promise.resolve({ handles: handles.length, grants: grants.size });
    },
  };
}
