/**
 * The crash gauntlet's model: what the writer child printed (`_crash_child.ts`)
 * rebuilt into the records the store must hold, one {@link Model} per
 * acknowledged handle, with the writes that were in flight at the kill set
 * apart. `crash.ts` and `_travel.ts` check the store against it.
 *
 * @module
 */

import type { HandleStore, JsonObject, Snapshot } from "../mod.ts";
import { McpStateError } from "../mod.ts";
import { body, messageOf } from "./_util.ts";

/** One line the child printed. */
export interface Line {
  t: "ready" | "begin" | "ack" | "fail";
  id?: number;
  lane?: number;
  op?: string;
  h?: string;
  v?: number;
  [k: string]: unknown;
}

/** What one run of the child left: its lines, how it ended. */
export interface ChildRun {
  lines: Line[];
  stderr: string;
  pid: number;
  beforeReady: boolean;
  status: Deno.CommandStatus;
}

/**
 * The users of one iteration: the child writes as `owner`, transfers
 * handles between `owner` and `other`, and shares them with `grantee`.
 */
export function crashUsers(user: string): { owner: string; other: string; grantee: string } {
  return { owner: user, other: `${user}-to`, grantee: `${user}-by` };
}

/**
 * A record's expiry: absolute, relative to its creation, set by a touch in
 * flight (relative to its update), or unknown (a fork of a handle whose
 * expiry is relative to the origin's creation).
 */
export type Expiry =
  | { at: number | null }
  | { fromCreated: number }
  | { touchedTtl: number | null }
  | { unknown: true };

/** What produced one version: the changelog entry it must have. */
export interface Hist {
  op: "mint" | "save" | "patch" | "touch" | "fork" | "share" | "unshare" | "transfer";
  /** Patch: the appended id and the increment. */
  id?: number;
  by?: number;
  /** Touch: the expiry it set (`undefined`: known only from the record). */
  exp?: number | null;
  /** The entry's writer when it is not the child's label: the user who shared, unshared, moved. */
  who?: string;
  /** A patch through a grant: the grant. */
  via?: string;
  /** Members the entry must carry as they are (share, unshare, transfer, fork). */
  what?: Record<string, unknown>;
}

/** A grant the child was told about. */
export interface GrantModel {
  grant: string;
  alias: string;
  to: string;
  rights: string;
}

/** One handle as the acknowledged writes left it. */
export interface Model {
  handle: string;
  lane: number;
  /** Who holds it now (transfers move it). */
  owner: string;
  version: number;
  rev: number;
  n: number;
  log: number[];
  seed: number;
  len: number;
  /** The string every state of the run carries (looked for in the engine's storage). */
  mark: string;
  expiry: Expiry;
  /** In the trash (revoked, restorable). */
  deleted: boolean;
  /** `hist[v - 1]` produced version `v`. */
  hist: Hist[];
  /** Acknowledged grants in force. */
  grants: GrantModel[];
  /** Acknowledged grants that ended (unshared, or ended by a transfer): their aliases are gone. */
  ended: GrantModel[];
  /** Grants in force whose ids nobody printed: a transfer's `keep`, a share in flight. */
  unknownGrants: { to: string; rights: string }[];
  /** A fork's origin at the fork. */
  forkedFrom?: { handle: string; version: number };
}

/** What one record may look like: the model after the acknowledged writes, or with the one in flight. */
export interface Candidate {
  what: string;
  m: Model;
}

/** The models rebuilt from one run's lines. */
export interface Rebuilt {
  models: Map<string, Model>;
  /** Model handle → the write in flight on it at the kill. */
  pending: Map<string, Line>;
  /** Mints and forks in flight (their handles were never printed). */
  pendingMints: Line[];
  pendingForks: Line[];
  /** The counter every lane patches. */
  shared?: string;
  /** Writes refused with a code the run allows (they changed nothing). */
  refused: number;
  sharedMintPending: boolean;
  sharedBegun: Set<number>;
  sharedAcked: Set<number>;
}

/** The state a model stands for. */
export function stateOf(
  m: Pick<Model, "lane" | "rev" | "n" | "log" | "seed" | "len" | "mark">,
): JsonObject {
  return {
    lane: m.lane,
    rev: m.rev,
    n: m.n,
    log: m.log,
    seed: m.seed,
    len: m.len,
    mark: m.mark,
    body: body(m.seed, m.len),
  };
}

/** A new handle's model. */
function fresh(
  handle: string,
  from: Pick<Model, "lane" | "owner" | "rev" | "n" | "log" | "seed" | "len" | "mark" | "expiry">,
  first: Hist,
): Model {
  return {
    handle,
    lane: from.lane,
    owner: from.owner,
    version: 1,
    rev: from.rev,
    n: from.n,
    log: from.log,
    seed: from.seed,
    len: from.len,
    mark: from.mark,
    expiry: from.expiry,
    deleted: false,
    hist: [first],
    grants: [],
    ended: [],
    unknownGrants: [],
  };
}

