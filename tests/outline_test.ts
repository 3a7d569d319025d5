/**
 * Token-budgeted reads: `outline`, `readPaths` and `HandleStore.read`.
 *
 * The properties run states of many shapes (wide objects, long lists, deep
 * nesting, long strings, non-ASCII and astral text, lone surrogates, keys
 * with `/`, `~` and `.`, keys named like the outline's own fields) at budgets
 * from 256 bytes to beyond the state's size, and check every outline against
 * the state it describes: within the budget, valid JSON, each node exactly
 * what the format says, every path it names reading exactly that subtree,
 * and `truncated` true exactly when something was left out. Every property
 * runs with a fixed seed; `MCPSTATE_FC_SEED` replaces it and
 * `MCPSTATE_FC_SCALE` multiplies the run counts.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  getPath,
  HandleStore,
  InvalidArgument,
  type JsonObject,
  jsonSize,
  MAX_READ_PATHS,
  MIN_READ_BYTES,
  outline,
  type OutlineNode,
  PREVIEW_CHARS,
  readPaths,
  toPointer,
  toReadPayload,
} from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { rejectsWith } from "./_helpers.ts";
import { codeUnitOr, runs } from "./_fc.ts";

// ---------------------------------------------------------------- checking an outline

const encoder = new TextEncoder();

/** The UTF-8 size of the compact JSON of `v`, the way the contract defines it. */
function size(v: unknown): number {
  return encoder.encode(JSON.stringify(v)).length;
}

function escape(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** The part of an outline (or any JSON) under `keys`. */
function dig(x: unknown, ...keys: string[]): Record<string, unknown> {
  let at = x;
  for (const k of keys) {
    assert.ok(isObject(at), `an object before ${k}`);
    at = at[k];
  }
  assert.ok(isObject(at));
  return at;
}

function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** The indexes a list node shows after `k` steps: 0, n-1, 1, n-2, … */
function alternation(n: number, k: number): string[] {
  const out: number[] = [];
  for (let i = 0; i < k; i++) out.push(i % 2 === 0 ? i / 2 : n - 1 - (i - 1) / 2);
  return out.sort((a, b) => a - b).map(String);
}

const NODE_KEYS: Record<string, string[]> = {
  object: ["type", "path", "bytes", "keys", "entries"],
  list: ["type", "path", "bytes", "length", "items"],
  string: ["type", "path", "bytes", "preview"],
};

/**
 * Checks `node`, the outline of the value at `pointer` in `state`, against
 * that value, node by node, and returns the path of every node that stands
 * for a value not shown in full (in the order met).
 */
function checkOutline(
  state: unknown,
  node: unknown,
  pointer: string,
  { topMayLackPath = false, sameValues = true } = {},
): string[] {
  const described: string[] = [];
  const todo: [unknown, string, boolean][] = [[node, pointer, topMayLackPath]];
  // An outline of the state in hand holds its very values; one read back from storage, equal ones.
  const same = sameValues
    ? (a: unknown, b: unknown, at: string) => assert.ok(Object.is(a, b), `{value} at ${at}`)
    : (a: unknown, b: unknown, at: string) => assert.deepEqual(a, b, `{value} at ${at}`);
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const [n, at, mayLackPath] = next;
    assert.ok(isObject(n), `the node at ${at} is an object`);
    const actual = getPath(state, at);
    const keys = Object.keys(n);
    if (keys.length === 1 && keys[0] === "value") {
      same(n.value, actual, at);
      continue;
    }
    const type = n.type;
    assert.ok(typeof type === "string" && type in NODE_KEYS, `a known type at ${at}`);
    for (const k of keys) assert.ok(NODE_KEYS[type]!.includes(k), `no key "${k}" at ${at}`);
    if ("path" in n) assert.equal(n.path, at);
    else assert.ok(mayLackPath, `the node at ${at} names its path`);
    described.push(at);
    assert.equal(n.bytes, size(actual), `bytes at ${at}`);
    if (type === "string") {
      assert.equal(typeof actual, "string");
      const s = actual as string;
      if ("preview" in n) {
        const p = n.preview;
        assert.ok(typeof p === "string" && p.length > 0 && p.length < s.length, `preview at ${at}`);
        assert.ok(s.startsWith(p), `the preview at ${at} is a beginning`);
        const lastHalf = isHigh(p.charCodeAt(p.length - 1)) && isLow(s.charCodeAt(p.length));
        assert.ok(!lastHalf, `the preview at ${at} does not split a surrogate pair`);
      }
    } else if (type === "list") {
      assert.ok(Array.isArray(actual), `a list at ${at}`);
      assert.equal(n.length, actual.length);
      if ("items" in n) {
        assert.ok(isObject(n.items));
        const shown = Object.keys(n.items);
        assert.ok(shown.length > 0);
        assert.deepEqual(shown, alternation(actual.length, shown.length), `items at ${at}`);
        for (const i of shown) todo.push([n.items[i], `${at}/${i}`, false]);
      }
    } else {
      assert.ok(isObject(actual), `an object at ${at}`);
      const all = Object.keys(actual);
      assert.equal(n.keys, all.length);
      if ("entries" in n) {
        assert.ok(isObject(n.entries));
        const shown = Object.keys(n.entries);
        assert.ok(shown.length > 0);
        assert.deepEqual(shown, all.slice(0, shown.length), `the first keys at ${at}`);
        for (const k of shown) todo.push([n.entries[k], `${at}/${escape(k)}`, false]);
      }
    }
  }
  return described;
}

