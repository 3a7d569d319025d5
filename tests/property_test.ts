/**
 * Property tests of the patch ops and of the store's JSON handling.
 *
 * Every property runs with a fixed seed, so a run is reproducible; fast-check
 * prints the seed, the shrink path and the counterexample when one fails.
 * `MCPSTATE_FC_SEED` replaces every seed (to explore) and `MCPSTATE_FC_SCALE`
 * multiplies every run count (for long runs).
 *
 * What the interleaving properties establish, precisely, for ops from several
 * writers where each writer's ops keep their order:
 * - `increment` with integer steps whose partial sums stay exact (|sum| ≤ 2^53)
 *   gives the same counters in every interleaving. With fractional steps the
 *   results agree only up to rounding (floating-point addition is not
 *   associative), and a sum that overflows in one order may not in another.
 * - `add_to_set` gives the same set in every interleaving: the same elements
 *   up to deep equality with key order ignored, each once. The list order, and
 *   which of several key orders of an equal object is kept (or whether `-0` or
 *   `0`), depend on the interleaving.
 * - `append` gives the same multiset of elements, existing elements first and
 *   each writer's elements in that writer's order; the relative order of
 *   different writers' elements depends on the interleaving.
 * - `append` and `add_to_set` on the same list do not commute with each other.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AddToSet,
  Append,
  applyOps,
  DelKey,
  getPath,
  HandleStore,
  Increment,
  type JsonObject,
  McpStateError,
  Merge,
  PatchError,
  type PatchOp,
  SetKey,
} from "../mod.ts";
import { codeUnitOr, PROTO_NAMES, runs, storeTest } from "./_fc.ts";

// ---------------------------------------------------------------- helpers

function isObject(x: unknown): x is JsonObject {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** An object with exactly these own data properties (`__proto__` included, as data). */
function objectOf(entries: Iterable<readonly [string, unknown]>): JsonObject {
  return Object.fromEntries(entries);
}

/** JSON text with every object's keys sorted: equal iff deep-equal ignoring key order. */
function canon(v: unknown): string {
  return JSON.stringify(
    v,
    (_k, x: unknown) =>
      isObject(x)
        ? objectOf(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        : x,
  );
}

function sortedCanon(list: readonly unknown[]): string[] {
  return list.map(canon).sort();
}

/** The same value with every object's keys in reverse order. */
function reverseKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reverseKeys);
  if (isObject(v)) {
    return objectOf(Object.entries(v).reverse().map(([k, x]) => [k, reverseKeys(x)]));
  }
  return v;
}

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Reflect.ownKeys(v)) deepFreeze((v as Record<PropertyKey, unknown>)[k]);
  }
  return v;
}

