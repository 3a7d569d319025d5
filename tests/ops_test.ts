import assert from "node:assert/strict";
import { PatchError } from "../src/errors.ts";
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

/** Asserts that `f` throws a PatchError (never another class) and returns it. */
function patchError(f: () => unknown, details: Record<string, unknown> = {}): PatchError {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof PatchError, `expected a PatchError, got ${String(caught)}`);
  assert.equal(caught.code, "patch_error");
  assert.equal(typeof caught.details.reason, "string");
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
    for (const p of ["a..b", "a.", ".a", "."]) patchError(() => parsePath(p), { path: p });
  });
  await t.step("decodes JSON Pointers with ~0 and ~1", () => {
    assert.deepEqual(parsePath("/profile/tags"), ["profile", "tags"]);
    assert.deepEqual(parsePath("/a~1b/~0c/~01"), ["a/b", "~c", "~1"]);
    assert.deepEqual(parsePath("/"), [""]);
    assert.deepEqual(parsePath("/a//b"), ["a", "", "b"]);
    assert.deepEqual(parsePath("/a.b"), ["a.b"]);
  });
  await t.step("rejects bad ~ escapes", () => {
    for (const p of ["/a~", "/a~2", "/~x/b"]) patchError(() => parsePath(p), { field: "path" });
  });
  await t.step("caps paths at 1000 segments", () => {
    assert.equal(parsePath(Array(1000).fill("k").join(".")).length, 1000);
    patchError(() => parsePath(Array(1001).fill("k").join(".")), { field: "path" });
    patchError(() => applyOps({}, [SetKey("/k".repeat(1001), "k", 1)]), { op_index: 0 });
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
      const e = patchError(() => applyOps({ a: v }, [Append("a", 1)]), { path: "a", op_index: 0 });
      assert.match(e.message, /"a"/);
    }
    patchError(() => applyOps({}, [Append("", 1)]));
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
    patchError(() => applyOps({ t: {} }, [AddToSet("t", 1)]), { path: "t" });
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
      patchError(() => applyOps({ p: v }, [SetKey("p", "k", 1)]), { path: "p" });
    }
  });
  await t.step("del_key removes; absent keys and containers are no-ops that create nothing", () => {
    assert.deepEqual(apply({ a: 1, b: 2 }, [DelKey("", "a")]), { b: 2 });
    const state = { p: { a: 1 } };
    assert.equal(apply(state, [DelKey("p", "zz"), DelKey("q.r", "a"), DelKey("/q/r", "a")]), state);
    patchError(() => applyOps({ p: [1] }, [DelKey("p", "0")]), { path: "p" });
    patchError(() => applyOps({ p: "s" }, [DelKey("p.q", "a")]), { path: "p.q" });
  });
  await t.step("merge is shallow, keeps positions of existing keys and appends new ones", () => {
    const out = apply({ a: 1, n: { x: 1, y: 2 }, z: 0 }, [Merge({ n: { y: 3 }, b: 2, a: 5 })]);
    assert.deepEqual(out, { a: 5, n: { y: 3 }, z: 0, b: 2 });
    assert.deepEqual(Object.keys(out), ["a", "n", "z", "b"]);
    assert.deepEqual(apply({}, [Merge({ k: 1 }, "p.q")]), { p: { q: { k: 1 } } });
    assert.deepEqual(apply({}, [Merge({}, "p")]), { p: {} });
    patchError(() => applyOps({ p: [] }, [Merge({ k: 1 }, "p")]), { path: "p" });
  });
  await t.step("increment counts from 0 and requires finite numbers", () => {
    assert.deepEqual(
      apply({ s: { n: 2 } }, [Increment("s", "n"), Increment("s", "n", 0.5), Increment("t", "m")]),
      { s: { n: 3.5 }, t: { m: 1 } },
    );
    assert.deepEqual(apply({}, [Increment("", "n", -4)]), { n: -4 });
    for (const v of ["1", null, [], {}, true]) {
      patchError(() => applyOps({ n: v }, [Increment("", "n")]), { key: "n" });
    }
    patchError(() => applyOps({ n: Number.MAX_VALUE }, [Increment("", "n", Number.MAX_VALUE)]));
    patchError(() => applyOps({ s: "x" }, [Increment("s", "n")]), { path: "s" });
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
    for (const p of ["/items/2/x", "/items/01/x", "/items/-/x", "/items/-1/x", "/items/x/y"]) {
      patchError(() => applyOps(state, [SetKey(p, "k", 1)]), { path: p });
    }
    patchError(() => applyOps({ l: [[1]] }, [Append("/l/1", 2)]), { path: "/l/1" });
    assert.deepEqual(apply({ l: [[1]] }, [Append("/l/0", 2)]), { l: [[1, 2]] });
  });
  await t.step("dotted paths never index lists", () => {
    patchError(() => applyOps(state, [SetKey("items.0", "k", 1)]), { path: "items.0" });
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
    for (const p of ["nope", "profile.tags.0", "/profile/tags/2", "/profile/tags/01", "n.x"]) {
      const e = patchError(() => getPath(state, p), { path: p });
      assert.match(String(e.details.reason), /does not exist/);
    }
    for (const p of ["constructor", "toString", "__proto__", "hasOwnProperty", "profile.valueOf"]) {
      patchError(() => getPath(state, p), { path: p });
      patchError(() => getPath(state, `/${p.replace(".", "/")}`));
    }
    patchError(() => getPath(state, "a..b"));
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
    const cases: [unknown, string][] = [
      [null, "op"],
      [[], "op"],
      ["append", "op"],
      [42, "op"],
      [undefined, "op"],
      [new Date(0), "op"],
      [{}, "op"],
      [{ op: "push", path: "a", value: 1 }, "op"],
      [{ op: 1, path: "a", value: 1 }, "op"],
      [{ op: "append", value: 1 }, "path"],
      [{ op: "append", path: 1, value: 1 }, "path"],
      [{ op: "append", path: null, value: 1 }, "path"],
      [{ op: "append", path: "a..b", value: 1 }, "path"],
      [{ op: "append", path: "/a~2", value: 1 }, "path"],
      [{ op: "append", path: "a" }, "value"],
      [{ op: "append", path: "a", value: undefined }, "value"],
      [{ op: "add_to_set", path: "a" }, "value"],
      [{ op: "set_key", path: "a", key: "k" }, "value"],
      [{ op: "set_key", path: "a", value: 1 }, "key"],
      [{ op: "set_key", path: "a", key: 1, value: 1 }, "key"],
      [{ op: "del_key", path: "a" }, "key"],
      [{ op: "del_key", key: "k" }, "path"],
      [{ op: "merge" }, "mapping"],
      [{ op: "merge", mapping: null }, "mapping"],
      [{ op: "merge", mapping: [1] }, "mapping"],
      [{ op: "merge", mapping: "x" }, "mapping"],
      [{ op: "merge", mapping: {}, path: 3 }, "path"],
      [{ op: "merge", mapping: {}, path: null }, "path"],
      [{ op: "increment", path: "a" }, "key"],
      [{ op: "increment", path: "a", key: "k", by: "1" }, "by"],
      [{ op: "increment", path: "a", key: "k", by: null }, "by"],
      [{ op: "increment", path: "a", key: "k", by: NaN }, "by"],
      [{ op: "increment", path: "a", key: "k", by: Infinity }, "by"],
      [Object.create({ op: "append", path: "a", value: 1 }), "op"],
      [{ __proto__: { op: "append", path: "a", value: 1 } }, "op"],
    ];
    for (const [x, field] of cases) {
      patchError(() => opFromJson(x), { field });
      const e = patchError(() => opsFromJson([Append("ok", 1), x]), { field, op_index: 1 });
      assert.match(String(e.details.reason), /^Op 1: /);
      patchError(() => applyOps({}, [Append("ok", 1), x as PatchOp]), { field, op_index: 1 });
    }
  });
  await t.step("the list itself must be an array of at most 1000 ops", () => {
    for (const x of [null, {}, "[]", Append("a", 1)]) {
      patchError(() => opsFromJson(x), { field: "ops" });
    }
    assert.equal(opsFromJson(Array.from({ length: 1000 }, () => Append("a", 1))).length, 1000);
    patchError(() => opsFromJson(Array.from({ length: 1001 }, () => Append("a", 1))), {
      field: "ops",
      limit: 1000,
    });
    patchError(() => applyOps({}, "nope" as unknown as PatchOp[]), { field: "ops" });
    patchError(() => applyOps([] as unknown as JsonObject, []), { field: "state" });
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
      { op_index: 2, path: "text" },
    );
    assert.match(e.message, /No op of this patch was applied/);
    assert.deepEqual(state, before);
  });
});
