/**
 * Patch ops: small, mergeable edits of a state that never conflict.
 *
 * Six ops exist, each a plain JSON object on the wire, built by a factory of
 * the same name: {@link Append}, {@link SetKey}, {@link DelKey}, {@link Merge},
 * {@link Increment} and {@link AddToSet}. {@link opFromJson} and
 * {@link opsFromJson} parse the wire form strictly; {@link applyOps} applies a
 * list of ops purely and atomically; {@link getPath} selects a subtree.
 *
 * Paths:
 * - Dotted: `"profile.tags"`; `""` is the root. Every segment is an object key;
 *   an empty segment (`"a..b"`, `".a"`, `"a."`) is an error.
 * - JSON Pointer (RFC 6901) when the path starts with `/`: `"/profile/tags"`,
 *   `~1` stands for `/` and `~0` for `~`. A segment may also index a list
 *   (`"/sources/0"`: decimal, no leading zeros, within bounds).
 * - Only own properties are walked: names that exist only on
 *   `Object.prototype` (`constructor`, `toString`, `__proto__`) are absent keys.
 *   `__proto__`, `constructor` and `prototype` are plain data keys, written as
 *   own properties; no op ever changes a prototype.
 * - A path has at most 1000 segments.
 *
 * Creation, when an op writes:
 * - a missing object key on the way to the target is created as `{}`;
 * - an absent target is created as `[]` for `append` and `add_to_set`, as `{}`
 *   for `set_key`, `increment` and `merge`;
 * - `del_key` of an absent key, or in an absent object, is a no-op that
 *   creates nothing;
 * - list indexes are never created: they must exist;
 * - any other value in the way (a string, a number, `null`, a list reached by
 *   a dotted path, a list where an object is needed or the reverse) is a
 *   {@link PatchError} naming the path.
 *
 * @example Applying ops
 * ```ts
 * import { AddToSet, Append, applyOps, Increment } from "@mcpstate/core";
 * const next = applyOps({ sources: [] }, [
 *   Append("sources", "https://example.org"),
 *   Increment("stats", "visits"),
 *   AddToSet("/profile/tags", "deno"),
 * ]);
 * // { sources: ["https://example.org"], stats: { visits: 1 }, profile: { tags: ["deno"] } }
 * ```
 *
 * @module
 */

import { PatchError } from "./errors.ts";

import type { JsonObject } from "./json.ts";
export type { JsonObject };

/** Appends `value` to the list at `path`. */
export interface AppendOp {
  /** The op name. */
  op: "append";
  /** Where the list is. */
  path: string;
  /** The JSON value to append. */
  value: unknown;
}

/** Sets `key` to `value` in the object at `path`. */
export interface SetKeyOp {
  /** The op name. */
  op: "set_key";
  /** Where the object is. */
  path: string;
  /** The key to set. */
  key: string;
  /** The JSON value to store. */
  value: unknown;
}

/** Removes `key` from the object at `path`; an absent key is a no-op. */
export interface DelKeyOp {
  /** The op name. */
  op: "del_key";
  /** Where the object is. */
  path: string;
  /** The key to remove. */
  key: string;
}

/** Copies every key of `mapping` into the object at `path` (shallow). */
export interface MergeOp {
  /** The op name. */
  op: "merge";
  /** The keys and values to copy. */
  mapping: JsonObject;
  /** Where the object is; `""` is the root. */
  path: string;
}

/** Adds `by` to the number at `key` of the object at `path` (absent: 0). */
export interface IncrementOp {
  /** The op name. */
  op: "increment";
  /** Where the object is. */
  path: string;
  /** The counter's key. */
  key: string;
  /** A finite number to add. */
  by: number;
}

/** Appends `value` to the list at `path` unless a deep-equal value is there. */
export interface AddToSetOp {
  /** The op name. */
  op: "add_to_set";
  /** Where the list is. */
  path: string;
  /** The JSON value to add. */
  value: unknown;
}

/** Any patch op. */
export type PatchOp = AppendOp | SetKeyOp | DelKeyOp | MergeOp | IncrementOp | AddToSetOp;

const OP_NAMES = "append, set_key, del_key, merge, increment, add_to_set";
const MAX_OPS = 1000;
const MAX_SEGMENTS = 1000;

/**
 * Builds an `append` op.
 *
 * @param path Where the list is; created as `[]` when absent.
 * @param value The JSON value to append.
 * @returns `{ op: "append", path, value }`.
 *
 * @example Appending a source
 * ```ts
 * import { Append } from "@mcpstate/core";
 * Append("sources", "https://arxiv.org/abs/1234"); // { op: "append", path: "sources", value: "..." }
 * ```
 */
