import assert from "node:assert/strict";
import fc from "fast-check";
import { PATCH_REASONS, PatchError, type PatchReason } from "../src/errors.ts";
import { patchCost, resetPatchCost } from "../src/ops/_patch_cost.ts";
import { Reads } from "./_counted.ts";
import {
  AddToSet,
  Append,
  applyOps,
  DelKey,
  getPath,
  Increment,
  type JsonObject,
  Merge,
  opFromJson,
  opsFromJson,
  parsePath,
  type PatchOp,
  SetKey,
} from "../src/ops.ts";

// The codes of SPEC §2, and path_not_found of getPath().
const REASONS: readonly string[] = PATCH_REASONS;
assert.deepEqual(
  [...REASONS].sort(),
  ("unknown_op missing_field wrong_type bad_path path_not_found not_an_object not_a_list " +
    "not_a_number out_of_range too_many_ops").split(" ").sort(),
);

/**
 * Asserts that `f` throws a PatchError (never another class) with `reason` as
 * its machine code and the sentence in its message, and returns it.
 */
function patchError(
  f: () => unknown,
  reason: PatchReason,
  details: Record<string, unknown> = {},
): PatchError {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof PatchError, `expected a PatchError, got ${String(caught)}`);
  assert.equal(caught.code, "patch_error");
  assert.equal(caught.details.reason, reason, caught.message);
  assert.equal(caught.reason, reason);
  assert.ok(REASONS.includes(caught.details.reason as string));
  const payload = caught.toPayload();
  assert.equal(payload.code, "patch_error");
  assert.equal(payload.reason, reason);
  assert.match(payload.message, /^[A-Z].*\. No op of this patch was applied; fix the op and send/);
  assert.equal(payload.message.match(/No op of this patch was applied/g)?.length, 1);
  for (const [k, v] of Object.entries(details)) assert.deepEqual(caught.details[k], v, k);
  return caught;
}

/** Applies ops and checks the input was not mutated. */
function apply(state: JsonObject, ops: PatchOp[]): JsonObject {
  const before = structuredClone(state);
  const out = applyOps(state, ops);
  assert.deepEqual(state, before);
  return out;
}

Deno.test("factories build the plain wire objects", () => {
  assert.deepEqual(Append("a", 1), { op: "append", path: "a", value: 1 });
  assert.deepEqual(SetKey("a", "k", null), { op: "set_key", path: "a", key: "k", value: null });
  assert.deepEqual(DelKey("a", "k"), { op: "del_key", path: "a", key: "k" });
  assert.deepEqual(Merge({ x: 1 }), { op: "merge", mapping: { x: 1 }, path: "" });
  assert.deepEqual(Merge({ x: 1 }, "p"), { op: "merge", mapping: { x: 1 }, path: "p" });
  assert.deepEqual(Increment("s", "n"), { op: "increment", path: "s", key: "n", by: 1 });
  assert.deepEqual(Increment("s", "n", -2.5), { op: "increment", path: "s", key: "n", by: -2.5 });
  assert.deepEqual(AddToSet("t", "x"), { op: "add_to_set", path: "t", value: "x" });
  for (const op of [Append("a", 1), Merge({}), Increment("", "n")]) {
    assert.equal(Object.getPrototypeOf(op), Object.prototype);
    assert.deepEqual(opFromJson(JSON.parse(JSON.stringify(op))), op);
  }
});

Deno.test("parsePath()", async (t) => {
  await t.step("splits dotted paths; empty is the root", () => {
    assert.deepEqual(parsePath(""), []);
    assert.deepEqual(parsePath("profile"), ["profile"]);
    assert.deepEqual(parsePath("profile.tags"), ["profile", "tags"]);
    assert.deepEqual(parsePath("a/b~0.c"), ["a/b~0", "c"]);
  });
  await t.step("rejects empty dotted segments", () => {
    for (const p of ["a..b", "a.", ".a", "."]) {
      patchError(() => parsePath(p), "bad_path", { path: p });
    }
  });
  await t.step("decodes JSON Pointers with ~0 and ~1", () => {
    assert.deepEqual(parsePath("/profile/tags"), ["profile", "tags"]);
    assert.deepEqual(parsePath("/a~1b/~0c/~01"), ["a/b", "~c", "~1"]);
    assert.deepEqual(parsePath("/"), [""]);
    assert.deepEqual(parsePath("/a//b"), ["a", "", "b"]);
    assert.deepEqual(parsePath("/a.b"), ["a.b"]);
  });
  await t.step("rejects bad ~ escapes", () => {
    for (const p of ["/a~", "/a~2", "/~x/b"]) {
      patchError(() => parsePath(p), "bad_path", { field: "path" });
    }
  });
  await t.step("caps paths at 1000 segments", () => {
    assert.equal(parsePath(Array(1000).fill("k").join(".")).length, 1000);
    patchError(() => parsePath(Array(1001).fill("k").join(".")), "bad_path", { field: "path" });
    patchError(() => applyOps({}, [SetKey("/k".repeat(1001), "k", 1)]), "bad_path", {
      op_index: 0,
    });
  });
});

