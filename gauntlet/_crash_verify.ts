/**
 * The crash gauntlet's checker: after a kill, the reopened store against
 * the model rebuilt from the child's lines (`_crash_model.ts`), record by
 * record, changelog by changelog; `_travel.ts` adds forks, grants and
 * aliases.
 *
 * @module
 */

import {
  type Backend as StoreBackend,
  type EncryptionOptions,
  HandleStore,
  openBackend,
  type Snapshot,
} from "../mod.ts";
import { vaultOf } from "../src/store/_vault.ts";
import {
  acknowledgedOps,
  applied,
  type Candidate,
  canonical,
  type ChildRun,
  crashUsers,
  expected,
  expiryOk,
  getOrNull,
  type Hist,
  minted,
  rebuild,
  type Rebuilt,
  sameJson,
  stateOf,
  summary,
} from "./_crash_model.ts";
import { forkInFlight, TravelCheck, type TravelCounts } from "./_travel.ts";

/** What the checker counts (a part of the crash report). */
export interface VerifyCounts extends TravelCounts {
  /** Acknowledged writes verified, by operation. */
  acknowledged: Record<string, number>;
  /** Writes in flight at the kill that turned out applied / not applied. */
  inFlight: { applied: number; notApplied: number };
  /** Writes in flight at the kill, by operation (applied or not). */
  inFlightOps: Record<string, number>;
  /** Writes refused with a code the run allows (they changed nothing). */
  refused: number;
  /** Records checked after the kills (per iteration, summed). */
  recordsChecked: number;
  /** Changelogs compared with the writes that produced their versions. */
  changelogsChecked: number;
}

/** What was found for one handle at the end of an iteration, for the final re-check. */
export interface Seen {
  user: string;
  handle: string;
  version: number | null;
  state: string | null;
}

/** How far back the changelog is compared (the default retention keeps 100 entries). */
const LOG_WINDOW = 60;

/** The backend of each store {@link openStore} opened: the changelog check reads it. */
const backendOf = new WeakMap<HandleStore, StoreBackend>();

/**
 * A store on `url` (no background reclaim), keeping the backend it runs on
 * (with keys, seen through the encryption seam: its changelog reads open).
 */
export async function openStore(
  url: string,
  encryption?: EncryptionOptions,
): Promise<HandleStore> {
  const backend = await openBackend(url);
  const store = new HandleStore(backend, {
    reclaimIntervalMs: 0,
    ...(encryption ? { encryption } : {}),
  });
  backendOf.set(store, encryption ? vaultOf(backend, encryption) : backend);
  return store;
}

/**
 * Checks a handle's changelog, as the backend holds it, against the writes
 * that produced its versions: the entries after `version - LOG_WINDOW` are
 * there, one per version and none beyond the record's, each with the right
 * operation and writer (and for patches the very ops sent and the grant
 * written through; for share, unshare, transfer and fork what they name);
 * the last one has the record's `updatedAt`. A record and its entry are
 * written together or not at all.
 *
 * @returns A violation, or `null`.
 */
async function logProblem(
  store: HandleStore,
  user: string,
  s: Snapshot,
  hist: Hist[],
  writer: string,
): Promise<string | null> {
  const from = Math.max(0, s.version - LOG_WINDOW);
  const entries = await backendOf.get(store)!.changes(user, s.handle, from);
  const versions = entries.map((e) => e.version);
  const want = Array.from({ length: s.version - from }, (_, i) => from + 1 + i);
  if (canonical(versions) !== canonical(want)) {
    return `changelog versions ${versions.join(",")}, expected ${from + 1}..${s.version}`;
  }
  for (const e of entries) {
    const h = hist[e.version - 1];
    if (!h) return `no write produced v${e.version}, yet the changelog has it`;
    let c: Record<string, unknown>;
    try {
      c = JSON.parse(e.text);
    } catch {
      return `changelog v${e.version} is not JSON: ${e.text.slice(0, 80)}`;
    }
    const problem = entryProblem(c, h, writer);
    if (problem) return `changelog v${e.version}: ${problem}`;
  }
  const last = entries.at(-1);
  if (last && last.at !== s.updatedAt.getTime()) {
    return `the last changelog entry (v${last.version}) is from ${last.at}, the record from ${s.updatedAt.getTime()}`;
  }
  return null;
}

/** What is wrong with one changelog entry `c`, written by the write `h`; `null` if nothing. */
function entryProblem(c: Record<string, unknown>, h: Hist, writer: string): string | null {
  if (c.op !== h.op) return `a ${c.op}, the write was a ${h.op}`;
  if (c.writer !== (h.who ?? writer)) return `writer ${c.writer}, expected ${h.who ?? writer}`;
  if (c.via !== h.via) return `via ${c.via}, the write went through ${h.via ?? "no grant"}`;
  // An entry past the size limit keeps only its head: version, time, writer, operation.
  if (c.omitted === true) return null;
  for (const [k, v] of Object.entries(h.what ?? {})) {
    if (!sameJson(c[k], v)) return `${k} ${canonical(c[k])}, expected ${canonical(v)}`;
  }
  if (h.op === "patch") {
    const ops = [
      { op: "increment", path: "", key: "n", by: h.by },
      { op: "append", path: "log", value: h.id },
    ];
    if (!sameJson(c.ops, ops)) return `ops ${canonical(c.ops)}, the patch was #${h.id}`;
  }
  if (h.op === "touch" && h.exp !== undefined) {
    const at = h.exp === null ? null : new Date(h.exp).toISOString();
    if (c.expires_at !== at) return `expires_at ${c.expires_at}, the touch set ${at}`;
  }
  return null;
}