/** Escapes one JSON Pointer segment (RFC 6901). */
function esc(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

function pointer(keys: readonly string[]): string {
  return keys.map((k) => `/${esc(k)}`).join("");
}

/** Depth as the store counts it: a primitive is 0, a container 1 + its deepest child. */
function depthOf(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  let d = 0;
  for (const x of Object.values(v)) d = Math.max(d, depthOf(x));
  return d + 1;
}

/** What a JSON round trip turns `v` into (`-0` becomes `0`; nothing else changes). */
function viaJson<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

async function expectCode(p: Promise<unknown>, code: string): Promise<McpStateError> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof McpStateError)) throw e;
    assert.equal(e.code, code, `expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

function throwsPatchError(f: () => unknown): PatchError {
  try {
    f();
  } catch (e) {
    if (e instanceof PatchError) return e;
    throw e;
  }
  assert.fail("expected a PatchError");
}

/** Own keys and descriptors of the built-in prototypes, to prove nothing touched them. */
function prototypeFingerprint(): string {
  return [Object.prototype, Array.prototype, Function.prototype].map((p) =>
    Reflect.ownKeys(p).map((k) => {
      const d = Object.getOwnPropertyDescriptor(p, k);
      return `${String(k)}:${typeof d?.value}:${typeof d?.get}`;
    }).join(",")
  ).join("|");
}

function assertPrototypesClean(before: string): void {
  assert.equal(prototypeFingerprint(), before, "a built-in prototype changed");
  const probe: Record<string, unknown> = {};
  for (const k of ["polluted", "x", "inner", "n", "k"]) {
    assert.equal(probe[k], undefined, `Object.prototype.${k} appeared`);
  }
  assert.equal(Object.getPrototypeOf(probe), Object.prototype);
}

/** Every object in `v` has `Object.prototype` as its prototype. */
function assertOrdinaryObjects(v: unknown): void {
  if (Array.isArray(v)) v.forEach(assertOrdinaryObjects);
  else if (isObject(v)) {
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    Object.values(v).forEach(assertOrdinaryObjects);
  }
}

// ---------------------------------------------------------------- arbitraries

const PROTO_KEYS = [
  ...PROTO_NAMES,
  "isPrototypeOf",
  "__defineGetter__",
];

const EDGE_KEYS = [
  "",
  " ",
  ".",
  "..",
  "a.b",
  ".a",
  "~",
  "/",
  "~0",
  "~1",
  "~01",
  "a/b",
  "a~b",
  "/~",
  "0",
  "01",
  "-",
  "\u0000",
  "😀",
  "\u{10FFFF}",
  "\ud800",
  "\udfff",
  "x\udc00y",
  "e\u0301",
  "ключ",
  "polluted",
];

/** Any code unit, lone surrogates included. */
const codeUnit = codeUnitOr("~", "/", ".", "0", "1");

const keyArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...PROTO_KEYS, ...EDGE_KEYS),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.string({ unit: codeUnit, maxLength: 6 }),
);

const EDGE_NUMBERS = [
  -0,
  0,
  1,
  -1,
  0.1,
  1e308,
  -1e308,
  5e-324,
  -5e-324,
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_SAFE_INTEGER,
  2 ** 53,
  1e21,
  1e-7,
];

const EDGE_STRINGS = [
  "",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff",
  "a\udbffb",
  "\udc00\ud800",
  "😀",
  "\u2028\u2029",
  '"\\/',
  "</script>",
  "\u001f\u007f\u0080",
];

const leafArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(...EDGE_NUMBERS, ...EDGE_STRINGS, true, false, null),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.string({ unit: "binary", maxLength: 8 }),
  fc.string({ unit: codeUnit, maxLength: 8 }),
);

/** JSON values with edge numbers, lone surrogates and prototype-named keys. */
const { value: jsonArb } = fc.letrec<{ value: unknown; array: unknown[]; object: JsonObject }>(
  (tie) => ({
    value: fc.oneof({ depthSize: "small", maxDepth: 5 }, leafArb, tie("array"), tie("object")),
    array: fc.array(tie("value"), { maxLength: 4 }),
    object: fc.array(fc.tuple(keyArb, tie("value")), { maxLength: 4 }).map(objectOf),
  }),
);

const anyJsonArb: fc.Arbitrary<unknown> = fc.oneof(jsonArb, fc.jsonValue({ maxDepth: 4 }));

const stateArb: fc.Arbitrary<JsonObject> = fc.oneof(
  fc.array(fc.tuple(keyArb, anyJsonArb), { maxLength: 6 }).map(objectOf),
  fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 6 }).map(viaJson),
);

// ---------------------------------------------------------------- interleavings

/** Merges the lanes in the order `picks` chooses, keeping each lane's own order. */
function interleave<T>(lanes: readonly (readonly T[])[], picks: readonly number[]): T[] {
  const pos = lanes.map(() => 0);
  const out: T[] = [];
  for (let k = 0;; k++) {
    const live = lanes.flatMap((lane, i) => ((pos[i] ?? 0) < lane.length ? [i] : []));
    if (live.length === 0) return out;
    const w = live[(picks[k % picks.length] ?? 0) % live.length] ?? 0;
    const at = pos[w] ?? 0;
    pos[w] = at + 1;
    out.push((lanes[w] ?? [])[at] as T);
  }
}

const COUNTER_KEYS = ["a", "b", "__proto__", "constructor", "toString", "c.d", "", "~/"];
const SET_NAMES = ["s1", "s2"];
const LIST_NAMES = ["l1", "l2"];

/** Small domain, so writers often add equal values (in different key orders). */
const setValueArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    "x",
    "y",
    1,
    0,
    -0,
    null,
    true,
    { a: 1, b: [1, 2] },
    { b: [1, 2], a: 1 },
    { a: 1, b: [2, 1] },
    { k: { x: 1, y: { p: null, q: "" } } },
    { k: { y: { q: "", p: null }, x: 1 } },
    JSON.parse('{"__proto__": 1, "z": 2}'),
    JSON.parse('{"z": 2, "__proto__": 1}'),
  ),
  jsonArb,
);

type OpSpec =
  | { kind: "inc"; key: string; by: number }
  | { kind: "set"; name: string; value: unknown }
  | { kind: "app"; name: string; value: unknown };

function opSpecArb(by: fc.Arbitrary<number>): fc.Arbitrary<OpSpec> {
  return fc.oneof(
    fc.record({ kind: fc.constant("inc" as const), key: fc.constantFrom(...COUNTER_KEYS), by }),
    fc.record({
      kind: fc.constant("set" as const),
      name: fc.constantFrom(...SET_NAMES),
      value: setValueArb,
    }),
    fc.record({
      kind: fc.constant("app" as const),
      name: fc.constantFrom(...LIST_NAMES),
      value: anyJsonArb,
    }),
  );
}

/** Turns each writer's specs into ops; appended values are tagged `{w, i, v}` (`i` per list). */
function lanesOf(writers: readonly (readonly OpSpec[])[]): PatchOp[][] {
  return writers.map((specs, w) => {
    const next = new Map<string, number>();
    return specs.map((s): PatchOp => {
      switch (s.kind) {
        case "inc":
          return Increment("counters", s.key, s.by);
        case "set":
          return AddToSet(`sets.${s.name}`, s.value);
        case "app": {
          const i = next.get(s.name) ?? 0;
          next.set(s.name, i + 1);
          return Append(`/lists/${s.name}`, { w, i, v: s.value });
        }
      }
    });
  });
}

const initialArb: fc.Arbitrary<JsonObject> = fc.record({
  counters: fc.dictionary(fc.constantFrom(...COUNTER_KEYS), fc.integer({ min: -1e6, max: 1e6 }), {
    maxKeys: 3,
  }).map((d) => objectOf(Object.entries(d))),
  sets: fc.record({
    s1: fc.uniqueArray(setValueArb, { maxLength: 3, selector: canon }),
  }),
  lists: fc.record({ l1: fc.array(anyJsonArb, { maxLength: 3 }) }),
  other: anyJsonArb,
}, { requiredKeys: ["other"] });

function own(o: unknown, k: string): unknown {
  return isObject(o) && Object.hasOwn(o, k) ? o[k] : undefined;
}

function asList(x: unknown): unknown[] {
  return Array.isArray(x) ? x : [];
}

Deno.test("interleavings of append, increment and add_to_set from several writers", async (t) => {
  const writersArb = (by: fc.Arbitrary<number>) =>
    fc.array(fc.array(opSpecArb(by), { maxLength: 8 }), { minLength: 2, maxLength: 4 });
  const picksArb = fc.array(fc.nat(), { minLength: 1, maxLength: 40 });

  await t.step("counters, sets and list multisets are the same in every interleaving", () => {
    fc.assert(
      fc.property(
        initialArb,
        writersArb(fc.integer({ min: -1e6, max: 1e6 })),
        picksArb,
        picksArb,
        (initial, writers, p1, p2) => {
          deepFreeze(initial);
          const lanes = lanesOf(writers);
          const orders = [lanes.flat(), interleave(lanes, p1), interleave(lanes, p2)];
          const results = orders.map((ops) => applyOps(initial, ops));
          const all = lanes.flat();

          // Counters: initial value plus the sum of every step, exactly, in every order.
          const counters = new Map<string, number>();
          for (const [k, v] of Object.entries(own(initial, "counters") ?? {})) {
            counters.set(k, v as number);
          }
          for (const op of all) {
            if (op.op === "increment") counters.set(op.key, (counters.get(op.key) ?? 0) + op.by);
          }
          const hasCounters = own(initial, "counters") !== undefined ||
            all.some((op) => op.op === "increment");
          for (const r of results) {
            const got = own(r, "counters");
            if (!hasCounters) assert.equal(got, undefined);
            else {
              assert.deepEqual(Object.keys(got ?? {}).sort(), [...counters.keys()].sort());
              for (const [k, v] of counters) assert.equal(own(got, k), v, `counter ${k}`);
            }
          }

          // Sets: the same elements (key order ignored), each once.
          for (const name of SET_NAMES) {
            const path = `sets.${name}`;
            const initialSet = own(own(initial, "sets"), name);
            const want = new Set(asList(initialSet).map(canon));
            for (const op of all) {
              if (op.op === "add_to_set" && op.path === path) want.add(canon(op.value));
            }
            const present = initialSet !== undefined ||
              all.some((op) => op.op === "add_to_set" && op.path === path);
            for (const r of results) {
              const got = own(own(r, "sets"), name);
              if (!present) assert.equal(got, undefined);
              else assert.deepEqual(sortedCanon(asList(got)), [...want].sort(), `set ${name}`);
            }
          }

          // Lists: the same multiset; existing items first; each writer's in its order.
          for (const name of LIST_NAMES) {
            const path = `/lists/${name}`;
            const initialList = own(own(initial, "lists"), name);
            const before = asList(initialList);
            const appended = all.flatMap((op) =>
              op.op === "append" && op.path === path ? [op.value] : []
            );
            for (const r of results) {
              const got = own(own(r, "lists"), name);
              if (initialList === undefined && appended.length === 0) {
                assert.equal(got, undefined);
                continue;
              }
              const list = asList(got);
              assert.deepEqual(sortedCanon(list), sortedCanon([...before, ...appended]));
              assert.deepEqual(list.slice(0, before.length), before);
              for (let w = 0; w < lanes.length; w++) {
                const mine = list.slice(before.length).filter((x) => own(x, "w") === w);
                assert.deepEqual(mine.map((x) => own(x, "i")), mine.map((_, i) => i));
              }
            }
          }

          // Nothing else moves.
          for (const r of results) assert.equal(own(r, "other"), own(initial, "other"));
        },
      ),
      runs(6221057, 2000),
    );
  });

  await t.step("fractional increments agree up to rounding", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { maxLength: 8 }), {
          minLength: 2,
          maxLength: 4,
        }),
        picksArb,
        (steps, picks) => {
          const lanes = steps.map((lane) => lane.map((by) => Increment("", "n", by)));
          const a = own(applyOps({}, lanes.flat()), "n") ?? 0;
          const b = own(applyOps({}, interleave(lanes, picks)), "n") ?? 0;
          const magnitude = steps.flat().reduce((s, x) => s + Math.abs(x), 0);
          assert.ok(
            Math.abs((a as number) - (b as number)) <= magnitude * steps.flat().length * 2 ** -52,
            `${String(a)} vs ${String(b)}`,
          );
        },
      ),
      runs(6221058, 1500),
    );
  });

  await t.step("the documented limits of commutativity", () => {
    // Floating-point addition is not associative.
    const steps = [0.1, 0.2, 0.3];
    const forward = applyOps({}, steps.map((by) => Increment("", "n", by)));
    const backward = applyOps({}, steps.toReversed().map((by) => Increment("", "n", by)));
    assert.equal(forward.n, 0.6000000000000001);
    assert.equal(backward.n, 0.6);
    // Leaving ±(2^53 − 1) on the way depends on the order.
    const max = Number.MAX_SAFE_INTEGER;
    const past = [max, 1, -1];
    const e = throwsPatchError(() => applyOps({}, past.map((by) => Increment("", "n", by))));
    assert.equal(e.details.reason, "out_of_range");
    assert.equal(applyOps({}, [max, -1, 1].map((by) => Increment("", "n", by))).n, max);
    // append and add_to_set on the same list do not commute with each other.
    assert.deepEqual(applyOps({}, [Append("l", 1), AddToSet("l", 1)]), { l: [1] });
    assert.deepEqual(applyOps({}, [AddToSet("l", 1), Append("l", 1)]), { l: [1, 1] });
  });
});

storeTest("N concurrent patchers on one handle all land exactly once", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.array(
          fc.record({
            by: fc.integer({ min: -1000, max: 1000 }),
            tag: fc.constantFrom("a", "b", "c", "d"),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        { minLength: 2, maxLength: 6 },
      ),
      async (writers) => {
        const h = await store.mint("counter", { c: {}, tags: [], log: [] }, { user });
        await Promise.all(writers.map(async (patches, w) => {
          for (const [i, { by, tag }] of patches.entries()) {
            await store.patch(h, [
              Increment("c", `w${w}`, by),
              Increment("c", "total", by),
              AddToSet("tags", tag),
              Append("log", { w, i }),
            ], { user, writer: `writer-${w}` });
          }
        }));
        const snap = await store.get(h, { user });
        const s = snap.state;
        const total = writers.flat().reduce((sum, p) => sum + p.by, 0);
        assert.equal(own(s.c, "total"), total);
        writers.forEach((patches, w) => {
          assert.equal(own(s.c, `w${w}`), patches.reduce((sum, p) => sum + p.by, 0));
          const mine = asList(s.log).filter((x) => own(x, "w") === w).map((x) => own(x, "i"));
          assert.deepEqual(mine, patches.map((_, i) => i), `writer ${w}'s appends in order`);
        });
        assert.equal(asList(s.log).length, writers.flat().length);
        assert.deepEqual(
          asList(s.tags).toSorted(),
          [...new Set(writers.flat().map((p) => p.tag))].sort(),
        );
        assert.equal(snap.version, 1 + writers.flat().length, "every patch wrote exactly once");
      },
    ),
    runs(6221059, 150),
  );
});