Deno.test("append and add_to_set", async (t) => {
  await t.step("append adds to the end, creating the list and its parents", () => {
    assert.deepEqual(apply({ a: [1] }, [Append("a", 2), Append("a", 2)]), { a: [1, 2, 2] });
    assert.deepEqual(apply({}, [Append("x.y.z", "v")]), { x: { y: { z: ["v"] } } });
    assert.deepEqual(apply({}, [Append("/x/y", { k: 1 })]), { x: { y: [{ k: 1 }] } });
  });
  await t.step("append into a non-list names the path", () => {
    for (const v of [{}, "s", 1, null, true]) {
      const e = patchError(() => applyOps({ a: v }, [Append("a", 1)]), "not_a_list", {
        path: "a",
        op_index: 0,
      });
      assert.match(e.message, /"a"/);
    }
    patchError(() => applyOps({}, [Append("", 1)]), "not_a_list");
  });
  await t.step("add_to_set skips deep-equal values, ignoring key order", () => {
    const state = { tags: ["x", { a: 1, b: [1, { c: 2, d: 3 }] }] };
    const out = apply(state, [
      AddToSet("tags", "x"),
      AddToSet("tags", { b: [1, { d: 3, c: 2 }], a: 1 }),
    ]);
    assert.equal(out, state);
    assert.deepEqual(apply(state, [AddToSet("tags", { b: [{ d: 3, c: 2 }, 1], a: 1 })]).tags, [
      ...state.tags,
      { b: [{ d: 3, c: 2 }, 1], a: 1 },
    ]);
    assert.deepEqual(apply({}, [AddToSet("t", 1), AddToSet("t", 1), AddToSet("t", "1")]), {
      t: [1, "1"],
    });
    assert.deepEqual(apply({ t: [null, [], {}] }, [AddToSet("t", {}), AddToSet("t", [])]), {
      t: [null, [], {}],
    });
    assert.deepEqual(apply({ t: [{ a: 1 }] }, [AddToSet("t", { a: 1, b: undefined })]).t, [
      { a: 1 },
      { a: 1, b: undefined },
    ]);
    patchError(() => applyOps({ t: {} }, [AddToSet("t", 1)]), "not_a_list", { path: "t" });
  });
});

Deno.test("set_key, del_key, merge and increment", async (t) => {
  await t.step("set_key sets, overwrites in place and creates its object", () => {
    const out = apply({ p: { a: 1, b: 2 } }, [SetKey("p", "a", 9), SetKey("p", "c", [3])]);
    assert.deepEqual(out, { p: { a: 9, b: 2, c: [3] } });
    assert.deepEqual(Object.keys(out.p as JsonObject), ["a", "b", "c"]);
    assert.deepEqual(apply({}, [SetKey("", "k", null)]), { k: null });
    assert.deepEqual(apply({}, [SetKey("x.y", "k", 1)]), { x: { y: { k: 1 } } });
    for (const v of [[], "s", 3, null]) {
      patchError(() => applyOps({ p: v }, [SetKey("p", "k", 1)]), "not_an_object", { path: "p" });
    }
  });
  await t.step("del_key removes; absent keys and containers are no-ops that create nothing", () => {
    assert.deepEqual(apply({ a: 1, b: 2 }, [DelKey("", "a")]), { b: 2 });
    const state = { p: { a: 1 } };
    assert.equal(apply(state, [DelKey("p", "zz"), DelKey("q.r", "a"), DelKey("/q/r", "a")]), state);
    patchError(() => applyOps({ p: [1] }, [DelKey("p", "0")]), "not_an_object", { path: "p" });
    patchError(() => applyOps({ p: "s" }, [DelKey("p.q", "a")]), "not_an_object", {
      path: "p.q",
    });
  });
  await t.step("merge is shallow, keeps positions of existing keys and appends new ones", () => {
    const out = apply({ a: 1, n: { x: 1, y: 2 }, z: 0 }, [Merge({ n: { y: 3 }, b: 2, a: 5 })]);
    assert.deepEqual(out, { a: 5, n: { y: 3 }, z: 0, b: 2 });
    assert.deepEqual(Object.keys(out), ["a", "n", "z", "b"]);
    assert.deepEqual(apply({}, [Merge({ k: 1 }, "p.q")]), { p: { q: { k: 1 } } });
    assert.deepEqual(apply({}, [Merge({}, "p")]), { p: {} });
    patchError(() => applyOps({ p: [] }, [Merge({ k: 1 }, "p")]), "not_an_object", { path: "p" });
  });
  await t.step("increment counts from 0 and requires finite numbers", () => {
    assert.deepEqual(
      apply({ s: { n: 2 } }, [Increment("s", "n"), Increment("s", "n", 0.5), Increment("t", "m")]),
      { s: { n: 3.5 }, t: { m: 1 } },
    );
    assert.deepEqual(apply({}, [Increment("", "n", -4)]), { n: -4 });
    for (const v of ["1", null, [], {}, true]) {
      patchError(() => applyOps({ n: v }, [Increment("", "n")]), "not_a_number", { key: "n" });
    }
    patchError(
      () => applyOps({ n: Number.MAX_VALUE }, [Increment("", "n", Number.MAX_VALUE)]),
      "out_of_range",
    );
    patchError(() => applyOps({ s: "x" }, [Increment("s", "n")]), "not_an_object", { path: "s" });
  });
  await t.step("ops that change nothing return the input object itself", () => {
    const state = { a: 1, p: { b: { c: 2 } }, t: [1] };
    const ops = [
      SetKey("", "a", 1),
      SetKey("p", "b", { c: 2 }),
      Merge({ a: 1 }),
      Increment("", "a", 0),
      AddToSet("t", 1),
    ];
    assert.equal(apply(state, ops), state);
    const ordered = { o: { x: 1, y: 2 } };
    const reordered = apply(ordered, [SetKey("", "o", { y: 2, x: 1 })]);
    assert.notEqual(reordered, ordered);
    assert.deepEqual(Object.keys(reordered.o as JsonObject), ["y", "x"]);
  });
});

