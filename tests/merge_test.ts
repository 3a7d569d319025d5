/**
 * Automatic merge of disjoint edits (`save` with `onConflict: "merge"`):
 * the rules as properties of `mergeStates` and of the store, then the merge
 * group of the contract (`_merge_contract.ts`) on every engine — memory,
 * SQLite, Redis, Deno KV and PostgreSQL — opened as their backend test
 * files open them. A missing engine fails these tests; they never skip.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import postgres from "postgres";
import {
  Append,
  applyOps,
  DelKey,
  HandleStore,
  type HandleStoreOptions,
  type JsonObject,
  type PatchOp,
  SetKey,
  StaleWrite,
} from "../mod.ts";
import type { Backend } from "../src/backend.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { changesBetween, mergeStates } from "../src/merge.ts";
import { mergeContract } from "./_merge_contract.ts";
import { startRedis } from "./_redis.ts";
import { runs } from "./_fc.ts";

// ---------------------------------------------------------------- the rules, as properties

/** A base state of a fixed shape: objects, lists of objects, scalars. */
const baseArb: fc.Arbitrary<JsonObject> = fc.record({
  o0: fc.record({ s0: fc.integer({ min: 0, max: 3 }), s1: fc.string({ maxLength: 2 }) }),
  o1: fc.record({ s0: fc.integer({ min: 0, max: 3 }), s1: fc.string({ maxLength: 2 }) }),
  l0: fc.array(fc.record({ f: fc.integer({ min: 0, max: 3 }) }), { maxLength: 3 }),
  l1: fc.array(fc.record({ f: fc.integer({ min: 0, max: 3 }) }), { maxLength: 3 }),
  c0: fc.integer({ min: 0, max: 3 }),
  c1: fc.oneof(fc.string({ maxLength: 2 }), fc.constant(null)),
}).map((o) => JSON.parse(JSON.stringify(o))); // plain objects, as JSON makes them

/** Where an op acts, as segments of the base (`"-"` last: an append to that list). */
function placeOf(op: PatchOp): string[] {
  switch (op.op) {
    case "append":
      return [op.path, "-"];
    case "del_key":
      return [op.key];
    case "set_key":
      return op.path === "" ? [op.key] : [...op.path.slice(1).split("/"), op.key];
    default:
      throw new Error(`no place for ${op.op}`);
  }
}

/** Ops that apply to every base of {@link baseArb}: one side's edits. */
function sideArb(base: JsonObject): fc.Arbitrary<PatchOp[]> {
  const value = fc.oneof(fc.integer({ min: 0, max: 9 }), fc.string({ maxLength: 2 }));
  const edits: fc.Arbitrary<PatchOp>[] = [
    fc.tuple(fc.constantFrom("c0", "c1", "o0", "l0", "new"), value).map(([k, v]) =>
      SetKey("", k, v)
    ),
    fc.constantFrom("c0", "c1", "o1", "l1").map((k) => DelKey("", k)),
    fc.tuple(fc.constantFrom("o0", "o1"), fc.constantFrom("s0", "s1", "s2"), value)
      .map(([o, k, v]) => SetKey(`/${o}`, k, v)),
    fc.tuple(fc.constantFrom("l0", "l1"), value).map(([l, v]) => Append(l, { f: v })),
  ];
  for (const l of ["l0", "l1"]) {
    const n = (base[l] as unknown[]).length;
    if (n > 0) {
      edits.push(
        fc.tuple(fc.integer({ min: 0, max: n - 1 }), value).map(([i, v]) =>
          SetKey(`/${l}/${i}`, "f", v)
        ),
      );
    }
  }
  return fc.array(fc.oneof(...edits), { minLength: 0, maxLength: 4 });
}

/**
 * The places a side changes, by the documented rule: a list that one side
 * both appends to and changes otherwise (or replaces, or deletes) is changed
 * as a whole.
 */
function placesOf(ops: readonly PatchOp[]): string[][] {
  const places = ops.map(placeOf);
  const whole = new Set<string>();
  for (const l of ["l0", "l1"]) {
    const mine = places.filter((p) => p[0] === l);
    if (mine.some((p) => p[1] === "-") && mine.some((p) => p[1] !== "-")) whole.add(l);
  }
  return places.map((p) => whole.has(p[0]!) ? [p[0]!] : p);
}

function prefixOf(a: readonly string[], b: readonly string[]): boolean {
  return a.length <= b.length && a.every((s, i) => s === b[i]);
}

/** Whether two places overlap by the documented rule. */
function overlap(a: string[], b: string[]): boolean {
  const appendA = a.at(-1) === "-";
  const appendB = b.at(-1) === "-";
  if (appendA && appendB) return false;
  if (appendA) return prefixOf(b, a.slice(0, -1));
  if (appendB) return prefixOf(a, b.slice(0, -1));
  return prefixOf(a, b) || prefixOf(b, a);
}