// ---------------------------------------------------------------- add_to_set

Deno.test("add_to_set is idempotent and ignores key order", () => {
  fc.assert(
    fc.property(
      stateArb,
      fc.array(anyJsonArb, { maxLength: 5 }),
      anyJsonArb,
      fc.constantFrom("t", "/t", "p.t", "/p/t", "/l/0"),
      (base, list, value, path) => {
        const state: JsonObject = objectOf([
          ...Object.entries(base),
          ["t", list],
          ["p", { t: list }],
          ["l", [list]],
        ]);
        deepFreeze(state);
        const once = applyOps(state, [AddToSet(path, value)]);
        const present = asList(getPath(state, path)).some((x) => canon(x) === canon(value));
        const after = asList(getPath(once, path));
        if (present) assert.equal(once, state, "an equal value present: nothing changes");
        else {
          assert.equal(after.length, list.length + 1);
          assert.equal(after.at(-1), value);
        }
        // Twice equals once, and the second returns its input itself.
        assert.equal(applyOps(once, [AddToSet(path, value)]), once);
        assert.equal(applyOps(once, [AddToSet(path, reverseKeys(value))]), once);
        assert.equal(applyOps(once, [AddToSet(path, viaJson(value))]), once);
        assert.deepEqual(applyOps(state, [AddToSet(path, value), AddToSet(path, value)]), once);
      },
    ),
    runs(6221060, 3000),
  );
});