/** The model of a handle `owner` minted, as the mint's begin line describes it. */
export function minted(handle: string, begin: Line, owner: string, mark: string): Model {
  return fresh(handle, {
    lane: begin.lane!,
    owner,
    mark,
    rev: 0,
    n: 0,
    log: [],
    seed: begin.seed as number,
    len: begin.len as number,
    expiry: begin.ttl === null ? { at: null } : { fromCreated: begin.ttl as number },
  }, { op: "mint" });
}

/** The model of a fork of `origin` as it stands. */
export function forked(handle: string, origin: Model): Model {
  const from = { handle: origin.handle, version: origin.version };
  // The fork keeps the origin's expiry: known here only when it is absolute.
  const expiry: Expiry = "at" in origin.expiry ? origin.expiry : { unknown: true };
  return {
    ...fresh(handle, { ...origin, expiry }, { op: "fork", what: { from } }),
    forkedFrom: from,
  };
}

/**
 * Applies one write to a model: an acknowledged one (`ack`), or one in
 * flight at the kill taken as applied (`ack` null: what only its answer
 * would tell stays open).
 *
 * @returns A violation, or `null`.
 */
export function applyWrite(m: Model, l: Line, ack: Line | null): string | null {
  if (l.op === "revoke") {
    m.deleted = true;
    return null;
  }
  if (l.op === "restore") {
    m.deleted = false;
    return ack && ack.v !== m.version
      ? `restore #${l.id} gave back v${ack.v}, the handle was at v${m.version}`
      : null;
  }
  m.version += 1;
  const wrong = ack && typeof ack.v === "number" && ack.v !== m.version
    ? `${l.op} #${l.id} acknowledged version ${ack.v}, expected ${m.version}`
    : null;
  switch (l.op) {
    case "save":
      m.rev = l.rev as number;
      m.seed = l.seed as number;
      m.len = l.len as number;
      m.hist.push({ op: "save" });
      break;
    case "patch":
    case "apatch":
      m.n += l.by as number;
      m.log = [...m.log, l.id!];
      m.hist.push({
        op: "patch",
        id: l.id!,
        by: l.by as number,
        ...(l.op === "apatch" ? { via: l.grant as string } : {}),
      });
      break;
    case "touch":
      if (ack) m.expiry = { at: ack.exp as number | null };
      else m.expiry = { touchedTtl: l.ttl as number | null };
      m.hist.push({ op: "touch", ...(ack ? { exp: ack.exp as number | null } : {}) });
      break;
    default:
      return applyTravel(m, l, ack) ?? wrong;
  }
  return wrong;
}

/** {@link applyWrite} of share, unshare and transfer: versions that change no state. */
function applyTravel(m: Model, l: Line, ack: Line | null): string | null {
  const to = l.to as string;
  switch (l.op) {
    case "share": {
      const rights = l.rights as string;
      if (ack) {
        m.grants.push({ grant: ack.grant as string, alias: ack.alias as string, to, rights });
      } else m.unknownGrants.push({ to, rights });
      const what = { to, rights, ...(ack ? { grant: ack.grant } : {}) };
      m.hist.push({ op: "share", who: m.owner, what });
      return null;
    }
    case "unshare": {
      const g = m.grants.find((x) => x.grant === l.grant);
      if (!g) return `unshare #${l.id} of ${l.grant}, which is no grant in force on ${m.handle}`;
      m.grants.splice(m.grants.indexOf(g), 1);
      m.ended.push(g);
      m.hist.push({ op: "unshare", who: m.owner, what: { grant: g.grant } });
      return ack && ack.n !== 1 ? `unshare #${l.id} ended ${ack.n} grants, not 1` : null;
    }
    case "transfer": {
      const keep = l.keep as string | null;
      const from = m.owner;
      m.hist.push({
        op: "transfer",
        who: from,
        what: { from, to, ...(keep ? { keep } : {}) },
      });
      // Grants the old owner made end in the same step; a kept one is the new owner's.
      m.ended.push(...m.grants);
      m.grants = [];
      m.unknownGrants = keep ? [{ to: from, rights: keep }] : [];
      m.owner = to;
      return null;
    }
    default:
      throw new Error(`no model for ${l.op}`);
  }
}

/** The model as acknowledged. */
export function expected(m: Model): Candidate {
  return { what: "acknowledged", m };
}

/** The model with the write in flight applied. */
export function applied(m: Model, begin: Line): Candidate {
  const c = structuredClone(m);
  applyWrite(c, begin, null);
  return { what: `in-flight ${begin.op} #${begin.id} applied`, m: c };
}

/**
 * Rebuilds the expected models from the child's lines, in order.
 *
 * @param run The child's run.
 * @param owner The user the child mints as.
 * @param mark The string every state of the run carries.
 * @param refusable Codes a write may be refused with (it then changed nothing).
 * @param fail Reports a violation.
 */