Deno.test("JSON Pointer paths walk lists by existing index", async (t) => {
  const state = { items: [{ tags: [] }, { "a/b": { "~c": {} } }], "": { k: 1 } };
  await t.step("writes through list items and escaped keys", () => {
    const out = apply(state, [
      Append("/items/0/tags", "t"),
      SetKey("/items/1/a~1b/~0c", "k", true),
      SetKey("/", "z", 2),
    ]);
    assert.deepEqual(out, {
      items: [{ tags: ["t"] }, { "a/b": { "~c": { k: true } } }],
      "": { k: 1, z: 2 },
    });
  });
  await t.step("indexes must exist and be canonical", () => {
    const cases: [string, PatchReason][] = [
      ["/items/2/x", "out_of_range"],
      ["/items/-/x", "out_of_range"],
      ["/items/01/x", "bad_path"],
      ["/items/-1/x", "bad_path"],
      ["/items/x/y", "bad_path"],
    ];
    for (const [p, reason] of cases) {
      patchError(() => applyOps(state, [SetKey(p, "k", 1)]), reason, { path: p, op_index: 0 });
    }
    patchError(() => applyOps({ l: [[1]] }, [Append("/l/1", 2)]), "out_of_range", {
      path: "/l/1",
    });
    assert.deepEqual(apply({ l: [[1]] }, [Append("/l/0", 2)]), { l: [[1, 2]] });
  });
  await t.step("dotted paths never index lists", () => {
    patchError(() => applyOps(state, [SetKey("items.0", "k", 1)]), "not_an_object", {
      path: "items.0",
    });
  });
});

Deno.test("getPath()", async (t) => {
  const state = { profile: { tags: ["a", "b"], "x.y": 1, "": 0 }, n: null };
  await t.step("selects subtrees with both syntaxes", () => {
    assert.equal(getPath(state, ""), state);
    assert.equal(getPath(state, "profile.tags"), state.profile.tags);
    assert.equal(getPath(state, "/profile/tags/1"), "b");
    assert.equal(getPath(state, "/profile/x.y"), 1);
    assert.equal(getPath(state, "/profile/"), 0);
    assert.equal(getPath(state, "n"), null);
  });
  await t.step("a missing path says it does not exist", () => {
    const cases: [string, PatchReason][] = [
      ["nope", "path_not_found"],
      ["profile.tags.0", "path_not_found"],
      ["n.x", "path_not_found"],
      ["/profile/tags/2", "out_of_range"],
      ["/profile/tags/01", "bad_path"],
    ];
    for (const [p, reason] of cases) {
      const e = patchError(() => getPath(state, p), reason, { path: p });
      assert.match(e.message, /does not exist/);
    }
    for (const p of ["constructor", "toString", "__proto__", "hasOwnProperty", "profile.valueOf"]) {
      patchError(() => getPath(state, p), "path_not_found", { path: p });
      patchError(() => getPath(state, `/${p.replace(".", "/")}`), "path_not_found");
    }
    patchError(() => getPath(state, "a..b"), "bad_path");
  });
});