/** Checks one answer of `outline(value, budget)` in full. */
function checkBudgeted(value: unknown, budget: number): string[] {
  const out = outline(value, budget);
  const full = size(value);
  assert.equal(out.sizeBytes, full);
  if (full <= budget) {
    assert.equal(out.truncated, false);
    assert.ok(!out.truncated && Object.is(out.value, value), "within budget: the value itself");
    assert.deepEqual(Object.keys(out).sort(), ["sizeBytes", "truncated", "value"]);
    return [];
  }
  assert.equal(out.truncated, true);
  assert.ok(out.truncated);
  assert.deepEqual(Object.keys(out).sort(), ["outline", "sizeBytes", "truncated"]);
  const text = JSON.stringify(out.outline);
  assert.ok(size(out.outline) <= budget, `${size(out.outline)} bytes within ${budget}`);
  assert.equal(JSON.stringify(JSON.parse(text)), text, "plain JSON");
  const described = checkOutline(value, out.outline, "");
  assert.ok(described.length > 0, "an outline leaves something out and says where");
  assert.equal(described[0], "", "the root is described");
  return described;
}

// ---------------------------------------------------------------- states of many shapes

/** Keys that need pointer escapes, look like numbers, paths or the outline's own fields. */
const EDGE_KEYS = [
  "",
  "a/b",
  "/",
  "~",
  "~0",
  "~1",
  "a~1b",
  "a.b",
  "0",
  "10",
  "01",
  "-",
  "__proto__",
  "constructor",
  "toString",
  "type",
  "value",
  "path",
  "bytes",
  "keys",
  "length",
  "entries",
  "items",
  "preview",
  "$omitted",
  "é",
  "日本",
  "😀",
  "\ud800",
  "\u0000",
];

/** Any code unit, lone surrogates included, plus astral characters. */
const codeUnit = codeUnitOr("😀", "𝄞", "é", "日", '"', "\\", "\n", "~", "/");

const keyArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...EDGE_KEYS),
  fc.string({ maxLength: 8 }),
  fc.string({ unit: codeUnit, maxLength: 6 }),
);

/** Long text: ASCII, accented, CJK, emoji (surrogate pairs), escapes, lone surrogates. */
const longTextArb: fc.Arbitrary<string> = fc.tuple(
  fc.constantFrom(
    "Arm64 runners finish first. ",
    "Läufer schneller — ",
    "速い走者 ",
    "🚀😀𝄞",
    'quote " back \\ nl \n ',
    "a\ud800b",
    "😀",
  ),
  fc.integer({ min: 20, max: 3000 }),
  fc.nat(3),
).map(([unit, n, cut]) => unit.repeat(Math.ceil(n / unit.length)).slice(cut, n));

const leafArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(0, -1, 1e21, 5e-324, 0.1, true, false, null, "", "😀", "\ud800"),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: codeUnit, maxLength: 40 }),
  longTextArb,
);

