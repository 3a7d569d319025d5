/**
 * Fuzzing of the patch-op parser, `applyOps` and the store's argument
 * validation: random and mutated wire ops, random arguments. Only structured
 * errors may escape (a `PatchError`, or at the store an `McpStateError` such
 * as `invalid_argument`), never a `TypeError` or `RangeError`, and a refused
 * call changes nothing.
 *
 * Seeds are fixed; fast-check prints seed, shrink path and counterexample on
 * failure. `MCPSTATE_FC_SEED` replaces every seed, `MCPSTATE_FC_SCALE`
 * multiplies every run count.
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
  HandleStore,
  type HandleStoreOptions,
  Increment,
  type JsonObject,
  McpStateError,
  Merge,
  opFromJson,
  opsFromJson,
  parsePath,
  PATCH_REASONS,
  PatchError,
  type PatchOp,
  SetKey,
} from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { PROTO_NAMES, runs, storeTest } from "./_fc.ts";

// ---------------------------------------------------------------- helpers

const OP_NAMES = ["append", "set_key", "del_key", "merge", "increment", "add_to_set"] as const;
const FIELDS_OF: Record<string, readonly string[]> = {
  append: ["op", "path", "value"],
  add_to_set: ["op", "path", "value"],
  set_key: ["op", "path", "key", "value"],
  del_key: ["op", "path", "key"],
  merge: ["op", "mapping", "path"],
  increment: ["op", "path", "key", "by"],
};

function isObject(x: unknown): x is JsonObject {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function isPlain(x: unknown): x is JsonObject {
  if (!isObject(x)) return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

/** Sets an own data property, `__proto__` included, on any object. */
function defineOwn<T extends object>(o: T, key: string, value: unknown): T {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  return o;
}

function deepFreeze<T>(v: T, seen = new Set<unknown>()): T {
  if (typeof v !== "object" || v === null || seen.has(v)) return v;
  seen.add(v);
  try {
    Object.freeze(v);
  } catch {
    return v; // typed arrays with elements can't be frozen
  }
  for (const k of Reflect.ownKeys(v)) {
    const d = Object.getOwnPropertyDescriptor(v, k);
    if (d && "value" in d) deepFreeze(d.value, seen);
  }
  return v;
}

/** Depth as the store counts it: a primitive is 0, a container 1 + its deepest child. */
function depthOf(v: unknown): number {
  let max = 0;
  const todo: [unknown, number][] = [[v, 0]];
  for (let item = todo.pop(); item; item = todo.pop()) {
    const [x, d] = item;
    if (typeof x !== "object" || x === null) continue;
    max = Math.max(max, d + 1);
    for (const c of Object.values(x)) todo.push([c, d + 1]);
  }
  return max;
}

/** The JSON text of `v`, or `undefined` when JSON can't carry it. */
function jsonText(v: unknown): string | undefined {
  try {
    return JSON.stringify(v);
  } catch {
    return undefined;
  }
}

/** What arrives over the wire: `v` after a JSON round trip (when JSON can carry it at all). */
function overTheWire(v: unknown): unknown {
  const text = jsonText(v);
  return text === undefined ? v : JSON.parse(text);
}

/** The machine codes a PatchError may carry. */
const REASONS = new Set<string>(PATCH_REASONS);

type Outcome<T> = { ok: true; value: T } | { ok: false; error: PatchError };

/** Runs `f`; a PatchError is an outcome, anything else thrown fails the property. */
function outcome<T>(f: () => T): Outcome<T> {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    if (e instanceof PatchError) {
      assert.equal(e.code, "patch_error");
      assert.ok(REASONS.has(e.details.reason as string), `reason ${String(e.details.reason)}`);
      assert.equal(e.details.reason, e.reason);
      assert.ok(e.message.length > 0);
      assert.doesNotThrow(() => JSON.stringify(e.toPayload()), "the payload is JSON");
      return { ok: false, error: e };
    }
    throw new Error(`a raw ${describeError(e)} escaped instead of a PatchError`, { cause: e });
  }
}

function describeError(e: unknown): string {
  return e instanceof Error ? `${e.constructor.name}: ${e.message.slice(0, 200)}` : typeof e;
}

/** Awaits `p`; an McpStateError with one of `codes` is an outcome, anything else fails. */
async function settle<T>(
  p: () => Promise<T>,
  codes: readonly string[],
): Promise<{ ok: true; value: T } | { ok: false; error: McpStateError }> {
  try {
    return { ok: true, value: await p() };
  } catch (e) {
    if (!(e instanceof McpStateError)) {
      throw new Error(`a raw ${describeError(e)} escaped instead of a structured error`, {
        cause: e,
      });
    }
    assert.ok(codes.includes(e.code), `unexpected code ${e.code}: ${e.message}`);
    assert.doesNotThrow(() => JSON.stringify(e.toPayload()), "the payload is JSON");
    return { ok: false, error: e };
  }
}

