/**
 * The inspector's timeline of a handle: its changelog entries, newest first,
 * each with what it changed as added, removed and changed values.
 *
 * The timeline starts at the oldest version after which the changelog holds
 * every entry in full (the mint, while retention has not dropped it). The
 * state before its first entry is `{}` at the mint, else the store's
 * {@link HandleStore.stateAt} (the entries' own undo); from there each entry
 * is replayed forward, so a removed or changed value shows what it was. Only
 * when `stateAt` cannot reach that far either (entries written before undo
 * existed) does the timeline tell the entries' own values alone: what a save
 * set, not what it replaced.
 *
 * It also tells the oldest version `stateAt` can rebuild, the one the page
 * offers to restore as a new save: one `stateAt` call when every version
 * shown is reachable, a binary search when some are not.
 *
 * @module
 */

import { applyPatch, type Operation } from "rfc6902";
import { McpStateError } from "../errors.ts";
import { isPlainObject, type JsonObject } from "../json.ts";
import { applyOps, getPath, opsFromJson, parsePath, type PatchOp } from "../ops.ts";
import { toPointer } from "../outline.ts";
import type { HandleStore } from "../store.ts";
import type { ChangeInfo } from "../types.ts";

/** Characters of a value's JSON shown in a change; longer ones are cut. */
const VALUE_CHARS = 240;
/** Changes shown per entry; the rest are counted. */
const MAX_CHANGES = 50;

/** One value that an entry added, removed or changed. */
export interface ValueChange {
  /** What happened at `path`. */
  kind: "added" | "removed" | "changed";
  /** The JSON Pointer of the value. */
  path: string;
  /** The new value's JSON (cut to a preview), for added and changed values. */
  value?: string;
  /** The old value's JSON (cut), when the timeline knows it. */
  old?: string;
}

/** One version in the timeline. */
export interface TimelineEntry {
  /** The version the write produced. */
  version: number;
  /** When, ISO-8601 UTC. */
  at: string;
  /** Who wrote. */
  writer: string | null;
  /** mint, save, patch, touch, restore. */
  op: string;
  /** The values it changed (at most {@link MAX_CHANGES}). */
  changes: ValueChange[];
  /** Changes left out beyond the first {@link MAX_CHANGES}. */
  more: number;
  /** A touch: the new expiry (`null`: never). */
  expiresAt?: string | null;
  /** The entry was too large to keep: what it changed is not known. */
  omitted?: true;
  /** A share, an unshare or a transfer: what happened, in words (it changed no state). */
  event?: string;
}

/** The timeline of a handle. */
export interface Timeline {
  /** The current version. */
  version: number;
  /** The oldest version shown (1 when the log reaches back to the mint). */
  from: number;
  /** Whether old values are known: the state before the first entry was rebuilt. */
  replayed: boolean;
  /**
   * The oldest version {@link HandleStore.stateAt} rebuilds (at most `from`
   * when every version shown can be): every version from it to the current
   * one can be restored.
   */
  restorableFrom: number;
  /** The entries, newest first. */
  entries: TimelineEntry[];
}

/**
 * Builds the timeline of a handle.
 *
 * @param store The store.
 * @param handle The handle.
 * @param user Its owner.
 * @returns The timeline.
 */
export async function timeline(
  store: HandleStore,
  handle: string,
  user: string,
): Promise<Timeline> {
  const first = await store.changesSince(handle, 0, { user });
  let after = 0;
  let changes: ChangeInfo[];
  let version: number;
  if (!first.truncated) {
    changes = first.changes;
    version = first.version;
  } else {
    // The log is complete after `hi` and not after `lo`: search the oldest complete suffix.
    version = first.current.version;
    let lo = 0, hi = version;
    changes = [];
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      const r = await store.changesSince(handle, mid, { user });
      if (r.truncated) lo = mid;
      else [hi, changes] = [mid, r.changes];
    }
    after = hi;
  }
  const from = changes[0]?.version ?? version;
  // The state before the first entry: `{}` before a mint, else the way back from the current one.
  const base = after === 0 ? {} : await reach(store, handle, user, after);
  const restorableFrom = after > 0 && base !== undefined
    ? after
    : await oldestReachable(store, handle, user, from, version);
  const entries: TimelineEntry[] = [];
  let state = base;
  for (const info of changes) {
    const before = state;
    state = before === undefined ? undefined : replay(before, info);
    entries.push(describe(info, before));
  }
  return {
    version,
    from,
    replayed: base !== undefined,
    restorableFrom,
    entries: entries.reverse(),
  };
}