function objectOf(entries: Iterable<readonly [string, unknown]>): JsonObject {
  return Object.fromEntries(entries);
}

const { value: treeArb } = fc.letrec<{ value: unknown; list: unknown[]; object: JsonObject }>(
  (tie) => ({
    value: fc.oneof({ depthSize: "small", maxDepth: 4 }, leafArb, tie("list"), tie("object")),
    list: fc.array(tie("value"), { maxLength: 12 }),
    object: fc.array(fc.tuple(keyArb, tie("value")), { maxLength: 10 }).map(objectOf),
  }),
);

/** A wide object: hundreds to thousands of keys. */
const wideArb = fc.tuple(fc.integer({ min: 50, max: 2000 }), fc.array(treeArb, { maxLength: 3 }))
  .map(([n, extra]) => {
    const o: JsonObject = {};
    for (let i = 0; i < n; i++) o[i % 7 === 0 ? `k/${i}~` : `k${i}`] = i % 3 ? i : `v${i}`;
    extra.forEach((v, i) => o[`extra${i}`] = v);
    return o;
  });

/** A long list of small items, or of small objects. */
const longListArb = fc.tuple(fc.integer({ min: 50, max: 2000 }), fc.boolean(), treeArb)
  .map(([n, objects, tail]) => {
    const list: unknown[] = Array.from(
      { length: n },
      (_, i) => objects ? { id: i, note: `finding ${i}`, ok: i % 2 === 0 } : i,
    );
    list.push(tail);
    return list;
  });

/** Nesting up to 64 levels (the root object is level 1), with a small sibling on the way. */
const deepArb = fc.tuple(
  fc.integer({ min: 2, max: 63 }),
  fc.tuple(keyArb, fc.oneof(leafArb, fc.string({ maxLength: 200 }))),
  fc.boolean(),
  treeArb,
).map(([depth, sibling, lists, bottom]) => {
  let v: unknown = bottom;
  for (let d = 0; d < depth - 1; d++) {
    if (lists && d % 2 === 1) v = [v, d];
    else v = objectOf([sibling, [`level${depth - d}`, v]]);
  }
  return v;
});

/** A state: a root object holding parts of every shape. */
const stateArb: fc.Arbitrary<JsonObject> = fc.array(
  fc.tuple(keyArb, fc.oneof(treeArb, wideArb, longListArb, deepArb, longTextArb)),
  { minLength: 1, maxLength: 6 },
).map((entries) => JSON.parse(JSON.stringify(objectOf(entries))) as JsonObject);

/** Budgets from the floor to beyond the size of `value`. */
function budgetArb(value: unknown): fc.Arbitrary<number> {
  const full = size(value);
  return fc.oneof(
    fc.constant(MIN_READ_BYTES),
    fc.integer({ min: MIN_READ_BYTES, max: 2048 }),
    fc.integer({ min: MIN_READ_BYTES, max: Math.max(MIN_READ_BYTES, Math.ceil(full * 1.2)) }),
    fc.constantFrom(Math.max(MIN_READ_BYTES, full - 1), Math.max(MIN_READ_BYTES, full)),
  );
}

/** Every JSON Pointer into `value` (pointer form), the root included. */
function pointersOf(value: unknown, at = "", out: string[] = []): string[] {
  out.push(at);
  if (out.length > 2000) return out;
  if (Array.isArray(value)) value.forEach((v, i) => pointersOf(v, `${at}/${i}`, out));
  else if (isObject(value)) {
    for (const k of Object.keys(value)) pointersOf(value[k], `${at}/${escape(k)}`, out);
  }
  return out;
}

// ---------------------------------------------------------------- outline: properties

Deno.test("outline() keeps to the budget and describes exactly what it leaves out", () => {
  fc.assert(
    fc.property(
      stateArb.chain((s) => fc.tuple(fc.constant(s), budgetArb(s))),
      ([state, budget]) => {
        checkBudgeted(state, budget);
      },
    ),
    runs(0x5eed01, 250),
  );
});