storeTest("a repeated add_to_set patch writes nothing", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  await fc.assert(
    fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
      const h = await store.mint("set", { tags: [] }, { user });
      const first = await store.patch(h, [AddToSet("tags", value)], { user, writer: "one" });
      assert.equal(first.version, 2);
      const again = await store.patch(h, [AddToSet("tags", reverseKeys(value))], {
        user,
        writer: "two",
      });
      assert.equal(again.version, 2);
      assert.equal(again.lastWriter, "one");
      assert.equal(JSON.stringify(again.state), JSON.stringify({ tags: [value] }));
    }),
    runs(6221061, 400),
  );
});

// ---------------------------------------------------------------- purity

/** Ops aimed at paths that exist in `state`, plus paths that don't. */
function opsFor(state: JsonObject): fc.Arbitrary<PatchOp[]> {
  const paths: string[] = [""];
  const visit = (v: unknown, keys: string[]) => {
    if (keys.length > 4) return;
    if (Array.isArray(v)) v.forEach((x, i) => visit(x, [...keys, String(i)]));
    else if (isObject(v)) {
      for (const [k, x] of Object.entries(v)) {
        paths.push(pointer([...keys, k]));
        visit(x, [...keys, k]);
      }
    }
  };
  visit(state, []);
  const path = fc.oneof(
    fc.constantFrom(...paths),
    fc.constantFrom("a", "a.b", "/x/0", "/missing/deep", "..", "/~2", "toString", "__proto__"),
  );
  const key = fc.oneof(keyArb, fc.constantFrom(...Object.keys(state), "k"));
  const op: fc.Arbitrary<PatchOp> = fc.oneof(
    fc.tuple(path, anyJsonArb).map(([p, v]) => Append(p, v)),
    fc.tuple(path, anyJsonArb).map(([p, v]) => AddToSet(p, v)),
    fc.tuple(path, key, anyJsonArb).map(([p, k, v]) => SetKey(p, k, v)),
    fc.tuple(path, key).map(([p, k]) => DelKey(p, k)),
    fc.tuple(stateArb, path).map(([m, p]) => Merge(m, p)),
    fc.tuple(path, key, fc.double({ noNaN: true })).map(([p, k, by]) => Increment(p, k, by)),
    anyJsonArb.map((x) => x as PatchOp),
  );
  return fc.array(op, { maxLength: 6 });
}

