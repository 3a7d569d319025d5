/**
 * The crash gauntlet's erase kills: after an iteration was verified, one of
 * its users is erased with the real CLI, `mcpstate erase --user U --yes`,
 * SIGKILLed at a random moment around the time a dry run of it takes; then
 * erase runs again to completion. Afterwards
 *
 * - nothing of the user is left through any API: no record, listing, alias
 *   (held or given), usage, export or entry in `users()`, a second erase
 *   counts zero, and with keys the user's data key is gone;
 * - nothing of its states is left in the engine's storage: slices of the
 *   states only the user held, found there before, are found nowhere after
 *   (without keys; with keys they were never there in clear);
 * - the other users are untouched: every record of theirs reads exactly as
 *   verified, and only the grants made to the user are gone from theirs.
 *
 * @module
 */

import { type Backend as StoreBackend, type HandleStore, openBackend } from "../mod.ts";
import { mcpstate } from "../tests/_cli_run.ts";
import { canonical, getOrNull } from "./_crash_model.ts";
import type { Seen } from "./_crash_verify.ts";
import { dump, type Storage } from "./_plaintext.ts";
import { cliEnvOf, killedCli } from "./_maintenance.ts";
import type { Rng } from "./_util.ts";

/** What the erase kills count (a part of the crash report). */
export interface EraseCounts {
  /** Deno KV: slices found only in an old owner's changelog left for `sweep` by a killed transfer. */
  eraseLeftForSweep: number;
  /** Erases run (each: one kill, one rerun to completion, one check). */
  eraseRuns: number;
  /** Of those, the killed run had erased a part of the user already (a torn erase). */
  eraseTorn: number;
  /** Of those, the killed run had finished before the kill. */
  eraseFinished: number;
  /** Slices of the erased users' states found in the storage before, and checked gone after. */
  eraseSlices: number;
}

/** What an erase kill needs of its iteration. */
export interface EraseTarget {
  /** The backend's URL and storage, the private HOME of the CLI runs, the keys. */
  url: string;
  storage: Storage;
  home: string;
  keys?: string;
  /** Opens the store as the checker does. */
  open: () => Promise<HandleStore>;
  /** The user to erase. */
  user: string;
  /** The records this iteration's verification saw (updated here for the final re-check). */
  seen: Seen[];
  /** The handles the iteration's child forked (their states have copies). */
  forked: ReadonlySet<string>;
  rng: Rng;
  tag: string;
}

/** What the user has, as the store answers before the erase. */
interface Holdings {
  handles: string[];
  /** Of those, the ones that are forks (their states are copies). */
  forks: Set<string>;
  /** Aliases the user holds: grants of others to it. */
  held: string[];
  /** Grants the user made on its handles: alias and grantee. */
  given: { alias: string; to: string }[];
  /** Others' handles, by owner, and the grants on them to users other than the erased one. */
  othersGrants: Map<string, string[]>;
}

async function holdings(store: HandleStore, t: EraseTarget): Promise<Holdings> {
  const listed = await store.list(t.user, { includeExpired: true });
  const handles = listed.filter((i) => i.sharedBy === undefined).map((i) => i.handle);
  const held = listed.filter((i) => i.sharedBy !== undefined).map((i) => i.handle);
  const given: Holdings["given"] = [];
  const forks = new Set<string>();
  for (const h of handles) {
    for (const g of await store.grants(h, { user: t.user })) {
      given.push({ alias: g.handle, to: g.to });
    }
    if ((await getOrNull(store, h, t.user))?.forkedFrom) forks.add(h);
  }
  const othersGrants = new Map<string, string[]>();
  for (const s of t.seen) {
    if (s.user === t.user || s.version === null) continue;
    const grants = await store.grants(s.handle, { user: s.user });
    othersGrants.set(
      `${s.user} ${s.handle}`,
      grants.filter((g) => g.to !== t.user).map((g) => g.grant).sort(),
    );
  }
  return { handles, forks, held, given, othersGrants };
}

/**
 * Slices of states only the erased user holds, as the engine stores them:
 * a run of characters JSON leaves as they are, from the state of a handle
 * that is no fork and was never forked (a fork's record and first changelog
 * entry copy its origin's state, so those may stay with another user), and
 * that no other record shares.
 */
function needles(t: EraseTarget, before: Holdings): string[] {
  const owners = new Map<string, Set<string>>();
  const own = new Map<string, string>();
  for (const s of t.seen) {
    if (s.state === null) continue;
    const body = (JSON.parse(s.state) as { body?: unknown }).body;
    if (typeof body !== "string") continue;
    owners.set(body, (owners.get(body) ?? new Set()).add(s.user));
    if (s.user === t.user && !t.forked.has(s.handle) && !before.forks.has(s.handle)) {
      own.set(s.handle, body);
    }
  }
  const out: string[] = [];
  for (const body of own.values()) {
    if (owners.get(body)!.size !== 1) continue;
    const run = /[a-z0-9 _.,;:!?/-]{16,}/.exec(body);
    if (run) out.push(run[0].slice(0, 24));
  }
  return out;
}

/** Runs `mcpstate erase` for `user` to completion: its exit code and output. */
function eraseCli(t: EraseTarget, yes: boolean) {
  return mcpstate(t.home, ["erase", "--user", t.user, "--json", ...(yes ? ["--yes"] : [])], {
    env: cliEnvOf(t.url, t.keys),
  });
}

/** The backend the store runs on, with keys through the seam or not: its data keys. */
async function dataKeyOf(url: string, user: string): Promise<unknown> {
  const backend: StoreBackend = await openBackend(url);
  try {
    return await backend.keys?.get(user) ?? null;
  } finally {
    await backend.close();
  }
}