Deno.test("prototype-named keys are plain data", async (t) => {
  const names = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty"];
  const protoBefore = Object.getOwnPropertyNames(Object.prototype).sort();
  await t.step("written as own properties at every level, round-tripping through JSON", () => {
    let state: JsonObject = {};
    for (const k of names) {
      state = apply(state, [
        SetKey("", k, { x: 1 }),
        SetKey(k, "inner", k),
        Increment(`/${k}`, "n"),
        Append(`${k}.list`, 1),
        AddToSet(`holder.${k}`, 2),
        Merge(JSON.parse(`{"${k}": {"m": true}}`), "merged"),
      ]);
    }
    for (const k of names) {
      assert.ok(Object.hasOwn(state, k), k);
      assert.deepEqual(state[k], { x: 1, inner: k, n: 1, list: [1] });
      assert.deepEqual(getPath(state, `holder.${k}`), [2]);
      assert.deepEqual(getPath(state, `/merged/${k}`), { m: true });
    }
    assert.equal(Object.getPrototypeOf(state), Object.prototype);
    assert.equal(Object.getPrototypeOf(state.holder), Object.prototype);
    const parsed = JSON.parse(JSON.stringify(state));
    assert.deepEqual(Object.keys(parsed), Object.keys(state));
    assert.deepEqual(parsed, state);
  });
  await t.step("JSON.parse inputs with __proto__ keep and update it as data", () => {
    const state = JSON.parse('{"__proto__": {"x": 1}, "a": {"__proto__": []}}');
    const out = apply(state, [
      SetKey("__proto__", "y", 2),
      Append("a.__proto__", 3),
      Merge(JSON.parse('{"__proto__": {"z": 1}, "b": 1}'), "m"),
      DelKey("", "nothing"),
    ]);
    assert.equal(
      JSON.stringify(out),
      '{"__proto__":{"x":1,"y":2},"a":{"__proto__":[3]},"m":{"__proto__":{"z":1},"b":1}}',
    );
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
    assert.equal(({} as JsonObject).x, undefined);
    const gone = apply(out, [DelKey("", "__proto__"), DelKey("a", "__proto__")]);
    assert.equal(JSON.stringify(gone), '{"a":{},"m":{"__proto__":{"z":1},"b":1}}');
    assert.equal(Object.getPrototypeOf(gone), Object.prototype);
  });
  await t.step("names only on Object.prototype are absent, not paths into it", () => {
    assert.deepEqual(apply({}, [SetKey("toString", "k", 1)]), { toString: { k: 1 } });
    assert.deepEqual(apply({}, [Append("constructor.prototype", 1)]), {
      constructor: { prototype: [1] },
    });
    assert.deepEqual(apply({}, [Increment("", "hasOwnProperty")]), { hasOwnProperty: 1 });
    assert.deepEqual(apply({}, [DelKey("", "toString"), DelKey("__proto__", "x")]), {});
  });
  await t.step("Object.prototype is untouched afterwards", () => {
    assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), protoBefore);
    const probe: JsonObject = {};
    for (const k of ["x", "y", "z", "inner", "n", "list", "m", "b"]) {
      assert.equal(probe[k], undefined);
    }
    assert.equal(typeof Object.prototype.toString, "function");
  });
});

Deno.test("opFromJson() and opsFromJson() parse the wire form strictly", async (t) => {
  await t.step("accepts every op, fills defaults and drops unknown fields", () => {
    assert.deepEqual(opFromJson({ op: "merge", mapping: { a: 1 }, extra: 1 }), Merge({ a: 1 }));
    assert.deepEqual(opFromJson({ op: "increment", path: "s", key: "n" }), Increment("s", "n"));
    assert.deepEqual(opFromJson({ op: "append", path: "", value: null }), Append("", null));
    assert.deepEqual(opFromJson({ op: "add_to_set", path: "/t", value: 0 }), AddToSet("/t", 0));
    assert.deepEqual(
      opFromJson({ op: "set_key", path: "", key: "", value: "" }),
      SetKey("", "", ""),
    );
    assert.deepEqual(opFromJson({ op: "del_key", path: "a", key: "b" }), DelKey("a", "b"));
    assert.deepEqual(opsFromJson([]), []);
  });
  await t.step("every malformed op is a PatchError naming the field", () => {
    const cases: [unknown, string, PatchReason][] = [
      [null, "op", "wrong_type"],
      [[], "op", "wrong_type"],
      ["append", "op", "wrong_type"],
      [42, "op", "wrong_type"],
      [undefined, "op", "wrong_type"],
      [new Date(0), "op", "wrong_type"],
      [{}, "op", "missing_field"],
      [{ op: "push", path: "a", value: 1 }, "op", "unknown_op"],
      [{ op: "APPEND", path: "a", value: 1 }, "op", "unknown_op"],
      [{ op: 1, path: "a", value: 1 }, "op", "wrong_type"],
      [{ op: "append", value: 1 }, "path", "missing_field"],
      [{ op: "append", path: 1, value: 1 }, "path", "wrong_type"],
      [{ op: "append", path: null, value: 1 }, "path", "wrong_type"],
      [{ op: "append", path: "a..b", value: 1 }, "path", "bad_path"],
      [{ op: "append", path: "/a~2", value: 1 }, "path", "bad_path"],
      [{ op: "append", path: "a" }, "value", "missing_field"],
      [{ op: "append", path: "a", value: undefined }, "value", "missing_field"],
      [{ op: "add_to_set", path: "a" }, "value", "missing_field"],
      [{ op: "set_key", path: "a", key: "k" }, "value", "missing_field"],
      [{ op: "set_key", path: "a", value: 1 }, "key", "missing_field"],
      [{ op: "set_key", path: "a", key: 1, value: 1 }, "key", "wrong_type"],
      [{ op: "del_key", path: "a" }, "key", "missing_field"],
      [{ op: "del_key", key: "k" }, "path", "missing_field"],
      [{ op: "merge" }, "mapping", "missing_field"],
      [{ op: "merge", mapping: null }, "mapping", "wrong_type"],
      [{ op: "merge", mapping: [1] }, "mapping", "wrong_type"],
      [{ op: "merge", mapping: "x" }, "mapping", "wrong_type"],
      [{ op: "merge", mapping: {}, path: 3 }, "path", "wrong_type"],
      [{ op: "merge", mapping: {}, path: null }, "path", "wrong_type"],
      [{ op: "increment", path: "a" }, "key", "missing_field"],
      [{ op: "increment", path: "a", key: "k", by: "1" }, "by", "wrong_type"],
      [{ op: "increment", path: "a", key: "k", by: null }, "by", "wrong_type"],
      [{ op: "increment", path: "a", key: "k", by: NaN }, "by", "wrong_type"],
      [{ op: "increment", path: "a", key: "k", by: Infinity }, "by", "wrong_type"],
      [{ op: "increment", path: "a", key: "k", by: 2 ** 53 }, "by", "out_of_range"],
      [{ op: "increment", path: "a", key: "k", by: -(2 ** 53) }, "by", "out_of_range"],
      [{ op: "increment", path: "a", key: "k", by: 1e300 }, "by", "out_of_range"],
      [Object.create({ op: "append", path: "a", value: 1 }), "op", "wrong_type"],
      [{ __proto__: { op: "append", path: "a", value: 1 } }, "op", "wrong_type"],
    ];
    for (const [x, field, reason] of cases) {
      const alone = patchError(() => opFromJson(x), reason, { field });
      const e = patchError(() => opsFromJson([Append("ok", 1), x]), reason, {
        field,
        op_index: 1,
      });
      // The reason stays the code; the index goes into the sentence and beside it.
      assert.equal(e.message, `Op 1: ${alone.message}`);
      patchError(() => applyOps({}, [Append("ok", 1), x as PatchOp]), reason, {
        field,
        op_index: 1,
      });
    }
  });
  await t.step("the list itself must be an array of at most 1000 ops", () => {
    for (const x of [null, {}, "[]", Append("a", 1)]) {
      patchError(() => opsFromJson(x), "wrong_type", { field: "ops" });
    }
    assert.equal(opsFromJson(Array.from({ length: 1000 }, () => Append("a", 1))).length, 1000);
    patchError(
      () => opsFromJson(Array.from({ length: 1001 }, () => Append("a", 1))),
      "too_many_ops",
      {
        field: "ops",
        limit: 1000,
        count: 1001,
      },
    );
    const five = Array.from({ length: 5 }, () => Append("a", 1));
    assert.equal(opsFromJson(five, { maxOps: 5 }).length, 5);
    patchError(() => opsFromJson([...five, Append("a", 1)], { maxOps: 5 }), "too_many_ops", {
      limit: 5,
      count: 6,
    });
    patchError(() => applyOps({}, "nope" as unknown as PatchOp[]), "wrong_type", { field: "ops" });
    patchError(() => applyOps([] as unknown as JsonObject, []), "wrong_type", {
      field: "state",
    });
  });
});