Deno.test("applyOps() never mutates its input", () => {
  fc.assert(
    fc.property(
      stateArb.chain((state) => fc.tuple(fc.constant(state), opsFor(state))),
      ([state, ops]) => {
        const stateBefore = structuredClone(state);
        const opsBefore = structuredClone(ops);
        const textBefore = JSON.stringify([state, ops]);
        const outcome = (): unknown => {
          try {
            return applyOps(state, ops);
          } catch (e) {
            if (e instanceof PatchError) return e.details;
            throw e;
          }
        };
        const first = outcome();
        assert.deepEqual(state, stateBefore);
        assert.deepEqual(ops, opsBefore);
        assert.equal(JSON.stringify([state, ops]), textBefore);
        // Frozen, any write into the input would throw a TypeError; the outcome is the same.
        deepFreeze(state);
        deepFreeze(ops);
        assert.deepEqual(outcome(), first);
      },
    ),
    runs(6221062, 2000),
  );
});

// ---------------------------------------------------------------- keys

const valueArb = fc.oneof(
  anyJsonArb,
  fc.constant({ polluted: true }),
  fc.constant([{ polluted: 1 }]),
);

Deno.test("arbitrary keys round-trip through the ops and getPath and never touch a prototype", () => {
  const protoBefore = prototypeFingerprint();
  fc.assert(
    fc.property(
      fc.array(keyArb, { maxLength: 4 }),
      keyArb,
      valueArb,
      (parents, key, value) => {
        const at = pointer(parents);
        const leaf = `${at}/${esc(key)}`;
        const expected = parents.reduceRight<JsonObject>(
          (inner, k) => objectOf([[k, inner]]),
          objectOf([[key, value]]),
        );

        const set = applyOps({}, [SetKey(at, key, value)]);
        assert.deepEqual(set, expected);
        assert.equal(getPath(set, leaf), value);
        assertOrdinaryObjects(set);
        const back = viaJson(set);
        assert.equal(JSON.stringify(back), JSON.stringify(set));
        assert.deepEqual(getPath(back, leaf), viaJson(value));
        assert.deepEqual(applyOps({}, [Merge(objectOf([[key, value]]), at)]), expected);
        assert.deepEqual(getPath(applyOps({}, [Increment(at, key, 3)]), leaf), 3);
        assert.deepEqual(getPath(applyOps({}, [AddToSet(leaf, value)]), leaf), [value]);
        assert.deepEqual(getPath(applyOps({}, [Append(leaf, value)]), leaf), [value]);

        const dotted = parents.join(".");
        if (parents.every((k) => k !== "" && !k.includes(".")) && !dotted.startsWith("/")) {
          assert.deepEqual(applyOps({}, [SetKey(dotted, key, value)]), expected);
          if (dotted !== "") assert.deepEqual(getPath(set, dotted), objectOf([[key, value]]));
        }

        const deleted = applyOps(set, [DelKey(at, key)]);
        assert.deepEqual(getPath(deleted, at), {});
        throwsPatchError(() => getPath(deleted, leaf));
        assert.equal(applyOps(deleted, [DelKey(at, key)]), deleted);
        assert.deepEqual(applyOps(back, [DelKey(at, key)]), deleted);

        assertPrototypesClean(protoBefore);
      },
    ),
    runs(6221063, 4000),
  );
  assertPrototypesClean(protoBefore);
});

