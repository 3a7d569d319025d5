/**
 * Lineage: `fork` copies a handle into a new one that remembers where it
 * came from, `mergeBack` brings a fork's changes home through the merge
 * loop `save` uses, and `transfer` moves a handle to another owner.
 *
 * @module
 */

import type { ForkPoint, GrantRecord, HandleRecord } from "../backend.ts";
import { isReplayed } from "../backend.ts";
import { BackendError, HandleNotFound, InvalidArgument } from "../errors.ts";
import { checkRights, random130 } from "../grants.ts";
import { decodeState } from "../json.ts";
import { previewOf } from "../preview.ts";
import type { ForkOptions, MergeResult, TransferOptions } from "../types.ts";
import { checkHandle, checkUser, checkUserHandle, checkWriter } from "./_check.ts";
import {
  alive,
  auditStep,
  type Call,
  call,
  context,
  type Core,
  entry,
  infoOf,
  UNAVAILABLE,
} from "./_core.ts";
import { diffOf, withUndo } from "./_diff.ts";
import { needGrants, routed } from "./_share.ts";
import { insertUnique, mergeLoop } from "./_write.ts";

/** Forks a handle (see {@link HandleStore.fork}). */
export async function fork(core: Core, handle: string, options: ForkOptions): Promise<string> {
  const user = checkUserHandle(options, handle);
  const writer = checkWriter(options.writer);
  const now = core.clock();
  const origin = alive(await call(core, () => core.backend.read(user, handle)), handle, now);
  const ctx = await context(core, undefined, "", []);
  const from: ForkPoint = { handle, version: origin.version };
  if (core.retention) {
    const what = { from, patch: diffOf({}, decodeState(origin.state)) };
    ctx.entry = entry(core, 1, now, writer, "fork", what);
    ctx.retention = core.retention;
  }
  // As many random characters as the origin has: a 128-bit handle forks into one.
  const chars = Math.max(8, handle.length - origin.kind.length - 1);
  const { record } = await insertUnique(core, user, ctx, origin.kind, chars, (h) => ({
    handle: h,
    kind: origin.kind,
    state: origin.state,
    version: 1,
    createdAt: now,
    updatedAt: now,
    expiresAt: origin.expiresAt,
    lastWriter: writer,
    ...(origin.schemaVersion == null ? {} : { schemaVersion: origin.schemaVersion }),
    forkedFrom: from,
    preview: origin.preview ?? previewOf(decodeState(origin.state)),
  }), false);
  return record.handle;
}

/** Merges a fork back into its origin (see {@link HandleStore.mergeBack}). */
export async function mergeBack<S>(
  core: Core,
  fork: string,
  options: ForkOptions,
): Promise<MergeResult<S>> {
  const user = checkUser(options);
  checkHandle(fork);
  const writer = checkWriter(options.writer);
  const now = core.clock();
  const f = alive(await call(core, () => core.backend.read(user, fork)), fork, now);
  const point = f.forkedFrom;
  if (point == null) {
    throw new InvalidArgument(
      `The handle ${fork} is not a fork: only a handle made by state_fork can be merged back.`,
      { field: "handle" },
    );
  }
  const origin = point.handle;
  const mine = decodeState(f.state);
  const label = { from: { handle: fork, version: f.version } };
  const ctx = await context(core, undefined, origin, []);
  if (core.retention) ctx.retention = core.retention;
  const { res, merged } = await mergeLoop(core, {
    user,
    handle: origin,
    expect: point.version,
    merge: true,
    mine,
    rule: undefined,
    now,
    label,
    giveUp: UNAVAILABLE,
    head: (live) => ({ updatedAt: now, expiresAt: live.expiresAt, lastWriter: writer }),
    run: (change) => call(core, () => core.backend.update(user, origin, change, ctx)),
    plain: (live) => {
      // Nobody wrote the origin since the fork: the fork's state is the result.
      const before = decodeState(live.state);
      const version = live.version + 1;
      const record: HandleRecord = {
        ...live,
        updatedAt: now,
        expiresAt: live.expiresAt,
        lastWriter: writer,
        state: f.state,
        version,
        ...(f.schemaVersion == null ? {} : { schemaVersion: f.schemaVersion }),
        preview: previewOf(mine),
      };
      const what = {
        ...label,
        base_version: point.version,
        ...withUndo(before, diffOf(before, mine)),
      };
      return core.retention
        ? { record, entry: entry(core, version, now, writer, "merge", what), state: mine }
        : { record, state: mine };
    },
  });
  if (isReplayed(res)) throw new BackendError("A merge was answered as a replay; try again.");
  const info = infoOf(alive(res.record, origin, now));
  const state = (merged?.state ?? decodeState(res.record!.state)) as S;
  return { ...info, state, mergedFrom: label.from };
}

/**
 * Transfers a handle to another user for good (see {@link HandleStore.transfer});
 * through an alias, the grantee's call is `permission_denied` (only the
 * owner transfers), nothing changed.
 */
export function transfer(core: Core, handle: string, options: TransferOptions): Promise<string> {
  return routed(core, handle, options, "owner", transferAs, (r) => r);
}

/** {@link transfer} of the owner's own handle. */
async function transferAs({ core, handle, options }: Call<TransferOptions>): Promise<string> {
  const user = checkUserHandle(options, handle);
  const to = checkUser({ user: (options as { to?: unknown }).to }, "to");
  if (to === user) {
    throw new InvalidArgument("to is the handle's owner already: name another user.", {
      field: "to",
    });
  }
  const keep = options.keep === undefined ? undefined : checkRights(options.keep, "keep");
  const transfer = core.backend.transfer;
  if (transfer === undefined) {
    throw new InvalidArgument(
      "transfer needs a backend that moves a record between users in one atomic step; this one cannot.",
    );
  }
  if (keep !== undefined) needGrants(core);
  const now = core.clock();
  const record = alive(
    await call(core, () => core.backend.read(user, handle)),
    handle,
    now,
  );
  const ctx = await context(core, undefined, handle, []);
  const kept: GrantRecord | undefined = keep === undefined ? undefined : {
    grant: `grant_${random130()}`,
    alias: `${record.kind}_${random130()}`,
    owner: to,
    handle,
    to: user,
    rights: keep,
    by: to,
    parent: null,
    createdAt: now,
    expiresAt: null,
    endedAt: null,
  };
  const audit = auditStep(core, now, user, "transfer", {
    from: user,
    to,
    ...(keep === undefined ? {} : { keep }),
  });
  const res = await call(core, () =>
    transfer.move(user, handle, to, ctx, {
      ...(audit ? { audit } : {}),
      ...(kept ? { keep: kept } : {}),
    }));
  if (res === "absent") throw new HandleNotFound(handle);
  // Only a move with content re-sealed for the new owner answers so (the seam retries it).
  if (res === "changed") throw new BackendError(`${handle} changed during its transfer; retry.`);
  if (res === "taken") {
    throw new InvalidArgument(
      `The user ${
        JSON.stringify(to)
      } already has a handle named ${handle}; nothing was transferred.`,
      { field: "to" },
    );
  }
  return handle;
}