Deno.test("applyOps() is pure and atomic", async (t) => {
  await t.step("never mutates the input and shares only untouched subtrees", () => {
    const state = { a: { b: [1, 2] }, keep: { deep: [1] }, l: [{ x: 1 }, { y: 2 }] };
    const before = structuredClone(state);
    const out = applyOps(state, [
      Append("a.b", 3),
      SetKey("a", "c", 1),
      DelKey("a", "c"),
      Merge({ a: 0 }, "/l/1"),
      Increment("n", "k"),
    ]);
    assert.deepEqual(state, before);
    assert.deepEqual(out, {
      a: { b: [1, 2, 3] },
      keep: { deep: [1] },
      l: [{ x: 1 }, { y: 2, a: 0 }],
      n: { k: 1 },
    });
    assert.equal(out.keep, state.keep);
    assert.equal((out.l as unknown[])[0], state.l[0]);
    assert.notEqual((out.l as unknown[])[1], state.l[1]);
  });
  await t.step("a failing third op leaves nothing applied", () => {
    const state = { n: 1, list: [], text: "s" };
    const before = structuredClone(state);
    const e = patchError(
      () =>
        applyOps(state, [
          Increment("", "n"),
          Append("list", 1),
          Append("text", 2),
          SetKey("", "z", 1),
        ]),
      "not_a_list",
      { op_index: 2, path: "text" },
    );
    assert.match(e.message, /No op of this patch was applied/);
    assert.deepEqual(state, before);
  });
});

Deno.test("increment stays within ±(2^53 − 1), where JSON numbers count exactly", async (t) => {
  const max = Number.MAX_SAFE_INTEGER;
  await t.step("up to the bound it counts", () => {
    assert.deepEqual(apply({}, [Increment("", "n", max)]), { n: max });
    assert.deepEqual(apply({ n: max - 1 }, [Increment("", "n")]), { n: max });
    assert.deepEqual(apply({ n: -max + 1 }, [Increment("", "n", -1)]), { n: -max });
    assert.deepEqual(apply({ n: max }, [Increment("", "n", -max)]), { n: 0 });
    assert.deepEqual(apply({}, [Increment("", "n", -max)]), { n: -max });
  });
  await t.step("a result past the bound is out_of_range, never a silent no-op", () => {
    for (
      const [n, by] of [[max, 1], [max - 1, 2], [-max, -1], [2 ** 53, 1], [2 ** 53, 2], [1, max]]
    ) {
      patchError(() => applyOps({ n }, [Increment("", "n", by)]), "out_of_range", {
        key: "n",
        path: "",
        op_index: 0,
      });
    }
  });
  await t.step("an operand past the bound is out_of_range, even when adding 0", () => {
    patchError(() => applyOps({ n: 2 ** 60 }, [Increment("", "n", 0)]), "out_of_range");
    patchError(() => applyOps({ n: -1e300 }, [Increment("", "n")]), "out_of_range");
    for (const by of [2 ** 53, -(2 ** 53), 1e300, -Number.MAX_VALUE]) {
      patchError(() => applyOps({}, [Increment("", "n", by)]), "out_of_range", { field: "by" });
      patchError(() => opFromJson(Increment("", "n", by)), "out_of_range", { field: "by" });
    }
  });
  await t.step("fractions stay allowed inside the bound", () => {
    assert.deepEqual(apply({ n: 0.5 }, [Increment("", "n", 0.25)]), { n: 0.75 });
    assert.deepEqual(apply({ n: 1e15 }, [Increment("", "n", 0.5)]), { n: 1e15 + 0.5 });
  });
  await t.step("the failing op applies nothing of the patch", () => {
    const state = { n: max, m: 1 };
    patchError(
      () => apply(state, [Increment("", "m"), Increment("", "n")]),
      "out_of_range",
      { op_index: 1 },
    );
  });
});