/** The state at `version`, or `undefined` when the changelog no longer reaches back to it. */
async function reach(
  store: HandleStore,
  handle: string,
  user: string,
  version: number,
): Promise<JsonObject | undefined> {
  try {
    return (await store.stateAt(handle, version, { user })).state;
  } catch (e) {
    if (e instanceof McpStateError && e.details.reason === "history_unavailable") return undefined;
    throw e;
  }
}

/**
 * The oldest version from `from` to `current` that {@link HandleStore.stateAt}
 * rebuilds. Reachability only grows with the version (the way back to `v`
 * passes every later one), so one call answers when `from` is reachable and
 * a binary search finds the limit when it is not.
 */
async function oldestReachable(
  store: HandleStore,
  handle: string,
  user: string,
  from: number,
  current: number,
): Promise<number> {
  if (from >= current || await reach(store, handle, user, from) !== undefined) {
    return Math.min(from, current);
  }
  let lo = from, hi = current; // lo is out of reach, hi (the current version) never is
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await reach(store, handle, user, mid) !== undefined) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The state after an entry, or `undefined` when it cannot be rebuilt. */
function replay(before: JsonObject, info: ChangeInfo): JsonObject | undefined {
  try {
    if (info.omitted) return undefined;
    if (Array.isArray(info.patch)) {
      const next = structuredClone(before);
      const errors = applyPatch(next, info.patch as Operation[]);
      return errors.every((e) => e === null) && isPlainObject(next) ? next : undefined;
    }
    if (Array.isArray(info.ops)) return applyOps(before, opsFromJson(info.ops));
    return before;
  } catch {
    return undefined;
  }
}

/**
 * What one entry changed; old values come from `before` when it is known,
 * advanced op by op (two appends in one entry land at two indexes).
 */
function describe(info: ChangeInfo, before: JsonObject | undefined): TimelineEntry {
  const out: ValueChange[] = [];
  let state = before === undefined ? undefined : structuredClone(before);
  const old = (pointer: string): string | undefined => {
    if (state === undefined) return undefined;
    try {
      return preview(getPath(state, pointer));
    } catch {
      return undefined;
    }
  };
  const has = (pointer: string) => old(pointer) !== undefined;
  const push = (kind: ValueChange["kind"], path: string, value?: unknown) => {
    const c: ValueChange = { kind, path };
    if (value !== undefined) c.value = preview(value);
    if (kind !== "added") {
      const was = old(path);
      if (was !== undefined) c.old = was;
    }
    out.push(c);
    return c;
  };
  if (Array.isArray(info.patch)) {
    for (const raw of info.patch as Operation[]) {
      // An append ("/list/-") names the index it landed at, when the list is known.
      const op = raw.path.endsWith("/-") && state !== undefined
        ? { ...raw, path: appended(state, raw.path) }
        : raw;
      if (op.op === "add") {
        push(has(op.path) && !isListIndex(op.path) ? "changed" : "added", op.path, op.value);
      } else if (op.op === "remove") push("removed", op.path);
      else if (op.op === "replace") push("changed", op.path, op.value);
      else push("changed", op.path, "value" in op ? op.value : undefined);
      state = stepPatch(state, raw);
    }
  } else if (Array.isArray(info.ops)) {
    for (const op of info.ops as PatchOp[]) {
      opChanges(op, state, push, has);
      state = stepOps(state, op);
    }
  }
  const entry: TimelineEntry = {
    version: info.version,
    at: info.at,
    writer: info.writer,
    op: info.op,
    changes: out.slice(0, MAX_CHANGES),
    more: Math.max(0, out.length - MAX_CHANGES),
  };
  if (info.op === "touch") entry.expiresAt = (info.expires_at as string | null) ?? null;
  if (info.omitted) entry.omitted = true;
  const event = eventOf(info);
  if (event) entry.event = event;
  return entry;
}