// ---------------------------------------------------------------- arbitraries

const KEYS = [
  "",
  "a",
  "k",
  "n",
  "list",
  "obj",
  "inner",
  "counters",
  "a.b",
  "a/b",
  "~",
  ...PROTO_NAMES,
  "😀",
  "\ud800",
  "\u0000",
];

const keyArb = fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 6 }));

const pathUnit = fc.oneof(
  fc.constantFrom(".", "/", "~", "~0", "~1", "0", "01", "-", "a", "list", "obj", "__proto__"),
  fc.string({ unit: "binary", maxLength: 2 }),
);

const HUGE = 200_000;

const pathArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      "",
      "a",
      "a.b",
      "list",
      "obj",
      "obj.inner",
      "counters",
      "/list/0",
      "/list/1",
      "/list/9",
      "/list/-",
      "/list/01",
      "/list/0/x",
      "/obj/inner",
      "/a~1b",
      "/~0",
      "/~2",
      "/~",
      "a..b",
      ".a",
      "a.",
      "/",
      "//",
      "__proto__",
      "constructor",
      "toString",
      "obj.__proto__",
      "/__proto__/x",
      "prototype.x",
      "list.0",
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: pathUnit, maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "a." + "a.".repeat(998) + "a", // 1000 segments: allowed
      "a." + "a.".repeat(999) + "a", // 1001 segments
      "/x".repeat(1001),
      "/".repeat(5000),
      "x".repeat(HUGE),
      "~".repeat(1000),
      "/" + "9".repeat(400),
    ),
  },
);

/** `d` levels of containers, alternating lists and objects, around `leaf`. */
function nest(d: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < d; i++) v = i % 2 ? [v] : { k: v };
  return v;
}

const wireValueArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<unknown>(
      null,
      -0,
      1e308,
      5e-324,
      Number.MAX_SAFE_INTEGER,
      "",
      "\u0000",
      "\ud800",
      [],
      {},
      { op: "append", path: "list", value: 1 },
      JSON.parse('{"__proto__": {"polluted": true}}'),
      JSON.parse('{"constructor": {"prototype": {"polluted": true}}}'),
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3000 }).map((d) => nest(d, 1)) },
  { weight: 1, arbitrary: fc.constant("x".repeat(HUGE)) },
);

class Point {
  x = 1;
}

/** Values that can't come over the wire, for library callers. */
const nonWireArb: fc.Arbitrary<unknown> = fc.constantFrom<() => unknown>(
  () => undefined,
  () => NaN,
  () => Infinity,
  () => -Infinity,
  () => 10n,
  () => Symbol("s"),
  () => () => 1,
  () => new Date(0),
  () => new Map([[1, 2]]),
  () => new Set([1]),
  () => new Point(),
  () => new Uint8Array(2),
  () => [, 1],
  () => Object.create(null),
  () => Object.create({ inherited: 1 }),
  () => ({
    get g() {
      return 1;
    },
  }),
  () => ({ [Symbol("k")]: 1 }),
  () => {
    const o: JsonObject = {};
    o.self = o;
    return o;
  },
  () => new String("s"),
).map((make) => make());

const byArb: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: -100, max: 100 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(-0, Number.MAX_VALUE, -Number.MAX_VALUE, 1e308, 0),
);

const mappingArb: fc.Arbitrary<JsonObject> = fc.array(fc.tuple(keyArb, wireValueArb), {
  maxLength: 4,
}).map((entries) => Object.fromEntries(entries));

const validOpArb: fc.Arbitrary<PatchOp> = fc.oneof(
  fc.tuple(pathArb, wireValueArb).map(([p, v]) => Append(p, v)),
  fc.tuple(pathArb, wireValueArb).map(([p, v]) => AddToSet(p, v)),
  fc.tuple(pathArb, keyArb, wireValueArb).map(([p, k, v]) => SetKey(p, k, v)),
  fc.tuple(pathArb, keyArb).map(([p, k]) => DelKey(p, k)),
  fc.tuple(mappingArb, pathArb).map(([m, p]) => Merge(m, p)),
  fc.tuple(pathArb, keyArb, byArb).map(([p, k, by]) => Increment(p, k, by)),
);

/** Field values of the wrong kind, or of the right kind at the extremes. */
const fieldValueArb = (library: boolean): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.constantFrom<unknown>(
      null,
      true,
      false,
      0,
      -1,
      1.5,
      "",
      "x",
      "1",
      [],
      {},
      ["append"],
      { op: "append" },
      "x".repeat(HUGE),
    ),
    wireValueArb,
    pathArb,
    ...(library ? [nonWireArb] : []),
  );