Deno.test("add_to_set's index follows the list as other ops of the same patch change it", () => {
  const state = { l: [{ a: 1 }, { a: 2 }, "x"] };
  const out = apply(state, [
    AddToSet("l", { a: 3 }), // builds the index
    SetKey("/l/0", "a", 5), // item 0 is no longer {a: 1}
    AddToSet("l", { a: 1 }), // so this adds
    AddToSet("l", { a: 5 }), // and this finds item 0
    Merge({ b: 1 }, "/l/1"), // item 1 becomes {a: 2, b: 1}
    AddToSet("l", { b: 1, a: 2 }), // found, key order ignored
    AddToSet("l", { a: 2 }), // gone: added
    Append("l", "y"),
    AddToSet("l", "y"), // appended by append: found
    AddToSet("l", "x"),
  ]);
  assert.deepEqual(out, { l: [{ a: 5 }, { a: 2, b: 1 }, "x", { a: 3 }, { a: 1 }, { a: 2 }, "y"] });
  // Duplicates (from append) are counted: changing one leaves the other findable.
  const dup = apply({ l: [{ k: 1 }, { k: 1 }] }, [
    AddToSet("l", { k: 2 }),
    SetKey("/l/0", "k", 9),
    AddToSet("l", { k: 1 }),
    DelKey("/l/1", "k"),
    AddToSet("l", { k: 1 }),
    AddToSet("l", {}),
  ]);
  assert.deepEqual(dup, { l: [{ k: 9 }, {}, { k: 2 }, { k: 1 }] });
  // A list replaced by set_key gets an index of its own.
  const replaced = apply({ l: [1] }, [
    AddToSet("l", 2),
    SetKey("", "l", [2, 3]),
    AddToSet("l", 2),
    AddToSet("l", 1),
  ]);
  assert.deepEqual(replaced, { l: [2, 3, 1] });
  // Values that are not plain JSON compare as before: undefined keys count, -0 is 0.
  assert.deepEqual(
    apply({ l: [{ a: 1, b: undefined }, 0] }, [AddToSet("l", { a: 1 }), AddToSet("l", -0)]).l,
    [{ a: 1, b: undefined }, 0, { a: 1 }],
  );
});

/** A plain object of `n` keys `k0` … `k${n - 1}`. */
function wideObject(n: number): JsonObject {
  const o: JsonObject = {};
  for (let i = 0; i < n; i++) o[`k${i}`] = i;
  return o;
}

Deno.test("a patch costs O(ops + what changes), not O(ops × state size)", async (t) => {
  await t.step("1,000 set_key ops on an object of 80,000 keys copy it once", () => {
    const n = 80_000;
    const ops = 1000;
    // One copy of the object reads each key a few times; each op may read a few more.
    const reads = new Reads(4 * n + 50 * ops);
    const big = reads.watch(wideObject(n));
    const state = reads.watch({ big, other: { x: 1 } });
    resetPatchCost();
    const out = applyOps(
      state,
      Array.from({ length: ops }, (_, i) => SetKey("big", `k${i * 7}`, -i)),
    );
    assert.equal(patchCost.copies, 2, "the root and the object, once each");
    assert.ok(reads.count <= 4 * n + 50 * ops, `${reads.count} reads`);
    const bigOut = out.big as JsonObject;
    assert.equal(Object.keys(bigOut).length, n);
    assert.equal(bigOut.k7, -1);
    assert.equal(bigOut.k6993, -999);
    assert.equal(bigOut.k6994, 6994);
    assert.equal(out.other, state.other, "untouched subtrees are shared");
  });
  await t.step("300 add_to_set ops on a list of 300,000 items read each item once", () => {
    const n = 300_000;
    const ops = 300;
    // Every 10th item is watched: deep equality has to read it, so a scan per op shows.
    const watched = n / 10;
    const reads = new Reads(8 * watched + 10 * ops);
    const items = Array.from({ length: n }, (_, i) => {
      const item = { id: i, tag: `t${i}` };
      return i % 10 === 0 ? reads.watch(item) : item;
    });
    resetPatchCost();
    const out = applyOps(
      { list: items },
      // Every other value is already there (with its keys in another order).
      Array.from(
        { length: ops },
        (_, i) => AddToSet("list", { tag: `t${i}`, id: i + (i % 2) * n }),
      ),
    );
    assert.ok(reads.count <= 8 * watched + 10 * ops, `${reads.count} reads`);
    assert.equal(patchCost.copies, 2, "the root and the list, once each");
    assert.equal(patchCost.indexedItems, n + ops / 2, "each item encoded once");
    const list = out.list as unknown[];
    assert.equal(list.length, n + ops / 2);
    assert.deepEqual(list.at(-1), { tag: "t299", id: 299 + n });
  });
  await t.step("edits inside the list's items between add_to_sets don't rebuild its index", () => {
    const n = 100_000;
    const ops = 1000;
    const list = Array.from({ length: n }, (_, i) => ({ id: i }));
    resetPatchCost();
    const out = applyOps(
      { list },
      Array.from(
        { length: ops },
        (_, i) =>
          i % 2 === 0 ? SetKey(`/list/${i}`, "seen", true) : AddToSet("list", { id: i - 1 }),
      ),
    );
    assert.ok(patchCost.indexedItems <= n + ops, `${patchCost.indexedItems} items encoded`);
    assert.ok(patchCost.copies <= 2 + ops / 2, `${patchCost.copies} copies`);
    // {id: i - 1} was item i - 1 before set_key added "seen": not there any more, so added.
    assert.equal((out.list as unknown[]).length, n + ops / 2);
  });
  await t.step("a patch that changes nothing copies nothing and returns its input", () => {
    const n = 80_000;
    const reads = new Reads(4 * n + 50 * 2000);
    const state = reads.watch({ big: reads.watch(wideObject(n)), list: [1, 2, 3] });
    resetPatchCost();
    const same = applyOps(state, [
      ...Array.from({ length: 1000 }, (_, i) => SetKey("big", `k${i}`, i)),
      ...Array.from({ length: 1000 }, (_, i) => AddToSet("list", (i % 3) + 1)),
      DelKey("big", "absent"),
      Merge({ k1: 1, k2: 2 }, "big"),
      Increment("big", "k3", 0),
    ]);
    assert.equal(same, state);
    assert.equal(patchCost.copies, 0);
  });
});

