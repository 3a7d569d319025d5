/**
 * Live checks that every backend with a change feed and leases runs
 * unchanged against a URL, with a real second OS process (`_live_child.ts`):
 * a watcher hears every version the other process writes, and a lease
 * outlives its holder's `kill -9` until it lapses.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HandleStore } from "../mod.ts";
import type { Backend, HandleRecord } from "../src/backend.ts";
import { freshUser, within } from "./contract.ts";

/** Reads a stream line by line. */
export class Lines {
  #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";
  #done = false;
  /** @param stream A process's stdout. */
  constructor(stream: ReadableStream<Uint8Array>) {
    this.#reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  }
  /** The next complete line, or `null` at the end of the stream. */
  async next(): Promise<string | null> {
    for (;;) {
      const nl = this.#buffer.indexOf("\n");
      if (nl >= 0) {
        const line = this.#buffer.slice(0, nl);
        this.#buffer = this.#buffer.slice(nl + 1);
        return line;
      }
      if (this.#done) return null;
      const { value, done } = await this.#reader.read();
      if (done) this.#done = true;
      else this.#buffer += value;
    }
  }
}

/** All of a stream, as text. */
export async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(stream).text();
}

/** Spawns `_live_child.ts` with `args` (see its module doc). */
export function liveChild(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      "--unstable-kv",
      new URL("./_live_child.ts", import.meta.url).pathname,
      ...args,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/**
 * A watcher on `url` sees each version another OS process writes, within
 * 5 s each, through the backend's change feed alone (a long safety-net poll).
 *
 * @param url The backend URL, shared by both processes.
 */
export async function watcherHearsAnotherProcess(url: string): Promise<void> {
  const user = freshUser();
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  const h = await store.mint("live", { n: 0 }, { user });
  const proc = liveChild(["patch", url, user, h]);
  const lines = new Lines(proc.stdout);
  const stdin = proc.stdin.getWriter();
  const stop = new AbortController();
  const it = store.watch<{ n: number }>(h, { user, signal: stop.signal, pollMs: 600_000 });
  try {
    assert.equal(await lines.next(), "ready", "the writer process did not start");
    assert.equal((await it.next()).value?.version, 1);
    for (let version = 2; version <= 4; version++) {
      await stdin.write(new TextEncoder().encode("patch\n"));
      assert.equal(await lines.next(), String(version), "the writer process failed");
      const r = await within(5_000, `version ${version}`, it.next());
      assert.equal(r.done, false);
      assert.equal(r.value?.version, version);
      assert.equal(r.value?.state.n, version - 1);
      assert.equal(r.value?.lastWriter, "child");
    }
  } finally {
    stop.abort();
    await it.return?.(undefined);
    await stdin.close();
    const [status, stderr] = await Promise.all([proc.status, readAll(proc.stderr)]);
    assert.equal(status.code, 0, stderr);
    await store.close();
  }
}

/**
 * A lease taken by another OS process stays in force after that process is
 * killed with SIGKILL, until it lapses on the real clock; then another holder
 * takes it. Neither lease touches the record.
 *
 * @param url The backend URL, shared by both processes.
 */
export async function leaseOutlivesKilledHolder(url: string): Promise<void> {
  const user = freshUser();
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  const h = await store.mint("task", { step: 1 }, { user, writer: "w" });
  const proc = liveChild(["lease", url, user, h, "child/a", "2"]);
  const line = await new Lines(proc.stdout).next();
  proc.kill("SIGKILL");
  const [status, stderr] = await Promise.all([proc.status, readAll(proc.stderr)]);
  await proc.stdin.close().catch(() => {});
  try {
    assert.match(String(line), /^leased \d+$/, `the child took no lease: ${stderr}`);
    assert.equal(status.signal, "SIGKILL");
    const expiresAt = new Date(Number(line!.split(" ")[1]));
    const s = await store.get(h, { user });
    assert.deepEqual(s.activeLease, { holder: "child/a", expiresAt });
    assert.deepEqual([s.version, s.lastWriter], [1, "w"]);
    if (Date.now() < expiresAt.getTime() - 200) {
      assert.deepEqual(await store.lease(h, { user, writer: "test/b", seconds: 5 }), {
        acquired: false,
        holder: "child/a",
        expiresAt,
      });
    }
    // The real clock runs past the lease's end.
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt.getTime() - Date.now()) + 20));
    assert.equal((await store.get(h, { user })).activeLease, undefined);
    const taken = await store.lease(h, { user, writer: "test/b", seconds: 5 });
    assert.deepEqual([taken.acquired, taken.holder], [true, "test/b"]);
    const after = await store.get(h, { user });
    assert.deepEqual([after.version, after.lastWriter, after.activeLease?.holder], [
      1,
      "w",
      "test/b",
    ]);
  } finally {
    await store.close();
  }
}