export function Append(path: string, value: unknown): AppendOp {
  return { op: "append", path, value };
}

/**
 * Builds a `set_key` op.
 *
 * @param path Where the object is; created as `{}` when absent.
 * @param key The key to set.
 * @param value The JSON value to store.
 * @returns `{ op: "set_key", path, key, value }`.
 *
 * @example Setting a nested key
 * ```ts
 * import { SetKey } from "@mcpstate/core";
 * SetKey("profile", "name", "Ada"); // { op: "set_key", path: "profile", key: "name", value: "Ada" }
 * ```
 */
export function SetKey(path: string, key: string, value: unknown): SetKeyOp {
  return { op: "set_key", path, key, value };
}

/**
 * Builds a `del_key` op. Deleting an absent key is a no-op.
 *
 * @param path Where the object is.
 * @param key The key to remove.
 * @returns `{ op: "del_key", path, key }`.
 *
 * @example Removing a draft
 * ```ts
 * import { DelKey } from "@mcpstate/core";
 * DelKey("", "draft"); // { op: "del_key", path: "", key: "draft" }
 * ```
 */
export function DelKey(path: string, key: string): DelKeyOp {
  return { op: "del_key", path, key };
}

/**
 * Builds a shallow `merge` op.
 *
 * @param mapping The keys and values to copy into the object at `path`.
 * @param path Where the object is; the root by default.
 * @returns `{ op: "merge", mapping, path }`.
 *
 * @example Merging into the root
 * ```ts
 * import { Merge } from "@mcpstate/core";
 * Merge({ notes: "arm64 wins" }); // { op: "merge", mapping: { notes: "arm64 wins" }, path: "" }
 * ```
 */
export function Merge(mapping: JsonObject, path = ""): MergeOp {
  return { op: "merge", mapping, path };
}

/**
 * Builds an `increment` op: a commutative counter.
 *
 * @param path Where the object holding the counter is.
 * @param key The counter's key; an absent key counts from 0.
 * @param by A finite number to add, 1 by default.
 * @returns `{ op: "increment", path, key, by }`.
 *
 * @example Counting visits
 * ```ts
 * import { Increment } from "@mcpstate/core";
 * Increment("stats", "visits"); // { op: "increment", path: "stats", key: "visits", by: 1 }
 * ```
 */
export function Increment(path: string, key: string, by = 1): IncrementOp {
  return { op: "increment", path, key, by };
}

/**
 * Builds an `add_to_set` op: commutative and idempotent.
 *
 * @param path Where the list is; created as `[]` when absent.
 * @param value The JSON value to add unless a deep-equal one (key order ignored) is present.
 * @returns `{ op: "add_to_set", path, value }`.
 *
 * @example Tagging
 * ```ts
 * import { AddToSet } from "@mcpstate/core";
 * AddToSet("tags", "deno"); // { op: "add_to_set", path: "tags", value: "deno" }
 * ```
 */
export function AddToSet(path: string, value: unknown): AddToSetOp {
  return { op: "add_to_set", path, value };
}

/**
 * Splits a path into its segments (dotted, or a JSON Pointer when it starts with `/`).
 *
 * @param path The path; `""` is the root.
 * @returns The decoded segments, `[]` for the root.
 * @throws {PatchError} When a dotted path has an empty segment or a pointer a bad `~` escape.
 *
 * @example Both syntaxes
 * ```ts
 * import { parsePath } from "@mcpstate/core";
 * parsePath("profile.tags"); // ["profile", "tags"]
 * parsePath("/a~1b/~0c/0"); // ["a/b", "~c", "0"]
 * ```
 */
export function parsePath(path: string): string[] {
  return splitPath(path).segments;
}

function splitPath(path: unknown): { segments: string[]; pointer: boolean } {
  if (typeof path !== "string") {
    throw new PatchError(`A path must be a string, not ${kindOf(path)}.`, { field: "path" });
  }
  const pointer = path.startsWith("/");
  let segments: string[] = [];
  if (pointer) {
    segments = path.slice(1).split("/").map((s) => {
      if (/~(?![01])/.test(s)) {
        throw new PatchError(
          `The JSON Pointer "${path}" has a bad escape: "~" must be followed by 0 (for ~) or 1 (for /).`,
          { field: "path", path },
        );
      }
      return s.replace(/~[01]/g, (m) => m === "~1" ? "/" : "~");
    });
  } else if (path !== "") {
    segments = path.split(".");
    if (segments.includes("")) {
      throw new PatchError(
        `The path "${path}" has an empty segment; write keys separated by single dots, such as "profile.tags", or "" for the root.`,
        { field: "path", path },
      );
    }
  }
  if (segments.length > MAX_SEGMENTS) {
    throw new PatchError(`The path has ${segments.length} segments; at most ${MAX_SEGMENTS}.`, {
      field: "path",
    });
  }
  return { segments, pointer };
}