storeTest("arbitrary keys round-trip through mint, patch and get", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  const protoBefore = prototypeFingerprint();
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(keyArb, valueArb), { maxLength: 5 }).map(objectOf),
      fc.array(keyArb, { maxLength: 3 }),
      keyArb,
      valueArb,
      async (state, parents, key, value) => {
        const h = await store.mint("keys", state, { user });
        const got = await store.get(h, { user });
        assert.equal(JSON.stringify(got.state), JSON.stringify(state));
        assertOrdinaryObjects(got.state);
        const at = pointer(parents);
        const counts = "#counts-9f2";
        const ops = [SetKey(at, key, value), Increment(`/${counts}`, key), DelKey("", key)];
        let want: JsonObject | PatchError;
        try {
          want = applyOps(viaJson(state), ops);
        } catch (e) {
          if (!(e instanceof PatchError)) throw e;
          want = e;
        }
        if (want instanceof PatchError) {
          // The ops run into the state's own values: the store refuses them the same way.
          await expectCode(store.patch(h, ops, { user }), "patch_error");
          const after = await store.get(h, { user });
          assert.equal(after.version, 1);
          assert.equal(JSON.stringify(after.state), JSON.stringify(state));
        } else {
          const patched = await store.patch(h, ops, { user });
          assert.equal(JSON.stringify(patched.state), JSON.stringify(want));
          assert.equal(JSON.stringify((await store.get(h, { user })).state), JSON.stringify(want));
          assert.equal(getPath(patched.state, `/${counts}/${esc(key)}`), 1);
        }
        assertPrototypesClean(protoBefore);
      },
    ),
    runs(6221064, 800),
  );
});

// ---------------------------------------------------------------- JSON values

/** Values at the edges of JSON that must come back exactly. */
const edgeStateArb: fc.Arbitrary<JsonObject> = fc.oneof(
  stateArb,
  fc.constantFrom<unknown>(...EDGE_NUMBERS, ...EDGE_STRINGS).map((v) => ({ v })),
  fc.array(fc.constantFrom(...EDGE_STRINGS), { maxLength: 4 }).map((parts) =>
    objectOf([[parts.join(""), parts.join("")]])
  ),
  stateArb.map((s) => Object.assign(Object.create(null) as JsonObject, s)),
  fc.integer({ min: 1, max: 63 }).map((d) => ({ v: nest(d - 1, 0) })),
);

/** `d` levels of containers, alternating lists and objects, around `leaf`. */
function nest(d: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < d; i++) v = i % 2 ? [v] : { k: v };
  return v;
}

storeTest("any JSON state round-trips exactly through mint, save, patch and get", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  await fc.assert(
    fc.asyncProperty(edgeStateArb, edgeStateArb, async (state, next) => {
      const text = JSON.stringify(state);
      const h = await store.mint("json", state, { user });
      const got = await store.get(h, { user });
      assert.equal(JSON.stringify(got.state), text);
      assert.deepEqual(got.state, viaJson(state));
      const saved = await store.save(h, next, { user, expectVersion: 1 });
      assert.equal(JSON.stringify(saved.state), JSON.stringify(next));
      const patched = await store.patch(h, [SetKey("", "inner", state)], { user });
      assert.equal(
        JSON.stringify((await store.get(h, { user })).state),
        JSON.stringify(objectOf([...Object.entries(viaJson(next)), ["inner", viaJson(state)]])),
      );
      assert.equal(
        patched.version,
        JSON.stringify(saved.state) === JSON.stringify(patched.state) ? 2 : 3,
      );
    }),
    runs(6221065, 1000),
  );
});

