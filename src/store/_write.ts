/**
 * Writes: `mint`, `save`, `patch` and `touch`, with the two loops other
 * writes share — the unique-handle loop of `mint` and `fork`, and the one
 * update / stale / re-read / merge loop of `save` and `mergeBack`.
 *
 * @module
 */

import type {
  ForkPoint,
  HandleRecord,
  InsertOutcome,
  Replayed,
  Step,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { isReplayed } from "../backend.ts";
import { BackendError, InvalidArgument } from "../errors.ts";
import { rightsForOps } from "../grants.ts";
import { type EntryInfo, EVENT_OPS, rewind } from "../history.ts";
import { assertJson, decodeState, encodeParsed, encodeState, type JsonObject } from "../json.ts";
import { checkNow, kindOfHandle, type KindRule, rulesIn } from "../kinds.ts";
import { mergeStates } from "../merge.ts";
import { applyOpsWithUndo, type JsonPatchOp, opsFromJson, type PatchOp } from "../ops.ts";
import { previewOf } from "../preview.ts";
import type {
  MintOptions,
  PatchOptions,
  SaveOptions,
  SaveResult,
  Snapshot,
  TouchOptions,
  WriteLeaseOption,
} from "../types.ts";
import {
  checkOnConflict,
  checkTtl,
  checkUser,
  checkUserHandle,
  checkWriter,
  KIND_RE,
  safeString,
  writeLease,
} from "./_check.ts";
import {
  alive,
  type Call,
  call,
  callOn,
  context,
  type Core,
  entries,
  entry,
  infoOf,
  leaseAfter,
  log,
  missing,
  replayed,
  snapshotOf,
  stale,
  StaleVersion,
  step,
  UNAVAILABLE,
  update,
  type Via,
  written,
} from "./_core.ts";
import { diffKeyed, diffOf, withUndo } from "./_diff.ts";
import { asAlias, routed } from "./_share.ts";

/**
 * How many times a merging save reads the changelog again and retries when
 * other writes keep landing between its read and its write. Every retry
 * means another writer's write landed, so the store as a whole progresses;
 * the bound only keeps one save from chasing a stream of writes for ever
 * (it then fails as a plain stale write, with the current state).
 */
const MERGE_ATTEMPTS = 64;
const ALPHABET = "abcdefghijklmnopqrstuvwxyz234567";

/** `n` random characters of the handle alphabet. */
function randomChars(n: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(n));
  let out = "";
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}

/**
 * Inserts the record `make` builds for a fresh random handle of `kind`,
 * drawing another handle while the drawn one is taken (at most 8 draws).
 * With `replays`, a replayed answer ends the loop as well.
 *
 * @returns The record tried last and the backend's answer.
 * @throws {BackendError} when 8 draws were all taken.
 */
export async function insertUnique(
  core: Core,
  user: string,
  ctx: WriteContext,
  kind: string,
  chars: number,
  make: (handle: string) => HandleRecord,
  replays: boolean,
): Promise<{ record: HandleRecord; res: InsertOutcome | Replayed }> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const record = make(`${kind}_${randomChars(chars)}`);
    const res = await call(core, () => core.backend.insert(user, record, ctx));
    if (isReplayed(res) ? replays : res.inserted) return { record, res };
  }
  throw new BackendError("Could not mint a unique handle after 8 attempts; try again.");
}