const OP_NAME_NOISE = [
  "Append",
  "APPEND",
  " append",
  "append ",
  "append\u0000",
  "set-key",
  "setKey",
  "delete",
  "remove",
  "replace",
  "add",
  "test",
  "move",
  "copy",
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "",
];

const EXTRA_FIELDS = [
  ...PROTO_NAMES,
  "extra",
  "",
  "op_index",
];

/** A mutation, as data so counterexamples print readably. */
type Mutation =
  | { kind: "set"; field: string; value: unknown }
  | { kind: "delete"; field: string }
  | { kind: "rename"; name: unknown }
  | { kind: "reshape"; how: string };

const RESHAPES = [
  "wrap in a list",
  "values",
  "entries",
  "JSON text",
  "nest under op",
  "null prototype",
  "foreign prototype",
  "inherit every field",
  "array with the fields",
  "Map",
  "null",
  "the value",
] as const;

const mutationArb = (library: boolean): fc.Arbitrary<Mutation> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant("set" as const),
        field: fc.constantFrom("op", "path", "key", "value", "mapping", "by", ...EXTRA_FIELDS),
        value: fieldValueArb(library),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("delete" as const),
        field: fc.constantFrom("op", "path", "key", "value", "mapping", "by"),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("rename" as const),
        name: fc.oneof(fc.constantFrom<unknown>(...OP_NAMES, ...OP_NAME_NOISE), fc.string()),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("reshape" as const),
        how: fc.constantFrom(...RESHAPES),
      }),
    },
  );

function mutate(x: unknown, m: Mutation): unknown {
  if (m.kind !== "reshape") {
    if (typeof x !== "object" || x === null) return x;
    // Copy on write: generated values are shared between runs (and frozen by some).
    const c: object = Array.isArray(x)
      ? Object.assign([], x)
      : Object.assign(Object.create(Object.getPrototypeOf(x)), x);
    if (m.kind === "set") return defineOwn(c, m.field, m.value);
    if (m.kind === "rename") return defineOwn(c, "op", m.name);
    Reflect.deleteProperty(c, m.field);
    return c;
  }
  const o = isObject(x) ? x : { value: x };
  switch (m.how as (typeof RESHAPES)[number]) {
    case "wrap in a list":
      return [x];
    case "values":
      return Object.values(o);
    case "entries":
      return Object.entries(o);
    case "JSON text":
      return jsonText(x) ?? String(typeof x);
    case "nest under op":
      return { op: x };
    case "null prototype":
      return Object.assign(Object.create(null) as JsonObject, o);
    case "foreign prototype":
      return Object.assign(Object.create({ inherited: true }) as JsonObject, o);
    case "inherit every field":
      return Object.create(o);
    case "array with the fields":
      return Object.assign([], o);
    case "Map":
      return new Map(Object.entries(o));
    case "null":
      return null;
    case "the value":
      return o.value;
  }
}

/** A valid op after 0-3 mutations; in wire mode, after a JSON round trip. */
const fuzzOpArb = (library: boolean): fc.Arbitrary<{ op: unknown; mutations: Mutation[] | null }> =>
  fc.record({
    base: validOpArb,
    mutations: fc.array(mutationArb(library), { maxLength: 3 }),
  }).map(({ base, mutations }) => {
    const copy: unknown = { ...base };
    const op = mutations.reduce(mutate, copy);
    return { op: library ? op : overTheWire(op), mutations };
  });

/** Anything at all in place of an op. */
const strayArb = (library: boolean): fc.Arbitrary<unknown> =>
  library ? fc.oneof(fc.anything(), nonWireArb, wireValueArb) : wireValueArb;

const opListArb = (library: boolean): fc.Arbitrary<unknown> =>
  fc.oneof(
    {
      weight: 8,
      arbitrary: fc.array(
        fc.oneof(
          { weight: 6, arbitrary: validOpArb },
          { weight: 3, arbitrary: fuzzOpArb(library).map((f) => f.op) },
          { weight: 1, arbitrary: strayArb(library) },
        ),
        { maxLength: 6 },
      ),
    },
    { weight: 1, arbitrary: strayArb(library) },
    {
      weight: 1,
      arbitrary: fc.constantFrom<() => unknown>(
        () => Array.from({ length: 1001 }, () => Append("list", 1)),
        () => Array.from({ length: 1000 }, () => Increment("", "n")),
        () => new Array(5000),
        () => ({ length: 1, 0: Append("list", 1) }),
      ).map((make) => make()),
    },
  );