Deno.test("every path an outline names reads exactly the subtree it stands for", () => {
  fc.assert(
    fc.property(
      stateArb.chain((s) => fc.tuple(fc.constant(s), budgetArb(s))),
      ([state, budget]) => {
        const described = checkBudgeted(state, budget);
        if (described.length === 0) return;
        for (let i = 0; i < described.length; i += MAX_READ_PATHS) {
          const batch = described.slice(i, i + MAX_READ_PATHS);
          const r = readPaths(state, batch);
          assert.equal(r.truncated, false);
          assert.equal(r.missing, undefined);
          for (const p of batch) assert.ok(Object.is(r.values[p], getPath(state, p)), p);
        }
      },
    ),
    runs(0x5eed02, 100),
  );
});

Deno.test("outline() of any JSON value (lists, strings, scalars at the top) keeps its contract", () => {
  fc.assert(
    fc.property(
      fc.oneof(treeArb, longListArb, longTextArb, deepArb, wideArb).map((v) =>
        JSON.parse(JSON.stringify(v))
      ).chain((v) => fc.tuple(fc.constant(v), budgetArb(v))),
      ([value, budget]) => {
        checkBudgeted(value, budget);
      },
    ),
    runs(0x5eed03, 300),
  );
});

Deno.test("jsonSize() is the UTF-8 length of JSON.stringify", () => {
  fc.assert(
    fc.property(fc.oneof(stateArb, treeArb), (v) => {
      const value = JSON.parse(JSON.stringify(v));
      assert.equal(jsonSize(value), size(value));
    }),
    runs(0x5eed04, 300),
  );
  for (
    const s of ["", "\u0000", "\ud800", "a\udbffb", "😀", "\u2028", '"\\/', "\u001f\u007f\u0080"]
  ) {
    assert.equal(jsonSize(s), size(s));
    assert.equal(jsonSize(s.repeat(100)), size(s.repeat(100)));
  }
  for (const n of [-0, 0.1, 1e21, 5e-324, -Number.MAX_VALUE, 2 ** 53]) {
    assert.equal(jsonSize(n), size(n));
  }
});

// ---------------------------------------------------------------- outline: shapes at scale

const BUDGETS = [256, 300, 1024, 4096, 131_072];

Deno.test("a wide object of 80,000 keys", async (t) => {
  const wide: JsonObject = {};
  for (let i = 0; i < 80_000; i++) wide[i % 1000 === 0 ? `k~${i}/x` : `key${i}`] = i;
  const state = { title: "wide", wide };
  for (const budget of BUDGETS) {
    await t.step(`at ${budget} bytes`, () => {
      const described = checkBudgeted(state, budget);
      assert.ok(described.includes("/wide"));
    });
  }
  // Read on its own with a larger budget, the object shows more of its keys.
  const small = outline(state, 4096);
  const closer = readPaths(state, ["/wide"], 131_072).outline?.["/wide"] as { entries: object };
  assert.ok(small.truncated);
  const first = dig(small.outline, "entries", "wide");
  assert.ok(Object.keys(closer.entries).length > Object.keys(first.entries ?? {}).length);
  assert.ok(Object.keys(closer.entries).includes("k~1000/x"));
});

Deno.test("a list of 300,000 items shows both ends", async (t) => {
  const state = { log: Array.from({ length: 300_000 }, (_, i) => ({ run: i, ok: i % 3 !== 0 })) };
  for (const budget of BUDGETS) {
    await t.step(`at ${budget} bytes`, () => {
      checkBudgeted(state, budget);
    });
  }
  const out = outline(state, 4096);
  assert.ok(out.truncated);
  const items = dig(out.outline, "entries", "log", "items");
  assert.deepEqual(items["299999"], { value: state.log[299_999] });
  assert.deepEqual(items["0"], { value: state.log[0] });
});

Deno.test("nesting 64 levels deep, each level large", async (t) => {
  let v: unknown = { text: "deep ".repeat(60_000) };
  for (let d = 63; d >= 2; d--) v = { pad: `level ${d} `.repeat(100), [`level${d}`]: v };
  const state = v as JsonObject;
  for (const budget of [...BUDGETS, 262_144]) {
    await t.step(`at ${budget} bytes`, () => {
      const described = checkBudgeted(state, budget);
      if (budget >= 131_072) {
        // The bottom, 63 keys down, is reached and described.
        assert.ok(described.some((p) => p.split("/").length === 64 && p.endsWith("/text")));
      }
    });
  }
});