/** Mints a handle (see {@link HandleStore.mint}). */
export async function mint(
  core: Core,
  kind: string,
  state: JsonObject,
  options: MintOptions,
): Promise<string> {
  const user = checkUser(options);
  if (typeof kind !== "string" || !KIND_RE.test(kind)) {
    throw new InvalidArgument(
      `The kind ${
        JSON.stringify(safeString(kind)).slice(0, 80)
      } is not valid: use 1-32 characters of lowercase letters, digits and "-", starting with a letter (e.g. "research").`,
      { field: "kind" },
    );
  }
  const ttl = checkTtl(options.ttlDays, true);
  const writer = checkWriter(options.writer);
  const chars = options.randomChars ?? 8;
  if (!Number.isInteger(chars) || chars < 8 || chars > 64) {
    throw new InvalidArgument("randomChars must be a whole number from 8 to 64.");
  }
  const rule = rulesIn(options)?.(kind);
  if (rule) state = await rule.check(state) as JsonObject;
  const text = encodeState(state, core.maxBytes);
  const now = core.clock();
  const ctx = await writeContext(core, options, { handle: "", via: undefined, writer, now }, [
    "mint",
    kind,
    text,
    ttl ?? null,
    writer,
  ]);
  if (core.retention) {
    ctx.entry = entry(core, 1, now, writer, "mint", { patch: diffOf({}, state) });
    ctx.retention = core.retention;
  }
  const { record, res } = await insertUnique(core, user, ctx, kind, chars, (handle) => ({
    handle,
    kind,
    state: text,
    version: 1,
    createdAt: now,
    updatedAt: now,
    expiresAt: ttl == null ? null : now + ttl,
    lastWriter: writer,
    ...(rule ? { schemaVersion: rule.version } : {}),
    preview: previewOf(state),
  }), true);
  if (isReplayed(res)) {
    const handle = replayed(res, ctx).handle;
    await leaseAfter(core, user, handle, ctx, undefined, true);
    return handle;
  }
  await leaseAfter(core, user, record.handle, ctx, res.lease, false);
  return record.handle;
}

/** Saves a state on the version read (see {@link HandleStore.save}), through an alias too. */
export function save<S extends JsonObject>(
  core: Core,
  handle: string,
  state: S,
  options: SaveOptions,
): Promise<SaveResult<S>> {
  return routed(core, handle, options, "write", (c) => saveAs(c, state), asAlias);
}