function disjoint(theirs: readonly PatchOp[], mine: readonly PatchOp[]): boolean {
  const t = placesOf(theirs);
  return placesOf(mine).every((m) => t.every((p) => !overlap(m, p)));
}

/** `applyOps`, or `undefined` when an op does not apply (a side that undoes its own shape). */
function tryOps(state: JsonObject, ops: readonly PatchOp[]): JsonObject | undefined {
  try {
    return applyOps(state, ops);
  } catch {
    return undefined;
  }
}

const caseArb = baseArb.chain((base) => fc.tuple(fc.constant(base), sideArb(base), sideArb(base)));

Deno.test("mergeStates(): disjoint edits merge into both applied; a conflict names places both changed", () => {
  let merged = 0, refused = 0;
  const settings = runs(0x3e26e, 3000);
  fc.assert(
    fc.property(caseArb, ([base, theirOps, myOps]) => {
      const theirs = tryOps(base, theirOps);
      const mine = tryOps(base, myOps);
      fc.pre(theirs !== undefined && mine !== undefined);
      const out = mergeStates(base, theirs, mine);
      if (disjoint(theirOps, myOps)) {
        assert.ok(out.ok, `disjoint edits merge: ${JSON.stringify([theirOps, myOps])}`);
        // Nothing lost: the merge is both sides' edits applied, theirs first.
        assert.deepEqual(out.state, applyOps(theirs, myOps));
      }
      if (out.ok) {
        merged++;
        return;
      }
      refused++;
      assert.ok(out.conflicts.length > 0);
      assert.deepEqual(out.conflicts, [...out.conflicts].sort());
      const t = placesOf(theirOps);
      const m = placesOf(myOps);
      for (const c of out.conflicts) {
        const at = c.slice(1).split("/");
        const touches = (p: string[]) => {
          const q = p.at(-1) === "-" ? p.slice(0, -1) : p;
          return prefixOf(q, at) || prefixOf(at, q);
        };
        assert.ok(t.some(touches) && m.some(touches), `${c} was changed by both`);
      }
    }),
    settings,
  );
  assert.ok(
    merged > settings.numRuns / 4 && refused > settings.numRuns / 10,
    `${merged} ${refused}`,
  );
});

Deno.test("changesBetween(): the documented rules for objects and lists", () => {
  const base = { o: { a: 1, b: [1] }, l: [{ f: 1 }, { f: 2 }], s: "x", gone: 1 };
  assert.deepEqual(changesBetween(base, base), []);
  assert.deepEqual(
    changesBetween(base, { o: { a: 2, b: [1], c: 3 }, l: [{ f: 1 }, { f: 2 }, { f: 3 }], s: "x" }),
    [
      { kind: "set", path: ["o", "a"], value: 2 },
      { kind: "set", path: ["o", "c"], value: 3 },
      { kind: "append", path: ["l"], items: [{ f: 3 }] },
      { kind: "delete", path: ["gone"] },
    ],
  );
  // Same length: item by item. Shorter, or longer with an earlier item changed: the whole list.
  assert.deepEqual(changesBetween({ l: [1, 2] }, { l: [1, 3] }), [
    { kind: "set", path: ["l", "1"], value: 3 },
  ]);
  assert.deepEqual(changesBetween({ l: [1, 2] }, { l: [2] }), [
    { kind: "set", path: ["l"], value: [2] },
  ]);
  assert.deepEqual(changesBetween({ l: [1, 2] }, { l: [0, 1, 2] }), [
    { kind: "set", path: ["l"], value: [0, 1, 2] },
  ]);
  // Key order is not a change; a type change is a change of the whole value.
  assert.deepEqual(changesBetween({ o: { a: 1, b: 2 } }, { o: { b: 2, a: 1 } }), []);
  assert.deepEqual(changesBetween({ o: { a: 1 } }, { o: [1] }), [
    { kind: "set", path: ["o"], value: [1] },
  ]);
  // Keys that are pointers' own characters and prototype names are plain keys.
  const odd = JSON.parse('{"__proto__": {"a/b": 1, "~": 2}}');
  const odd2 = JSON.parse('{"__proto__": {"a/b": 2, "~": 2}}');
  assert.deepEqual(changesBetween(odd, odd2), [
    { kind: "set", path: ["__proto__", "a/b"], value: 2 },
  ]);
  const out = mergeStates(odd, odd2, JSON.parse('{"__proto__": {"a/b": 1, "~": 3}}'));
  assert.ok(out.ok);
  assert.equal(JSON.stringify(out.state), '{"__proto__":{"a/b":2,"~":3}}');
  assert.deepEqual(out.patch, [{ op: "add", path: "/__proto__/~0", value: 3 }]);
});

