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

import { PatchError, type PatchReason } from "./errors.ts";
import type { JsonObject } from "./json.ts";
import { atIndex, MAX_OPS, parseOp } from "./ops/_parse.ts";
import { indexOf, splitPath } from "./ops/_path.ts";
import { runOps } from "./ops/_patch.ts";
import type {
  AddToSetOp,
  AppendOp,
  DelKeyOp,
  IncrementOp,
  JsonPatchOp,
  MergeOp,
  PatchOp,
  SetKeyOp,
} from "./ops/_types.ts";
import { isPlainObject, kindOf } from "./ops/_values.ts";

export type {
  AddToSetOp,
  AppendOp,
  DelKeyOp,
  IncrementOp,
  JsonObject,
  JsonPatchOp,
  MergeOp,
  PatchOp,
  SetKeyOp,
};

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
  return parseOp(x);
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
  return runOps(state, ops, undefined);
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
  const next = runOps(state, ops, inverse);
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