Deno.test("long non-ASCII strings: UTF-8 counted, previews cut on code points", async (t) => {
  for (const unit of ["😀", "é", "日本語", "a😀", "\ud83d", "😀\ud800", '"\n\\']) {
    const text = unit.repeat(5000);
    for (const budget of [256, 257, 258, 259, 1000, 4096]) {
      await t.step(`${JSON.stringify(unit)} at ${budget}`, () => {
        checkBudgeted({ text }, budget);
        checkBudgeted(text, budget);
        const cut = text.slice(1);
        checkBudgeted({ cut, text }, budget);
      });
    }
  }
  // Read alone, a long string's preview fills the budget.
  const out = readPaths({ text: "😀".repeat(5000) }, ["text"], 4096);
  const node = out.outline?.text as { preview: string };
  assert.ok(size(node) <= 4096 && size(node) > 4000, `${size(node)}`);
  assert.ok(node.preview.length > PREVIEW_CHARS * 2);
});

Deno.test("keys named like the outline's own fields are data, never markers", () => {
  const state = JSON.parse(
    `{"__proto__": {"keys": 1}, "type": "object", "path": "", "value": {"value": 1},
      "entries": {"$omitted": "/x"}, "$omitted": {"type": "string", "path": "/fake", "bytes": 1},
      "": {"~": {"/": "${"z".repeat(3000)}"}}}`,
  );
  for (const budget of [256, 512, 1024, 2048, 4096]) {
    const described = checkBudgeted(state, budget);
    for (const p of described) assert.notEqual(p, "/fake");
  }
  const out = outline(state, 2048);
  assert.ok(out.truncated);
  const entries = dig(out.outline, "entries");
  assert.deepEqual(entries.value, { value: { value: 1 } });
  assert.deepEqual(Object.getPrototypeOf(entries), Object.prototype);
  assert.ok(Object.hasOwn(entries, "__proto__"));
  const deep = readPaths(state, ["/~1~0", "/"], 4096);
  assert.deepEqual(Object.keys(deep.values).sort(), ["/"]);
  assert.deepEqual(deep.missing, ["/~1~0"]);
});

Deno.test("outline() with a pointer names paths from the state's root", () => {
  const state = { a: { "b/c": { list: Array.from({ length: 500 }, (_, i) => `item ${i}`) } } };
  const out = outline(state.a["b/c"], 512, { pointer: "/a/b~1c" });
  assert.ok(out.truncated);
  const described = checkOutline(state, out.outline, "/a/b~1c");
  assert.deepEqual(described, ["/a/b~1c", "/a/b~1c/list"]);
  assert.throws(() => outline(state, 512, { pointer: "a" }), InvalidArgument);
});

// ---------------------------------------------------------------- readPaths