storeTest("-0 comes back as 0: the JSON text is what round-trips", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  const h = await store.mint("zero", { z: -0, l: [-0], o: { z: -0 } }, { user });
  const { state } = await store.get(h, { user });
  assert.equal(JSON.stringify(state), '{"z":0,"l":[0],"o":{"z":0}}');
  assert.ok(Object.is(state.z, 0));
  // Equal as JSON: adding 0 next to a stored -0 changes nothing.
  const p = await store.patch(h, [SetKey("", "z", 0), AddToSet("l", 0)], { user });
  assert.equal(p.version, 1);
});

storeTest("nesting is refused exactly beyond 64 levels (the root is level 1)", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  for (const depth of [62, 63, 64, 65, 66, 200]) {
    // The root plus `depth - 1` nested containers.
    const state = { v: nest(depth - 1, "leaf") };
    assert.equal(depthOf(state), depth);
    if (depth <= 64) {
      const h = await store.mint("deep", state, { user });
      assert.equal(JSON.stringify((await store.get(h, { user })).state), JSON.stringify(state));
    } else {
      await expectCode(store.mint("deep", state, { user }), "invalid_argument");
    }
  }
});

storeTest("the size cap is the UTF-8 length of the compact JSON", async (_base, url) => {
  const cap = 300;
  // A store of its own on the same engine, with a small cap.
  await using store = await HandleStore.fromUrl(url, { maxStateBytes: cap, reclaimIntervalMs: 0 });
  const user = `u-${crypto.randomUUID()}`;
  {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: codeUnit, maxLength: 120 }), async (s) => {
        const state = { s };
        const size = new TextEncoder().encode(JSON.stringify(state)).length;
        if (size <= cap) {
          const h = await store.mint("size", state, { user });
          assert.equal((await store.get(h, { user })).state.s, s);
        } else {
          const e = await expectCode(store.mint("size", state, { user }), "state_too_large");
          assert.equal(e.details.size_bytes, size);
          assert.equal(e.details.limit_bytes, cap);
        }
      }),
      runs(6221066, 800),
    );
  }
});

class Point {
  x = 1;
}

/** Values JSON can't carry faithfully, each built fresh. */
const BAD_VALUES: Record<string, () => unknown> = {
  undefined: () => undefined,
  function: () => () => 1,
  "async function": () => async () => {},
  symbol: () => Symbol("s"),
  bigint: () => 10n,
  NaN: () => NaN,
  Infinity: () => Infinity,
  "-Infinity": () => -Infinity,
  Date: () => new Date(0),
  Map: () => new Map([[1, 2]]),
  Set: () => new Set([1]),
  WeakMap: () => new WeakMap(),
  "class instance": () => new Point(),
  "foreign prototype": () => Object.create({ inherited: 1 }),
  "Uint8Array": () => new Uint8Array(2),
  "Float64Array": () => new Float64Array([1.5]),
  ArrayBuffer: () => new ArrayBuffer(2),
  DataView: () => new DataView(new ArrayBuffer(1)),
  RegExp: () => /x/,
  Error: () => new Error("x"),
  Promise: () => Promise.resolve(1),
  "boxed string": () => new String("s"),
  "boxed number": () => new Number(1),
  "boxed boolean": () => new Boolean(false),
  "sparse array": () => [, 1],
  "empty slots": () => new Array(3),
  "array subclass": () => new (class List extends Array {})(),
  "getter": () => ({
    get g() {
      return 1;
    },
  }),
  "symbol key": () => ({ a: 1, [Symbol("k")]: 2 }),
  "object cycle": () => {
    const o: JsonObject = { a: 1 };
    o.self = { back: o };
    return o;
  },
  "array cycle": () => {
    const a: unknown[] = [1];
    a.push([a]);
    return a;
  },
  "nesting beyond 64": () => nest(64, 1),
  "toJSON": () => ({ toJSON: () => "x" }),
  "array with a named property": () => Object.assign([1], { extra: 2 }),
  "array with a symbol key": () => Object.assign([1], { [Symbol("k")]: 2 }),
  "non-enumerable property": () => Object.defineProperty({ a: 1 }, "hidden", { value: 2 }),
  "getter in an array": () =>
    Object.defineProperty([], "0", { get: () => 1, enumerable: true, configurable: true }),
};

/** A JSON state with a bad value planted in one of its containers. */
const plantedArb: fc.Arbitrary<{ name: string; state: JsonObject; bad: unknown }> = fc.record({
  name: fc.constantFrom(...Object.keys(BAD_VALUES)),
  state: stateArb,
  where: fc.nat(),
}).map(({ name, state, where }) => {
  const copy = viaJson(state);
  const containers: (JsonObject | unknown[])[] = [];
  const visit = (v: unknown) => {
    if (Array.isArray(v)) {
      containers.push(v);
      v.forEach(visit);
    } else if (isObject(v)) {
      containers.push(v);
      Object.values(v).forEach(visit);
    }
  };
  visit(copy);
  const target = containers[where % containers.length] ?? copy;
  const bad = (BAD_VALUES[name] ?? (() => undefined))();
  if (Array.isArray(target)) target.push(bad);
  else Object.defineProperty(target, "planted", { value: bad, enumerable: true, writable: true });
  return { name, state: copy, bad };
});

