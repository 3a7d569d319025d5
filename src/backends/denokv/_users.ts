/**
 * The users of a Deno KV backend (private to the package): its user names
 * in order, each kept while it has a live record.
 *
 * @module
 */

import type { KvIo } from "./_io.ts";
import { sameKey } from "./_keys.ts";

/** {@inheritDoc RecordPrimitives.users} */
export async function listUsers(
  db: KvIo,
  query: { after?: string; limit: number },
): Promise<string[]> {
  const prefix: Deno.KvKey = [...db.keys.p, "n"];
  const startKey = query.after === undefined ? undefined : [...prefix, db.keys.user(query.after)];
  const out: string[] = [];
  let cursor: Deno.KvKey | undefined = startKey;
  let skipFirst = startKey !== undefined;
  while (out.length < query.limit) {
    const rows: Deno.KvEntry<string>[] = await db.range<string>(
      cursor ? { prefix, start: cursor } : { prefix },
      { limit: Math.min(1000, query.limit - out.length + 1), batchSize: 1000 },
    );
    let progressed = false;
    for (const row of rows) {
      if (skipFirst && cursor && sameKey(row.key, cursor)) continue;
      progressed = true;
      cursor = row.key;
      const u = row.key[db.keys.p.length + 1]!;
      const any = await db.range({ prefix: [...db.keys.p, "u", u, "h"] }, { limit: 1 });
      if (any.length > 0 && typeof row.value === "string") out.push(row.value);
      if (out.length >= query.limit) break;
    }
    skipFirst = true;
    if (!progressed) break;
  }
  return out;
}
