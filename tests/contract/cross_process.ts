/**
 * Cross-process: real OS processes (`tests/_child.ts`) on the target's URL —
 * writers in two processes patching one handle, and a writer process killed
 * with SIGKILL in the middle of its writes. Both workloads are exported, for
 * engine tests that run them with other settings.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Append, HandleStore, Increment, type Snapshot } from "../../mod.ts";
import { openBackend } from "../../src/url.ts";
import { freshUser, sleep, within } from "../_helpers.ts";
import { spawnChild } from "../_child.ts";
import { type EngineChecks, group, step, type WorkloadRun } from "./_group.ts";

/** The state every workload patches: a counter and the log of every patch. */
type Counter = { n: number; log: string[] };

/** Settings of {@link writersInTwoProcesses}. */
export interface WritersOptions {
  /** Concurrent writers in each process (default 8). */
  writers?: number;
  /** Stores (connections) the writers of each process share (default: one, then one each). */
  stores?: [number, number];
  /** Patches per writer (default 25). */
  count?: number;
  /** A pause after each patch, in ms (default none). */
  pauseMs?: number;
  /** Bytes of padding in the handle's state (default none). */
  pad?: number;
}

/** What {@link writersInTwoProcesses} leaves: the run and the handle's log. */
export interface WritersRun extends WorkloadRun {
  /** The `log` of the handle's state: every patch's entry, in the order they landed. */
  log: string[];
}

/**
 * Writers in two OS processes patch one handle at the same moment: every
 * patch lands exactly once, each writer's in the order it made them, no
 * process sees a "locked" or "busy" error, and the changelog matches the
 * state.
 *
 * @param url The backend URL, shared by the test and both processes.
 * @param options How many writers, connections and patches.
 * @param inspect Engine checks before and after.
 * @returns What landed.
 */
export async function writersInTwoProcesses(
  url: string,
  options: WritersOptions = {},
  inspect: EngineChecks = {},
): Promise<WritersRun> {
  const { writers = 8, count = 25, pauseMs = 0 } = options;
  const stores = options.stores ?? [1, writers];
  await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  const user = freshUser();
  const pad = "p".repeat(options.pad ?? 0);
  const handle = await store.mint("counter", { n: 0, log: [], ...(pad ? { pad } : {}) }, { user });
  await inspect.beforeWriters?.();
  const tags = ["a", "b"] as const;
  const children = tags.map((tag, k) =>
    spawnChild([
      "writers",
      ...[url, user, handle, tag, writers, stores[k], count, pauseMs].map(String),
    ])
  );
  try {
    for (const [k, child] of children.entries()) {
      assert.equal(await child.line(`writer process ${tags[k]}`), "ready");
    }
    // Both processes start writing at the same moment.
    for (const child of children) await child.send("go");
    await Promise.all(children.map(async (child, k) => {
      const summary = await child.line(`writer process ${tags[k]}`);
      const stderr = await child.succeeded();
      assert.doesNotMatch(stderr, /locked|busy/i);
      assert.deepEqual(JSON.parse(summary), { patches: writers * count });
    }));
  } finally {
    for (const child of children) child.kill();
  }
  const s = await store.get<Counter>(handle, { user });
  const total = 2 * writers * count;
  assert.equal(s.state.n, total);
  assert.equal(s.state.log.length, total);
  assert.equal(new Set(s.state.log).size, total);
  assert.equal(s.version, total + 1);
  for (const tag of tags) {
    for (let w = 0; w < writers; w++) {
      const mine = s.state.log.filter((x) => x.startsWith(`${tag}/${w}:`));
      // One writer's patches land in the order it made them.
      assert.deepEqual(mine, Array.from({ length: count }, (_, i) => `${tag}/${w}:${i}`));
    }
  }
  await assertLogInStep(store, user, handle, s);
  const run = { user, handle, version: s.version, patches: total, log: s.state.log };
  await inspect.afterWriters?.(run);
  return run;
}

/**
 * A writer process with six writers on one store (every other one passing
 * idempotency keys) patches a handle with a 64 KB state until it passes
 * version 150, and is killed with SIGKILL while its writes are in flight:
 * every acknowledged patch is there, none twice, each writer's in order
 * without a gap, and the changelog holds exactly the retention's last 100
 * entries, each the write that made its version; the next write goes on
 * from there, entry and all.
 *
 * @param url The backend URL, shared by the test and the process.
 * @param inspect Engine checks after.
 * @returns What landed.
 */