const LOCAL_STATE = {
  a: 1,
  list: [{ x: 1 }, [1, 2], "s"],
  obj: { inner: { deep: [] }, n: 5 },
  counters: { n: 1 },
  "a/b": {},
  "~": { "": 0 },
};

const stateArb: fc.Arbitrary<JsonObject> = fc.oneof(
  fc.constant(LOCAL_STATE).map((s) => structuredClone(s) as JsonObject),
  fc.tuple(
    fc.constant(LOCAL_STATE),
    fc.dictionary(keyArb, fc.jsonValue({ maxDepth: 3 }), {
      maxKeys: 4,
    }),
  ).map(([s, extra]) => JSON.parse(JSON.stringify({ ...structuredClone(s), ...extra }))),
  fc.dictionary(keyArb, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }).map((d) =>
    JSON.parse(JSON.stringify(d)) as JsonObject
  ),
);

// ---------------------------------------------------------------- opFromJson

/** A parsed op is exactly the documented shape. */
function assertWellFormed(op: PatchOp): void {
  assert.ok(isPlain(op));
  assert.equal(Object.getPrototypeOf(op), Object.prototype);
  const fields = FIELDS_OF[op.op];
  assert.ok(fields, `op name ${String(op.op)}`);
  assert.deepEqual(Object.keys(op).sort(), [...fields].sort());
  assert.equal(typeof op.path, "string");
  parsePath(op.path);
  if ("key" in op) assert.equal(typeof op.key, "string");
  if ("value" in op) assert.notEqual(op.value, undefined);
  if (op.op === "increment") assert.ok(Number.isFinite(op.by));
  if (op.op === "merge") assert.ok(isPlain(op.mapping));
}

for (const library of [false, true]) {
  const mode = library ? "library values" : "wire values";

  Deno.test(`fuzz: opFromJson() returns a well-formed op or a PatchError (${mode})`, () => {
    fc.assert(
      fc.property(
        fc.oneof(fuzzOpArb(library), strayArb(library).map((op) => ({ op, mutations: null }))),
        ({
          op,
          mutations,
        }) => {
          deepFreeze(op);
          const r = outcome(() => opFromJson(op));
          if (r.ok) {
            assertWellFormed(r.value);
            assert.notEqual(r.value, op, "a fresh op");
            assert.deepEqual(opFromJson(r.value), r.value);
            for (const f of FIELDS_OF[r.value.op] ?? []) {
              if (f !== "path" && f !== "by") {
                assert.equal((r.value as unknown as JsonObject)[f], (op as JsonObject)[f]);
              }
            }
          } else {
            assert.equal(typeof r.error.details.field, "string");
            const pathOk = isPlain(op) && outcome(() => parsePath(op.path as string)).ok;
            // A counter step JSON can't carry exactly is refused even unmutated.
            const inexact = isPlain(op) && op.op === "increment" &&
              Number.isFinite(op.by) && Math.abs(op.by as number) > Number.MAX_SAFE_INTEGER;
            if (inexact) assert.equal(r.error.details.reason, "out_of_range");
            if (mutations !== null && mutations.length === 0 && pathOk && !inexact) {
              assert.fail(`an unmutated op was refused: ${r.error.message}`);
            }
          }
        },
      ),
      runs(library ? 7100002 : 7100001, 4000),
    );
  });

  Deno.test(`fuzz: opsFromJson() fails at the first bad op and names its index (${mode})`, () => {
    fc.assert(
      fc.property(opListArb(library), (list) => {
        deepFreeze(list);
        const r = outcome(() => opsFromJson(list));
        if (!Array.isArray(list) || list.length > 1000) {
          assert.ok(!r.ok, "a non-list or an over-long list is refused");
          assert.equal(r.error.details.field, "ops");
          assert.equal(r.error.details.reason, Array.isArray(list) ? "too_many_ops" : "wrong_type");
          return;
        }
        let firstBad = -1;
        for (let i = 0; i < list.length && firstBad < 0; i++) {
          if (!outcome(() => opFromJson(list[i])).ok) firstBad = i;
        }
        if (firstBad < 0) {
          assert.ok(r.ok, r.ok ? "" : r.error.message);
          assert.equal(r.value.length, list.length);
          for (let i = 0; i < list.length; i++) {
            assert.ok(Object.hasOwn(r.value, i), `op ${i} is present`);
            assert.deepEqual(r.value[i], opFromJson(list[i]));
          }
        } else {
          assert.ok(!r.ok, `op ${firstBad} is malformed, yet the list was accepted`);
          assert.equal(r.error.details.op_index, firstBad);
          assert.match(r.error.message, new RegExp(`^Op ${firstBad}: `));
          const alone = outcome(() => opFromJson(list[firstBad]));
          assert.ok(!alone.ok);
          assert.equal(r.error.details.reason, alone.error.details.reason, "the reason is kept");
        }
      }),
      runs(library ? 7100004 : 7100003, 2500),
    );
  });

  Deno.test(`fuzz: applyOps() is all-or-nothing, pure, and only throws PatchError (${mode})`, () => {
    fc.assert(
      fc.property(stateArb, opListArb(library), (state, ops) => {
        const text = JSON.stringify(state);
        const opsText = jsonText(ops);
        deepFreeze(state);
        deepFreeze(ops);
        const r = outcome(() => applyOps(state, ops as PatchOp[]));
        assert.equal(JSON.stringify(state), text, "the state is unchanged");
        assert.equal(jsonText(ops), opsText, "the ops are unchanged");
        if (!Array.isArray(ops)) {
          assert.ok(!r.ok);
          return;
        }
        // The same as applying the ops one at a time, up to the first that fails.
        let step: JsonObject = state;
        let failedAt = -1;
        for (let i = 0; i < ops.length; i++) {
          const one = outcome(() => applyOps(step, [ops[i] as PatchOp]));
          if (!one.ok) {
            failedAt = i;
            break;
          }
          step = one.value;
        }
        if (failedAt < 0) {
          assert.ok(r.ok, r.ok ? "" : r.error.message);
          assert.deepEqual(r.value, step);
        } else {
          assert.ok(!r.ok, `op ${failedAt} fails alone, yet the patch applied`);
          assert.equal(r.error.details.op_index, failedAt);
        }
      }),
      runs(library ? 7100006 : 7100005, 2000),
    );
  });
}