/** Whether `user` is among the store's users (paging through all). */
async function listedUser(store: HandleStore, user: string): Promise<boolean> {
  let after: string | undefined;
  for (;;) {
    const page = await store.users({ ...(after === undefined ? {} : { after }), limit: 1000 });
    if (page.includes(user)) return true;
    if (page.length < 1000) return false;
    after = page.at(-1);
  }
}

/**
 * One erase kill (see the module doc): pushes violations to `failures`,
 * counts into `counts`, and marks the erased user's records gone in
 * `t.seen`.
 */
export async function eraseKill(
  t: EraseTarget,
  counts: EraseCounts,
  failures: string[],
): Promise<void> {
  const fail = (msg: string) => failures.push(`${t.tag}: erase ${t.user}: ${msg}`);
  let store = await t.open();
  let before: Holdings;
  let total: number, countMs: number;
  try {
    before = await holdings(store, t);
    const c0 = performance.now();
    const n = await store.erase(t.user, { dryRun: true });
    countMs = performance.now() - c0;
    total = n.handles + n.grants;
  } finally {
    await store.close();
  }
  const slices = needles(t, before);
  const stored = slices.length > 0 && t.keys === undefined ? await dump(t.storage) : [];
  const present = slices.filter((s) => stored.some((x) => x.what.includes(s)));

  // The CLI's dry run takes its start-up and a count; the erase, about as
  // long as a count, begins after the same start-up: the kill lands around it.
  const t0 = performance.now();
  const dry = await eraseCli(t, false);
  const startMs = performance.now() - t0 - countMs;
  if (dry.code !== 1) fail(`the dry run exited ${dry.code}: ${dry.stderr.slice(0, 300)}`);
  counts.eraseRuns++;
  const span = Math.max(countMs, 5);
  const killMs = Math.max(0, Math.round(startMs + (2.5 * t.rng.next() - 0.5) * span));
  const args = ["erase", "--user", t.user, "--yes"];
  if (await killedCli(t.home, args, cliEnvOf(t.url, t.keys), killMs)) counts.eraseFinished++;

  store = await t.open();
  try {
    const left = await store.erase(t.user, { dryRun: true });
    if (left.handles + left.grants > 0 && left.handles + left.grants < total) counts.eraseTorn++;
  } finally {
    await store.close();
  }
  const rerun = await eraseCli(t, true);
  if (rerun.code !== 0) fail(`the rerun exited ${rerun.code}: ${rerun.stderr.slice(0, 300)}`);

  store = await t.open();
  try {
    await checkGone(store, t, before, fail);
    await checkOthers(store, t, before, fail);
  } finally {
    await store.close();
  }
  if (t.keys !== undefined && await dataKeyOf(t.url, t.user) !== null) {
    fail("its data key is still stored");
  }
  counts.eraseSlices += present.length;
  if (present.length > 0) {
    const after = await dump(t.storage);
    // On Deno KV a transfer's commit hands the old owner's changelog to the
    // collector; a kill right after it leaves that copy, under the old owner,
    // for `sweep` (docs/limits.md): erase of the handle's new owner does not
    // reach it. Counted, not failed.
    const leftForSweep = (where: string) =>
      "denokv" in t.storage && where.includes('"log"') && !where.includes(JSON.stringify(t.user));
    for (const s of present) {
      const hits = after.filter((x) => x.what.includes(s));
      counts.eraseLeftForSweep += hits.filter((x) => leftForSweep(x.where)).length;
      const where = hits.filter((x) => !leftForSweep(x.where)).map((x) => x.where.slice(0, 80));
      if (where.length > 0) fail(`a slice of its state is still stored: ${where.join(", ")}`);
    }
  }
  for (const s of t.seen) {
    if (s.user === t.user) Object.assign(s, { version: null, state: null });
  }
}

/** Nothing of the user is left through any API. */
async function checkGone(
  store: HandleStore,
  t: EraseTarget,
  before: Holdings,
  fail: (msg: string) => void,
): Promise<void> {
  const n = await store.erase(t.user, { dryRun: true });
  if (n.handles + n.grants > 0) fail(`a second erase would still remove ${canonical(n)}`);
  const listed = await store.list(t.user, { includeExpired: true });
  if (listed.length > 0) fail(`it still lists ${listed.map((i) => i.handle).join(", ")}`);
  if (await listedUser(store, t.user)) fail("users() still names it");
  if ((await store.usage(t.user)).handles !== 0) fail("its usage still counts handles");
  for await (const r of store.exportRecords(t.user)) fail(`export still gives ${r.handle}`);
  for (const h of [...before.handles, ...before.held]) {
    if (await getOrNull(store, h, t.user)) fail(`${h} still reads for it`);
  }
  for (const g of before.given) {
    if (await getOrNull(store, g.alias, g.to)) fail(`its grant's alias ${g.alias} still reads`);
  }
}

/** The other users' records read as verified; only the grants to the erased user are gone. */
async function checkOthers(
  store: HandleStore,
  t: EraseTarget,
  before: Holdings,
  fail: (msg: string) => void,
): Promise<void> {
  for (const s of t.seen) {
    if (s.user === t.user) continue;
    const got = await getOrNull(store, s.handle, s.user);
    if ((got?.version ?? null) !== s.version || (got ? canonical(got.state) : null) !== s.state) {
      fail(`${s.handle} of ${s.user} changed: v${got?.version ?? "–"}, verified v${s.version}`);
    }
    const kept = before.othersGrants.get(`${s.user} ${s.handle}`);
    if (kept === undefined || got === null) continue;
    const now = (await store.grants(s.handle, { user: s.user })).map((g) => g.grant).sort();
    if (canonical(now) !== canonical(kept)) {
      fail(`the grants on ${s.handle} of ${s.user} are ${canonical(now)}, were ${canonical(kept)}`);
    }
  }
}