/**
 * Parses one op from its wire form, strictly. Unknown extra fields are ignored;
 * `merge`'s `path` defaults to `""` and `increment`'s `by` to 1.
 *
 * @param x The untrusted value, e.g. one element of a tool's `ops` argument.
 * @returns A fresh op holding only the known fields.
 * @throws {PatchError} When `x` is not a well-formed op; `details.field` names the bad field.
 *
 * @example Parsing a wire op
 * ```ts
 * import { opFromJson } from "@mcpstate/core";
 * opFromJson({ op: "increment", path: "stats", key: "visits" }); // { ..., by: 1 }
 * ```
 */
export function opFromJson(x: unknown): PatchOp {
  if (!isPlainObject(x)) {
    throw new PatchError(
      `An op must be an object such as {"op": "append", "path": "notes", "value": "..."}, not ${
        kindOf(x)
      }.`,
      { field: "op" },
    );
  }
  const op = own(x, "op");
  switch (op) {
    case "append":
    case "add_to_set":
      return { op, path: pathField(x, op), value: valueField(x, op) };
    case "set_key":
      return { op, path: pathField(x, op), key: keyField(x, op), value: valueField(x, op) };
    case "del_key":
      return { op, path: pathField(x, op), key: keyField(x, op) };
    case "merge": {
      const mapping = own(x, "mapping");
      if (!isPlainObject(mapping)) {
        throw fieldError(op, "mapping", mapping, "an object of keys to copy");
      }
      return { op, mapping, path: own(x, "path") === undefined ? "" : pathField(x, op) };
    }
    case "increment": {
      const raw = own(x, "by");
      const by = raw === undefined ? 1 : raw;
      if (typeof by !== "number" || !Number.isFinite(by)) {
        throw fieldError(op, "by", by, "a finite number");
      }
      return { op, path: pathField(x, op), key: keyField(x, op), by };
    }
    default:
      throw new PatchError(
        typeof op === "string"
          ? `Unknown op "${op}"; use one of ${OP_NAMES}.`
          : `Every op needs an "op" field naming one of ${OP_NAMES}.`,
        { field: "op" },
      );
  }
}

/**
 * Parses a list of wire ops (at most 1000; an empty list is allowed).
 *
 * @param x The untrusted value, e.g. a tool's `ops` argument.
 * @returns Fresh, validated ops.
 * @throws {PatchError} When `x` is not a list, is too long, or holds a malformed op
 * (`details.op_index` says which).
 *
 * @example Parsing a patch
 * ```ts
 * import { opsFromJson } from "@mcpstate/core";
 * opsFromJson([{ op: "append", path: "sources", value: "https://example.org" }]);
 * ```
 */
export function opsFromJson(x: unknown): PatchOp[] {
  if (!Array.isArray(x)) {
    throw new PatchError(`The ops must be a list of op objects, not ${kindOf(x)}.`, {
      field: "ops",
    });
  }
  if (x.length > MAX_OPS) {
    throw new PatchError(
      `A patch holds at most ${MAX_OPS} ops, not ${x.length}; send fewer ops per patch.`,
      { field: "ops", count: x.length, limit: MAX_OPS },
    );
  }
  // An index loop, not map(): a hole in the list is a malformed op, not one to skip.
  const out: PatchOp[] = [];
  for (let i = 0; i < x.length; i++) {
    const op: unknown = x[i];
    out.push(atIndex(i, () => opFromJson(op)));
  }
  return out;
}

/**
 * Applies ops to a state, purely: the input is never mutated (the result may
 * share untouched subtrees with it). Either every op applies or the call
 * throws. When nothing changes, the input object itself is returned.
 *
 * @param state The current state; its root must be a plain object.
 * @param ops The ops, in order; each is validated again as by {@link opFromJson}.
 * @returns The new state.
 * @throws {PatchError} When an op is malformed or cannot apply (`details.op_index`).
 *
 * @example Applying a patch
 * ```ts
 * import { applyOps, DelKey, SetKey } from "@mcpstate/core";
 * applyOps({ draft: "x" }, [SetKey("", "notes", "done"), DelKey("", "draft")]); // { notes: "done" }
 * ```
 */