// ---------------------------------------------------------------- against a reference

/**
 * The semantics of applyOps, written as simply as possible: clone the whole
 * state once, then mutate the clone op by op. Returns the new state and
 * whether any op changed something, or the reason and index of the first
 * op that fails.
 */
function reference(
  state: JsonObject,
  ops: readonly PatchOp[],
): { state: JsonObject; changed: boolean } | { reason: PatchReason; op_index: number } {
  const root = JSON.parse(JSON.stringify(state)) as JsonObject;
  let changed = false;
  for (const [i, op] of ops.entries()) {
    try {
      if (referenceOp(root, op)) changed = true;
    } catch (reason) {
      return { reason: reason as PatchReason, op_index: i };
    }
  }
  return { state: root, changed };
}

function referenceOp(root: JsonObject, op: PatchOp): boolean {
  const isObject = (x: unknown): x is JsonObject =>
    typeof x === "object" && x !== null && !Array.isArray(x);
  const define = (o: JsonObject, k: string, v: unknown) =>
    Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  const max = Number.MAX_SAFE_INTEGER;
  if (op.op === "increment" && Math.abs(op.by) > max) throw "out_of_range";
  const pointer = op.path.startsWith("/");
  const segments = parsePath(op.path);
  let node: unknown = root;
  let created = false;
  for (const [i, seg] of segments.entries()) {
    let next: unknown;
    let put: (v: unknown) => void;
    if (Array.isArray(node) && pointer) {
      if (!/^(0|[1-9][0-9]*)$/.test(seg)) throw seg === "-" ? "out_of_range" : "bad_path";
      if (Number(seg) >= node.length) throw "out_of_range";
      next = node[Number(seg)];
      const list = node;
      put = (v) => list[Number(seg)] = v;
    } else if (isObject(node)) {
      next = Object.hasOwn(node, seg) ? node[seg] : undefined;
      const o = node;
      put = (v) => define(o, seg, v);
    } else {
      throw "not_an_object";
    }
    if (next === undefined) {
      if (op.op === "del_key") return false;
      const last = i === segments.length - 1;
      next = last && (op.op === "append" || op.op === "add_to_set") ? [] : {};
      put(next);
      created = true;
    }
    node = next;
  }
  switch (op.op) {
    case "append":
    case "add_to_set": {
      if (!Array.isArray(node)) throw "not_a_list";
      if (op.op === "add_to_set" && node.some((v) => unorderedEqual(v, op.value))) return created;
      node.push(structuredClone(op.value));
      return true;
    }
    case "set_key": {
      if (!isObject(node)) throw "not_an_object";
      if (
        Object.hasOwn(node, op.key) && JSON.stringify(node[op.key]) === JSON.stringify(op.value)
      ) return created;
      define(node, op.key, structuredClone(op.value));
      return true;
    }
    case "del_key": {
      if (!isObject(node)) throw "not_an_object";
      if (!Object.hasOwn(node, op.key)) return false;
      delete node[op.key];
      return true;
    }
    case "merge": {
      if (!isObject(node)) throw "not_an_object";
      let any = created;
      for (const [k, v] of Object.entries(op.mapping)) {
        if (Object.hasOwn(node, k) && JSON.stringify(node[k]) === JSON.stringify(v)) continue;
        define(node, k, structuredClone(v));
        any = true;
      }
      return any;
    }
    case "increment": {
      if (!isObject(node)) throw "not_an_object";
      const had = Object.hasOwn(node, op.key);
      const current = had ? node[op.key] : 0;
      if (typeof current !== "number") throw "not_a_number";
      const sum = current + op.by;
      if (Math.abs(current) > max || Math.abs(sum) > max) throw "out_of_range";
      if (had && sum === current) return created;
      define(node, op.key, sum);
      return true;
    }
  }
}

