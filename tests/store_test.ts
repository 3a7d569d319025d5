import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AddToSet,
  Append,
  HandleStore,
  Increment,
  InvalidArgument,
  type PatchOp,
  SetKey,
} from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { FakeClock, pageThrough, rejectsWith } from "./_helpers.ts";
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

/** Records restored straight into a backend, as `mcpstate import` writes them. */
async function restoreHandles(
  backend: MemoryBackend,
  user: string,
  handles: readonly string[],
  updatedAt: (i: number) => number,
): Promise<void> {
  for (const [i, handle] of handles.entries()) {
    await backend.records.import(user, {
      handle,
      kind: handle.slice(0, handle.lastIndexOf("_")),
      state: JSON.stringify({ i }),
      version: 1,
      createdAt: updatedAt(i),
      updatedAt: updatedAt(i),
      expiresAt: null,
      lastWriter: null,
    }, { now: Date.now(), graceMs: 0 });
  }
}

/** Handles whose kinds only an import can bring: CJK, astral, combining marks, right-to-left, Latin-1. */
const FOREIGN_HANDLES = [
  "研究_abcdefgh",
  "\u{1F600}_abcdefgh",
  "cafe\u0301_abcdefgh",
  "\u05DE\u05D7\u05E7\u05E8_abcdefgh",
  "\u0628\u062D\u062B_abcdefgh",
  "é_abcdefgh",
  "note_abcdefgh",
];

Deno.test("listPage() pages through handles outside Latin-1: every cursor comes back", async () => {
  const backend = new MemoryBackend();
  await using store = new HandleStore(backend);
  const t0 = Date.UTC(2026, 6, 28);
  // Distinct times, then one shared time so the handle alone orders the page.
  await restoreHandles(backend, "u", FOREIGN_HANDLES, (i) => t0 + i);
  await restoreHandles(backend, "tied", FOREIGN_HANDLES, () => t0);
  for (const user of ["u", "tied"]) {
    for (const limit of [1, 2, 3]) {
      const { handles: seen, cursors } = await pageThrough(store, user, limit);
      assert.equal(seen.length, FOREIGN_HANDLES.length, `${user}, limit ${limit}`);
      assert.deepEqual(new Set(seen), new Set(FOREIGN_HANDLES));
      for (const c of cursors) assert.match(c, /^c2\.[A-Za-z0-9_-]+$/);
    }
  }
  const { handles: seen } = await pageThrough(store, "u", 1);
  assert.deepEqual(seen, [...FOREIGN_HANDLES].reverse());
  assert.deepEqual((await store.list("u")).map((h) => h.handle), seen);
});

Deno.test("listPage() still reads the c1 cursors of earlier releases", async () => {
  const backend = new MemoryBackend();
  await using store = new HandleStore(backend);
  const t0 = Date.UTC(2026, 6, 28);
  const handles = ["a_aaaaaaaa", "é_bbbbbbbb", "c_cccccccc"];
  await restoreHandles(backend, "u", handles, (i) => t0 + i);
  // What 0.4.0 made: btoa of the JSON, base64url without padding.
  const legacy = (updatedAt: number, handle: string) =>
    "c1." + btoa(JSON.stringify([updatedAt, handle])).replaceAll("+", "-").replaceAll("/", "_")
      .replaceAll("=", "");
  const after = async (cursor: string) =>
    (await store.listPage("u", { cursor })).handles.map((h) => h.handle);
  assert.deepEqual(await after(legacy(t0 + 2, "c_cccccccc")), ["é_bbbbbbbb", "a_aaaaaaaa"]);
  assert.deepEqual(await after(legacy(t0 + 1, "é_bbbbbbbb")), ["a_aaaaaaaa"]);
});

Deno.test("a cursor that did not come from listPage() is invalid_argument, never another error", async () => {
  const backend = new MemoryBackend();
  await using store = new HandleStore(backend);
  await restoreHandles(backend, "u", FOREIGN_HANDLES, (i) => 1_000 + i);
  const { cursors } = await pageThrough(store, "u", 2);
  const b64 = (text: string) =>
    new TextEncoder().encode(text).toBase64({ alphabet: "base64url", omitPadding: true });
  const tryCursor = async (cursor: string): Promise<void> => {
    try {
      await store.listPage("u", { cursor, limit: 2 });
    } catch (e) {
      if (!(e instanceof InvalidArgument)) {
        assert.fail(`cursor ${JSON.stringify(cursor)} threw ${e}`);
      }
      assert.equal(e.details.field, "cursor");
    }
  };
  // Crafted ones: right prefix, wrong contents.
  const crafted = [
    "",
    "c1.",
    "c2.",
    "c2.e30",
    "c3." + b64('[1,"a"]'),
    "c2." + b64('[1,"a\u0000b"]'),
    "c2." + b64('[1,"\\ud800"]'),
    "c2." + b64('[1.5,"a"]'),
    "c2." + b64('[1,""]'),
    "c2." + b64(`[1,"${"x".repeat(257)}"]`),
    "c2." + b64('[1,"a"]') + "=",
    "c2." + b64('[1,"a"]').replace(/.$/, "B"),
    "c2." + b64('[1, "a"]'),
    "c2.//8",
    "c2." + "\xff\xfe",
    "c1." + b64('[1,"a"]').slice(0, -2),
    "c2." + "A".repeat(5_000),
  ];
  for (const c of crafted) {
    await rejectsWith(() => store.listPage("u", { cursor: c }), "invalid_argument")
      .catch((e) => assert.fail(`${JSON.stringify(c)}: ${e}`));
  }
  for (const cursor of [1, {}, [], true] as unknown[]) {
    await rejectsWith(() => store.listPage("u", { cursor: cursor as string }), "invalid_argument");
  }
  // Random ones: any text, text in the cursor's alphabet, and real cursors with one character changed.
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/. ";
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.string({ unit: "binary", maxLength: 80 }),
        fc.tuple(
          fc.constantFrom("c1.", "c2."),
          fc.string({ unit: fc.constantFrom(...alphabet), maxLength: 80 }),
        ).map(([p, s]) => p + s),
        fc.tuple(fc.constantFrom(...cursors), fc.nat(), fc.constantFrom(...alphabet)).map((
          [c, i, ch],
        ) => c.slice(0, i % c.length) + ch + c.slice((i % c.length) + 1)),
        fc.tuple(fc.integer(), fc.string({ unit: "binary", maxLength: 20 })).map(([n, s]) =>
          "c2." + b64(JSON.stringify([n, s]))
        ),
      ),
      tryCursor,
    ),
    { seed: 1307, numRuns: 2_000 },
  );
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
