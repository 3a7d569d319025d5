/**
 * What every feature of the store shares: the {@link Core} (the backend,
 * the clock, the checked options) and the plumbing of every call — the
 * closed check and the backend's failures, the not-found and expired
 * answers, the write context with its idempotency claim, the changelog
 * entries, the stale-write answer, and the lease a write asks for.
 *
 * @module
 */

import type {
  AuditStep,
  Backend,
  ChangeEntry,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  LeaseOutcome,
  LeaseRecord,
  QuotaLimits,
  Replayed,
  Retention,
  Step,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { isReplayed } from "../backend.ts";
import { vaultOf } from "./_vault.ts";
import { ParsedStates } from "./_states.ts";
import {
  BackendError,
  HandleExpired,
  HandleNotFound,
  InvalidArgument,
  McpStateError,
  StaleWrite,
} from "../errors.ts";
import type { GrantRecord } from "../backend.ts";
import { decodeState, utf8Length } from "../json.ts";
import type { EntryInfo } from "../history.ts";
import type { ChangeInfo, HandleInfo, HandleStoreOptions, Snapshot } from "../types.ts";
import { toPayload } from "../wire.ts";
import { checkOptions, checkQuotas, DAY_MS, isIdentifier, MAX_TIMER_MS } from "./_check.ts";

const IDEMPOTENCY_MS = DAY_MS;
/** How an entry's text starts before its version is known (see {@link AuditStep}). */
const AUDIT_HEAD = '{"version":0,';

/** The store's backend and checked options, shared by every feature module. */
export interface Core {
  /** The storage primitives. */
  readonly backend: Backend;
  /** The store's clock, in epoch ms. */
  readonly clock: () => number;
  /** The state size cap in bytes. */
  readonly maxBytes: number;
  /** The most ops one patch may hold. */
  readonly maxPatchOps: number;
  /** How long an expired record is kept (answering `handle_expired`). */
  readonly graceMs: number;
  /** The changelog's retention; `undefined` when the store keeps no history. */
  readonly retention: Retention | undefined;
  /** The largest changelog entry kept whole. */
  readonly maxEntryBytes: number;
  /** How long a revoked handle stays in the trash (0: not at all). */
  readonly trashMs: number;
  /** The quotas enforced, if any. */
  readonly quotas: QuotaLimits | undefined;
  /** The reclaim interval in ms (0: off). */
  readonly reclaimMs: number;
  /** The states this store last saved, parsed (see `_states.ts`). */
  readonly states: ParsedStates;
  /** Set by `close`: every call then fails. */
  closed: boolean;
}

/**
 * How a call reached its handle: `undefined` for a direct call, `null` for
 * the direct try of a call that goes on through an alias when it finds no
 * handle of the caller's, or the grant a routed call runs under.
 */
export type Via = GrantRecord | null | undefined;

/**
 * One run of a feature function that may be reached through an alias: the
 * store's core, the handle it runs on, its options (as the owner's when
 * routed), and how it got there (see `routed`).
 */
export interface Call<O> {
  /** The store's core. */
  core: Core;
  /** The handle the run works on: the caller's own, or the owner's behind an alias. */
  handle: string;
  /** The call's options; `user` is the owner's on a routed run. */
  options: O;
  /** How the call reached `handle`. */
  via: Via;
}

/**
 * The core of a store over `backend`, its options checked.
 *
 * @param backend The storage primitives.
 * @param options The store's options.
 * @returns The core.
 */
export function coreOf(backend: Backend, options: HandleStoreOptions): Core {
  checkOptions(options, "HandleStore");
  const clock = options.clock ?? Date.now;
  if (typeof clock !== "function") {
    throw new InvalidArgument("clock must be a function returning the time in epoch ms.", {
      field: "clock",
    });
  }
  const max = options.maxStateBytes ?? 1_048_576;
  if (!Number.isSafeInteger(max) || max < 2) {
    throw new InvalidArgument("maxStateBytes must be a whole number of bytes, at least 2.");
  }
  const maxOps = options.maxPatchOps ?? 1000;
  if (!Number.isSafeInteger(maxOps) || maxOps < 1) {
    throw new InvalidArgument("maxPatchOps must be a whole number of ops, at least 1.", {
      field: "maxPatchOps",
    });
  }
  const grace = options.expiredGraceDays ?? 7;
  if (typeof grace !== "number" || !Number.isFinite(grace) || grace < 0) {
    throw new InvalidArgument("expiredGraceDays must be a finite number of days, 0 or more.");
  }
  let retention: Retention | undefined, maxEntryBytes: number;
  const history = options.history ?? {};
  if (history !== false) {
    checkOptions(history, "history");
    const maxEntries = history.maxEntries ?? 100;
    const maxAgeDays = history.maxAgeDays ?? 30;
    const maxEntry = history.maxEntryBytes ?? 32_768;
    for (const [name, v] of [["maxEntries", maxEntries], ["maxEntryBytes", maxEntry]]) {
      if (!Number.isSafeInteger(v) || (v as number) < 1) {
        throw new InvalidArgument(`history.${name} must be a whole number, at least 1.`);
      }
    }
    if (typeof maxAgeDays !== "number" || !(maxAgeDays > 0)) {
      throw new InvalidArgument("history.maxAgeDays must be a number of days greater than 0.");
    }
    retention = { maxEntries, maxAgeMs: Math.round(maxAgeDays * DAY_MS) };
    maxEntryBytes = Math.min(maxEntry, backend.maxEntryBytes ?? Infinity);
  } else {
    retention = undefined;
    maxEntryBytes = 0;
  }
  const trash = options.trashDays ?? 7;
  if (typeof trash !== "number" || !Number.isFinite(trash) || trash < 0) {
    throw new InvalidArgument("trashDays must be a finite number of days, 0 or more.");
  }
  const quotas = checkQuotas(options.quotas, backend);
  const every = options.reclaimIntervalMs ?? 600_000;
  // setInterval runs a delay over 2^31 - 1 ms every millisecond instead.
  if (typeof every !== "number" || !(every >= 0 && every <= MAX_TIMER_MS)) {
    throw new InvalidArgument(
      `reclaimIntervalMs must be a number of ms from 0 (off) to ${MAX_TIMER_MS} (about 24.8 days).`,
      { field: "reclaimIntervalMs" },
    );
  }
  const encryption = options.encryption;
  if (encryption !== undefined || backend.keys) backend = vaultOf(backend, encryption);
  return {
    backend,
    clock,
    maxBytes: max,
    maxPatchOps: maxOps,
    graceMs: Math.round(grace * DAY_MS),
    retention,
    maxEntryBytes,
    trashMs: Math.round(trash * DAY_MS),
    quotas,
    reclaimMs: every,
    states: new ParsedStates(),
    closed: false,
  };
}

/**
 * Thrown inside a save step when the version moved on; turned into
 * `StaleWrite` outside. `refusal`: why a merging save could not merge (the
 * details it adds to the `StaleWrite`).
 */
export class StaleVersion extends McpStateError {
  /** The record as the step found it. */
  readonly current: HandleRecord;
  /** Why a merge was refused, if it was. */
  readonly refusal: Record<string, unknown> | undefined;
  /**
   * @param current The record as the step found it.
   * @param refusal Why a merge was refused.
   */
  constructor(current: HandleRecord, refusal?: Record<string, unknown>) {
    super("stale_write", "stale");
    this.current = current;
    this.refusal = refusal;
  }
}

/** The refusal of a merge whose base version is no longer in the changelog. */
export const UNAVAILABLE = { reason: "history_unavailable" } as const;

/** A backend's failure as the store reports it: its own errors as they are, others as `backend_error`. */
function backendFailed(e: unknown): never {
  if (e instanceof McpStateError) throw e;
  const msg = e instanceof Error ? e.message : String(e);
  throw new BackendError(`The storage backend failed: ${msg}`, { cause: e });
}

/** Runs a backend call: refused once the store is closed, failures as the store reports them. */
export function call<T>(core: Core, fn: () => Promise<T>): Promise<T> {
  if (core.closed) {
    return Promise.reject(new BackendError("The store is closed; open a new one."));
  }
  // A handler on the call's own promise, not an async frame (every call goes through here).
  try {
    return fn().catch(backendFailed);
  } catch (e) {
    return Promise.reject(e).catch(backendFailed);
  }
}

/**
 * {@link call} for a read or write of `(user, handle)`: a not-found of that
 * handle says whether it is in the caller's trash.
 */
export async function callOn<T>(
  core: Core,
  user: string,
  handle: string,
  fn: () => Promise<T>,
  via?: Via,
): Promise<T> {
  try {
    return await call(core, fn);
  } catch (e) {
    if (!(e instanceof HandleNotFound) || e.details.handle !== handle) throw e;
    throw await missing(core, user, handle, via);
  }
}

/**
 * The not-found of `handle` for `user`: with `restorableUntil` when it is in
 * the user's own trash (one backend call, made on a miss only).
 */
export async function missing(
  core: Core,
  user: string,
  handle: string,
  via?: Via,
): Promise<HandleNotFound> {
  // A call that goes on through an alias when it finds no handle of the
  // caller's asks the trash only once no alias is found either (`routed`).
  if (via === null) return new HandleNotFound(handle);
  const trash = core.backend.trash;
  if (!trash) return new HandleNotFound(handle);
  const until = await call(core, () => trash.until(user, handle));
  return until === null || until <= core.clock()
    ? new HandleNotFound(handle)
    : new HandleNotFound(handle, { restorableUntil: new Date(until) });
}

/** Returns the record if it exists and is live, else throws not-found / expired. */
export function alive(r: HandleRecord | null, handle: string, now: number): HandleRecord {
  if (!r) throw new HandleNotFound(handle);
  if (r.expiresAt !== null && r.expiresAt <= now) {
    throw new HandleExpired(
      handle,
      new Date(r.expiresAt),
      Math.round((r.expiresAt - r.createdAt) / DAY_MS * 1000) / 1000,
    );
  }
  return r;
}

/** The context of a write: the time, the grace, the quotas and the idempotency claim of `key`. */
export async function context(
  core: Core,
  key: string | undefined,
  scope: string,
  args: unknown[],
): Promise<WriteContext> {
  const now = core.clock();
  if (key === undefined) {
    return core.quotas
      ? { now, graceMs: core.graceMs, quota: core.quotas }
      : { now, graceMs: core.graceMs };
  }
  if (typeof key !== "string" || key.length === 0 || key.length > 256 || !isIdentifier(key)) {
    throw new InvalidArgument(
      "idempotencyKey must be a well-formed string of 1 to 256 characters, without U+0000.",
      {
        field: "idempotency_key",
      },
    );
  }
  const claim: IdempotencyClaim = {
    key,
    scope,
    fingerprint: await digest(JSON.stringify(args)),
    expiresAt: now + IDEMPOTENCY_MS,
  };
  const ctx: WriteContext = { now, graceMs: core.graceMs, idempotency: claim };
  if (core.quotas) ctx.quota = core.quotas;
  return ctx;
}

/** The SHA-256 of `text`, in hex: an idempotency fingerprint. */
async function digest(text: string): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Refuses a replay of another call under the same idempotency key. */
export function checkFingerprint(res: Replayed, ctx: WriteContext): void {
  if (res.fingerprint !== ctx.idempotency?.fingerprint) {
    throw new InvalidArgument(
      "This idempotency key was already used for a different call; nothing was applied. Use a fresh key for a new change.",
      { field: "idempotency_key" },
    );
  }
}

/** The record a replayed write answered with, once its fingerprint matches. */
export function replayed(res: Replayed, ctx: WriteContext): HandleRecord {
  checkFingerprint(res, ctx);
  if (!res.result) throw new HandleNotFound(ctx.idempotency?.scope ?? "");
  return res.result;
}

/** {@link Backend.update}, with the grant of `ctx` named in the changelog entry. */
export function update(
  core: Core,
  user: string,
  handle: string,
  change: Parameters<Backend["update"]>[2],
  ctx: WriteContext,
): ReturnType<Backend["update"]> {
  const g = ctx.grant;
  if (!g) return core.backend.update(user, handle, change, ctx);
  return core.backend.update(user, handle, (cur) => {
    const step = change(cur);
    if (step?.entry) {
      const text = JSON.stringify({ ...JSON.parse(step.entry.text), via: g.grant });
      return { ...step, entry: { ...step.entry, text } };
    }
    return step;
  }, ctx);
}

/** The last entry time written out, and its text: writes in the same millisecond share it. */
const LAST_AT = { at: NaN, iso: "" };

/** `new Date(at).toISOString()`, which costs a write about as much as its entry's JSON. */
function isoOf(at: number): string {
  if (at !== LAST_AT.at) {
    LAST_AT.iso = new Date(at).toISOString();
    LAST_AT.at = at;
  }
  return LAST_AT.iso;
}

/** A changelog entry for a write, or a marker when it is over `maxEntryBytes`. */
export function entry(
  core: Core,
  version: number,
  at: number,
  writer: string | null,
  op: ChangeInfo["op"],
  what: Record<string, unknown>,
): ChangeEntry {
  const head = { version, at: isoOf(at), writer, op };
  let text = JSON.stringify({ ...head, ...what });
  if (text.length * 3 > core.maxEntryBytes && utf8Length(text) > core.maxEntryBytes) {
    text = JSON.stringify({ ...head, omitted: true });
  }
  return { version, at, text };
}

/** The step writing `record`, with its changelog entry when the store keeps history. */
export function step(
  core: Core,
  record: HandleRecord,
  op: ChangeInfo["op"],
  what: Record<string, unknown>,
): Step {
  if (!core.retention) return { record };
  return {
    record,
    entry: entry(core, record.version, record.updatedAt, record.lastWriter, op, what),
  };
}

/**
 * The entry a grant change or a transfer leaves (SPEC 8.2), which the
 * backend numbers as the record's next version; `undefined` when the store
 * keeps no history.
 */
export function auditStep(
  core: Core,
  now: number,
  writer: string,
  op: ChangeInfo["op"],
  what: Record<string, unknown>,
): AuditStep | undefined {
  if (!core.retention) return undefined;
  const text = entry(core, 0, now, writer, op, what).text;
  return { at: now, tail: text.slice(AUDIT_HEAD.length), retention: core.retention };
}

/**
 * The entries `after < version <= upTo`, when the log holds every one of
 * them in full; `null` otherwise.
 */
export async function log(
  core: Core,
  user: string,
  handle: string,
  after: number,
  upTo: number,
): Promise<ChangeInfo[] | null> {
  if (after === upTo) return [];
  if (!core.retention) return null;
  const all = await entries(core, user, handle, after);
  const out: ChangeInfo[] = [];
  for (const info of all) {
    if (info.version > upTo) break;
    if (info.version !== after + 1 + out.length) return null;
    if (info.omitted) return null;
    // The way back is the store's own business: the wire form shows what changed.
    delete info.undo;
    out.push(info);
  }
  return out.length === upTo - after ? out : null;
}

/** The changelog entries after `after`, parsed, oldest first (`undo` included). */
export async function entries(
  core: Core,
  user: string,
  handle: string,
  after: number,
): Promise<(ChangeInfo & EntryInfo)[]> {
  const all = await call(core, () => core.backend.changes(user, handle, after));
  return all.map((e) => JSON.parse(e.text) as ChangeInfo & EntryInfo);
}

/**
 * The `StaleWrite` for a save based on `expect` while the record is at
 * `current`; `refusal` adds why a merging save did not merge.
 */
export async function stale(
  core: Core,
  user: string,
  handle: string,
  expect: number,
  current: HandleRecord,
  refusal: Record<string, unknown> = {},
): Promise<StaleWrite> {
  const extra: Record<string, unknown> = { base_version: expect, ...refusal };
  if (core.retention && expect < current.version) {
    const changes = await log(core, user, handle, expect, current.version).catch(() => null);
    // Bounded like a state: a log larger than the cap is left out.
    const fits = changes !== null && utf8Length(JSON.stringify(changes)) <= core.maxBytes;
    extra.changes = fits ? changes : null;
    if (!fits) extra.changes_truncated = true;
  }
  return new StaleWrite(handle, expect, toPayload(snapshotOf(current)), extra);
}

/**
 * Removes the records past their grace period (unless the backend reclaims
 * them by itself), then the grants that ended or expired longer than the
 * trash grace ago, in the background; never throws.
 */
export function reclaim(core: Core): void {
  if (core.closed) return;
  const now = core.clock();
  const { backend } = core;
  const records = backend.reclaimsExpired
    ? Promise.resolve()
    : backend.sweep(null, now - core.graceMs, now);
  records.then(() => backend.grants?.sweep(now - core.trashMs)).catch(() => {});
}

/**
 * Starts the background reclaim, unless the interval is 0 or there is
 * nothing to reclaim (the backend reclaims records by itself and has no grants).
 */
export function reclaimTimer(core: Core): ReturnType<typeof setInterval> | undefined {
  const idle = core.backend.reclaimsExpired && !core.backend.grants;
  if (idle || core.reclaimMs <= 0) return undefined;
  const timer = setInterval(() => reclaim(core), core.reclaimMs);
  Deno.unrefTimer(timer);
  return timer;
}

/** Closes the store once: stops the reclaim timer and closes the backend. */
export async function closeCore(
  core: Core,
  timer: ReturnType<typeof setInterval> | undefined,
): Promise<void> {
  if (core.closed) return;
  core.closed = true;
  clearInterval(timer);
  await core.backend.close();
}

/** The snapshot after an update step (patch, touch), with the write's lease. */
export async function written<S>(
  core: Core,
  user: string,
  handle: string,
  res: UpdateOutcome | Replayed,
  ctx: WriteContext,
  now: number,
): Promise<Snapshot<S>> {
  if (isReplayed(res)) {
    const snap = snapshotOf<S>(replayed(res, ctx));
    await leaseAfter(core, user, handle, ctx, undefined, true, snap);
    return snap;
  }
  const snap = snapshotOf<S>(alive(res.record, handle, now));
  await leaseAfter(core, user, handle, ctx, res.lease, false, snap);
  return snap;
}

/**
 * After a write landed (or was replayed): the lease it asked for in
 * `ctx.lease`. `taken` is the outcome when the backend took it with the
 * write; otherwise (a backend that does not, a write that changed nothing,
 * a replay) it is taken now, after a check that the handle is still live
 * for a replay. Sets `info.activeLease` to the lease in force. Never throws:
 * the lease is advisory, and the write already landed.
 */
export async function leaseAfter(
  core: Core,
  user: string,
  handle: string,
  ctx: WriteContext,
  taken: LeaseOutcome | undefined,
  wasReplayed: boolean,
  info?: HandleInfo,
): Promise<void> {
  const lease = ctx.lease;
  if (!lease) return;
  let out = taken;
  if (!out) {
    const b = core.backend;
    const leases = b.leases;
    if (!leases) return;
    try {
      out = await call(core, async () => {
        if (wasReplayed) alive(await b.read(user, handle), handle, core.clock());
        return await leases.acquire(user, handle, lease, ctx.now);
      });
    } catch {
      return;
    }
  }
  if (info) {
    info.activeLease = { holder: out.lease.holder, expiresAt: new Date(out.lease.expiresAt) };
  }
}

/** The active leases of `handles` (empty when the backend keeps none). */
export async function leasesOf(
  core: Core,
  user: string,
  handles: readonly string[],
  now: number,
): Promise<Map<string, LeaseRecord> | undefined> {
  return await core.backend.leases?.of(user, handles, now);
}

/** Sets `info.activeLease` from the lease `leases` holds for its handle, if any. */
export function withLease<T extends HandleInfo>(
  info: T,
  leases: Map<string, LeaseRecord> | undefined,
): T {
  const l = leases?.get(info.handle);
  if (l) info.activeLease = { holder: l.holder, expiresAt: new Date(l.expiresAt) };
  return info;
}

/**
 * A record's metadata as the store hands it out; `schemaVersion: false` for
 * listings (a fork's `forkedFrom` shows in both).
 */
export function infoOf(r: HandleMeta, schemaVersion = true): HandleInfo {
  return {
    handle: r.handle,
    kind: r.kind,
    version: r.version,
    createdAt: new Date(r.createdAt),
    updatedAt: new Date(r.updatedAt),
    expiresAt: r.expiresAt === null ? null : new Date(r.expiresAt),
    lastWriter: r.lastWriter,
    ...(r.schemaVersion == null || !schemaVersion ? {} : { schemaVersion: r.schemaVersion }),
    ...(r.forkedFrom == null ? {} : { forkedFrom: { ...r.forkedFrom } }),
  };
}

/** A record as a snapshot: its metadata and its parsed state. */
export function snapshotOf<S>(r: HandleRecord): Snapshot<S> {
  return { ...infoOf(r), state: decodeState<S>(r.state) };
}