export function applyOps(state: JsonObject, ops: readonly PatchOp[]): JsonObject {
  if (!isPlainObject(state)) {
    throw new PatchError(`The state must be a plain object, not ${kindOf(state)}.`, {
      field: "state",
    });
  }
  if (!Array.isArray(ops)) {
    throw new PatchError(`The ops must be a list of op objects, not ${kindOf(ops)}.`, {
      field: "ops",
    });
  }
  let out = state;
  for (let i = 0; i < ops.length; i++) {
    const raw: unknown = ops[i];
    const current = out;
    out = atIndex(i, () => applyOp(current, opFromJson(raw)));
  }
  return out;
}

/**
 * Selects the subtree at `path`, following own properties only.
 *
 * @param state A state or any JSON value.
 * @param path A dotted path or JSON Pointer; `""` selects `state` itself.
 * @returns The value at `path` (not a copy).
 * @throws {PatchError} When the path is malformed or does not exist in `state`.
 *
 * @example Selecting a list item
 * ```ts
 * import { getPath } from "@mcpstate/core";
 * getPath({ profile: { tags: ["a", "b"] } }, "/profile/tags/1"); // "b"
 * ```
 */
export function getPath(state: unknown, path: string): unknown {
  const { segments, pointer } = splitPath(path);
  let node = state;
  for (const seg of segments) {
    if (Array.isArray(node) && pointer) {
      const idx = indexOf(seg);
      if (idx === undefined || idx >= node.length) throw missing(path);
      node = node[idx];
    } else if (isPlainObject(node) && Object.hasOwn(node, seg)) {
      node = node[seg];
    } else {
      throw missing(path);
    }
  }
  return node;
}

function missing(path: string): PatchError {
  return new PatchError(
    `The path "${path}" does not exist in the state; load the whole state to see its shape.`,
    { field: "path", path },
  );
}

function applyOp(state: JsonObject, op: PatchOp): JsonObject {
  const { path } = op;
  switch (op.op) {
    case "append":
    case "add_to_set":
      return update(state, path, true, (list) => {
        if (list === undefined) return [op.value];
        if (!Array.isArray(list)) throw wrongTarget(op.op, path, list, "a list");
        if (op.op === "add_to_set" && list.some((v) => jsonEqual(v, op.value, false))) return list;
        return [...list, op.value];
      });
    case "set_key":
      return update(state, path, true, (obj) => {
        const o = targetObject(op.op, path, obj);
        return Object.hasOwn(o, op.key) && jsonEqual(o[op.key], op.value, true)
          ? o
          : setOwn({ ...o }, op.key, op.value);
      });
    case "del_key":
      return update(state, path, false, (obj) => {
        if (obj === undefined) return obj;
        const o = targetObject(op.op, path, obj);
        if (!Object.hasOwn(o, op.key)) return o;
        const copy = { ...o };
        Reflect.deleteProperty(copy, op.key);
        return copy;
      });
    case "increment":
      return update(state, path, true, (obj) => {
        const o = targetObject(op.op, path, obj);
        const had = Object.hasOwn(o, op.key);
        const current = had ? o[op.key] : 0;
        if (typeof current !== "number") {
          throw new PatchError(
            `increment needs a number at key "${op.key}" of path "${path}", but it holds ${
              kindOf(current)
            }.`,
            { field: "key", path, key: op.key },
          );
        }
        const sum = current + op.by;
        if (!Number.isFinite(sum)) {
          throw new PatchError(`Incrementing key "${op.key}" of path "${path}" overflows.`, {
            field: "by",
            path,
            key: op.key,
          });
        }
        return had && sum === current ? o : setOwn({ ...o }, op.key, sum);
      });
    case "merge":
      return update(state, path, true, (obj) => {
        let o = targetObject(op.op, path, obj);
        let copied = obj === undefined;
        for (const [k, v] of Object.entries(op.mapping)) {
          if (Object.hasOwn(o, k) && jsonEqual(o[k], v, true)) continue;
          if (!copied) [o, copied] = [{ ...o }, true];
          setOwn(o, k, v);
        }
        return o;
      });
  }
}

/**
 * Rebuilds the spine from the root to the target at `path`, copying on write.
 * `leaf` gets the target (`undefined` when absent) and returns its new value;
 * returning the same value leaves every ancestor unchanged.
 */