/** Whether a record (held by `holder`, or nothing) is what candidate `c` says. */
function matches(c: Candidate, s: Snapshot | null, holder: string | null): boolean {
  if (c.m.deleted) return s === null;
  return s !== null && holder === c.m.owner && s.version === c.m.version &&
    sameJson(s.state, stateOf(c.m)) && expiryOk(c.m.expiry, s);
}

function describe(c: Candidate): string {
  return c.m.deleted ? "absent" : `v${c.m.version} of ${c.m.owner} ${summary(stateOf(c.m))}`;
}

/** A record and the user who holds it (`null`: nobody). */
interface Found {
  s: Snapshot | null;
  holder: string | null;
}

/** One iteration's check: the reopened store against the model. */
class Checker {
  readonly seen: Seen[] = [];
  /** Handle → who lists it, at which version (aliases left out: `_travel.ts` checks those). */
  readonly listed = new Map<string, { user: string; version: number }>();
  readonly travel: TravelCheck;

  constructor(
    readonly store: HandleStore,
    readonly r: Rebuilt,
    readonly holders: readonly string[],
    readonly writer: string,
    readonly mark: string,
    readonly counts: VerifyCounts,
    readonly fail: (msg: string) => void,
  ) {
    this.travel = new TravelCheck(store, counts, fail);
  }

