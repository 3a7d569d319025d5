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
 * Errors: every failure is a {@link PatchError} whose `details.reason` is a
 * stable code (`unknown_op`, `missing_field`, `wrong_type`, `bad_path`,
 * `not_an_object`, `not_a_list`, `not_a_number`, `out_of_range`,
 * `too_many_ops`, and `path_not_found` from {@link getPath}), with the
 * sentence in `message` and `op_index`, `path`, `field` beside it.
 *
 * Numbers: `increment` works within ±(2^53 − 1), where JSON numbers count
 * exactly; a `by`, a stored counter or a sum beyond that is `out_of_range`.
 *
 * Cost: {@link applyOps} takes time in proportion to the ops and what they
 * change, not to the size of the state: a container is copied at most once
 * per call, and `add_to_set` finds values through an index of the list
 * built once per call.
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

import { patchCost } from "./_patch_cost.ts";
import { PatchError, type PatchReason } from "./errors.ts";

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
  /** A number to add, within ±(2^53 − 1). */
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

/**
 * One op of an RFC 6902 JSON Patch, as the changelog keeps them (`patch` of
 * a save, `undo` of a save or patch). `path` and `from` are JSON Pointers.
 *
 * @since 0.5.0
 */
export interface JsonPatchOp {
  /** The op name. */
  op: "add" | "remove" | "replace" | "move" | "copy" | "test";
  /** Where it applies. */
  path: string;
  /** The value of `add`, `replace` and `test`. */
  value?: unknown;
  /** The source of `move` and `copy`. */
  from?: string;
}

const OP_NAMES = "append, set_key, del_key, merge, increment, add_to_set";
const MAX_OPS = 1000;
const MAX_SEGMENTS = 1000;
/** The largest magnitude `increment` accepts or produces: 2^53 − 1, exact in a JSON number. */
const MAX_COUNTER = Number.MAX_SAFE_INTEGER;

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
 * @param by A number to add, within ±(2^53 − 1); 1 by default.
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
 * @throws {PatchError} When a dotted path has an empty segment or a pointer a bad `~` escape
 * (reason `bad_path`).
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

interface Path {
  /** The path as written, for messages. */
  text: string;
  segments: string[];
  /** A JSON Pointer (may index lists), not a dotted path. */
  pointer: boolean;
}

