/**
 * History: what changed since a version (`changesSince`) and the state at
 * an earlier version (`stateAt`), both from the changelog.
 *
 * @module
 */

import type { GrantRecord, HandleRecord } from "../backend.ts";
import { InvalidArgument } from "../errors.ts";
import { rewind } from "../history.ts";
import { decodeState, type JsonObject } from "../json.ts";
import type { ChangesSince, StateAt, UserOption } from "../types.ts";
import { checkUserHandle, checkVersion } from "./_check.ts";
import { alive, type Call, call, type Core, entries, log, missing, snapshotOf } from "./_core.ts";
import { asAlias, routed } from "./_share.ts";

/** What happened to a handle after `version` (see {@link HandleStore.changesSince}), through an alias too. */
export function changesSince<S>(
  core: Core,
  handle: string,
  version: number,
  options: UserOption,
): Promise<ChangesSince<S>> {
  return routed(core, handle, options, "read", (c) => changesAs<S>(c, version), currentAsAlias);
}

/** Names the snapshot of a truncated answer by the alias. */
function currentAsAlias<S>(r: ChangesSince<S>, g: GrantRecord): ChangesSince<S> {
  return r.truncated ? { ...r, current: asAlias(r.current, g) } : r;
}

async function changesAs<S>(c: Call<UserOption>, version: number): Promise<ChangesSince<S>> {
  const { core, handle, options } = c;
  const user = checkUserHandle(options, handle);
  checkVersion(version, "since_version", 0);
  const current = await notBehind(core, user, handle, version, "since_version");
  const changes = await log(core, user, handle, version, current.version);
  if (changes) return { truncated: false, changes, version: current.version };
  return { truncated: true, current: snapshotOf<S>(current) };
}

/** The live record, when it is at `version` or later; `field` names `version` in the error. */
export async function notBehind(
  core: Core,
  user: string,
  handle: string,
  version: number,
  field: string,
): Promise<HandleRecord> {
  const r = await call(core, () => core.backend.read(user, handle));
  if (!r) throw await missing(core, user, handle);
  const current = alive(r, handle, core.clock());
  if (version > current.version) {
    throw new InvalidArgument(
      `Handle "${handle}" is at version ${current.version}; ${field} ${version} is ahead of it. Pass a version you have seen.`,
      { field, version: current.version },
    );
  }
  return current;
}

/** The state a handle had at an earlier version (see {@link HandleStore.stateAt}). */
export async function stateAt<S>(
  core: Core,
  handle: string,
  version: number,
  options: UserOption,
): Promise<StateAt<S>> {
  const user = checkUserHandle(options, handle);
  checkVersion(version, "version", 1);
  for (let attempt = 0;; attempt++) {
    const current = await notBehind(core, user, handle, version, "version");
    const state = decodeState<JsonObject>(current.state);
    const head = { handle, kind: current.kind, version };
    if (version === current.version) return { ...head, state: state as S };
    const after = core.retention ? await entries(core, user, handle, version) : [];
    const past = rewind(state, current.version, version, after);
    if (past !== null) return { ...head, state: past as S };
    // A write between the two reads moved the record past the entries read: read again.
    const last = after[after.length - 1]?.version ?? 0;
    if (last > current.version && attempt < 3) continue;
    throw new InvalidArgument(
      `The state of "${handle}" at version ${version} is no longer in its retained history (it is at version ${current.version}).`,
      { field: "version", reason: "history_unavailable", version: current.version },
    );
  }
}