/** The state after one RFC 6902 operation (applied in place), or `undefined`. */
function stepPatch(state: JsonObject | undefined, op: Operation): JsonObject | undefined {
  if (state === undefined || op.path === "") return undefined;
  try {
    return applyPatch(state, [op])[0] === null ? state : undefined;
  } catch {
    return undefined;
  }
}

/** The state after one patch op, or `undefined`. */
function stepOps(state: JsonObject | undefined, op: PatchOp): JsonObject | undefined {
  if (state === undefined) return undefined;
  try {
    return applyOps(state, opsFromJson([op]));
  } catch {
    return undefined;
  }
}

/** What a share, an unshare or a transfer entry records, in words. */
function eventOf(info: ChangeInfo): string | undefined {
  const name = (x: unknown) => x === "*" ? "anyone with the link" : JSON.stringify(x);
  if (info.op === "share") {
    return `shared with ${name(info.to)} (${info.rights})${info.via ? " — a re-share" : ""}`;
  }
  if (info.op === "unshare") return `ended the grant ${info.grant}`;
  if (info.op === "transfer") {
    return `transferred from ${name(info.from)} to ${name(info.to)}${
      info.keep ? `, keeping ${info.keep}` : ""
    }`;
  }
  return undefined;
}

/** The changes of one patch op. */
function opChanges(
  op: PatchOp,
  before: JsonObject | undefined,
  push: (kind: ValueChange["kind"], path: string, value?: unknown) => ValueChange,
  has: (pointer: string) => boolean,
): void {
  let base: string;
  try {
    base = toPointer(parsePath(op.path ?? ""));
  } catch {
    return;
  }
  const at = (key: string) => base + toPointer([key]);
  switch (op.op) {
    case "append":
    case "add_to_set": {
      const list = before === undefined ? undefined : safeGet(before, base);
      const index = Array.isArray(list) ? String(list.length) : "-";
      if (op.op === "add_to_set" && Array.isArray(list)) {
        const json = canonical(op.value);
        if (list.some((v) => canonical(v) === json)) return;
      }
      push("added", base + "/" + index, op.value);
      return;
    }
    case "set_key":
      push(has(at(op.key)) || before === undefined ? "changed" : "added", at(op.key), op.value);
      return;
    case "del_key":
      if (before === undefined || has(at(op.key))) push("removed", at(op.key));
      return;
    case "merge":
      for (const [key, value] of Object.entries(op.mapping)) {
        push(has(at(key)) || before === undefined ? "changed" : "added", at(key), value);
      }
      return;
    case "increment": {
      const was = before === undefined ? undefined : safeGet(before, at(op.key));
      const by = op.by ?? 1;
      if (before === undefined) push("changed", at(op.key)).value = `+${by}`;
      else push(typeof was === "number" ? "changed" : "added", at(op.key), (Number(was) || 0) + by);
      return;
    }
  }
}

/** `/list/-` as `/list/<length>`, or as it is when the list is not there. */
function appended(state: JsonObject, pointer: string): string {
  const list = safeGet(state, pointer.slice(0, -2));
  return Array.isArray(list) ? pointer.slice(0, -1) + list.length : pointer;
}

function safeGet(state: JsonObject, pointer: string): unknown {
  try {
    return getPath(state, pointer);
  } catch {
    return undefined;
  }
}

/** Whether a pointer's last segment is a list index (an `add` there inserts). */
function isListIndex(pointer: string): boolean {
  return /\/(\d+|-)$/.test(pointer);
}

/** JSON with sorted keys, to compare values as `add_to_set` does. */
function canonical(value: unknown): string {
  return JSON.stringify(
    value,
    (_k, v) =>
      isPlainObject(v)
        ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a < b ? -1 : 1))
        : v,
  );
}

/**
 * A value's compact JSON, cut to {@link VALUE_CHARS} characters with `…`.
 *
 * @param value A JSON value.
 * @returns Its preview.
 */
export function preview(value: unknown): string {
  const text = JSON.stringify(value) ?? "null";
  return text.length <= VALUE_CHARS ? text : text.slice(0, VALUE_CHARS - 1) + "…";
}
