/**
 * The trash: `revoke` moves a handle there for the undo window, `restore`
 * brings it back, `trash` lists it; `sweep` removes expired records.
 *
 * @module
 */

import type { WriteContext } from "../backend.ts";
import { isReplayed } from "../backend.ts";
import { HandleNotFound, InvalidArgument } from "../errors.ts";
import type { RevokeOptions, Snapshot, TrashOptions, TrashPage, UserOption } from "../types.ts";
import { checkOptions, checkUser, checkUserHandle, unsupported } from "./_check.ts";
import {
  type Call,
  call,
  checkFingerprint,
  context,
  type Core,
  infoOf,
  missing,
  snapshotOf,
} from "./_core.ts";
import { decodeCursor, encodeCursor } from "./_cursor.ts";
import { routed } from "./_share.ts";

/** Deletes a handle into the trash (see {@link HandleStore.revoke}); never through an alias. */
export function revoke(core: Core, handle: string, options: RevokeOptions): Promise<void> {
  return routed(core, handle, options, "owner", revokeAs, () => {});
}

async function revokeAs(c: Call<RevokeOptions>): Promise<void> {
  const { core, handle, options, via } = c;
  const user = checkUserHandle(options, handle);
  const ctx = await context(core, options.idempotencyKey, handle, ["revoke"]);
  if (core.trashMs > 0) ctx.trashUntil = ctx.now + core.trashMs;
  const res = await call(core, () => core.backend.remove(user, handle, ctx));
  if (isReplayed(res)) {
    checkFingerprint(res, ctx);
    return;
  }
  if (!res.removed) throw await missing(core, user, handle, via);
}

/** Brings a revoked handle back (see {@link HandleStore.restore}). */
export async function restore<S>(
  core: Core,
  handle: string,
  options: UserOption,
): Promise<Snapshot<S>> {
  const user = checkUserHandle(options, handle);
  const now = core.clock();
  const ctx: WriteContext = { now, graceMs: core.graceMs };
  if (core.quotas) ctx.quota = core.quotas;
  const r = await call(core, () => core.backend.untrash(user, handle, ctx));
  if (!r) throw new HandleNotFound(handle);
  return snapshotOf<S>(r);
}

/** One page of a user's trash (see {@link HandleStore.trash}). */
export async function trash(core: Core, user: string, options: TrashOptions): Promise<TrashPage> {
  checkUser({ user });
  checkOptions(options, "trash");
  const limit = options.limit ?? 50;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 500) {
    throw new InvalidArgument("limit must be a whole number from 1 to 500.", { field: "limit" });
  }
  const trash = core.backend.trash;
  if (!trash) throw unsupported("list its trash");
  let after: { trashUntil: number; handle: string } | undefined;
  const c = options.cursor;
  if (c != null) {
    let at: { updatedAt: number; handle: string } | undefined;
    try {
      // A trash cursor is "t" and a list cursor of its position.
      if (typeof c === "string" && c.startsWith("t")) at = decodeCursor(c.slice(1));
    } catch { /* refused below */ }
    if (!at) {
      throw new InvalidArgument(
        "This cursor did not come from this store's trash(). Pass back nextCursor exactly as you got it, or omit it to start from the first page.",
        { field: "cursor" },
      );
    }
    after = { trashUntil: at.updatedAt, handle: at.handle };
  }
  const rows = await call(
    core,
    () => trash.list(user, { limit: limit + 1, ...(after ? { after } : {}) }),
  );
  // Past-window records sort last: the page ends at the first one.
  const now = core.clock();
  const open = rows.findIndex((r) => r.trashUntil <= now);
  const live = open < 0 ? rows : rows.slice(0, open);
  const more = live.length > limit;
  const page = more ? live.slice(0, limit) : live;
  const last = page[page.length - 1];
  return {
    handles: page.map((r) => {
      // A trash listing shows no lineage (engines list the trash without it).
      const { forkedFrom: _, ...info } = infoOf(r, false);
      return { ...info, restorableUntil: new Date(r.trashUntil) };
    }),
    nextCursor: more && last
      ? "t" + encodeCursor({ updatedAt: last.trashUntil, handle: last.handle })
      : null,
  };
}

/**
 * Removes every expired record now (see {@link HandleStore.sweep}); for
 * every user (no `user`), also the grants that ended or expired longer than
 * the trash grace ago (SPEC 8.5). The count is the records' only.
 */
export async function sweep(core: Core, user?: string): Promise<number> {
  if (user !== undefined) checkUser({ user });
  const now = core.clock();
  const removed = await call(core, () => core.backend.sweep(user ?? null, now, now));
  const grants = core.backend.grants;
  if (user === undefined && grants) await call(core, () => grants.sweep(now - core.trashMs));
  return removed;
}