  /** Counts a write that was in flight at the kill. */
  #inFlight(op: string, applied: boolean): void {
    this.counts.inFlight[applied ? "applied" : "notApplied"]++;
    this.counts.inFlightOps[op] = (this.counts.inFlightOps[op] ?? 0) + 1;
  }

  /** Lists every record of the users who hold handles. */
  async list(): Promise<void> {
    for (const u of this.holders) {
      for (const i of await this.store.list(u, { includeExpired: true })) {
        if (i.sharedBy !== undefined) continue;
        const other = this.listed.get(i.handle);
        if (other) this.fail(`${i.handle} is listed for ${other.user} and ${u}`);
        this.listed.set(i.handle, { user: u, version: i.version });
      }
    }
  }

  /** The record of `handle` under whichever user holds it (never two), checked against the listing. */
  async read(handle: string): Promise<Found> {
    let found: Found = { s: null, holder: null };
    for (const u of this.holders) {
      const s = await getOrNull(this.store, handle, u);
      if (s && found.s) this.fail(`${handle} is held by ${found.holder} and ${u} at once`);
      if (s) found = { s, holder: u };
    }
    const { s, holder } = found;
    this.seen.push({
      user: holder ?? this.holders[0]!,
      handle,
      version: s?.version ?? null,
      state: s ? canonical(s.state) : null,
    });
    this.counts.recordsChecked++;
    const info = this.listed.get(handle);
    if (s === null && info) this.fail(`${handle} is listed (v${info.version}) but can't be read`);
    if (s !== null) {
      if (!info || info.user !== holder) {
        this.fail(`${handle} (v${s.version}) can be read by ${holder} but is not listed for it`);
      } else if (info.version !== s.version) {
        this.fail(`${handle}: listed at v${info.version}, stored at v${s.version}`);
      }
      if (s.lastWriter !== this.writer) {
        this.fail(`${handle}: last writer ${s.lastWriter}, expected ${this.writer}`);
      }
      if (s.updatedAt.getTime() < s.createdAt.getTime()) {
        this.fail(`${handle}: updated before created`);
      }
    }
    return found;
  }

  async checkLog(s: Snapshot, holder: string, hist: Hist[]): Promise<void> {
    const problem = await logProblem(this.store, holder, s, hist, this.writer);
    this.counts.changelogsChecked++;
    if (problem) this.fail(`${s.handle}: ${problem}`);
  }

  /** Checks a record against its candidates: the one it matched, or `undefined`. */
  async explain(handle: string, candidates: Candidate[]): Promise<Candidate | undefined> {
    const { s, holder } = await this.read(handle);
    const match = candidates.find((c) => matches(c, s, holder));
    if (!match) {
      this.fail(
        `${handle}: found ${
          s === null ? "nothing" : `v${s.version} of ${holder} ${summary(s.state)}`
        }; expected ${candidates.map(describe).join(" or ")}`,
      );
      return undefined;
    }
    if (s && holder) {
      // An applied touch's expiry is known only from the record.
      const hist = match.m.hist.map((h, i) =>
        i === s.version - 1 && h.op === "touch" && h.exp === undefined
          ? { ...h, exp: s.expiresAt === null ? null : s.expiresAt.getTime() }
          : h
      );
      await this.checkLog(s, holder, hist);
      await this.travel.record(match, s);
    }
    return match;
  }

  /** Every acknowledged handle, with the write in flight on it applied whole or not at all. */
  async models(): Promise<void> {
    for (const [handle, m] of this.r.models) {
      const p = this.r.pending.get(handle);
      const match = await this.explain(handle, p ? [expected(m), applied(m, p)] : [expected(m)]);
      if (p && match) this.#inFlight(p.op!, match.m !== m);
      await this.travel.ended(match?.m ?? m);
    }
  }

  /** A record nobody acknowledged must be the whole result of a mint or fork in flight. */
  async unacknowledged(): Promise<void> {
    const r = this.r;
    const mints = r.pendingMints.length, forks = r.pendingForks.length;
    for (const [handle, info] of this.listed) {
      if (r.models.has(handle) || handle === r.shared) continue;
      const s = await getOrNull(this.store, handle, info.user);
      if (s?.kind === "counter" && r.sharedMintPending && !r.shared) {
        r.shared = handle;
        this.#inFlight("mint", true);
        continue; // checked with the shared counter
      }
      const st = (s?.state ?? {}) as { lane?: number; seed?: number };
      const mint = s?.forkedFrom
        ? undefined
        : r.pendingMints.find((b) => b.lane === st.lane && b.seed === st.seed);
      const fork = s?.forkedFrom ? forkInFlight(s, r) : null;
      if (mint) r.pendingMints.splice(r.pendingMints.indexOf(mint), 1);
      const c = fork ??
        (mint &&
          {
            what: `in-flight mint #${mint.id} applied`,
            m: minted(handle, mint, info.user, this.mark),
          });
      if (c) await this.explain(handle, [c]);
      else {
        const { s: found, holder } = await this.read(handle);
        if (found) {
          this.fail(
            `${handle} (v${found.version} of ${holder} ${
              summary(found.state)
            }) was never acknowledged and matches no write in flight`,
          );
        }
      }
    }
    for (
      const [op, before, after] of [["mint", mints, r.pendingMints], [
        "fork",
        forks,
        r.pendingForks,
      ]] as const
    ) {
      for (let i = 0; i < before; i++) this.#inFlight(op, i >= after.length);
    }
  }

  /** The shared counter: every acknowledged increment counted once, nothing invented. */
  async shared(): Promise<void> {
    const r = this.r;
    if (!r.shared) return;
    const { s, holder } = await this.read(r.shared);
    if (s === null || holder === null) {
      this.fail(`the shared counter ${r.shared} is gone`);
      return;
    }
    const st = s.state as { n?: unknown; log?: unknown };
    const log = Array.isArray(st.log) ? st.log as number[] : [];
    if (st.n !== log.length) this.fail(`shared counter: n = ${st.n} but ${log.length} log entries`);
    if (s.version !== 1 + log.length) {
      this.fail(`shared counter: v${s.version} after ${log.length} patches`);
    }
    if (new Set(log).size !== log.length) this.fail("shared counter: a patch was applied twice");
    for (const id of r.sharedAcked) {
      if (!log.includes(id)) this.fail(`shared counter: acknowledged patch #${id} is lost`);
    }
    for (const id of log) {
      if (!r.sharedBegun.has(id)) this.fail(`shared counter: patch #${id} was never sent`);
    }
    for (const id of r.sharedBegun) {
      if (r.sharedAcked.has(id)) continue;
      this.#inFlight("shared", log.includes(id));
    }
    // Version v + 1 is the patch that appended log[v - 1]: the changelog must say so.
    await this.checkLog(s, holder, [
      { op: "mint" },
      ...log.map((id): Hist => ({ op: "patch", id, by: 1 })),
    ]);
  }
}

/**
 * One iteration: the user the child wrote as, the mark of its states, its
 * tag in messages, and the codes its writes may be refused with.
 */
export interface Iteration {
  user: string;
  mark: string;
  tag: string;
  refusable?: ReadonlySet<string>;
}

/**
 * Checks one iteration's records against the child's lines.
 *
 * @returns The records seen (for the final re-check); pushes violations to `failures`.
 */
export async function verify(
  store: HandleStore,
  { user, mark, tag, refusable = new Set() }: Iteration,
  run: ChildRun,
  counts: VerifyCounts,
  failures: string[],
): Promise<Seen[]> {
  const fail = (msg: string) => failures.push(`${tag}: ${msg}`);
  if (!run.status.signal && !run.beforeReady) {
    fail(`the child exited by itself (code ${run.status.code}): ${run.stderr.slice(0, 500)}`);
  }
  const users = crashUsers(user);
  const r = rebuild(run, users.owner, mark, refusable, fail);
  counts.refused += r.refused;
  for (const [op, n] of Object.entries(acknowledgedOps(run))) {
    counts.acknowledged[op] = (counts.acknowledged[op] ?? 0) + n;
  }
  const check = new Checker(
    store,
    r,
    [users.owner, users.other],
    `crash-child/${run.pid}`,
    mark,
    counts,
    fail,
  );
  await check.list();
  await check.models();
  await check.unacknowledged();
  await check.shared();
  await check.travel.listings([users.owner, users.other, users.grantee]);
  return check.seen;
}