export function rebuild(
  run: ChildRun,
  owner: string,
  mark: string,
  refusable: ReadonlySet<string>,
  fail: (msg: string) => void,
): Rebuilt {
  const acks = new Map<number, Line>();
  const refused = new Set<number>();
  const begun = new Map(run.lines.filter((l) => l.t === "begin").map((l) => [l.id!, l]));
  for (const l of run.lines) {
    if (l.t === "ack") acks.set(l.id!, l);
    else if (l.t === "fail" && refusable.has(String(l.code))) refused.add(l.id!);
    else if (l.t === "fail") {
      const b = begun.get(l.id!);
      fail(
        `the child's write #${l.id} (${b?.op} of ${b?.h} as ${b?.u}) was refused: ${l.code} ${l.message}`,
      );
    }
  }
  const r: Rebuilt = {
    models: new Map(),
    pending: new Map(),
    pendingMints: [],
    pendingForks: [],
    sharedMintPending: false,
    sharedBegun: new Set(),
    sharedAcked: new Set(),
    refused: refused.size,
  };
  for (const l of run.lines) {
    // A write refused with a structured error is one that never happened.
    if (l.t !== "begin" || refused.has(l.id!)) continue;
    const ack = acks.get(l.id!) ?? null;
    if (l.op === "mint-shared") {
      if (ack) r.shared = ack.h!;
      else r.sharedMintPending = true;
    } else if (l.op === "shared") {
      r.sharedBegun.add(l.id!);
      if (ack) r.sharedAcked.add(l.id!);
    } else if (l.op === "mint") {
      if (ack) r.models.set(ack.h!, minted(ack.h!, l, owner, mark));
      else r.pendingMints.push(l);
    } else {
      const m = r.models.get(l.h!);
      if (!m) fail(`write #${l.id} targets ${l.h}, which no acknowledged mint or fork created`);
      else if (l.u !== m.owner) fail(`write #${l.id} on ${l.h} as ${l.u}, which ${m.owner} holds`);
      else if (l.op === "fork") {
        if (ack) r.models.set(ack.h!, forked(ack.h!, m));
        else r.pendingForks.push(l);
      } else if (!ack) {
        if (r.pending.has(m.handle)) fail(`two writes in flight on ${m.handle}`);
        r.pending.set(m.handle, l);
      } else {
        const problem = applyWrite(m, l, ack);
        if (problem) fail(problem);
      }
    }
  }
  return r;
}

/** The acknowledged writes of one run, by operation. */
export function acknowledgedOps(run: ChildRun): Record<string, number> {
  const acked = new Set(run.lines.filter((l) => l.t === "ack").map((l) => l.id!));
  const out: Record<string, number> = {};
  for (const l of run.lines) {
    if (l.t !== "begin" || !acked.has(l.id!) || l.op === "mint-shared") continue;
    out[l.op!] = (out[l.op!] ?? 0) + 1;
  }
  return out;
}

/** Whether a record's expiry is the one expected. */
export function expiryOk(e: Expiry, s: Snapshot): boolean {
  const got = s.expiresAt === null ? null : s.expiresAt.getTime();
  if ("unknown" in e) return true;
  if ("at" in e) return got === e.at;
  if ("fromCreated" in e) return got === s.createdAt.getTime() + Math.round(e.fromCreated * DAY);
  return e.touchedTtl === null
    ? got === null
    : got === s.updatedAt.getTime() + Math.round(e.touchedTtl * DAY);
}

const DAY = 86_400_000;

/** A state without its body, for messages. */
export function summary(state: unknown): string {
  const { body: text, ...rest } = (state ?? {}) as Record<string, unknown>;
  return `${canonical(rest)} (body of ${
    typeof text === "string" ? [...text].length : "?"
  } code points)`;
}

/** Whether two JSON values are equal (key order aside). */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

/** JSON with sorted keys. */
export function canonical(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(canonical).join(",")}]`;
  if (typeof x === "object" && x !== null) {
    const keys = Object.keys(x).sort();
    return `{${
      keys.map((k) => `${JSON.stringify(k)}:${canonical((x as Record<string, unknown>)[k])}`)
        .join(",")
    }}`;
  }
  return JSON.stringify(x);
}

/**
 * A snapshot, or `null` for `handle_not_found` (a revoked alias included);
 * any other error is thrown naming the handle and the user.
 */
export async function getOrNull(
  store: HandleStore,
  handle: string,
  user: string,
): Promise<Snapshot | null> {
  try {
    return await store.get(handle, { user });
  } catch (e) {
    if (e instanceof McpStateError && e.code === "handle_not_found") return null;
    const reason = e instanceof McpStateError ? ` (${e.code} ${JSON.stringify(e.details)})` : "";
    throw new Error(`reading ${handle} as ${user}${reason}: ${messageOf(e)}`, { cause: e });
  }
}