Deno.test("mergeStates(): the exceptions that lose nothing, and the same change made twice", () => {
  const base = { log: [{ f: 1 }], tags: ["a"], n: 1 };
  // Both append: theirs first, then mine.
  const both = mergeStates(base, { ...base, log: [{ f: 1 }, { f: 2 }] }, {
    ...base,
    log: [{ f: 1 }, { f: 3 }],
  });
  assert.ok(both.ok);
  assert.deepEqual(both.state.log, [{ f: 1 }, { f: 2 }, { f: 3 }]);
  // One appends, the other edits an existing item: no item moves.
  const edit = mergeStates(base, { ...base, log: [{ f: 1 }, { f: 2 }] }, {
    ...base,
    log: [{ f: 9 }],
  });
  assert.ok(edit.ok);
  assert.deepEqual(edit.state.log, [{ f: 9 }, { f: 2 }]);
  // The same change on both sides is no conflict; a different one is.
  assert.ok(mergeStates(base, { ...base, n: 2 }, { ...base, n: 2 }).ok);
  assert.deepEqual(mergeStates(base, { ...base, n: 2 }, { ...base, n: 3 }), {
    ok: false,
    conflicts: ["/n"],
  });
  // Their insert at the front shifts every item: my edit of item 0 conflicts at the list.
  const shifted = mergeStates(base, { ...base, log: [{ f: 0 }, { f: 1 }] }, {
    ...base,
    log: [{ f: 9 }],
  });
  assert.deepEqual(shifted, { ok: false, conflicts: ["/log/0/f"] });
});

Deno.test("the store's merge equals both sides' edits applied, whichever side patched", async () => {
  await using store = new HandleStore(new MemoryBackend());
  const user = "u";
  let merged = 0;
  await fc.assert(
    fc.asyncProperty(caseArb, async ([base, theirOps, myOps]) => {
      const mine = tryOps(base, myOps);
      fc.pre(tryOps(base, theirOps) !== undefined && mine !== undefined);
      const h = await store.mint("doc", base, { user });
      await store.patch(h, theirOps, { user, writer: "theirs" });
      const theirs = await store.get(h, { user });
      try {
        const r = await store.save(h, mine, { user, expectVersion: 1, onConflict: "merge" });
        if (theirs.version === 1) {
          assert.equal(r.merged, undefined);
          assert.deepEqual(r.state, mine);
        } else {
          merged++;
          assert.equal(r.merged, true);
          assert.deepEqual(r.state, (await store.get(h, { user })).state);
          if (disjoint(theirOps, myOps)) assert.deepEqual(r.state, applyOps(theirs.state, myOps));
        }
      } catch (e) {
        assert.ok(e instanceof StaleWrite, String(e));
        assert.ok(!disjoint(theirOps, myOps), "only overlapping edits are refused");
        assert.ok(Array.isArray(e.details.conflicts));
        assert.equal((await store.get(h, { user })).version, theirs.version, "nothing written");
      }
      await store.revoke(h, { user });
    }),
    runs(0x3e26f, 300),
  );
  assert.ok(merged > 50, `${merged} merged`);
});

// ---------------------------------------------------------------- every engine

const dir = await Deno.makeTempDir({ prefix: "mcpstate-merge-" });

// Memory: one backend shared by every store, as processes share a database.
const shared = new MemoryBackend();
const view = (): Backend =>
  new Proxy(shared, {
    get(target, name) {
      if (name === "close") return () => Promise.resolve();
      const v = Reflect.get(target, name, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
mergeContract("memory", (options) => Promise.resolve(new HandleStore(view(), options)));

mergeContract(
  "sqlite file",
  (options) => HandleStore.fromUrl(`sqlite:///${dir}/merge.db`, options),
);

mergeContract(
  "denokv file",
  (options) => HandleStore.fromUrl(`denokv:///${dir}/merge.kv`, options),
);

const redis = startRedis();
mergeContract("redis", async (options) => HandleStore.fromUrl((await redis).url, options));

const PG_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";
const pgSchema = `mcpstate_test_merge_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pgUrl = (() => {
  const url = new URL(PG_URL);
  url.searchParams.set("schema", pgSchema);
  return url.toString();
})();
mergeContract(
  "postgres",
  (options: HandleStoreOptions = {}) => HandleStore.fromUrl(pgUrl, options),
);

Deno.test("merge: engines stop (Redis), their data goes (PostgreSQL schema, files)", async () => {
  await (await redis).stop();
  const sql = postgres(PG_URL, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
  } finally {
    await sql.end();
  }
  await Deno.remove(dir, { recursive: true });
});