// ---------------------------------------------------------------- the store

const CAP = 64 * 1024;

/** What the store must answer for a wire patch: `patch_error`, `invalid_argument`, … or the new text. */
function predict(stateText: string, ops: unknown): { code: string } | { text: string } {
  const parsed = outcome(() => opsFromJson(ops));
  if (!parsed.ok) return { code: "patch_error" };
  for (const op of parsed.value) {
    if ("value" in op && depthOf(op.value) > 64) return { code: "invalid_argument" };
    if (op.op === "merge" && depthOf(op.mapping) > 64) return { code: "invalid_argument" };
  }
  const applied = outcome(() => applyOps(JSON.parse(stateText), parsed.value));
  if (!applied.ok) return { code: "patch_error" };
  if (depthOf(applied.value) > 64) return { code: "invalid_argument" };
  const text = JSON.stringify(applied.value);
  if (new TextEncoder().encode(text).length > CAP) return { code: "state_too_large" };
  return { text };
}

storeTest("fuzz: a refused patch changes nothing in the store", async (store) => {
  const user = `u-${crypto.randomUUID()}`;
  const prop = (library: boolean) =>
    fc.asyncProperty(stateArb, opListArb(library), async (state, ops) => {
      const h = await store.mint("fuzz", state, { user, writer: "minter" });
      const before = await store.get(h, { user });
      const beforeText = JSON.stringify(before.state);
      const r = await settle(
        () => store.patch(h, ops as PatchOp[], { user, writer: "fuzzer" }),
        ["patch_error", "invalid_argument", "state_too_large"],
      );
      const after = await store.get(h, { user });
      const afterText = JSON.stringify(after.state);
      if (!r.ok) {
        assert.equal(after.version, before.version, "a refused patch wrote a version");
        assert.equal(afterText, beforeText, "a refused patch changed the state");
        assert.equal(after.lastWriter, "minter");
        assert.equal(after.updatedAt.getTime(), before.updatedAt.getTime());
      } else {
        assert.equal(JSON.stringify(r.value.state), afterText);
        assert.equal(after.version, before.version + (afterText === beforeText ? 0 : 1));
        assert.equal(after.lastWriter, afterText === beforeText ? "minter" : "fuzzer");
      }
      if (!library) {
        const want = predict(beforeText, ops);
        if ("code" in want) {
          assert.ok(!r.ok, `expected ${want.code}, but the patch applied`);
          assert.equal(r.error.code, want.code, r.error.message);
        } else {
          assert.ok(r.ok, r.ok ? "" : `expected success, got ${r.error.code}: ${r.error.message}`);
          assert.equal(afterText, want.text);
        }
      }
    });
  await fc.assert(prop(false), runs(7100007, 1000));
  await fc.assert(prop(true), runs(7100008, 800));
}, { maxStateBytes: CAP });