/** How a test looks inside a backend's engine for {@link leasePrimitivesHold}. */
export interface LeaseProbe {
  /** The user's lease rows, as `"<handle> <holder> <expiresAt>"`, ordered by handle. */
  rows(): Promise<string[]>;
  /** Every record of the engine, as text: leases must never change it. */
  records(): Promise<string>;
}

/**
 * The lease primitives of a backend that sweeps lapsed leases itself, at the
 * backend level with explicit times: one holder at a time, renewal, lapse at
 * `expiresAt`, listing, release by the holder only, sweep of lapsed rows,
 * and no record touched. `a` and `b` may be two connections to one engine.
 *
 * @param a The backend that takes the leases.
 * @param b The backend that lists, sweeps and releases them.
 * @param user A fresh user; `a` inserts its record `n_aaaaaaaa` first.
 * @param probe Looks at the engine's lease rows and records.
 */
export async function leasePrimitivesHold(
  a: Backend,
  b: Backend,
  user: string,
  probe: LeaseProbe,
): Promise<void> {
  const h = "n_aaaaaaaa", other = "n_bbbbbbbb";
  const record: HandleRecord = {
    handle: h,
    kind: "n",
    state: "{}",
    version: 1,
    createdAt: 1,
    updatedAt: 1,
    expiresAt: null,
    lastWriter: null,
  };
  assert.deepEqual(await a.insert(user, record, { now: 1, graceMs: 0 }), { inserted: true });
  const before = await probe.records();
  const take = (holder: string, expiresAt: number, now: number, handle = h) =>
    a.acquireLease!(user, handle, { holder, expiresAt }, now);
  const lease = (holder: string, expiresAt: number) => ({ holder, expiresAt });
  assert.deepEqual(await take("a", 2000, 1000), { acquired: true, lease: lease("a", 2000) });
  assert.deepEqual(await take("b", 3000, 1999), { acquired: false, lease: lease("a", 2000) });
  assert.deepEqual(await take("a", 2500, 1999), { acquired: true, lease: lease("a", 2500) });
  // At its expiry a lease has lapsed: another holder takes it.
  assert.deepEqual(await take("b", 3000, 2500), { acquired: true, lease: lease("b", 3000) });
  assert.deepEqual(await take("c", 1500, 1000, other), { acquired: true, lease: lease("c", 1500) });
  assert.deepEqual(
    await b.leases!(user, [h, other, "n_none"], 1499),
    new Map([[h, lease("b", 3000)], [other, lease("c", 1500)]]),
  );
  assert.deepEqual(await b.leases!(user, [h, other], 1500), new Map([[h, lease("b", 3000)]]));
  assert.deepEqual(await b.leases!(user, [], 0), new Map());
  assert.deepEqual(await b.leases!(freshUser(), [h], 0), new Map());
  // Sweep drops the lapsed leases, and only them.
  assert.equal(await b.sweep(null, 0, 1500), 0);
  assert.deepEqual(await probe.rows(), [`${h} b 3000`]);
  // Only the holder releases; a lapsed lease is dropped but not "released".
  assert.equal(await b.releaseLease!(user, h, "a", 2000), false);
  assert.equal(await b.releaseLease!(freshUser(), h, "b", 2000), false);
  assert.deepEqual(await probe.rows(), [`${h} b 3000`]);
  assert.equal(await b.releaseLease!(user, h, "b", 3000), false);
  assert.deepEqual(await probe.rows(), []);
  await take("b", 4000, 3000);
  assert.equal(await b.releaseLease!(user, h, "b", 3999), true);
  assert.equal(await b.releaseLease!(user, h, "b", 3999), false);
  assert.equal(await probe.records(), before, "a lease changed a record");
}