async function saveAs<S extends JsonObject>(
  c: Call<SaveOptions>,
  state: S,
): Promise<SaveResult<S>> {
  const { core, handle, options, via } = c;
  const user = checkUserHandle(options, handle);
  const expect = options.expectVersion;
  if (typeof expect !== "number" || !Number.isSafeInteger(expect) || expect < 0) {
    throw new InvalidArgument(
      "expectVersion must be the whole version number you read (from get or state_load).",
      { field: "expect_version" },
    );
  }
  const merge = checkOnConflict(options.onConflict) === "merge";
  const ttl = checkTtl(options.ttlDays, true);
  const writer = checkWriter(options.writer);
  // A handle's kind is its prefix: the rule is known before the record is read.
  const rule = rulesIn(options)?.(kindOfHandle(handle));
  if (rule) state = await rule.check(state) as S;
  const stamp = rule ? { schemaVersion: rule.version } : {};
  const text = encodeState(state, core.maxBytes);
  const now = core.clock();
  const ctx = await writeContext(core, options, { handle, via, writer, now }, [
    "save",
    text,
    expect,
    ttl === undefined ? "keep" : ttl,
    writer,
    // A merging save is another call than a failing one (the fingerprint of a failing one is unchanged).
    ...(merge ? ["merge"] : []),
  ]);
  const expiresAt = (cur: HandleRecord) =>
    ttl === undefined ? cur.expiresAt : ttl === null ? null : now + ttl;
  if (core.retention) {
    // With history the write needs the previous state for its diff: one
    // read-modify-write step that also checks the version.
    ctx.retention = core.retention;
    // The state the plain step last built, parsed, to keep once it lands.
    let kept: { version: number; state: JsonObject } | undefined;
    const { res, merged } = await mergeLoop(core, {
      user,
      handle,
      expect,
      merge,
      mine: state,
      rule,
      now,
      head: (live) => ({ updatedAt: now, expiresAt: expiresAt(live), lastWriter: writer }),
      run: (change) =>
        callOn(core, user, handle, () => update(core, user, handle, change, ctx), via),
      plain: (live) => {
        const version = live.version + 1;
        const { what, after } = saveDiff(core, user, handle, live.state, state);
        kept = after && { version, state: after };
        return {
          record: {
            ...live,
            state: text,
            version,
            updatedAt: now,
            expiresAt: expiresAt(live),
            lastWriter: writer,
            ...stamp,
            preview: previewOf(state),
          },
          entry: entry(core, version, now, writer, "save", what),
        };
      },
    });
    if (isReplayed(res)) {
      const snap = snapshotOf<S>(replayed(res, ctx));
      await leaseAfter(core, user, handle, ctx, undefined, true, snap);
      // A merged save lands past expectVersion + 1; a plain one exactly on it.
      return snap.version > expect + 1 ? { ...snap, merged: true, baseVersion: expect } : snap;
    }
    const info = infoOf(alive(res.record, handle, now));
    if (kept?.version === info.version && res.written) {
      core.states.keep(user, handle, text, kept.state);
    }
    await leaseAfter(core, user, handle, ctx, res.lease, false, info);
    if (merged?.version !== info.version) return { ...info, state };
    return { ...info, state: merged.state as S, merged: true, baseVersion: expect };
  }
  const res = await call(core, () =>
    core.backend.save(user, handle, {
      expectVersion: expect,
      state: text,
      updatedAt: now,
      expiresAt: ttl === undefined ? "keep" : ttl === null ? null : now + ttl,
      lastWriter: writer,
      ...stamp,
      preview: previewOf(state),
    }, ctx));
  if (isReplayed(res)) {
    const snap = snapshotOf<S>(replayed(res, ctx));
    await leaseAfter(core, user, handle, ctx, undefined, true, snap);
    return snap;
  }
  if (res.ok) {
    const info = infoOf(res.record);
    await leaseAfter(core, user, handle, ctx, res.lease, false, info);
    // `state` was just validated and encoded: return it instead of parsing the text back.
    return { ...info, state };
  }
  if (!res.current) throw await missing(core, user, handle, via);
  const current = alive(res.current, handle, now);
  // Without a changelog there is no way back to the caller's version: nothing to merge with.
  throw await stale(core, user, handle, expect, current, merge ? UNAVAILABLE : undefined);
}

/**
 * A plain save's diff from the stored state `stored` to `state`: what its
 * changelog entry keeps (`patch`, and `undo` when the patch replays), and,
 * when the patch rebuilds exactly what `state`'s text parses to, that state
 * (`after`), to keep for the next save of the handle (see `_states.ts`).
 */
function saveDiff(
  core: Core,
  user: string,
  handle: string,
  stored: string,
  state: JsonObject,
): { what: Record<string, unknown>; after?: JsonObject } {
  const before = core.states.parse(user, handle, stored);
  const { patch, ordered } = diffKeyed(before, state);
  if (!ordered) return { what: withUndo(before, patch) };
  const replayed = core.states.replay(before, patch as JsonPatchOp[]);
  if (!replayed) return { what: { patch } };
  return { what: { patch: replayed.patch, undo: replayed.undo }, after: replayed.state };
}

/** What {@link mergeLoop} writes, and how. */
export interface MergeWrite {
  /** The owner. */
  user: string;
  /** The handle written. */
  handle: string;
  /** The version the caller's state is based on. */
  expect: number;
  /** Whether a stale version is merged with (a save without it fails instead). */
  merge: boolean;
  /** The caller's state. */
  mine: JsonObject;
  /** The kind's rule, if any. */
  rule: KindRule | undefined;
  /** The write's time. */
  now: number;
  /** The merge entry's label (a merge back); absent for a save. */
  label?: { from: ForkPoint };
  /** The refusal when the merges run out (a save's is none: a plain stale write). */
  giveUp?: Record<string, unknown>;
  /** The head fields of the record written. */
  head: (live: HandleRecord) => Pick<HandleRecord, "updatedAt" | "expiresAt" | "lastWriter">;
  /** The write when nobody wrote since the base version; a `state` it returns is the result's. */
  plain: (live: HandleRecord) => Step & { state?: JsonObject };
  /** Runs the update with the step. */
  run: (change: (cur: HandleRecord | null) => Step) => Promise<UpdateOutcome | Replayed>;
}