function splitPath(path: unknown): Path {
  if (typeof path !== "string") {
    throw new PatchError("wrong_type", `A path must be a string, not ${kindOf(path)}.`, {
      field: "path",
    });
  }
  const pointer = path.startsWith("/");
  let segments: string[] = [];
  if (pointer) {
    segments = path.slice(1).split("/").map((s) => {
      if (/~(?![01])/.test(s)) {
        throw new PatchError(
          "bad_path",
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
        "bad_path",
        `The path "${path}" has an empty segment; write keys separated by single dots, such as "profile.tags", or "" for the root.`,
        { field: "path", path },
      );
    }
  }
  if (segments.length > MAX_SEGMENTS) {
    throw new PatchError(
      "bad_path",
      `The path has ${segments.length} segments; at most ${MAX_SEGMENTS}.`,
      { field: "path" },
    );
  }
  return { text: path, segments, pointer };
}

/**
 * Parses one op from its wire form, strictly. Unknown extra fields are ignored;
 * `merge`'s `path` defaults to `""` and `increment`'s `by` to 1.
 *
 * @param x The untrusted value, e.g. one element of a tool's `ops` argument.
 * @returns A fresh op holding only the known fields.
 * @throws {PatchError} When `x` is not a well-formed op; `details.reason` says
 * how (`unknown_op`, `missing_field`, `wrong_type`, `bad_path`, `out_of_range`)
 * and `details.field` names the bad field.
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
      "wrong_type",
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
      if (Math.abs(by) > MAX_COUNTER) {
        throw new PatchError(
          "out_of_range",
          `The "by" of an increment op must lie within ±${MAX_COUNTER} (2^53 − 1), which JSON numbers carry exactly; ${by} does not. Store a larger count as a string, or in several counters.`,
          { field: "by", op },
        );
      }
      return { op, path: pathField(x, op), key: keyField(x, op), by };
    }
    default:
      throw typeof op === "string"
        ? new PatchError("unknown_op", `Unknown op "${op}"; use one of ${OP_NAMES}.`, {
          field: "op",
        })
        : new PatchError(
          op === undefined ? "missing_field" : "wrong_type",
          `Every op needs an "op" field naming one of ${OP_NAMES}.`,
          { field: "op" },
        );
  }
}

/** Options of {@link opsFromJson}. */
export interface OpsFromJsonOptions {
  /** The most ops a list may hold. Default 1,000. */
  maxOps?: number;
}

/**
 * Parses a list of wire ops (at most 1000 by default; an empty list is allowed).
 *
 * @param x The untrusted value, e.g. a tool's `ops` argument.
 * @param options The most ops allowed (`maxOps`).
 * @returns Fresh, validated ops.
 * @throws {PatchError} When `x` is not a list (`wrong_type`), is too long
 * (`too_many_ops`, with `limit` and `count`), or holds a malformed op
 * (`details.op_index` says which).
 *
 * @example Parsing a patch
 * ```ts
 * import { opsFromJson } from "@mcpstate/core";
 * opsFromJson([{ op: "append", path: "sources", value: "https://example.org" }]);
 * ```
 */
export function opsFromJson(x: unknown, options: OpsFromJsonOptions = {}): PatchOp[] {
  const limit = options.maxOps ?? MAX_OPS;
  if (!Array.isArray(x)) {
    throw new PatchError("wrong_type", `The ops must be a list of op objects, not ${kindOf(x)}.`, {
      field: "ops",
    });
  }
  if (x.length > limit) {
    throw new PatchError(
      "too_many_ops",
      `A patch holds at most ${limit} ops, not ${x.length}; send fewer ops per patch (split the work into several patches).`,
      { field: "ops", count: x.length, limit },
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
 * The cost is O(ops + what changes): each container on the way to a change is
 * copied once per call however many ops write into it, and `add_to_set` looks
 * values up in an index of the list built once per call.
 *
 * @param state The current state; its root must be a plain object.
 * @param ops The ops, in order; each is validated again as by {@link opFromJson}.
 * @returns The new state.
 * @throws {PatchError} When an op is malformed or cannot apply (`details.op_index`,
 * `details.reason`).
 *
 * @example Applying a patch
 * ```ts
 * import { applyOps, DelKey, SetKey } from "@mcpstate/core";
 * applyOps({ draft: "x" }, [SetKey("", "notes", "done"), DelKey("", "draft")]); // { notes: "done" }
 * ```
 */
export function applyOps(state: JsonObject, ops: readonly PatchOp[]): JsonObject {
  return run(state, ops, undefined);
}

/** {@link applyOps}, recording the inverse of each change in `inverse` (in the order made). */
function run(state: JsonObject, ops: readonly PatchOp[], inverse: JsonPatchOp[] | undefined) {
  if (!isPlainObject(state)) {
    throw new PatchError("wrong_type", `The state must be a plain object, not ${kindOf(state)}.`, {
      field: "state",
    });
  }
  if (!Array.isArray(ops)) {
    throw new PatchError(
      "wrong_type",
      `The ops must be a list of op objects, not ${kindOf(ops)}.`,
      {
        field: "ops",
      },
    );
  }
  const patch = new Patch(state, inverse);
  for (let i = 0; i < ops.length; i++) {
    const raw: unknown = ops[i];
    atIndex(i, () => patch.apply(opFromJson(raw)));
  }
  return patch.root;
}

/**
 * Applies ops as {@link applyOps} does, and also answers how to undo them:
 * an RFC 6902 JSON Patch (only `add`, `remove` and `replace`) that takes the
 * result back to `state`. It holds the previous values at the places the ops
 * changed and nothing else, found while applying: no diff of the states.
 *
 * @param state The current state; its root must be a plain object.
 * @param ops The ops, in order.
 * @returns The new state (the input itself when nothing changed) and its undo patch (empty then).
 * @throws {PatchError} As {@link applyOps} does.
 * @since 0.5.0
 *
 * @example Undo an append and a set_key
 * ```ts
 * import { Append, applyOpsWithUndo, SetKey } from "@mcpstate/core";
 * const { state, undo } = applyOpsWithUndo({ log: ["a"], n: 1 }, [Append("log", "b"), SetKey("", "n", 2)]);
 * state; // { log: ["a", "b"], n: 2 }
 * undo; // [{ op: "replace", path: "/n", value: 1 }, { op: "remove", path: "/log/1" }]
 * ```
 */
export function applyOpsWithUndo(
  state: JsonObject,
  ops: readonly PatchOp[],
): { state: JsonObject; undo: JsonPatchOp[] } {
  const inverse: JsonPatchOp[] = [];
  const next = run(state, ops, inverse);
  return { state: next, undo: inverse.reverse() };
}

/**
 * Selects the subtree at `path`, following own properties only.
 *
 * @param state A state or any JSON value.
 * @param path A dotted path or JSON Pointer; `""` selects `state` itself.
 * @returns The value at `path` (not a copy).
 * @throws {PatchError} When the path is malformed (`bad_path`) or does not
 * exist in `state` (`path_not_found`; `out_of_range` for a list index past the end).
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
      if (idx === undefined) throw missing(path, seg === "-" ? "out_of_range" : "bad_path");
      if (idx >= node.length) throw missing(path, "out_of_range");
      node = node[idx];
    } else if (isPlainObject(node) && Object.hasOwn(node, seg)) {
      node = node[seg];
    } else {
      throw missing(path, "path_not_found");
    }
  }
  return node;
}

function missing(path: string, reason: PatchReason): PatchError {
  return new PatchError(
    reason,
    `The path "${path}" does not exist in the state; load the whole state to see its shape.`,
    { field: "path", path },
  );
}

/**
 * One `applyOps` call. Containers the call created (copies and new ones) are
 * its own: referenced from one place only, never seen by the caller before
 * the call returns, so later ops write into them in place. Everything else
 * (the input, op values) is only read, and copied once before a write.
 */
class Patch {
  root: JsonObject;
  readonly #own = new WeakSet<object>();
  /** Membership indexes of lists that `add_to_set` wrote to or looked into. */
  readonly #sets = new Map<unknown[], SetIndex>();
  /** Canonical encodings of containers that are not the call's own (they never change). */
  readonly #encoded = new WeakMap<object, string | null>();

  /** Receives the inverse of each change, in the order made (see {@link applyOpsWithUndo}). */
  readonly #inverse: JsonPatchOp[] | undefined;

  constructor(state: JsonObject, inverse?: JsonPatchOp[]) {
    this.root = state;
    this.#inverse = inverse;
  }

  apply(op: PatchOp): void {
    const path = splitPath(op.path);
    switch (op.op) {
      case "append":
      case "add_to_set": {
        const nodes = this.#locate(path, true) as unknown[];
        const list = nodes.at(-1);
        if (list !== undefined && !Array.isArray(list)) {
          throw wrongTarget("not_a_list", op.op, path, list, "a list");
        }
        if (op.op === "add_to_set" && list !== undefined && this.#index(list).has(list, op.value)) {
          return;
        }
        const created = this.#created(nodes, path);
        const target = this.#writable(nodes, path, () => []) as unknown[];
        target.push(op.value);
        this.#sets.get(target)?.added(op.value);
        if (!created) this.#undo("remove", path, String(target.length - 1));
        return;
      }
      case "set_key": {
        const nodes = this.#locate(path, true) as unknown[];
        const o = targetObject(op.op, path, nodes.at(-1));
        if (o !== undefined && Object.hasOwn(o, op.key) && jsonEqual(o[op.key], op.value, true)) {
          return;
        }
        this.#undoKey(nodes, path, o, op.key);
        setOwn(this.#writable(nodes, path, () => ({})) as JsonObject, op.key, op.value);
        return;
      }
      case "del_key": {
        const nodes = this.#locate(path, false);
        if (nodes === undefined) return;
        const o = targetObject(op.op, path, nodes.at(-1));
        if (o === undefined || !Object.hasOwn(o, op.key)) return;
        this.#undo("add", path, op.key, o[op.key]);
        Reflect.deleteProperty(this.#writable(nodes, path, () => ({})), op.key);
        return;
      }
      case "increment": {
        const nodes = this.#locate(path, true) as unknown[];
        const o = targetObject(op.op, path, nodes.at(-1));
        const had = o !== undefined && Object.hasOwn(o, op.key);
        const current = had ? o[op.key] : 0;
        if (typeof current !== "number") {
          throw new PatchError(
            "not_a_number",
            `The increment op needs a number at key "${op.key}" of ${where(path)}, but it holds ${
              kindOf(current)
            }; count in another key, or replace it with set_key.`,
            { field: "key", path: path.text, key: op.key },
          );
        }
        const sum = current + op.by;
        if (!(Math.abs(current) <= MAX_COUNTER && Math.abs(sum) <= MAX_COUNTER)) {
          throw new PatchError(
            "out_of_range",
            `Incrementing key "${op.key}" of ${
              where(path)
            } by ${op.by} gives ${sum}, beyond ±${MAX_COUNTER} (2^53 − 1), where JSON numbers stop counting exactly. Store a larger count as a string, or in several counters.`,
            { field: "by", path: path.text, key: op.key },
          );
        }
        if (had && sum === current) return;
        this.#undoKey(nodes, path, o, op.key);
        setOwn(this.#writable(nodes, path, () => ({})) as JsonObject, op.key, sum);
        return;
      }
      case "merge": {
        const nodes = this.#locate(path, true) as unknown[];
        const o = targetObject(op.op, path, nodes.at(-1));
        const changes = Object.entries(op.mapping).filter(([k, v]) =>
          o === undefined || !Object.hasOwn(o, k) || !jsonEqual(o[k], v, true)
        );
        if (o !== undefined && changes.length === 0) return;
        if (this.#inverse && !this.#created(nodes, path)) {
          for (const [k] of changes) this.#undoKey(nodes, path, o, k);
        }
        const target = this.#writable(nodes, path, () => ({})) as JsonObject;
        for (const [k, v] of changes) setOwn(target, k, v);
        return;
      }
    }
  }

  /**
   * Whether the write about to happen creates containers on its way (`nodes`
   * has an absent node). The first one created is recorded as removed, which
   * undoes everything the write puts under it.
   */
  #created(nodes: unknown[], path: Path): boolean {
    const i = nodes.indexOf(undefined);
    if (i < 0) return false;
    if (this.#inverse) {
      this.#inverse.push({ op: "remove", path: pointerOf(path.segments.slice(0, i)) });
    }
    return true;
  }

  /** Records how to undo writing `key` of the object `o` (`undefined`: to be created) at `path`. */
  #undoKey(nodes: unknown[], path: Path, o: JsonObject | undefined, key: string): void {
    if (!this.#inverse || this.#created(nodes, path)) return;
    if (o !== undefined && Object.hasOwn(o, key)) this.#undo("replace", path, key, o[key]);
    else this.#undo("remove", path, key);
  }

  /** Records one inverse op at `path` + `/last`. */
  #undo(op: "add" | "remove" | "replace", path: Path, last: string, value?: unknown): void {
    if (!this.#inverse) return;
    const at = pointerOf([...path.segments, last]);
    this.#inverse.push(op === "remove" ? { op, path: at } : { op, path: at, value });
  }

  /**
   * The nodes from the root to the target of `path`, read only: `nodes[0]` is
   * the root, `nodes[i + 1]` the value at `segments[i]`, `undefined` where
   * absent (and below). Without `create`, an absent node on the way ends the
   * walk with `undefined`: there is nothing to change.
   */
  #locate(path: Path, create: boolean): unknown[] | undefined {
    const { segments, pointer } = path;
    const nodes: unknown[] = [this.root];
    let node: unknown = this.root;
    for (const seg of segments) {
      if (node === undefined) {
        if (!create) return undefined;
      } else if (Array.isArray(node) && pointer) {
        const idx = indexOf(seg);
        if (idx === undefined || idx >= node.length) {
          throw new PatchError(
            idx === undefined && seg !== "-" ? "bad_path" : "out_of_range",
            `The path "${path.text}" uses "${seg}" as an index into a list of length ${node.length}; list items must already exist (append adds one), indexed from 0.`,
            { field: "path", path: path.text },
          );
        }
        node = node[idx];
      } else if (isPlainObject(node)) {
        node = own(node, seg);
      } else {
        throw new PatchError(
          "not_an_object",
          `The path "${path.text}" runs into ${kindOf(node)} before segment "${seg}"; only objects${
            pointer ? " and lists" : " (and, in a JSON Pointer such as /items/0, lists)"
          } can be walked into.`,
          { field: "path", path: path.text },
        );
      }
      nodes.push(node);
    }
    return nodes;
  }

  /**
   * Makes every node that {@link Patch.#locate} found the call's own, top
   * down: copies what is not yet (once per call), creates what is absent
   * (`{}` on the way, `empty()` for the target), and returns the target.
   */
  #writable(nodes: unknown[], path: Path, empty: () => object): object {
    let parent: object | undefined;
    for (let i = 0; i < nodes.length; i++) {
      let node = nodes[i] as object | undefined;
      if (node === undefined || !this.#own.has(node)) {
        node = node === undefined ? (i === nodes.length - 1 ? empty() : {}) : this.#copy(node);
        this.#own.add(node);
        if (parent === undefined) this.root = node as JsonObject;
        else put(parent, path.segments[i - 1] as string, node);
        nodes[i] = node;
      }
      // A list on the way: its item below is about to change.
      if (Array.isArray(parent)) {
        this.#sets.get(parent)?.changed(indexOf(path.segments[i - 1] as string) as number);
      }
      parent = node;
    }
    return parent as object;
  }

  #copy(node: object): object {
    patchCost.copies++;
    if (!Array.isArray(node)) return { ...node };
    const copy = node.slice();
    const index = this.#sets.get(node);
    if (index) {
      this.#sets.delete(node);
      this.#sets.set(copy, index);
    }
    return copy;
  }

  #index(list: unknown[]): SetIndex {
    let index = this.#sets.get(list);
    if (!index) this.#sets.set(list, index = new SetIndex(list, (v) => this.#canonical(v)));
    return index;
  }

  /**
   * A text equal for two values exactly when `jsonEqual(a, b, false)` holds,
   * or `undefined` for values it can't say that of cheaply (cycles, nesting
   * deeper than {@link MAX_ENCODED_DEPTH}, an encoding over
   * {@link MAX_ENCODED_CHARS}, NaN and ±Infinity, functions, symbols):
   * those are compared with `jsonEqual` instead.
   */
  #canonical(value: unknown): string | undefined {
    const walk = (v: unknown, depth: number): string | null => {
      switch (typeof v) {
        case "string":
          return JSON.stringify(v);
        case "number":
          return Number.isFinite(v) ? String(v) : null;
        case "boolean":
          return v ? "true" : "false";
        case "bigint":
          return `${v}n`;
        case "undefined":
          return "u";
        case "object":
          break;
        default:
          return null;
      }
      if (v === null) return "null";
      if (depth > MAX_ENCODED_DEPTH) return null;
      const mine = this.#own.has(v);
      const known = mine ? undefined : this.#encoded.get(v);
      if (known !== undefined) return known;
      // Built with + (ropes in V8), not join(): a level costs its own items, not its subtree.
      let out: string | null = null;
      if (Array.isArray(v)) {
        let text = "[";
        let i = 0;
        for (; i < v.length && text.length <= MAX_ENCODED_CHARS; i++) {
          const part = walk(v[i], depth + 1);
          if (part === null) break;
          text += i === 0 ? part : "," + part;
        }
        if (i === v.length) out = text + "]";
      } else {
        const keys = Object.keys(v).sort();
        let text = "{";
        let i = 0;
        for (; i < keys.length && text.length <= MAX_ENCODED_CHARS; i++) {
          const k = keys[i] as string;
          const part = walk((v as JsonObject)[k], depth + 1);
          if (part === null) break;
          text += (i === 0 ? "" : ",") + JSON.stringify(k) + ":" + part;
        }
        if (i === keys.length) out = text + "}";
      }
      if (out !== null && out.length > MAX_ENCODED_CHARS) out = null;
      // Remembering the long ones is enough to keep shared subtrees from being
      // encoded over and over; short ones are cheaper to encode again.
      if (!mine && (out === null || out.length >= MEMO_CHARS)) this.#encoded.set(v, out);
      return out;
    };
    return walk(value, 0) ?? undefined;
  }
}

/** Deepest value {@link Patch.#canonical} encodes; deeper ones are compared directly. */
const MAX_ENCODED_DEPTH = 256;
/** Longest canonical encoding kept; a longer one is compared directly. */
const MAX_ENCODED_CHARS = 1 << 26;
/** Encodings at least this long are remembered per container for the call. */
const MEMO_CHARS = 128;

/**
 * What a list holds, for `add_to_set`: a count of each item's canonical
 * encoding, plus the positions whose item has none or has changed since
 * (compared with `jsonEqual`; at most one per op of the call).
 */
class SetIndex {
  readonly #encode: (v: unknown) => string | undefined;
  readonly #counts = new Map<string, number>();
  readonly #keys: (string | undefined)[] = [];
  readonly #odd = new Set<number>();

  constructor(list: unknown[], encode: (v: unknown) => string | undefined) {
    this.#encode = encode;
    for (let i = 0; i < list.length; i++) this.#push(list[i]);
  }

  /** Whether an item deep-equal to `value` (key order ignored) is in `list`, the indexed list. */
  has(list: readonly unknown[], value: unknown): boolean {
    const key = this.#encode(value);
    if (key === undefined) return list.some((v) => jsonEqual(v, value, false));
    if (this.#counts.has(key)) return true;
    for (const i of this.#odd) if (jsonEqual(list[i], value, false)) return true;
    return false;
  }

  /** `value` was appended to the list. */
  added(value: unknown): void {
    this.#push(value);
  }

  /** The item at `i` is about to change in place. */
  changed(i: number): void {
    const key = this.#keys[i];
    if (key === undefined) return;
    const n = this.#counts.get(key) as number;
    if (n === 1) this.#counts.delete(key);
    else this.#counts.set(key, n - 1);
    this.#keys[i] = undefined;
    this.#odd.add(i);
  }

  #push(value: unknown): void {
    patchCost.indexedItems++;
    const key = this.#encode(value);
    this.#keys.push(key);
    if (key === undefined) this.#odd.add(this.#keys.length - 1);
    else this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
  }
}

function targetObject(op: string, path: Path, target: unknown): JsonObject | undefined {
  if (target !== undefined && !isPlainObject(target)) {
    throw wrongTarget("not_an_object", op, path, target, "an object");
  }
  return target;
}

function wrongTarget(
  reason: PatchReason,
  op: string,
  path: Path,
  found: unknown,
  need: string,
): PatchError {
  return new PatchError(
    reason,
    `The ${op} op needs ${need} at ${where(path)}, but it holds ${
      kindOf(found)
    }; load the state to see its shape, and point the op at ${need} (or replace the value with set_key).`,
    { field: "path", path: path.text },
  );
}

function where(path: Path): string {
  return path.text === "" ? "the root" : `path "${path.text}"`;
}

/** Writes `child` at `seg` of a container the call owns. */
function put(parent: object, seg: string, child: unknown): void {
  if (Array.isArray(parent)) parent[indexOf(seg) as number] = child;
  else setOwn(parent as JsonObject, seg, child);
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
  return got === undefined
    ? new PatchError("missing_field", `The ${op} op needs a "${field}" field (${need}).`, {
      field,
      op,
    })
    : new PatchError(
      "wrong_type",
      `The "${field}" of a ${op} op must be ${need}, not ${kindOf(got)}.`,
      { field, op },
    );
}

/** Runs `f` for op `i`: a PatchError keeps its reason and gains `op_index`. */
function atIndex<T>(i: number, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof PatchError)) throw e;
    throw new PatchError(e.reason, `Op ${i}: ${e.message}`, { ...e.details, op_index: i });
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

/** Encodes path segments as a JSON Pointer. */
function pointerOf(segments: readonly string[]): string {
  let out = "";
  for (const s of segments) out += "/" + s.replaceAll("~", "~0").replaceAll("/", "~1");
  return out;
}