Deno.test("readPaths() answers every path once: whole, outlined or missing", () => {
  const arb = stateArb.chain((state) => {
    const pointers = pointersOf(state);
    const pathArb = fc.oneof(
      fc.constantFrom(...pointers),
      fc.constantFrom("/no/such/key", "/0", "missing", "a.b"),
      keyArb.filter((k) => k.length > 0 && !k.includes(".")),
    );
    return fc.tuple(
      fc.constant(state),
      fc.array(pathArb, { minLength: 0, maxLength: MAX_READ_PATHS }),
      fc.option(budgetArb(state), { nil: undefined }),
    );
  });
  fc.assert(
    fc.property(arb, ([state, paths, budget]) => {
      let r: ReturnType<typeof readPaths>;
      try {
        r = readPaths(state, paths, budget);
      } catch (e) {
        // Refused only when the budget can't hold the least answer of every path found:
        // the smallest budget it names then works.
        assert.ok(e instanceof InvalidArgument && budget !== undefined, String(e));
        const min = e.details.min as number;
        assert.equal(e.details.field, "max_bytes");
        assert.ok(min > budget, `${min} > ${budget}`);
        r = readPaths(state, paths, min);
        budget = min;
      }
      const distinct = [...new Set(paths)];
      const values = Object.keys(r.values);
      const outlined = Object.keys(r.outline ?? {});
      const missing = r.missing ?? [];
      assert.deepEqual([...values, ...outlined, ...missing].sort(), [...distinct].sort());
      assert.equal(r.truncated, outlined.length > 0);
      assert.equal(r.outline === undefined, outlined.length === 0);
      assert.equal(r.missing === undefined, missing.length === 0);
      let total = 0;
      let sum = 0;
      for (const p of distinct) {
        let actual: unknown;
        try {
          actual = getPath(state, p);
        } catch {
          assert.ok(missing.includes(p), `${p} is missing`);
          continue;
        }
        sum += size(actual);
        if (Object.hasOwn(r.values, p)) {
          assert.ok(Object.is(r.values[p], actual));
          total += size(actual);
        } else {
          const node = r.outline![p] as OutlineNode;
          const pointer = toPointer(
            p === "" ? [] : p.startsWith("/") ? pointerSegments(p) : p.split("."),
          );
          assert.ok(budget !== undefined && size(node) <= budget);
          checkOutline(state, node, pointer, { topMayLackPath: true });
          total += size(node);
        }
      }
      assert.equal(r.sizeBytes, sum);
      if (budget === undefined || sum <= budget) assert.equal(r.truncated, false);
      else {
        assert.equal(r.truncated, true);
        assert.ok(total <= budget, `${total} bytes within ${budget}`);
      }
    }),
    runs(0x5eed05, 300),
  );
});

function pointerSegments(p: string): string[] {
  return p.slice(1).split("/").map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
}

Deno.test("readPaths() shares the budget: small values whole, the large ones outlined", () => {
  const state = {
    title: "Nightly",
    tags: ["ci", "arm64"],
    notes: "n".repeat(10_000),
    log: Array.from({ length: 2000 }, (_, i) => i),
  };
  const r = readPaths(state, ["title", "/tags", "notes", "/log"], 4096);
  assert.deepEqual(r.values, { title: "Nightly", "/tags": ["ci", "arm64"] });
  assert.deepEqual(Object.keys(r.outline ?? {}), ["notes", "/log"]);
  const total = size(r.values.title) + size(r.values["/tags"]) + size(r.outline);
  assert.ok(total <= 4096 + 50, `${total}`);
  // Each outline gets about half of what is left.
  const notes = size(r.outline!.notes);
  const log = size(r.outline!["/log"]);
  assert.ok(notes > 1500 && log > 1500, `${notes} ${log}`);
});

Deno.test("readPaths(): the budget is hard; one too small for the paths is refused, naming the least", () => {
  // 32 large strings: the smallest node for each is {"type":"string","bytes":1002}, 30 bytes.
  const many: JsonObject = {};
  for (let i = 0; i < 32; i++) many[`p${i}`] = "x".repeat(1000);
  const least = 32 * size({ type: "string", bytes: 1002 });
  for (const budget of [256, 512, least - 1]) {
    assert.throws(
      () => readPaths(many, Object.keys(many), budget),
      (e) =>
        e instanceof InvalidArgument && e.details.field === "max_bytes" &&
        e.details.min === least && /at least 960/.test(e.message),
    );
  }
  for (const budget of [least, least + 1, least + 100, 2048, 8192]) {
    const all = readPaths(many, Object.keys(many), budget);
    assert.equal(Object.keys(all.outline ?? {}).length, 32, `${budget}`);
    assert.ok(size(Object.values(all.outline!)) - 2 - 31 <= budget, `${budget}`);
    let total = 0;
    for (const [p, node] of Object.entries(all.outline!)) {
      total += size(node);
      checkOutline(many, node, `/${p}`, { topMayLackPath: true });
    }
    assert.ok(total <= budget, `${total} within ${budget}`);
  }
  // Small values shown whole leave the least of the others: never more than the budget.
  const mixed: JsonObject = {
    a: "y".repeat(120),
    b: { list: Array.from({ length: 500 }, (_, i) => i) },
  };
  for (let budget = 256; budget < 400; budget++) {
    const r = readPaths(mixed, ["a", "b"], budget);
    const total = size(r.values.a ?? "") * (r.values.a === undefined ? 0 : 1) +
      (r.outline ? Object.values(r.outline).reduce((n, o) => n + size(o), 0) : 0);
    assert.ok(total <= budget, `${total} within ${budget}`);
  }
});

