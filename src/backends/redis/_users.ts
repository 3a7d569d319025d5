/**
 * The users of a Redis backend (private to the package): a scan of the
 * keyspace for their indexes, in code point order, kept a minute for the
 * next page.
 *
 * @module
 */

import { compareCodePoints } from "./_codec.ts";
import type { Connection } from "./_connection.ts";
import type { KeySpace } from "./_keys.ts";

/** One scan of the users, kept for the page after `after`. */
export interface UsersScan {
  /** When it was made (`Date.now()`). */
  at: number;
  /** The last user of the page it served. */
  after: string | undefined;
  /** The users after the start of the page it served, sorted. */
  names: string[];
}

/**
 * A page of users with at least one live record (`live` tells), from the
 * `cached` scan when it served the page before and is less than a minute
 * old, else from a new scan; with the scan to keep for the next page.
 */
export async function listUsers(
  conn: Connection,
  k: KeySpace,
  cached: UsersScan | undefined,
  query: { after?: string; limit: number },
  live: (user: string) => Promise<boolean>,
): Promise<{ page: string[]; scan: UsersScan | undefined }> {
  let names: string[];
  if (cached && cached.after === query.after && Date.now() - cached.at < 60_000) {
    names = cached.names;
  } else {
    names = (await conn.scanKeys(k.pattern("i"))).map((key) => k.userOfIndex(key));
    names.sort(compareCodePoints);
  }
  const after = query.after;
  const rest = after === undefined ? names : names.filter((n) => compareCodePoints(n, after) > 0);
  const page: string[] = [];
  let i = 0;
  for (; i < rest.length && page.length < query.limit; i++) {
    const user = rest[i]!;
    if (await live(user)) page.push(user);
  }
  const last = page[page.length - 1];
  const scan = last === undefined ? undefined : { at: Date.now(), after: last, names: rest };
  return { page, scan };
}
