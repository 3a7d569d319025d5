/**
 * The way back through the changelog: `applyOpsWithUndo`, `applyJsonPatch`
 * and `undoOf` undo exactly what they apply, copy-on-write, and
 * `HandleStore.stateAt` rebuilds every retained version of a handle.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { createPatch } from "rfc6902";
import {
  AddToSet,
  Append,
  applyOps,
  applyOpsWithUndo,
  DelKey,
  HandleStore,
  Increment,
  InvalidArgument,
  type JsonObject,
  type JsonPatchOp,
  Merge,
  type PatchOp,
  SetKey,
  StaleWrite,
} from "../mod.ts";
import { applyJsonPatch, JsonPatchMismatch, rewind, undoOf } from "../src/history.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { runs } from "./_fc.ts";

const KEYS = ["a", "b", "c", "__proto__", "constructor", "x/y", "t~n", ""];
const keyArb = fc.constantFrom(...KEYS);

const valueArb: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.oneof(
      fc.integer({ min: -5, max: 5 }),
      fc.string({ maxLength: 3 }),
      fc.boolean(),
      fc.constant(null),
    ),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.array(fc.tuple(keyArb, tie("value")), { maxLength: 4 }).map(objectOf),
  ),
})).value;

const stateArb: fc.Arbitrary<JsonObject> = fc.array(fc.tuple(keyArb, valueArb), { maxLength: 6 })
  .map(objectOf);

function objectOf(entries: [string, unknown][]): JsonObject {
  const o: JsonObject = {};
  for (const [k, v] of entries) {
    Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  }
  return o;
}

const dotted = fc.constantFrom("", "a", "b", "a.b", "c.a", "__proto__", "constructor.a");
const pointer = fc.constantFrom("/a", "/b/0", "/a/1", "/c/a/0", "/x~1y", "/__proto__/b");
const pathArb = fc.oneof(dotted, pointer);
const opArb: fc.Arbitrary<PatchOp> = fc.oneof(
  fc.tuple(pathArb, valueArb).map(([p, v]) => Append(p, v)),
  fc.tuple(pathArb, valueArb).map(([p, v]) => AddToSet(p, v)),
  fc.tuple(pathArb, keyArb, valueArb).map(([p, k, v]) => SetKey(p, k, v)),
  fc.tuple(pathArb, keyArb).map(([p, k]) => DelKey(p, k)),
  fc.tuple(pathArb, fc.array(fc.tuple(keyArb, valueArb), { maxLength: 3 }).map(objectOf)).map((
    [p, m],
  ) => Merge(m, p)),
  fc.tuple(pathArb, keyArb, fc.integer({ min: -3, max: 3 })).map(([p, k, by]) =>
    Increment(p, k, by)
  ),
);

/** A deep copy that keeps `__proto__` keys as data. */
function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v));
}

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** JSON equality that also requires the same key order (what `JSON.stringify` shows). */
function sameText(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

Deno.test("applyOpsWithUndo(): the undo patch takes the result back to the input, and the input is untouched", () => {
  let changed = 0;
  const settings = runs(0x41570, 2000);
  fc.assert(
    fc.property(stateArb, fc.array(opArb, { maxLength: 6 }), (state, ops) => {
      const before = clone(state);
      deepFreeze(state);
      let r: ReturnType<typeof applyOpsWithUndo>;
      try {
        r = applyOpsWithUndo(state, ops);
      } catch {
        // An op that cannot apply throws as applyOps does.
        assert.throws(() => applyOps(state, ops));
        return;
      }
      assert.ok(sameText(r.state, applyOps(state, ops)), "the same result as applyOps");
      assert.equal(
        r.undo.length === 0,
        r.state === state,
        "an empty undo exactly when nothing changed",
      );
      for (const u of r.undo) assert.ok(["add", "remove", "replace"].includes(u.op));
      const back = applyJsonPatch(r.state, r.undo);
      assert.deepEqual(back, before);
      assert.ok(sameText(state, before), "the input is never changed");
      if (r.undo.length > 0) changed++;
    }),
    settings,
  );
  // Not a property that passes by never applying anything.
  assert.ok(
    changed > settings.numRuns / 4,
    `${changed} of ${settings.numRuns} runs changed the state`,
  );
});

Deno.test("undoOf(): a save's undo comes from its forward RFC 6902 patch and the previous state", () => {
  fc.assert(
    fc.property(stateArb, stateArb, (a, b) => {
      const forward = createPatch(a, b) as JsonPatchOp[];
      deepFreeze(a);
      const undo = undoOf(a, forward);
      assert.ok(undo !== undefined);
      const next = applyJsonPatch(a, forward);
      assert.deepEqual(next, b);
      assert.deepEqual(applyJsonPatch(next, undo), a);
    }),
    runs(0x41571, 1000),
  );
});

Deno.test("applyJsonPatch(): copy-on-write, every op, and mismatches are JsonPatchMismatch", () => {
  const shared = { big: Array.from({ length: 100 }, (_, i) => i) };
  const state = deepFreeze({ keep: shared, edit: { n: 1, list: [1, 2, 3] } });
  const undo: JsonPatchOp[] = [];
  const next = applyJsonPatch(state, [
    { op: "replace", path: "/edit/n", value: 2 },
    { op: "add", path: "/edit/list/1", value: 9 },
    { op: "add", path: "/edit/list/-", value: 4 },
    { op: "remove", path: "/edit/list/0" },
    { op: "move", from: "/edit/n", path: "/moved" },
    { op: "copy", from: "/edit/list", path: "/copied" },
    { op: "test", path: "/copied/0", value: 9 },
    { op: "add", path: "/__proto__", value: { x: 1 } },
  ], undo);
  assert.equal(next.keep, shared, "an untouched subtree is shared, not copied");
  assert.equal(
    JSON.stringify(next),
    '{"keep":' + JSON.stringify(shared) +
      ',"edit":{"list":[9,2,3,4]},"moved":2,"copied":[9,2,3,4],"__proto__":{"x":1}}',
  );
  assert.equal(({} as Record<string, unknown>).x, undefined);
  assert.deepEqual(applyJsonPatch(next, undo), state);
  for (
    const bad of [
      { op: "remove", path: "/nope" },
      { op: "replace", path: "/edit/list/3", value: 1 },
      { op: "add", path: "/edit/list/01", value: 1 },
      { op: "add", path: "/edit/n/x", value: 1 },
      { op: "test", path: "/edit/n", value: 2 },
      { op: "move", from: "/edit", path: "/edit/x" },
      { op: "nope", path: "" },
      { op: "add", path: "no-slash", value: 1 },
    ]
  ) {
    assert.throws(() => applyJsonPatch(state, [bad as JsonPatchOp]), JsonPatchMismatch, bad.op);
  }
  assert.equal(undoOf(state, [{ op: "remove", path: "/nope" }]), undefined);
});

Deno.test("rewind(): back through touch entries; null at an entry without undo, a marker or a hole", () => {
  const v3 = { n: 3 };
  const entries = [
    { version: 2, op: "patch", undo: [{ op: "replace", path: "/n", value: 1 }] },
    { version: 3, op: "save", undo: [{ op: "replace", path: "/n", value: 2 }] },
    { version: 4, op: "touch" },
  ];
  assert.deepEqual(rewind(v3, 4, 1, entries), { n: 1 });
  assert.deepEqual(rewind(v3, 4, 2, entries), { n: 2 });
  assert.equal(rewind(v3, 4, 4, entries), v3);
  assert.equal(rewind(v3, 4, 5, entries), null);
  assert.equal(rewind(v3, 4, 0, entries), null, "a mint is never undone");
  assert.equal(rewind(v3, 4, 1, entries.slice(1)), null, "a hole");
  assert.equal(rewind(v3, 4, 1, [{ version: 2, op: "patch" }, ...entries.slice(1)]), null);
  assert.equal(
    rewind(v3, 4, 1, [{ version: 2, op: "patch", omitted: true }, ...entries.slice(1)]),
    null,
  );
  const wrong = [{ version: 2, op: "patch", undo: [{ op: "remove", path: "/zzz" }] }];
  assert.equal(rewind(v3, 2, 1, wrong), null, "an undo that does not apply");
});

Deno.test("stateAt(): every retained version comes back, through patches, saves and touches", async () => {
  await using store = new HandleStore(new MemoryBackend());
  const user = "u";
  const h = await store.mint("doc", { log: [], meta: { n: 0 } }, { user });
  const seen: JsonObject[] = [(await store.get(h, { user })).state];
  const writes: (() => Promise<unknown>)[] = [
    () => store.patch(h, [Append("log", "a"), Increment("meta", "n")], { user }),
    () => store.touch(h, { user, ttlDays: 3 }),
    () =>
      store.save(h, { log: ["a", "b"], meta: { n: 1, tag: "x" }, extra: [1] }, {
        user,
        expectVersion: 3,
      }),
    () => store.patch(h, [DelKey("meta", "tag"), Append("extra", 2)], { user }),
    () => store.save(h, { fresh: true }, { user, expectVersion: 5 }),
    () => store.patch(h, [Merge({ a: { b: [1] } }, "deep.er")], { user }),
  ];
  for (const w of writes) {
    await w();
    seen.push((await store.get(h, { user })).state);
  }
  const now = await store.get(h, { user });
  assert.equal(now.version, seen.length);
  for (let v = 1; v <= now.version; v++) {
    const at = await store.stateAt(h, v, { user });
    assert.deepEqual(at, { handle: h, kind: "doc", version: v, state: seen[v - 1] });
  }
  for (const v of [0, -1, 1.5, now.version + 1, NaN]) {
    await assert.rejects(
      () => store.stateAt(h, v, { user }),
      (e) => e instanceof InvalidArgument && e.details.field === "version",
      String(v),
    );
  }
  await assert.rejects(() => store.stateAt(h, 1, { user: "other" }), /not_found|No state/);
});

Deno.test("stateAt(): saves of long lists (the bounded diff) come back exactly, with key-order-only and nested edits", async () => {
  await using store = new HandleStore(new MemoryBackend());
  const user = "u";
  const item = (i: number) => ({ id: i, text: `note ${i}`, tags: ["a", { deep: [i] }] });
  let state: JsonObject = { items: Array.from({ length: 200 }, (_, i) => item(i)) };
  const h = await store.mint("doc", state, { user });
  const seen = [JSON.stringify(state)];
  const edits: ((items: unknown[]) => unknown[])[] = [
    // The same values, one element's keys in another order: a different JSON text.
    (xs) =>
      xs.map((x, i) => (i === 50 ? { text: `note 50`, id: 50, tags: ["a", { deep: [50] }] } : x)),
    (xs) => xs.map((x, i) => (i === 3 ? { ...item(3), tags: ["a", { deep: [3, 4] }] } : x)),
    (xs) => [...xs.slice(0, 100), item(1000), item(1001), ...xs.slice(100)],
    (xs) => xs.slice(0, -5),
    (xs) => [{}, ...xs.slice(1)],
    (xs) => xs.map((x, i) => (i % 7 === 0 ? [x] : x)),
  ];
  for (const edit of edits) {
    state = { items: edit(state.items as unknown[]) };
    await store.save(h, state, { user, expectVersion: seen.length });
    seen.push(JSON.stringify(state));
  }
  for (let v = 1; v <= seen.length; v++) {
    // Values exactly; key order is not part of what stateAt rebuilds.
    assert.deepEqual(
      (await store.stateAt(h, v, { user })).state,
      JSON.parse(seen[v - 1]!),
      `v${v}`,
    );
  }
});

Deno.test("stateAt(): beyond the retained history, or past an entry too large to keep, is history_unavailable", async () => {
  await using store = new HandleStore(new MemoryBackend(), {
    history: { maxEntries: 3, maxEntryBytes: 400 },
  });
  const user = "u";
  const h = await store.mint("doc", { n: 0 }, { user });
  for (let i = 1; i <= 5; i++) await store.patch(h, [SetKey("", "n", i)], { user });
  // Versions 4..6 have entries; 3 is reachable (undo of 4), 2 is not (entry 3 was dropped).
  assert.deepEqual((await store.stateAt(h, 3, { user })).state, { n: 2 });
  const unavailable = (e: unknown) =>
    e instanceof InvalidArgument && e.details.reason === "history_unavailable" &&
    e.details.field === "version";
  await assert.rejects(() => store.stateAt(h, 2, { user }), unavailable);
  await store.patch(h, [SetKey("", "big", "x".repeat(500))], { user });
  await assert.rejects(() => store.stateAt(h, 6, { user }), unavailable);
  await using none = new HandleStore(new MemoryBackend(), { history: false });
  const g = await none.mint("doc", { n: 0 }, { user });
  await none.patch(g, [SetKey("", "n", 1)], { user });
  await assert.rejects(() => none.stateAt(g, 1, { user }), unavailable);
  assert.deepEqual((await none.stateAt(g, 2, { user })).state, { n: 1 });
});

Deno.test("state_changes output is unchanged: entries show no undo", async () => {
  await using store = new HandleStore(new MemoryBackend());
  const user = "u";
  const h = await store.mint("doc", { n: 0 }, { user });
  await store.patch(h, [SetKey("", "n", 1)], { user });
  await store.save(h, { n: 2 }, { user, expectVersion: 2 });
  const r = await store.changesSince(h, 0, { user });
  assert.ok(!r.truncated);
  if (r.truncated) return;
  assert.deepEqual(r.changes.map((c) => Object.keys(c).sort()), [
    ["at", "op", "patch", "version", "writer"],
    ["at", "op", "ops", "version", "writer"],
    ["at", "op", "patch", "version", "writer"],
  ]);
});

Deno.test("entries written before undo existed read as before, and end the way back", async () => {
  // A real memory backend whose changelog reads as an earlier release wrote it: no undo.
  const inner = new MemoryBackend();
  const old = new Proxy(inner, {
    get(target, name) {
      const v = Reflect.get(target, name, target);
      if (name !== "changes") return typeof v === "function" ? v.bind(target) : v;
      return async (...args: Parameters<MemoryBackend["changes"]>) =>
        (await target.changes(...args)).map((e) => {
          const { undo: _, ...rest } = JSON.parse(e.text);
          return { ...e, text: JSON.stringify(rest) };
        });
    },
  });
  await using store = new HandleStore(old);
  const user = "u";
  const h = await store.mint("doc", { a: 0, b: 0 }, { user });
  await store.patch(h, [SetKey("", "a", 1)], { user });
  const r = await store.changesSince(h, 0, { user });
  assert.ok(!r.truncated);
  if (!r.truncated) {
    assert.deepEqual(r.changes.map((c) => [c.version, c.op]), [[1, "mint"], [2, "patch"]]);
  }
  await assert.rejects(
    () => store.stateAt(h, 1, { user }),
    (e) => e instanceof InvalidArgument && e.details.reason === "history_unavailable",
  );
  await assert.rejects(
    () => store.save(h, { a: 0, b: 1 }, { user, expectVersion: 1, onConflict: "merge" }),
    (e) => e instanceof StaleWrite && e.details.reason === "history_unavailable",
  );
});

Deno.test("a save's changelog patch is rfc6902's own for short arrays, equal arrays included", async () => {
  await using store = new HandleStore(new MemoryBackend());
  const user = "u";
  await fc.assert(
    fc.asyncProperty(stateArb, stateArb, fc.boolean(), async (a, b, same) => {
      const after = same ? structuredClone(a) : b;
      const h = await store.mint("doc", a, { user });
      await store.save(h, after, { user, expectVersion: 1 });
      const r = await store.changesSince(h, 1, { user });
      assert.ok(!r.truncated);
      if (r.truncated) return;
      assert.deepEqual(r.changes[0]!.patch, createPatch(a, after));
    }),
    runs(0xd1ff, 300),
  );
});

/**
 * Checks `check` over a minted state and 1-8 steps with two stores on one
 * memory backend: each keeps the states it wrote (parsed), and a write by
 * the other changes the stored text under it.
 */
async function twoStores<T>(
  stepArb: fc.Arbitrary<T>,
  seed: number,
  n: number,
  check: (
    s: { backend: MemoryBackend; mine: HandleStore; other: HandleStore; user: string },
    a: JsonObject,
    steps: T[],
  ) => Promise<void>,
): Promise<void> {
  const backend = new MemoryBackend();
  await using mine = new HandleStore(backend);
  await using other = new HandleStore(backend);
  await fc.assert(
    fc.asyncProperty(
      stateArb,
      fc.array(stepArb, { minLength: 1, maxLength: 8 }),
      (a, steps) => check({ backend, mine, other, user: "u" }, a, steps),
    ),
    runs(seed, n),
  );
}

Deno.test("a save's entry is the same whether the state it replaces is parsed again or kept from the store's last save", async () => {
  // Next states: another state, or the previous one with some values changed,
  // keys added at the end, or keys moved (then its parse is not kept).
  const stepArb = fc.tuple(stateArb, fc.constantFrom("other", "merge", "reorder"), fc.boolean());
  await twoStores(stepArb, 0x5a7e, 200, async ({ backend, mine, other, user }, a, steps) => {
    const h = await mine.mint("doc", a, { user });
    let prev: JsonObject = JSON.parse(JSON.stringify(a));
    for (const [b, how, byOther] of steps) {
      const next: JsonObject = how === "other"
        ? b
        : how === "merge"
        ? Object.assign(structuredClone(prev), b)
        : Object.fromEntries(Object.entries(structuredClone(prev)).reverse());
      const snap = await (byOther ? other : mine).get(h, { user });
      await (byOther ? other : mine).save(h, next, { user, expectVersion: snap.version });
      const [e] = await backend.changes(user, h, snap.version);
      const { patch, undo } = JSON.parse(e!.text);
      const expected = createPatch(prev, JSON.parse(JSON.stringify(next)));
      assert.deepEqual(JSON.stringify(patch), JSON.stringify(expected));
      assert.deepEqual(
        JSON.stringify(undo),
        JSON.stringify(undoOf(prev, expected as JsonPatchOp[])),
      );
      // The caller's state, changed after the save, changes nothing kept.
      scribble(next);
      prev = JSON.parse((await backend.read(user, h))!.state);
    }
  });
});

Deno.test("a patch lands and logs the same whether the state it changes is parsed again or kept from the store's last write", async () => {
  // A patch sets or deletes top-level keys (values of any shape), or the
  // other store saves a state in between.
  const opArb = fc.oneof(
    fc.tuple(keyArb, valueArb).map(([k, v]) => SetKey("", k, v)),
    keyArb.map((k) => DelKey("", k)),
  );
  const stepArb = fc.oneof(
    fc.array(opArb, { minLength: 1, maxLength: 3 }),
    stateArb,
  );
  await twoStores(stepArb, 0x9a7c, 200, async ({ backend, mine, other, user }, a, steps) => {
    const h = await mine.mint("doc", a, { user });
    for (const step of steps) {
      const prev = JSON.parse((await backend.read(user, h))!.state);
      const version = (await mine.get(h, { user })).version;
      if (!Array.isArray(step)) {
        await other.save(h, step, { user, expectVersion: version });
        continue;
      }
      const expected = applyOpsWithUndo(prev, step);
      const snap = await mine.patch(h, step, { user });
      assert.equal(JSON.stringify(snap.state), JSON.stringify(expected.state));
      const stored = (await backend.read(user, h))!.state;
      assert.equal(stored, JSON.stringify(expected.state));
      if (snap.version > version) {
        const [e] = await backend.changes(user, h, version);
        assert.equal(JSON.stringify(JSON.parse(e!.text).undo), JSON.stringify(expected.undo));
      }
      // The op values, changed after the patch, change nothing kept.
      for (const op of step) if ("value" in op) scribble({ v: op.value });
    }
  });
});

/** Changes the containers at the top of `state` in place (a caller that reuses its objects). */
function scribble(state: JsonObject): void {
  for (const value of Object.values(state)) {
    if (Array.isArray(value)) value.push("later");
    else if (typeof value === "object" && value !== null) {
      Object.defineProperty(value, "later", { value: 1, enumerable: true, configurable: true });
    }
  }
}
