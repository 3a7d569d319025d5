/**
 * Reads: `get` (the snapshot, upcast and checked for a typed kind) and
 * `read` (within a byte budget: the state, its outline, or some paths).
 *
 * @module
 */

import type { HandleRecord, LeaseRecord } from "../backend.ts";
import type { JsonObject } from "../json.ts";
import { rulesIn, withRules } from "../kinds.ts";
import { checkReadArgs, jsonSize, outline, readPaths } from "../outline.ts";
import type { ReadOptions, ReadResult, Snapshot, UserOption } from "../types.ts";
import { checkUserHandle } from "./_check.ts";
import {
  alive,
  type Call,
  call,
  type Core,
  leasesOf,
  missing,
  snapshotOf,
  withLease,
} from "./_core.ts";
import { asAlias, routed } from "./_share.ts";

/** Reads a handle's snapshot (see {@link HandleStore.get}), through an alias too. */
export function get<S>(core: Core, handle: string, options: UserOption): Promise<Snapshot<S>> {
  return routed(core, handle, options, "read", getAs<S>, asAlias);
}

async function getAs<S>(c: Call<UserOption>): Promise<Snapshot<S>> {
  const { core, handle, options, via } = c;
  const user = checkUserHandle(options, handle);
  const now = core.clock();
  const b = core.backend;
  let r: HandleRecord | null, leases: Map<string, LeaseRecord> | undefined;
  const fast = b.leases;
  if (fast?.readLeased) {
    const { record, lease } = await call(core, () => fast.readLeased!(user, handle, now));
    r = record;
    if (lease) leases = new Map([[handle, lease]]);
  } else {
    [r, leases] = await call(
      core,
      () => Promise.all([b.read(user, handle), leasesOf(core, user, [handle], now)]),
    );
  }
  if (!r) throw await missing(core, user, handle, via);
  const snap = snapshotOf<S>(alive(r, handle, now));
  const rule = rulesIn(options)?.(snap.kind);
  if (rule) {
    let state = rule.upcast(snap.state as JsonObject, snap.schemaVersion ?? 1);
    if (rule.checkOnRead) state = await rule.check(state) as JsonObject;
    snap.state = state as S;
  }
  return withLease(snap, leases);
}

/** Reads a handle within a budget (see {@link HandleStore.read}). */
export async function read<S>(
  core: Core,
  handle: string,
  options: ReadOptions,
): Promise<ReadResult<S>> {
  const user = checkUserHandle(options, handle);
  const { maxBytes, paths } = options;
  checkReadArgs(maxBytes, paths);
  const { state, ...info } = await get<S>(core, handle, withRules({ user }, rulesIn(options)));
  if (paths !== undefined) return { ...info, ...readPaths(state, paths, maxBytes) };
  if (maxBytes === undefined) {
    return { ...info, state, truncated: false, sizeBytes: jsonSize(state) };
  }
  const b = outline(state, maxBytes);
  return b.truncated
    ? { ...info, outline: b.outline, truncated: true, sizeBytes: b.sizeBytes }
    : { ...info, state, truncated: false, sizeBytes: b.sizeBytes };
}