/** Deep equality of JSON values, object key order ignored. */
function unorderedEqual(a: unknown, b: unknown): boolean {
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => unorderedEqual(v, b[i]));
  }
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length &&
    ka.every((k) =>
      Object.hasOwn(b, k) && unorderedEqual((a as JsonObject)[k], (b as JsonObject)[k])
    );
}

/** Freezes a JSON value and everything in it. */
function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null) {
    for (const k of Object.keys(v)) deepFreeze((v as JsonObject)[k]);
    Object.freeze(v);
  }
  return v;
}

// Few keys and small values, so that ops meet each other and the state's own values.
const KEYS = ["a", "b", "0", "1", "__proto__", "constructor"];
const keyArb = fc.constantFrom(...KEYS);
const leafArb = fc.oneof(
  fc.constantFrom(0, 1, -1, 2 ** 53 - 1, 0.5, "", "a", "1", true, false, null),
  fc.integer({ min: -3, max: 3 }),
);
/** Builds objects with defineProperty semantics, so "__proto__" is a plain key. */
const objectOf = (entries: [string, unknown][]): JsonObject => Object.fromEntries(entries);
const { value: valueArb } = fc.letrec<{ value: unknown; list: unknown[]; object: JsonObject }>((
  tie,
) => ({
  value: fc.oneof({ depthSize: "small" }, leafArb, tie("list"), tie("object")),
  list: fc.array(tie("value"), { maxLength: 4 }),
  object: fc.array(fc.tuple(keyArb, tie("value")), { maxLength: 4 }).map(objectOf),
}));
const stateArb: fc.Arbitrary<JsonObject> = fc
  .array(fc.tuple(keyArb, valueArb), { maxLength: 5 })
  .map(objectOf);
const pathArb: fc.Arbitrary<string> = fc.oneof(
  fc.array(keyArb, { maxLength: 3 }).map((s) => s.join(".")),
  fc.array(keyArb, { minLength: 1, maxLength: 3 }).map((s) => "/" + s.join("/")),
  fc.constantFrom("/a/-", "/a/01", "/0/1/a"),
);
/** Reorders the keys of every object in a value: add_to_set must still find it. */
function shuffled(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(shuffled);
  if (typeof v !== "object" || v === null) return v;
  return objectOf(Object.entries(v).reverse().map(([k, x]) => [k, shuffled(x)]));
}
const opArb: fc.Arbitrary<PatchOp> = fc.oneof(
  fc.tuple(pathArb, valueArb).map(([p, v]) => Append(p, v)),
  fc.tuple(pathArb, valueArb, fc.boolean()).map(([p, v, s]) => AddToSet(p, s ? shuffled(v) : v)),
  fc.tuple(pathArb, keyArb, valueArb).map(([p, k, v]) => SetKey(p, k, v)),
  fc.tuple(pathArb, keyArb).map(([p, k]) => DelKey(p, k)),
  fc.tuple(pathArb, fc.array(fc.tuple(keyArb, valueArb), { maxLength: 3 })).map(([p, e]) =>
    Merge(objectOf(e), p)
  ),
  fc.tuple(pathArb, keyArb, fc.constantFrom(1, -1, 0, 0.5, 2 ** 53 - 1, -(2 ** 53), 2 ** 53))
    .map(([p, k, by]) => Increment(p, k, by)),
);

Deno.test("applyOps() agrees with a copy-everything reference and never mutates its input", () => {
  fc.assert(
    fc.property(stateArb, fc.array(opArb, { maxLength: 12 }), (state, ops) => {
      const text = JSON.stringify(state);
      const opsText = JSON.stringify(ops);
      const want = reference(state, ops);
      deepFreeze(state);
      deepFreeze(ops);
      let got: JsonObject | PatchError;
      try {
        got = applyOps(state, ops);
      } catch (e) {
        if (!(e instanceof PatchError)) throw e;
        got = e;
      }
      assert.equal(JSON.stringify(state), text, "the state is unchanged");
      assert.equal(JSON.stringify(ops), opsText, "the ops are unchanged");
      if ("reason" in want) {
        assert.ok(got instanceof PatchError, `expected ${want.reason} at op ${want.op_index}`);
        assert.equal(got.details.reason, want.reason, got.message);
        assert.equal(got.details.op_index, want.op_index);
        return;
      }
      assert.ok(!(got instanceof PatchError), got instanceof PatchError ? got.message : "");
      // Same keys in the same order, same values.
      assert.equal(JSON.stringify(got), JSON.stringify(want.state));
      if (!want.changed) assert.equal(got, state, "a patch that changes nothing returns its input");
      else assert.notEqual(got, state);
      // The result stays a JSON state: no own "__proto__" became a prototype.
      assert.equal(Object.getPrototypeOf(got), Object.prototype);
      assert.deepEqual(JSON.parse(JSON.stringify(got)), JSON.parse(JSON.stringify(want.state)));
    }),
    { seed: 5150, numRuns: 3000 },
  );
});