export async function killWriterMidWrites(
  url: string,
  inspect: EngineChecks = {},
): Promise<WorkloadRun> {
  const user = freshUser();
  // A large state, so that the kill is likely to land inside a write.
  const pad = "p".repeat(64_000);
  let handle: string;
  {
    await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
    handle = await store.mint("crash", { n: 0, log: [], pad }, { user });
  }
  const writers = 6;
  const child = spawnChild(["writers", url, user, handle, "k", `${writers}`, "1", "forever"]);
  const acked: [string, number][] = [];
  try {
    assert.equal(await child.line("the writer process"), "ready");
    await child.send("go");
    await within(
      60_000,
      "version 150",
      (async () => {
        // Past the default retention of 100 entries, so that the trim runs too;
        // then read what it acknowledged before it died.
        for (let line: string | null; (line = await child.stdout.next()) !== null;) {
          const [entry, version] = line.split(" ") as [string, string];
          acked.push([entry, Number(version)]);
          if (Number(version) >= 150) child.kill();
        }
      })(),
    );
  } finally {
    child.kill();
  }
  const { status, stderr } = await child.ended();
  assert.equal(status.signal, "SIGKILL", `the writer process ended on its own: ${stderr}`);
  // Read through a new connection, as after a restart.
  await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  // A server may still commit what a dead session sent: wait until the handle stops changing.
  for (let last = -1;;) {
    const { version } = await store.get(handle, { user });
    if (version === last) break;
    last = version;
    await sleep(200);
  }
  const s = await store.get<Counter & { pad: string }>(handle, { user });
  const log = new Set(s.state.log);
  assert.equal(log.size, s.state.log.length, "a patch was applied twice");
  assert.equal(s.state.n, s.state.log.length);
  assert.equal(s.version, s.state.n + 1);
  assert.equal(s.state.pad, pad);
  assert.ok(Math.max(...acked.map(([, v]) => v)) >= 150);
  for (const [entry, version] of acked) {
    assert.ok(log.has(entry), `acknowledged patch ${entry} is lost`);
    assert.ok(version <= s.version, `version ${s.version} < acknowledged ${version}`);
  }
  for (let w = 0; w < writers; w++) {
    const mine = s.state.log.filter((x) => x.startsWith(`k/${w}:`));
    assert.deepEqual(mine, Array.from({ length: mine.length }, (_, i) => `k/${w}:${i}`));
  }
  await assertLogInStep(store, user, handle, s);
  // Never a write without its entry, nor an entry without its write: the log
  // ends exactly at the state's version and holds the retention's 100.
  const backend = await openBackend(url);
  try {
    assert.deepEqual(
      (await backend.changes(user, handle, 0)).map((e) => e.version),
      Array.from({ length: 100 }, (_, i) => s.version - 99 + i),
    );
  } finally {
    await backend.close();
  }
  // Writers go on from there, entry and all.
  await store.patch(handle, [Increment("", "n"), Append("log", "after:0")], {
    user,
    writer: "after",
  });
  await assertLogInStep(store, user, handle, await store.get(handle, { user }));
  const run = { user, handle, version: s.version, patches: s.state.log.length };
  await inspect.afterKill?.(run);
  return run;
}

/**
 * Three processes create new data at each of `urls` at the same wall-clock
 * moment, one URL every `gapMs`: every process opens it and mints a handle
 * there, and each URL holds the three.
 *
 * @param urls URLs of data that does not exist yet (a file, a schema).
 * @param gapMs The time between two URLs.
 */
export async function createAtOnce(urls: string[], gapMs: number): Promise<void> {
  const children = Array.from({ length: 3 }, () => spawnChild(["create-at", `${gapMs}`, ...urls]));
  for (const child of children) assert.equal(await child.line("a creating process"), "ready");
  const start = Date.now() + 100;
  for (const child of children) await child.send(String(start));
  await Promise.all(children.map((child) => child.succeeded()));
  for (const url of urls) {
    await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
    assert.equal((await store.list("u")).length, 3, url);
  }
}

/**
 * Asserts that the changelog of a handle that was minted and then only
 * patched (each patch appending to `log` last) is in step with its state:
 * the last 100 entries (the default retention) are there and no more, one
 * per version up to the current one, and entry `v` is the patch of its
 * writer that appended `log[v - 2]`.
 *
 * @param store A store on the handle's backend.
 * @param user The handle's user.
 * @param handle The handle.
 * @param s Its current snapshot.
 */
export async function assertLogInStep(
  store: HandleStore,
  user: string,
  handle: string,
  s: Snapshot<{ log: string[] }>,
): Promise<void> {
  // (The mint's entry is left out: for a large state it is only an "omitted" marker.)
  const since = Math.max(1, s.version - 100);
  const r = await store.changesSince(handle, since, { user });
  assert.ok(!r.truncated, `the changelog of ${handle} has a hole before version ${s.version}`);
  if (r.truncated) return;
  assert.equal(r.version, s.version);
  assert.deepEqual(
    r.changes.map((c) => c.version),
    Array.from({ length: s.version - since }, (_, i) => since + 1 + i),
  );
  for (const c of r.changes) {
    assert.equal(c.op, "patch");
    const ops = c.ops as { value?: unknown }[];
    const appended = s.state.log[c.version - 2];
    assert.deepEqual(ops[ops.length - 1]!.value, appended, `entry ${c.version} is not the write`);
    assert.ok(String(appended).startsWith(`${c.writer}:`), `entry ${c.version} by ${c.writer}`);
  }
  if (since > 1) {
    const older = await store.changesSince(handle, since - 1, { user });
    assert.equal(older.truncated, true, "the changelog keeps more than its retention");
  }
}

export default group("cross-process", ["crossProcess"], [
  step(
    "16 writers in 2 processes (8 on one connection, 8 on one each) patching one handle " +
      "all land exactly once, in each writer's order",
    ({ target }) => writersInTwoProcesses(target.url!, {}, target.inspect),
  ),
  step(
    "a writer process killed (SIGKILL) mid-write: every acknowledged patch is there, " +
      "none twice, and no write is without its changelog entry",
    ({ target }) => killWriterMidWrites(target.url!, target.inspect),
  ),
]);