/** Junk for every argument position. */
const junkArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<() => unknown>(
    () => undefined,
    () => null,
    () => 0,
    () => -1,
    () => 1.5,
    () => NaN,
    () => Infinity,
    () => -0,
    () => "",
    () => " ",
    () => "note",
    () => "note_aaaaaaaa",
    () => true,
    () => [],
    () => [1],
    () => ({}),
    () => 10n,
    () => Symbol("s"),
    () => () => 1,
    () => new Date(0),
    () => new Map(),
    () => Object.create(null),
    () => ({ toString: "not a function" }),
    () => "x".repeat(5000),
    () => "\ud800",
    () => "__proto__",
    () => 36526,
    () => 1e-9,
    () => 2 ** 31,
    () => "c1.bm9wZQ",
  ).map((make) => make()),
  fc.string({ maxLength: 8 }),
  fc.integer(),
  fc.jsonValue({ maxDepth: 2 }),
);

const VICTIM = "<victim handle>";
const OWNER = "<victim owner>";

/** One of a few valid values, or (one time in four) junk. */
const orValid = (...valid: unknown[]) =>
  fc.oneof({ weight: 1, arbitrary: junkArb }, { weight: 3, arbitrary: fc.constantFrom(...valid) });

const optionsArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 1, arbitrary: junkArb },
  {
    weight: 4,
    arbitrary: fc.record({
      user: orValid(OWNER, OWNER, "someone-else"),
      ttlDays: orValid(1, 7, null, 0.5),
      writer: orValid("laptop/claude", "phone"),
      idempotencyKey: orValid("key-1", "key-2"),
      randomChars: orValid(8, 26, 64),
      expectVersion: orValid(1, 2, 3),
      kind: orValid("note", "victim"),
      limit: orValid(1, 2, 500),
      cursor: orValid(null),
      includeExpired: orValid(true, false),
    }, { requiredKeys: [] }),
  },
);

const kindArb = orValid("note", "victim", "research");
const handleArb = fc.oneof(junkArb, fc.constant(VICTIM), fc.constant(VICTIM));
const stateOrJunk = fc.oneof(junkArb, stateArb, stateArb);

const callArb = fc.oneof(
  fc.tuple(fc.constant("mint" as const), kindArb, stateOrJunk, optionsArb),
  fc.tuple(fc.constant("get" as const), handleArb, optionsArb),
  fc.tuple(fc.constant("save" as const), handleArb, stateOrJunk, optionsArb),
  fc.tuple(fc.constant("patch" as const), handleArb, opListArb(true), optionsArb),
  fc.tuple(fc.constant("touch" as const), handleArb, optionsArb),
  fc.tuple(fc.constant("revoke" as const), handleArb, optionsArb),
  fc.tuple(fc.constant("list" as const), orValid(OWNER), optionsArb),
  fc.tuple(fc.constant("listPage" as const), orValid(OWNER), optionsArb),
  fc.tuple(fc.constant("sweep" as const), orValid(OWNER)),
);

const STORE_CODES = [
  "invalid_argument",
  "handle_not_found",
  "handle_expired",
  "patch_error",
  "state_too_large",
  "stale_write",
];

storeTest("fuzz: store arguments only ever raise structured errors", async (store) => {
  const owner = `owner-${crypto.randomUUID()}`;
  let victim = await store.mint("victim", { list: [], n: 0 }, { user: owner });
  const read = async () => {
    const s = await store.get(victim, { user: owner });
    return JSON.stringify([s.version, s.state, s.expiresAt, s.lastWriter]);
  };
  let baseline = await read();
  const sub = (x: unknown): unknown => {
    if (x === VICTIM) return victim;
    if (x === OWNER) return owner;
    if (isPlain(x) && Object.values(x).includes(OWNER)) {
      return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, sub(v)]));
    }
    return x;
  };
  await fc.assert(
    fc.asyncProperty(callArb, async ([method, ...raw]) => {
      const a = raw.map(sub) as [never, never, never];
      const r = await settle((): Promise<unknown> => {
        switch (method) {
          case "mint":
            return store.mint(a[0], a[1], a[2]);
          case "get":
            return store.get(a[0], a[1]);
          case "save":
            return store.save(a[0], a[1], a[2]);
          case "patch":
            return store.patch(a[0], a[1], a[2]);
          case "touch":
            return store.touch(a[0], a[1]);
          case "revoke":
            return store.revoke(a[0], a[1]);
          case "list":
            return store.list(a[0], a[1]);
          case "listPage":
            return store.listPage(a[0], a[1]);
          case "sweep":
            return store.sweep(a[0]);
        }
      }, STORE_CODES);
      let now: string | null = null;
      try {
        now = await read();
      } catch (e) {
        if (!(e instanceof McpStateError)) throw e;
      }
      if (!r.ok) {
        assert.equal(now, baseline, `a refused ${method} changed the victim`);
      } else if (now === null) {
        // Revoked, or touched with a tiny TTL: start over with a fresh victim.
        victim = await store.mint("victim", { list: [], n: 0 }, { user: owner });
        baseline = await read();
      } else {
        baseline = now;
      }
    }),
    runs(7100009, 4000),
  );
});