/**
 * The one update / stale / re-read / merge loop of `save` and `mergeBack`.
 * The step writes `plain` while the record is at the base version; once it
 * moved on, a merging write reads the changelog since `expect` and merges
 * the caller's changes with everyone else's (see {@link mergeStep}), again
 * while other writes keep landing (at most {@link MERGE_ATTEMPTS} times). A
 * write that does not merge goes on past entries that changed no state.
 *
 * @returns The backend's answer, and the merged version and state (of the last step run).
 * @throws {StaleWrite} when the write cannot land.
 */
export async function mergeLoop(
  core: Core,
  w: MergeWrite,
): Promise<{
  res: UpdateOutcome | Replayed;
  merged: { version: number; state: JsonObject } | undefined;
}> {
  const { user, handle, expect } = w;
  // A merging write reads the changelog since expect, then merges inside the step.
  let changes: EntryInfo[] | undefined;
  let merged: { version: number; state: JsonObject } | undefined;
  // The version the write follows: `expect`, or past entries that changed no state (a share).
  let base = expect;
  for (let attempt = 1;; attempt++) {
    const res = await w.run((cur) => {
      const live = alive(cur, handle, w.now);
      if (live.version !== base) {
        if (changes === undefined || live.version < expect) throw new StaleVersion(live);
        const step = mergeStep(core, live, expect, changes, w.mine, w.head(live), w.rule, w.label);
        merged = { version: step.record.version, state: step.state };
        return step;
      }
      const step = w.plain(live);
      if (step.state) merged = { version: step.record.version, state: step.state };
      return step;
    }).catch((e) => {
      if (e instanceof StaleVersion) return e;
      throw e;
    });
    if (!(res instanceof StaleVersion)) return { res, merged };
    const current = res.current;
    if (
      res.refusal === undefined && w.merge && core.retention && current.version > expect &&
      attempt < MERGE_ATTEMPTS
    ) {
      // Read (again) what was written since the caller's version, and merge with it.
      changes = await entries(core, user, handle, expect);
      continue;
    }
    if (
      res.refusal === undefined && !w.merge && current.version > base &&
      attempt < MERGE_ATTEMPTS &&
      await stateUnchanged(core, user, handle, base, current.version)
    ) {
      base = current.version;
      continue;
    }
    const refusal = res.refusal ?? (w.merge && current.version > expect ? w.giveUp : undefined);
    throw await stale(core, user, handle, expect, current, refusal);
  }
}

/**
 * Whether every entry `after < version <= upTo` left the state as it was
 * (`share`, `unshare`, `transfer`): a save behind only those is not stale.
 */
async function stateUnchanged(
  core: Core,
  user: string,
  handle: string,
  after: number,
  upTo: number,
): Promise<boolean> {
  const changes = await log(core, user, handle, after, upTo);
  return changes !== null && changes.length === upTo - after &&
    changes.every((e) => EVENT_OPS.has(e.op));
}

/**
 * The step of a merging write whose `expect` is behind `live`: the state at
 * `expect` is rebuilt from the changelog `changes`, and the caller's changes
 * since it are applied to `live` when they are disjoint from everyone
 * else's (see `merge.ts`). Throws a {@link StaleVersion} when the log does
 * not yet reach `live` (read it again), or one with the refusal to report.
 */
