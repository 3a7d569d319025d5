import assert from "node:assert/strict";
import { AddToSet, Append, HandleStore, Increment, type PatchOp, SetKey } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { FakeClock, rejectsWith } from "./contract.ts";
import { Reads } from "./_counted.ts";

Deno.test("a state built from shared subtrees is refused at once, not walked exponentially", async () => {
  await using store = new HandleStore(new MemoryBackend());
  let x: unknown[] = [];
  for (let i = 0; i < 60; i++) x = [x, x];
  const started = performance.now();
  const e = await rejectsWith(() => store.mint("big", { x }, { user: "u" }), "state_too_large");
  assert.equal(e.details.limit_bytes, store.maxStateBytes);
  assert.ok(performance.now() - started < 5_000);
});

Deno.test("the background reclaim removes expired records only after the grace period", async () => {
  const clock = new FakeClock();
  await using store = new HandleStore(new MemoryBackend(), {
    clock: clock.fn,
    expiredGraceDays: 2,
    reclaimIntervalMs: 20,
  });
  const h = await store.mint("t", {}, { user: "u", ttlDays: 1 });
  clock.advance(1.5 * 86_400_000);
  await new Promise((r) => setTimeout(r, 80));
  await rejectsWith(() => store.get(h, { user: "u" }), "handle_expired");
  clock.advance(2 * 86_400_000);
  await new Promise((r) => setTimeout(r, 80));
  await rejectsWith(() => store.get(h, { user: "u" }), "handle_not_found");
});

Deno.test("maxPatchOps bounds one patch: a longer one is too_many_ops and applies nothing", async (t) => {
  const appends = (n: number): PatchOp[] => Array.from({ length: n }, (_, i) => Append("l", i));
  await t.step("the default is 1,000", async () => {
    await using store = new HandleStore(new MemoryBackend());
    assert.equal(store.maxPatchOps, 1000);
    const h = await store.mint("note", { l: [] }, { user: "u" });
    assert.equal((await store.patch(h, appends(1000), { user: "u" })).version, 2);
    const e = await rejectsWith(() => store.patch(h, appends(1001), { user: "u" }), "patch_error");
    assert.equal(e.details.reason, "too_many_ops");
    assert.equal(e.details.limit, 1000);
    assert.equal(e.details.count, 1001);
    assert.match(e.message, /at most 1000 ops/);
    const after = await store.get(h, { user: "u" });
    assert.equal(after.version, 2);
    assert.equal((after.state.l as unknown[]).length, 1000);
  });
  await t.step("the option governs, below and above the default", async () => {
    await using small = new HandleStore(new MemoryBackend(), { maxPatchOps: 3 });
    const h = await small.mint("note", { l: [] }, { user: "u" });
    await small.patch(h, appends(3), { user: "u" });
    const e = await rejectsWith(() => small.patch(h, appends(4), { user: "u" }), "patch_error");
    assert.deepEqual([e.details.reason, e.details.limit, e.details.count], ["too_many_ops", 3, 4]);
    assert.equal((await small.get(h, { user: "u" })).version, 2);

    await using large = new HandleStore(new MemoryBackend(), { maxPatchOps: 5000 });
    const g = await large.mint("note", { l: [] }, { user: "u" });
    const done = await large.patch(g, appends(5000), { user: "u" });
    assert.equal((done.state.l as unknown[]).length, 5000);
    await rejectsWith(() => large.patch(g, appends(5001), { user: "u" }), "patch_error");
  });
  await t.step("fromUrl passes it on", async () => {
    await using store = await HandleStore.fromUrl("memory://", { maxPatchOps: 7 });
    assert.equal(store.maxPatchOps, 7);
  });
  await t.step("it must be a whole number of ops, at least 1", () => {
    for (const bad of [0, -1, 1.5, NaN, Infinity, "10", 2 ** 53]) {
      assert.throws(
        () => new HandleStore(new MemoryBackend(), { maxPatchOps: bad as number }),
        (e: unknown) =>
          e instanceof Error && (e as { code?: string }).code === "invalid_argument" &&
          /maxPatchOps/.test(e.message),
        String(bad),
      );
    }
  });
});

Deno.test("a patch's increment past 2^53 − 1 is out_of_range and changes nothing", async () => {
  await using store = new HandleStore(new MemoryBackend());
  const max = Number.MAX_SAFE_INTEGER;
  const h = await store.mint("count", { n: max - 1, m: 0 }, { user: "u" });
  assert.equal((await store.patch(h, [Increment("", "n")], { user: "u" })).state.n, max);
  for (const ops of [[Increment("", "m"), Increment("", "n")], [Increment("", "m", 2 ** 53)]]) {
    const e = await rejectsWith(() => store.patch(h, ops, { user: "u" }), "patch_error");
    assert.equal(e.details.reason, "out_of_range");
  }
  const after = await store.get(h, { user: "u" });
  assert.equal(after.version, 2);
  assert.deepEqual(after.state, { n: max, m: 0 });
});

Deno.test("a patch's op values are checked against the size cap before they are walked", async () => {
  await using store = new HandleStore(new MemoryBackend(), { maxStateBytes: 10_000 });
  const h = await store.mint("note", {}, { user: "u" });
  // 2^40 leaves in JSON, from 40 objects shared with themselves, each one watched.
  const reads = new Reads(200_000);
  let x: unknown = reads.watch([1]);
  for (let i = 0; i < 40; i++) x = reads.watch([x, x]);
  for (const op of [SetKey("", "x", x), AddToSet("l", x)]) {
    await rejectsWith(() => store.patch(h, [op], { user: "u" }), "state_too_large");
  }
  assert.ok(reads.count < 200_000);
  assert.equal((await store.get(h, { user: "u" })).version, 1);
});