/** Short strings rich in lone surrogates and in U+FFFD, which UTF-8 engines turn them into. */
const surrogateStringArb = fc.string({
  unit: fc.oneof(
    fc.constantFrom("a", "\ufffd", "\ud800", "\udbff", "\udc00", "\udfff", "😀"),
    fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
  ),
  minLength: 1,
  maxLength: 4,
});

storeTest(
  "fuzz: distinct user ids, writers and idempotency keys stay distinct, or are refused",
  async (store) => {
    await fc.assert(
      fc.asyncProperty(surrogateStringArb, surrogateStringArb, async (a, b) => {
        fc.pre(a !== b);
        const tag = crypto.randomUUID();
        const [ua, ub, owner] = [`${tag}:${a}`, `${tag}:${b}`, `${tag}:owner`];
        const minted = await settle(
          () => store.mint("note", { secret: a }, { user: ua }),
          ["invalid_argument"],
        );
        if (minted.ok) {
          const other = await settle(
            () => store.get(minted.value, { user: ub }),
            ["invalid_argument", "handle_not_found"],
          );
          assert.ok(!other.ok, "another user read the state");
          const listed = await settle(() => store.list(ub), ["invalid_argument"]);
          assert.ok(!listed.ok || listed.value.length === 0, "another user listed the handle");
        }
        const h = await store.mint("note", { list: [] }, { user: owner });
        const w = await settle(
          () => store.patch(h, [Append("list", 0)], { user: owner, writer: a }),
          ["invalid_argument"],
        );
        if (w.ok) assert.equal((await store.get(h, { user: owner })).lastWriter, a);
        const k1 = await settle(
          () => store.patch(h, [Append("list", 1)], { user: owner, idempotencyKey: a }),
          ["invalid_argument"],
        );
        const k2 = await settle(
          () => store.patch(h, [Append("list", 1)], { user: owner, idempotencyKey: b }),
          ["invalid_argument"],
        );
        if (k1.ok && k2.ok) {
          assert.equal(k2.value.version, k1.value.version + 1, "a different key was replayed");
        }
      }),
      runs(7100011, 500),
    );
  },
);

Deno.test("fuzz: HandleStore options are validated up front", async () => {
  const optionValue = fc.oneof(junkArb, fc.constantFrom(0, 1, 2, 1000, 600_000, 2 ** 31 - 1));
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        junkArb,
        fc.record({
          clock: fc.oneof(junkArb, fc.constant(Date.now)),
          maxStateBytes: optionValue,
          expiredGraceDays: optionValue,
          reclaimIntervalMs: optionValue,
        }, { requiredKeys: [] }),
      ),
      async (options) => {
        const o = isObject(options) ? options : {};
        // `null` or absent is the default, for every option.
        const valid = (options === undefined || isObject(options)) &&
          (o.clock == null || typeof o.clock === "function") &&
          (o.maxStateBytes == null ||
            (Number.isSafeInteger(o.maxStateBytes) && (o.maxStateBytes as number) >= 2)) &&
          (o.expiredGraceDays == null ||
            (typeof o.expiredGraceDays === "number" && Number.isFinite(o.expiredGraceDays) &&
              o.expiredGraceDays >= 0)) &&
          (o.reclaimIntervalMs == null ||
            (typeof o.reclaimIntervalMs === "number" && o.reclaimIntervalMs >= 0 &&
              o.reclaimIntervalMs <= 2 ** 31 - 1));
        let store: HandleStore | undefined;
        try {
          store = new HandleStore(new MemoryBackend(), options as HandleStoreOptions);
        } catch (e) {
          if (!(e instanceof McpStateError)) {
            throw new Error(`a raw ${describeError(e)} escaped from the constructor`, { cause: e });
          }
          assert.equal(e.code, "invalid_argument");
          assert.ok(!valid, `valid options were refused: ${e.message}`);
          return;
        } finally {
          await store?.close();
        }
        assert.ok(valid, "invalid options were accepted");
      },
    ),
    runs(7100010, 1500),
  );
});

// ---------------------------------------------------------------- regressions