function update(
  root: JsonObject,
  path: string,
  create: boolean,
  leaf: (target: unknown) => unknown,
): JsonObject {
  const { segments, pointer } = splitPath(path);
  const walk = (node: unknown, i: number): unknown => {
    const seg = segments[i];
    if (seg === undefined) return leaf(node);
    if (node === undefined) {
      if (!create) return node;
      node = {};
    }
    if (Array.isArray(node) && pointer) {
      const idx = indexOf(seg);
      if (idx === undefined || idx >= node.length) {
        throw new PatchError(
          `The path "${path}" uses "${seg}" as an index into a list of length ${node.length}; list items must already exist (append adds one).`,
          { field: "path", path },
        );
      }
      const child = walk(node[idx], i + 1);
      if (child === node[idx]) return node;
      const copy = node.slice();
      copy[idx] = child;
      return copy;
    }
    if (!isPlainObject(node)) {
      throw new PatchError(
        `The path "${path}" runs into ${kindOf(node)} before segment "${seg}"; only objects${
          pointer ? " and lists" : " (and, in a JSON Pointer such as /items/0, lists)"
        } can be walked into.`,
        { field: "path", path },
      );
    }
    const before = own(node, seg);
    const child = walk(before, i + 1);
    return child === before ? node : setOwn({ ...node }, seg, child);
  };
  return walk(root, 0) as JsonObject;
}

function targetObject(op: string, path: string, target: unknown): JsonObject {
  if (target === undefined) return {};
  if (!isPlainObject(target)) throw wrongTarget(op, path, target, "an object");
  return target;
}

function wrongTarget(op: string, path: string, found: unknown, need: string): PatchError {
  return new PatchError(
    `${op} needs ${need} at ${path === "" ? "the root" : `path "${path}"`}, but it holds ${
      kindOf(found)
    }.`,
    { field: "path", path },
  );
}

function pathField(x: JsonObject, op: string): string {
  const path = own(x, "path");
  if (typeof path !== "string") throw fieldError(op, "path", path, "a string");
  splitPath(path);
  return path;
}

function keyField(x: JsonObject, op: string): string {
  const key = own(x, "key");
  if (typeof key !== "string") throw fieldError(op, "key", key, "a string");
  return key;
}

function valueField(x: JsonObject, op: string): unknown {
  const value = own(x, "value");
  if (value === undefined) throw fieldError(op, "value", value, "a JSON value");
  return value;
}

function fieldError(op: string, field: string, got: unknown, need: string): PatchError {
  return new PatchError(
    got === undefined
      ? `The ${op} op needs a "${field}" field (${need}).`
      : `The "${field}" of a ${op} op must be ${need}, not ${kindOf(got)}.`,
    { field, op },
  );
}

function atIndex<T>(i: number, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof PatchError)) throw e;
    const { reason, ...rest } = e.details;
    throw new PatchError(`Op ${i}: ${String(reason)}`, { op_index: i, ...rest });
  }
}

function own(obj: JsonObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

function setOwn(obj: JsonObject, key: string, value: unknown): JsonObject {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  return obj;
}

function indexOf(seg: string): number | undefined {
  return /^(0|[1-9][0-9]*)$/.test(seg) ? Number(seg) : undefined;
}

function isPlainObject(x: unknown): x is JsonObject {
  if (typeof x !== "object" || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

function kindOf(x: unknown): string {
  if (x === null || x === undefined) return String(x);
  if (Array.isArray(x)) return "a list";
  return typeof x === "object" ? "an object" : `a ${typeof x}`;
}

/**
 * JSON deep equality; `ordered` also requires object keys in the same order.
 * Iterative, so any depth compares; a pair of objects met again (a shared
 * subtree, a cycle) is not compared twice, so it always terminates.
 */
function jsonEqual(a: unknown, b: unknown, ordered: boolean): boolean {
  const todo: [unknown, unknown][] = [[a, b]];
  let seen: Map<object, Set<object>> | undefined;
  for (let pair = todo.pop(); pair !== undefined; pair = todo.pop()) {
    const [x, y] = pair;
    if (x === y) continue;
    if (typeof x !== "object" || typeof y !== "object" || x === null || y === null) return false;
    seen ??= new Map();
    let partners = seen.get(x);
    if (partners?.has(y)) continue;
    if (!partners) seen.set(x, partners = new Set());
    partners.add(y);
    if (Array.isArray(x) || Array.isArray(y)) {
      if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length) return false;
      for (let i = 0; i < x.length; i++) todo.push([x[i], y[i]]);
      continue;
    }
    const kx = Object.keys(x);
    const ky = Object.keys(y);
    if (kx.length !== ky.length) return false;
    for (let i = 0; i < kx.length; i++) {
      const k = kx[i] as string;
      if (ordered ? ky[i] !== k : !Object.hasOwn(y, k)) return false;
      todo.push([(x as JsonObject)[k], (y as JsonObject)[k]]);
    }
  }
  return true;
}