function mergeStep(
  core: Core,
  live: HandleRecord,
  expect: number,
  changes: EntryInfo[],
  mine: JsonObject,
  head: Pick<HandleRecord, "updatedAt" | "expiresAt" | "lastWriter">,
  rule: KindRule | undefined,
  label?: { from: ForkPoint },
): Step & { record: HandleRecord; state: JsonObject } {
  if (live.version > (changes[changes.length - 1]?.version ?? expect)) {
    throw new StaleVersion(live);
  }
  let theirs = decodeState(live.state);
  let base = rewind(theirs, live.version, expect, changes);
  if (base === null) throw new StaleVersion(live, UNAVAILABLE);
  if (rule) {
    // The caller wrote the current schema version: compare like with like.
    const from = live.schemaVersion ?? 1;
    theirs = rule.upcast(theirs, from);
    base = rule.upcast(base, from);
  }
  const out = mergeStates(base, theirs, mine);
  if (!out.ok) throw new StaleVersion(live, { conflicts: out.conflicts });
  // A merge of two valid states can still break the schema (a rule across keys).
  const state = rule ? checkNow(rule, out.state) : out.state;
  const text = rule ? encodeState(state, core.maxBytes) : encodeParsed(state, core.maxBytes);
  const version = live.version + 1;
  const what = label
    ? { ...label, base_version: expect, patch: out.patch, undo: out.undo }
    : { merged_from: expect, patch: out.patch, undo: out.undo };
  return {
    record: {
      ...live,
      ...head,
      state: text,
      version,
      ...(rule ? { schemaVersion: rule.version } : {}),
      preview: previewOf(state),
    },
    entry: entry(core, version, head.updatedAt, head.lastWriter, label ? "merge" : "save", what),
    state,
  };
}

/** Applies patch ops atomically (see {@link HandleStore.patch}), through an alias too. */
export function patch<S>(
  core: Core,
  handle: string,
  ops: readonly PatchOp[],
  options: PatchOptions,
): Promise<Snapshot<S>> {
  const rights = () => rightsForOps(opsFromJson(ops, { maxOps: core.maxPatchOps }));
  return routed(core, handle, options, rights, (c) => patchAs<S>(c, ops), asAlias);
}

async function patchAs<S>(c: Call<PatchOptions>, ops: readonly PatchOp[]): Promise<Snapshot<S>> {
  const { core, handle, options, via } = c;
  const user = checkUserHandle(options, handle);
  const parsed = opsFromJson(ops, { maxOps: core.maxPatchOps });
  for (const op of parsed) {
    for (const field of ["value", "mapping"] as const) {
      if (field in op) {
        // With the size cap, a value built from shared subtrees is refused
        // before it is walked exponentially: no value over the cap can land.
        const value = (op as unknown as Record<string, unknown>)[field];
        assertJson(value, field, false, core.maxBytes);
      }
    }
  }
  const { writer, now, ctx } = await updateContext(core, options, handle, via, "patch", parsed);
  const rules = rulesIn(options);
  // The state the step last built, to keep parsed once it lands (see
  // `_states.ts`): only when it holds nothing of the caller's (no op value
  // that is an object).
  const keepable = parsed.every((op) =>
    !("mapping" in op) && !("value" in op && isContainer(op.value))
  );
  let kept: { version: number; text: string; state: JsonObject } | undefined;
  const snap = await routedUpdate<S>(core, user, handle, via, ctx, now, (live) => {
    const rule = rules?.(live.kind);
    let applied: JsonObject, undo: JsonPatchOp[], next: string;
    kept = undefined;
    if (rule) {
      // Ops apply to the state as the kind's current version reads it, and
      // the result must pass its schema before anything is written.
      const base = rule.upcast(decodeState(live.state), live.schemaVersion ?? 1);
      ({ state: applied, undo } = applyOpsWithUndo(base, parsed));
      applied = checkNow(rule, applied) as JsonObject;
      next = encodeState(applied, core.maxBytes);
      if (next === live.state && live.schemaVersion === rule.version) return null;
    } else {
      // The stored state is JSON and every op value was checked above: only
      // the size and the depth of the result remain to check.
      const before = core.states.parse(user, handle, live.state);
      ({ state: applied, undo } = applyOpsWithUndo(before, parsed));
      next = encodeParsed(applied, core.maxBytes);
      if (next === live.state) return null;
      // Its text is the stringify of `applied`: they parse alike.
      if (keepable) kept = { version: live.version + 1, text: next, state: applied };
    }
    return step(
      core,
      {
        ...live,
        state: next,
        version: live.version + 1,
        updatedAt: now,
        lastWriter: writer,
        ...(rule ? { schemaVersion: rule.version } : {}),
        preview: previewOf(applied),
      },
      "patch",
      { ops: parsed, undo },
    );
  });
  if (kept?.version === snap.version) core.states.keep(user, handle, kept.text, kept.state);
  return snap;
}