Deno.test("readPaths(): a pointer too long for the share leaves only the top node's path out", () => {
  const key = "k/".repeat(200);
  const state = {
    [key]: { list: Array.from({ length: 100 }, (_, i) => i), note: "x".repeat(3000) },
  };
  const pointer = `/${key.replaceAll("/", "~1")}`;
  const r = readPaths(state, [pointer], 256);
  const node = r.outline?.[pointer];
  assert.ok(node !== undefined && size(node) <= 256);
  assert.deepEqual(node, { type: "object", bytes: size(state[key]), keys: 2 });
  checkOutline(state, node, pointer, { topMayLackPath: true });
  // With room for it, the path is there.
  const roomy = readPaths(state, [pointer], 1024).outline?.[pointer] as { path: string };
  assert.equal(roomy.path, pointer);
});

Deno.test("readPaths() refuses bad arguments with invalid_argument", () => {
  const state = { a: 1 };
  const bad: [unknown, unknown][] = [
    [["a"], 255],
    [["a"], 256.5],
    [["a"], NaN],
    [["a"], Infinity],
    [["a"], "300"],
    [["a"], -1],
    [["a"], null],
    [Array.from({ length: 33 }, (_, i) => `p${i}`), 1000],
    ["a", 1000],
    [[1], 1000],
    [["a..b"], 1000],
    [[".a"], 1000],
    [["/a~2"], 1000],
    [["/a~"], 1000],
    [null, 1000],
  ];
  for (const [paths, maxBytes] of bad) {
    assert.throws(
      () => readPaths(state, paths as string[], maxBytes as number),
      (e) => e instanceof InvalidArgument && e.code === "invalid_argument",
      `${JSON.stringify(paths)} ${String(maxBytes)}`,
    );
  }
  for (const maxBytes of [255, 1.5, NaN, "4096", null, 2 ** 53]) {
    assert.throws(() => outline(state, maxBytes as number), InvalidArgument);
  }
  assert.deepEqual(readPaths(state, Array.from({ length: 32 }, () => "a"), 256).values, { a: 1 });
  assert.deepEqual(readPaths(state, []), { values: {}, truncated: false, sizeBytes: 0 });
});

// ---------------------------------------------------------------- HandleStore.read

const BACKENDS: [string, () => Promise<HandleStore>][] = [
  ["memory", () => Promise.resolve(new HandleStore(new MemoryBackend()))],
  ["sqlite", () => HandleStore.fromUrl("sqlite:///:memory:")],
];