storeTest(
  "any non-JSON value is refused with invalid_argument and changes nothing",
  async (store) => {
    const user = `u-${crypto.randomUUID()}`;
    const h = await store.mint("victim", { list: [], obj: {} }, { user });
    const before = await store.get(h, { user });
    const unchanged = async () => {
      const now = await store.get(h, { user });
      assert.equal(now.version, before.version);
      assert.equal(JSON.stringify(now.state), JSON.stringify(before.state));
    };
    await fc.assert(
      fc.asyncProperty(plantedArb, async ({ name, state, bad }) => {
        const why = `planted ${name}`;
        await expectCode(store.mint("bad", state, { user }), "invalid_argument").catch((e) => {
          throw new Error(`${why}: ${String(e)}`);
        });
        await expectCode(store.save(h, state, { user, expectVersion: 1 }), "invalid_argument");
        await expectCode(store.patch(h, [SetKey("", "x", state)], { user }), "invalid_argument");
        // An undefined value is a missing field: a malformed op.
        await expectCode(
          store.patch(h, [Append("list", bad)], { user }),
          bad === undefined ? "patch_error" : "invalid_argument",
        );
        await expectCode(store.patch(h, [Merge(state, "obj")], { user }), "invalid_argument");
        await expectCode(
          store.patch(h, [Increment("", "n"), AddToSet("list", state)], { user }),
          "invalid_argument",
        );
        await unchanged();
      }),
      runs(6221067, 800),
    );
    for (const [name, make] of Object.entries(BAD_VALUES)) {
      await expectCode(store.mint("bad", { v: make() } as JsonObject, { user }), "invalid_argument")
        .catch((e) => {
          throw new Error(`${name}: ${String(e)}`);
        });
      await expectCode(
        store.patch(h, [SetKey("", "v", make())], { user }),
        name === "undefined" ? "patch_error" : "invalid_argument",
      );
    }
    const roots: unknown[] = [[], [1], null, "s", 1, true, undefined, new Map(), new Date(0)];
    for (const root of roots) {
      await expectCode(store.mint("bad", root as JsonObject, { user }), "invalid_argument");
      await expectCode(
        store.save(h, root as JsonObject, { user, expectVersion: 1 }),
        "invalid_argument",
      );
    }
    await unchanged();
  },
);

// ---------------------------------------------------------------- regressions

storeTest(
  "regression: values JSON.stringify drops silently are refused, not stored without them",
  async (store) => {
    const user = `u-${crypto.randomUUID()}`;
    const cases: [string, () => unknown][] = [
      ["a named property on an array", () => Object.assign([1], { extra: 2 })],
      ["a symbol key on an array", () => Object.assign([1], { [Symbol("k")]: 2 })],
      ["a non-enumerable property", () => Object.defineProperty({ a: 1 }, "hidden", { value: 2 })],
    ];
    for (const [what, make] of cases) {
      await expectCode(store.mint("bad", { v: make() }, { user }), "invalid_argument").catch(
        (e) => {
          throw new Error(`${what}: ${String(e)}`);
        },
      );
    }
  },
);

storeTest("regression: an accessor in an array is refused and never called", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  let calls = 0;
  const list = Object.defineProperty([], "0", {
    get: () => calls++,
    enumerable: true,
    configurable: true,
  });
  await expectCode(store.mint("bad", { list }, { user }), "invalid_argument");
  const throwing = Object.defineProperty([], "0", {
    get: () => {
      throw new Error("boom");
    },
    enumerable: true,
    configurable: true,
  });
  await expectCode(store.mint("bad", { list: throwing }, { user }), "invalid_argument");
  assert.equal(calls, 0);
});

Deno.test("regression: add_to_set stays idempotent for values nested deeper than 1000 levels", () => {
  for (const depth of [999, 1001, 1002, 1500, 5000]) {
    const state = applyOps({}, [AddToSet("s", nest(depth, "x"))]);
    const again = applyOps(state, [AddToSet("s", nest(depth, "x"))]);
    assert.ok(again === state, `add_to_set added a second copy at depth ${depth}`);
    const set = applyOps({}, [SetKey("", "k", nest(depth, "x"))]);
    assert.equal(
      applyOps(set, [SetKey("", "k", nest(depth, "x"))]),
      set,
      `set_key, depth ${depth}`,
    );
  }
  // Cyclic values (never valid state, but applyOps is total): the comparison terminates.
  const cyclic = () => {
    const o: JsonObject = { a: 1 };
    o.self = o;
    return o;
  };
  const withOne = applyOps({}, [AddToSet("s", cyclic())]);
  assert.equal(applyOps(withOne, [AddToSet("s", cyclic())]), withOne);
});