Deno.test("regression: a hole in an ops list is a PatchError at its index, never skipped", async () => {
  // deno-lint-ignore no-sparse-arrays
  const holey = [Append("list", 1), , Append("list", 2)] as PatchOp[];
  const calls: (() => unknown)[] = [() => opsFromJson(holey), () => applyOps({ list: [] }, holey)];
  for (const f of calls) {
    const r = outcome(f);
    assert.ok(!r.ok, "a hole was skipped");
    assert.equal(r.error.details.op_index, 1);
  }
  await using store = await HandleStore.fromUrl("memory://");
  const h = await store.mint("note", { list: [] }, { user: "u" });
  const r = await settle(() => store.patch(h, holey, { user: "u" }), ["patch_error"]);
  assert.ok(!r.ok);
  assert.equal(r.error.details.op_index, 1);
  const after = await store.get(h, { user: "u" });
  assert.equal(after.version, 1);
  assert.deepEqual(after.state, { list: [] });
});

Deno.test("regression: arguments String() can't convert are invalid_argument, not a TypeError", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const h = await store.mint("note", {}, { user: "u" });
  const bare = () => Object.create(null);
  const calls: [string, () => Promise<unknown>][] = [
    ["mint kind", () => store.mint(bare(), {}, { user: "u" })],
    ["mint ttlDays", () => store.mint("note", {}, { user: "u", ttlDays: bare() })],
    ["save ttlDays", () => store.save(h, {}, { user: "u", expectVersion: 1, ttlDays: bare() })],
    ["touch ttlDays", () => store.touch(h, { user: "u", ttlDays: bare() })],
    ["mint kind", () => store.mint({ toString: "x" } as never, {}, { user: "u" })],
  ];
  for (const [what, call] of calls) {
    const r = await settle(call, ["invalid_argument"]).catch((e) => {
      throw new Error(`${what}: ${String(e)}`);
    });
    assert.ok(!r.ok, what);
  }
  assert.equal((await store.get(h, { user: "u" })).version, 1);
});

Deno.test("regression: list() and listPage() with non-object options are invalid_argument", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  for (const options of [null, "kind", 5, true]) {
    const calls: (() => Promise<unknown>)[] = [
      () => store.listPage("u", options as never),
      () => store.list("u", options as never),
    ];
    for (const call of calls) {
      const r = await settle(call, ["invalid_argument"]);
      assert.ok(!r.ok, `options ${String(options)} were accepted`);
    }
  }
});

Deno.test("regression: HandleStore refuses a clock that isn't a function and intervals setInterval can't hold", async () => {
  const refused: unknown[] = [
    null,
    { clock: 5 },
    { clock: "now" },
    { reclaimIntervalMs: 2 ** 31 }, // setInterval would fire every 1 ms
    { reclaimIntervalMs: 30 * 86_400_000 },
    { reclaimIntervalMs: -1 },
    { reclaimIntervalMs: NaN },
    { reclaimIntervalMs: "600000" },
  ];
  for (const options of refused) {
    let store: HandleStore | undefined;
    try {
      store = new HandleStore(new MemoryBackend(), options as HandleStoreOptions);
    } catch (e) {
      assert.ok(e instanceof McpStateError, `a raw ${describeError(e)} for ${jsonText(options)}`);
      assert.equal(e.code, "invalid_argument");
      continue;
    } finally {
      await store?.close();
    }
    assert.fail(`accepted ${jsonText(options) ?? String(options)}`);
  }
  for (const reclaimIntervalMs of [0, 1000, 2 ** 31 - 1]) {
    await new HandleStore(new MemoryBackend(), { reclaimIntervalMs }).close();
  }
});

storeTest(
  "regression: user ids that differ only in lone surrogates are never one user",
  async (store) => {
    const h = await settle(
      () => store.mint("note", { secret: 1 }, { user: "alice\ud800" }),
      ["invalid_argument"],
    );
    if (h.ok) {
      const r = await settle(
        () => store.get(h.value, { user: "alice\udc00" }),
        ["invalid_argument", "handle_not_found"],
      );
      assert.ok(!r.ok, "a different user read the state");
      assert.deepEqual(await store.list("alice\ufffd"), []);
    }
    // The same for writers (kept exactly) and idempotency keys (never each other's replay).
    const mine = await store.mint("note", { n: 0 }, { user: "bob" });
    const w = await settle(
      () => store.patch(mine, [Increment("", "n")], { user: "bob", writer: "w\ud800" }),
      ["invalid_argument"],
    );
    if (w.ok) assert.equal(w.value.lastWriter, "w\ud800");
    const first = await settle(
      () => store.patch(mine, [Increment("", "n")], { user: "bob", idempotencyKey: "k\ud800" }),
      ["invalid_argument"],
    );
    const second = await settle(
      () => store.patch(mine, [Increment("", "n")], { user: "bob", idempotencyKey: "k\udc00" }),
      ["invalid_argument"],
    );
    if (first.ok && second.ok) assert.equal(second.value.version, first.value.version + 1);
  },
);