for (const [name, open] of BACKENDS) {
  Deno.test(`read() [${name}]: the state within budget, an outline over it`, async () => {
    await using store = await open();
    const state = {
      title: "Runners",
      sources: Array.from({ length: 300 }, (_, i) => `https://example.org/${i}`),
      notes: "Läufer 😀 ".repeat(3000),
    };
    const h = await store.mint("research", state, { user: "alice", writer: "laptop" });
    const snap = await store.get(h, { user: "alice" });
    const { state: _, ...info } = snap;

    const whole = await store.read(h, { user: "alice" });
    assert.deepEqual(whole, { ...info, state, truncated: false, sizeBytes: size(state) });
    const roomy = await store.read(h, { user: "alice", maxBytes: size(state) });
    assert.deepEqual(roomy, whole);

    const r = await store.read(h, { user: "alice", maxBytes: 4096 });
    assert.ok(r.truncated);
    assert.ok(!("state" in r));
    assert.equal(r.sizeBytes, size(state));
    const { outline: _o, truncated: _t, sizeBytes: _s, ...meta } = r;
    assert.deepEqual(meta, info);
    assert.ok(size(r.outline) <= 4096);
    const described = checkOutline(state, r.outline, "", { sameValues: false });
    assert.ok(described.includes("/notes") && described.includes("/sources"));
    const back = await store.read(h, { user: "alice", paths: described, maxBytes: 1 << 20 });
    assert.equal(back.truncated, false);
    for (const p of described) assert.deepEqual(back.values[p], getPath(state, p));

    const wire = toReadPayload(r);
    assert.equal(wire.truncated, true);
    assert.equal(wire.size_bytes, size(state));
    assert.deepEqual(wire.outline, r.outline);
    assert.equal(wire.created_at, snap.createdAt.toISOString());
    assert.equal(wire.last_writer, "laptop");
    assert.ok(!("state" in wire) && !("sizeBytes" in wire) && !("values" in wire));
    const wholeWire = toReadPayload(whole);
    assert.deepEqual(wholeWire.state, state);
    assert.equal(wholeWire.truncated, false);
    assert.ok(!("outline" in wholeWire));
  });

  Deno.test(`read() [${name}]: paths give values, outlines and missing paths`, async () => {
    await using store = await open();
    const state = { a: { "b/c": [1, 2, 3] }, big: "x".repeat(5000), "d.e": true };
    const h = await store.mint("note", state, { user: "u" });
    const r = await store.read(h, {
      user: "u",
      maxBytes: 1024,
      paths: ["/a/b~1c/2", "a", "big", "/d.e", "nope", "/a/b~1c/9"],
    });
    assert.deepEqual(r.values, { "/a/b~1c/2": 3, a: { "b/c": [1, 2, 3] }, "/d.e": true });
    assert.deepEqual(Object.keys(r.outline ?? {}), ["big"]);
    assert.deepEqual(r.missing, ["nope", "/a/b~1c/9"]);
    assert.equal(r.truncated, true);
    assert.equal(r.sizeBytes, size(3) + size(state.a) + size(state.big) + size(true));
    assert.ok(!("state" in r));
    const wire = toReadPayload(r);
    assert.deepEqual(wire.values, r.values);
    assert.deepEqual(wire.outline, r.outline);
    assert.deepEqual(wire.missing, ["nope", "/a/b~1c/9"]);
    assert.equal(wire.size_bytes, r.sizeBytes);
    assert.ok(!("state" in wire));
    const free = await store.read(h, { user: "u", paths: ["big"] });
    assert.deepEqual(free.values, { big: state.big });
    assert.equal(free.truncated, false);
  });

  Deno.test(`read() [${name}]: bad arguments are invalid_argument before any read`, async () => {
    await using store = await open();
    const h = await store.mint("note", { a: 1 }, { user: "u" });
    for (
      const options of [
        { maxBytes: 255 },
        { maxBytes: 300.5 },
        { maxBytes: "4096" },
        { paths: Array.from({ length: 33 }, () => "a") },
        { paths: ["a..b"] },
        { paths: "a" },
      ]
    ) {
      const args = { user: "u", ...options } as unknown as { user: string };
      await rejectsWith(() => store.read(h, args), "invalid_argument");
      // Checked before the handle is looked up: no handle_not_found.
      await rejectsWith(() => store.read("note_aaaaaaaa", args), "invalid_argument");
    }
    await rejectsWith(() => store.read(h, { user: "v" }), "handle_not_found");
    await rejectsWith(() => store.read(h, { user: "v", maxBytes: 256 }), "handle_not_found");
  });

  Deno.test(`read() [${name}]: every path an outline names reads back through the store`, async () => {
    await using store = await open();
    await fc.assert(
      fc.asyncProperty(
        stateArb.filter((s) => size(s) < 200_000).chain((s) =>
          fc.tuple(fc.constant(s), budgetArb(s))
        ),
        async ([state, budget]) => {
          const h = await store.mint("prop", state, { user: "p" });
          const r = await store.read(h, { user: "p", maxBytes: budget });
          assert.equal(r.sizeBytes, size(state));
          if (!r.truncated) {
            assert.deepEqual(r.state, state);
            return;
          }
          assert.ok(size(r.outline) <= budget);
          const described = checkOutline(state, r.outline, "", { sameValues: false });
          for (let i = 0; i < described.length; i += MAX_READ_PATHS) {
            const paths = described.slice(i, i + MAX_READ_PATHS);
            const back = await store.read(h, { user: "p", paths, maxBytes: 1 << 22 });
            assert.equal(back.truncated, false);
            for (const p of paths) assert.deepEqual(back.values[p], getPath(state, p), p);
          }
        },
      ),
      runs(0x5eed06, 40),
    );
  });
}