/** Whether an op's value is an object or a list (something the caller may change later). */
function isContainer(value: unknown): boolean {
  return typeof value === "object" && value !== null;
}

/** Renews or clears a handle's expiry (see {@link HandleStore.touch}), through an alias too. */
export function touch<S>(core: Core, handle: string, options: TouchOptions): Promise<Snapshot<S>> {
  return routed(core, handle, options, "write", touchAs<S>, asAlias);
}

async function touchAs<S>(c: Call<TouchOptions>): Promise<Snapshot<S>> {
  const { core, handle, options, via } = c;
  const user = checkUserHandle(options, handle);
  if (options.ttlDays === undefined) {
    throw new InvalidArgument("touch needs ttlDays: a number of days, or null for never.", {
      field: "ttl_days",
    });
  }
  const ttl = checkTtl(options.ttlDays, true);
  const { writer, now, ctx } = await updateContext(core, options, handle, via, "touch", ttl);
  const expiresAt = ttl == null ? null : now + ttl;
  return await routedUpdate<S>(core, user, handle, via, ctx, now, (live) =>
    step(
      core,
      { ...live, version: live.version + 1, updatedAt: now, expiresAt, lastWriter: writer },
      "touch",
      { expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString() },
    ));
}

/**
 * The writer, the time and the context of an update (patch, touch): {@link writeContext}
 * claiming `[op, arg, writer]`, with the retention set.
 */
async function updateContext(
  core: Core,
  options: PatchOptions | TouchOptions,
  handle: string,
  via: Via,
  op: string,
  arg: unknown,
): Promise<{ writer: string | null; now: number; ctx: WriteContext }> {
  const writer = checkWriter(options.writer);
  const now = core.clock();
  const ctx = await writeContext(core, options, { handle, via, writer, now }, [op, arg, writer]);
  if (core.retention) ctx.retention = core.retention;
  return { writer, now, ctx };
}

/** Runs `change` on the live record as one update (patch, touch) and answers the snapshot written. */
async function routedUpdate<S>(
  core: Core,
  user: string,
  handle: string,
  via: Via,
  ctx: WriteContext,
  now: number,
  change: (live: HandleRecord) => Step | null,
): Promise<Snapshot<S>> {
  const res = await callOn(
    core,
    user,
    handle,
    () => update(core, user, handle, (cur) => change(alive(cur, handle, now)), ctx),
    via,
  );
  return await written<S>(core, user, handle, res, ctx, now);
}

/**
 * A write's context: the lease it asks for (checked first), the idempotency claim of `args` for
 * the alias or handle it was called with, and the grant a routed write runs under.
 */
async function writeContext(
  core: Core,
  options: { idempotencyKey?: string; lease?: WriteLeaseOption },
  call: { handle: string; via: Via; writer: string | null; now: number },
  args: unknown[],
): Promise<WriteContext> {
  const lease = writeLease(options.lease, call.writer, call.now);
  const ctx = await context(core, options.idempotencyKey, call.via?.alias ?? call.handle, args);
  if (lease) ctx.lease = lease;
  if (call.via) ctx.grant = { grant: call.via.grant, alias: call.via.alias };
  return ctx;
}
