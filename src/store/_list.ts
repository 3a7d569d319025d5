/**
 * Listing: a user's handles (with the handles shared with them, named by
 * their aliases) a page at a time under a cursor, and the users of a store.
 *
 * @module
 */

import type { GrantRecord, HandleMeta } from "../backend.ts";
import { metaOf } from "../backend.ts";
import { compareListOrder } from "../backends/_shared.ts";
import { InvalidArgument } from "../errors.ts";
import { grantGone } from "../grants.ts";
import type {
  HandleInfo,
  HandlePage,
  ListOptions,
  ListPageOptions,
  UsersOptions,
} from "../types.ts";
import { checkOptions, checkUser, KIND_RE, unsupported } from "./_check.ts";
import { call, type Core, infoOf, leasesOf, withLease } from "./_core.ts";
import { decodeCursor, encodeCursor, fitPage } from "./_cursor.ts";
import { asAlias, grantBackend } from "./_share.ts";

/** Every handle of a user (see {@link HandleStore.list}), a page at a time. */
export async function list(core: Core, user: string, options: ListOptions): Promise<HandleInfo[]> {
  checkOptions(options, "list");
  const all: HandleInfo[] = [];
  let cursor: string | null = null;
  do {
    const page: HandlePage = await listPage(core, user, { ...options, limit: 500, cursor });
    all.push(...page.handles);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return all;
}

/** One page of a user's handles (see {@link HandleStore.listPage}). */
export async function listPage(
  core: Core,
  user: string,
  options: ListPageOptions,
): Promise<HandlePage> {
  checkUser({ user });
  checkOptions(options, "listPage");
  const limit = options.limit ?? 50;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 500) {
    throw new InvalidArgument("limit must be a whole number from 1 to 500.", { field: "limit" });
  }
  const kind = options.kind;
  if (kind !== undefined && (typeof kind !== "string" || !KIND_RE.test(kind))) {
    throw new InvalidArgument('kind must be a valid kind such as "research".', {
      field: "kind",
    });
  }
  const after = options.cursor == null ? undefined : decodeCursor(options.cursor);
  const maxBytes = options.maxBytes;
  if (maxBytes !== undefined && (!Number.isSafeInteger(maxBytes) || maxBytes < 1)) {
    throw new InvalidArgument("maxBytes must be a whole number of bytes, at least 1.", {
      field: "max_bytes",
    });
  }
  const rows: HandleMeta[] = await call(core, () =>
    core.backend.list(user, {
      limit: limit + 1,
      ...(kind === undefined ? {} : { kind }),
      ...(options.includeExpired ? {} : { liveAt: core.clock() }),
      ...(after ? { after } : {}),
      ...(options.previews ? { previews: true } : {}),
    }));
  const shared = await sharedRows(core, user, kind, !options.includeExpired, after);
  if (shared.size > 0) {
    rows.push(...shared.keys());
    rows.sort(compareListOrder);
    rows.length = Math.min(rows.length, limit + 1);
  }
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const last = page[page.length - 1];
  const leases = page.length === 0
    ? undefined
    : await call(core, () => leasesOf(core, user, page.map((r) => r.handle), core.clock()));
  // A listing never shows a schema version: SQL engines list from an index without it.
  const handles = page.map((r) => {
    const g = shared.get(r);
    if (g) return asAlias(infoOf(r, false), g);
    const info = options.previews && r.preview !== undefined
      ? { ...infoOf(r, false), preview: r.preview }
      : infoOf(r, false);
    return withLease(info, leases);
  });
  const kept = maxBytes === undefined ? handles.length : fitPage(handles, more, maxBytes);
  if (kept < handles.length) {
    return { handles: handles.slice(0, kept), nextCursor: encodeCursor(page[kept - 1]!) };
  }
  return { handles, nextCursor: more && last ? encodeCursor(last) : null };
}

/**
 * The handles shared with `user` by name (grants in force), as listing
 * rows named by their alias, after the cursor `after`: one read of each
 * owner's record (a grantee holds few).
 */
async function sharedRows(
  core: Core,
  user: string,
  kind: string | undefined,
  liveOnly: boolean,
  after: { updatedAt: number; handle: string } | undefined,
): Promise<Map<HandleMeta, GrantRecord>> {
  const out = new Map<HandleMeta, GrantRecord>();
  const b = grantBackend(core);
  if (!b) return out;
  const now = core.clock();
  const grants = (await call(core, () => b.grants.to(user))).filter((g) =>
    grantGone(g, now) === null
  );
  const records = await Promise.all(
    grants.map((g) => call(core, () => b.read(g.owner, g.handle))),
  );
  grants.forEach((g, i) => {
    const r = records[i];
    if (!r || (kind !== undefined && r.kind !== kind)) return;
    if (liveOnly && r.expiresAt !== null && r.expiresAt <= now) return;
    const meta = { ...metaOf(r), handle: g.alias };
    if (after && compareListOrder(meta, after) <= 0) return;
    out.set(meta, g);
  });
  return out;
}

/** One page of the users that hold records (see {@link HandleStore.users}). */
export async function users(core: Core, options: UsersOptions): Promise<string[]> {
  checkOptions(options, "users");
  const limit = options.limit ?? 1000;
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new InvalidArgument("limit must be a whole number from 1 to 10000.", {
      field: "limit",
    });
  }
  const after = options.after;
  if (after !== undefined && typeof after !== "string") {
    throw new InvalidArgument("after must be a user of the previous page.", { field: "after" });
  }
  const records = core.backend.records;
  if (!records) throw unsupported("list its users");
  return await call(
    core,
    () => records.users({ limit, ...(after === undefined ? {} : { after }) }),
  );
}
