/**
 * Token-budgeted reads: what to return when a state (or a part of it) is
 * larger than the caller, a model paying for every token, can afford to read.
 *
 * {@link outline} takes a JSON value and a budget in bytes (a whole number, at
 * least 256). When the value's compact JSON fits, it is returned as it is.
 * Otherwise the answer is an outline: a tree of nodes whose own compact JSON
 * takes at most the budget, showing keys, list lengths, sizes and previews,
 * where every part that is left out names the JSON Pointer that reads it.
 * {@link readPaths} answers a list of paths the same way, sharing one budget
 * among them, and {@link jsonSize} measures a value without building its JSON.
 * Everything here is pure: no I/O, and the input is never changed.
 *
 * ## The outline format
 *
 * Every node of an outline is an object of one of four fixed shapes. Data of
 * the state appears in only two places: as the keys of `entries`, and whole
 * under `value`. So a state whose own keys are `type`, `value`, `path` or
 * `$omitted` can never be mistaken for a part of the outline.
 *
 * - `{"value": V}`: `V` is the value at this place, complete and exact.
 * - `{"type": "object", "path": P, "bytes": B, "keys": N, "entries": {…}}`:
 *   an object of `N` keys. `entries`, when present, maps the keys shown (the
 *   first ones, in order) to their nodes; a key not in it was left out.
 * - `{"type": "list", "path": P, "bytes": B, "length": N, "items": {…}}`: a
 *   list of `N` items. `items`, when present, maps the decimal index of each
 *   item shown to its node. Items are shown from both ends (0, N−1, 1, N−2, …),
 *   so the newest entries of a log are seen too. An item left out is read with
 *   the pointer `P + "/" + index`.
 * - `{"type": "string", "path": P, "bytes": B, "preview": S}`: a string not
 *   shown whole; `preview`, when present, is its beginning (up to 64 code
 *   points, longer when budget is left at the end; never the whole string, and
 *   never half of a surrogate pair).
 *
 * A node with a `type` stands for a value that is not shown in full. Its
 * `path` is the value's RFC 6901 JSON Pointer from the root of the state
 * (`""` for the root, `~0` for `~` and `~1` for `/` inside a key): exactly
 * what `getPath` and the `paths` of a read take. Reading it returns the value,
 * or, when that is still over the budget, an outline of it alone, which looks
 * closer. `bytes` is the UTF-8 size of the complete value's compact JSON: what
 * reading it costs. An outline always has at least one node with a `type`.
 *
 * ## How the budget is spent
 *
 * Breadth first, so that the shape at the top is seen first: the root is
 * described, then its children, then theirs. On each level:
 * 1. each node that fits in its fair share of the budget left (divided among
 *    the nodes of the level not yet placed) is shown whole;
 * 2. the others are expanded in turns, one child (or a string's preview) at a
 *    time each, so a wide object does not starve its siblings. A child is
 *    shown whole at once when that costs at most 128 bytes (and 1/32 of the
 *    budget) more than describing it; otherwise it is described and waits for
 *    the next level. A node stops when its next child no longer fits.
 *
 * Budget left when nothing more fits lengthens the previews, shared fairly.
 * Cost: one measuring pass over the value, then work in proportion to what is
 * shown.
 *
 * @example A state over its budget
 * ```ts
 * import assert from "node:assert/strict";
 * import { getPath, outline } from "@mcpstate/core";
 *
 * const state = { title: "Runners", notes: "Arm64 builds finish first. ".repeat(100) };
 * const out = outline(state, 256);
 * assert(out.truncated);
 * assert.equal(out.sizeBytes, 2730); // the whole state
 * assert(JSON.stringify(out.outline).length <= 256);
 * // { type: "object", path: "", bytes: 2730, keys: 2, entries: {
 * //     title: { value: "Runners" },
 * //     notes: { type: "string", path: "/notes", bytes: 2702, preview: "Arm64 builds finish…" } } }
 * const notes = (out.outline as { entries: Record<string, { path: string }> }).entries.notes!;
 * assert.equal(getPath(state, notes.path), state.notes); // every path reads what was left out
 *
 * assert.deepEqual(outline({ a: 1 }, 256), { truncated: false, value: { a: 1 }, sizeBytes: 7 });
 * ```
 *
 * @module
 */

import { InvalidArgument, PatchError } from "./errors.ts";
import { getPath, parsePath } from "./ops.ts";
import {
  type Budgeted,
  escapeSegment,
  type ListNode,
  MAX_READ_PATHS,
  MIN_READ_BYTES,
  type ObjectNode,
  type OutlineNode,
  type OutlineOptions,
  type PathsRead,
  PREVIEW_CHARS,
  put,
  type ShownNode,
  type StringNode,
} from "./outline/_nodes.ts";
import { Outliner, split } from "./outline/_outliner.ts";
import { nativeSize, scalarSize, Sizer } from "./outline/_size.ts";

export type {
  Budgeted,
  ListNode,
  ObjectNode,
  OutlineNode,
  OutlineOptions,
  PathsRead,
  ShownNode,
  StringNode,
};
export { MAX_READ_PATHS, MIN_READ_BYTES, PREVIEW_CHARS };

/**
 * Returns `value` when its compact JSON fits in `maxBytes`, else an outline of
 * it whose compact JSON takes at most `maxBytes` (see the module doc for the
 * format).
 *
 * @param value A JSON value (what `JSON.parse` returns).
 * @param maxBytes The budget: a whole number of bytes, at least {@link MIN_READ_BYTES}.
 * @param options Where the value sits in its state.
 * @returns `{ truncated: false, value, sizeBytes }` or `{ truncated: true, outline, sizeBytes }`.
 * @throws {InvalidArgument} When `maxBytes` or `options.pointer` is not valid.
 *
 * @example A long list
 * ```ts
 * import { outline } from "@mcpstate/core";
 * const out = outline({ log: Array.from({ length: 1000 }, (_, i) => i) }, 256);
 * // { truncated: true, sizeBytes: 3899, outline: { type: "object", path: "", …,
 * //   entries: { log: { type: "list", path: "/log", bytes: 3891, length: 1000,
 * //     items: { "0": { value: 0 }, "1": { value: 1 }, "2": { value: 2 },
 * //       "997": { value: 997 }, "998": { value: 998 }, "999": { value: 999 } } } } } }
 * ```
 */
export function outline<T>(value: T, maxBytes: number, options: OutlineOptions = {}): Budgeted<T> {
  checkMaxBytes(maxBytes);
  const pointer = options.pointer ?? "";
  if (typeof pointer !== "string" || (pointer !== "" && !pointer.startsWith("/"))) {
    throw new InvalidArgument('pointer must be a JSON Pointer: "" or a string starting with "/".', {
      field: "pointer",
    });
  }
  const sizer = new Sizer();
  const sizeBytes = sizer.top(value);
  if (sizeBytes <= maxBytes) return { truncated: false, value, sizeBytes };
  return {
    truncated: true,
    outline: new Outliner(sizer, maxBytes).run(value, pointer, sizeBytes).node,
    sizeBytes,
  };
}

/**
 * Reads several paths of a state within one budget.
 *
 * Each path is dotted or a JSON Pointer, as `getPath` takes it, and is echoed
 * as the key of its answer. With no `maxBytes`, or when the values found take
 * at most `maxBytes` together, every value is returned whole in `values`.
 * Otherwise the budget is shared:
 * 1. each value has a least cost: its own size, or, when that is larger, the
 *    size of the smallest node that can describe it (`{"type": "list",
 *    "bytes": B, "length": N}`: about 40 bytes). When the least costs of the
 *    values found add up to more than `maxBytes`, no answer can keep to the
 *    budget, and the read is refused (`invalid_argument`, details `field:
 *    "max_bytes"` and `min`: the smallest budget these paths can be read
 *    with);
 * 2. the values are taken smallest first, and each one that fits in an equal
 *    share of the budget left (among the values not yet placed), while
 *    leaving the least costs of the others, is returned whole in `values`;
 * 3. each of the rest, in the same order, gets its least cost plus an equal
 *    share of what is left beyond the least costs of all of them: whole in
 *    `values` when it fits in that, else in `outline`, as an outline within
 *    that share.
 *
 * So the values and outlines together always take at most `maxBytes` (the
 * path keys are not counted). The top node of an outline has a `path` like
 * every other node, unless that pointer alone is longer than the outline's
 * share; its key reads it as well.
 *
 * A path that does not exist in the state (or a dotted one that runs into a
 * list) is listed in `missing`, and the other paths are answered all the same:
 * a batch read is not undone by one path the state no longer has.
 *
 * @param state The state.
 * @param paths At most {@link MAX_READ_PATHS} paths; a path given twice is answered once.
 * @param maxBytes The budget, at least {@link MIN_READ_BYTES}; `undefined` for no limit.
 * @returns The values, the outlines of those over budget, the missing paths.
 * @throws {InvalidArgument} When `paths` is not a list of at most 32 well-formed
 * paths, or `maxBytes` is not a whole number of at least 256, or is less than
 * the least costs of the values found add up to (details `min`).
 *
 * @example Two paths, one of them too large
 * ```ts
 * import { readPaths } from "@mcpstate/core";
 * const state = { title: "Runners", log: Array.from({ length: 1000 }, (_, i) => `run ${i}`) };
 * const r = readPaths(state, ["title", "/log", "/nope"], 512);
 * r.values; // { title: "Runners" }
 * r.outline?.["/log"]; // { type: "list", path: "/log", bytes: 9891, length: 1000, items: { … } }
 * r.missing; // ["/nope"]
 * ```
 */
export function readPaths(
  state: unknown,
  paths: readonly string[],
  maxBytes?: number,
): PathsRead {
  if (maxBytes !== undefined) checkMaxBytes(maxBytes);
  const pointers = checkPaths(paths);
  const sizer = new Sizer();
  const found: { path: string; pointer: string; value: unknown; size: number }[] = [];
  const missing: string[] = [];
  for (const [path, pointer] of pointers) {
    let value: unknown;
    try {
      value = getPath(state, path);
    } catch (e) {
      if (!(e instanceof PatchError)) throw e;
      missing.push(path);
      continue;
    }
    found.push({ path, pointer, value, size: sizer.top(value) });
  }
  let sizeBytes = 0;
  for (const f of found) sizeBytes += f.size;
  const values: Record<string, unknown> = {};
  const outlined: Record<string, OutlineNode> = {};
  const outlines = maxBytes === undefined || sizeBytes <= maxBytes
    ? new Map<unknown, OutlineNode>()
    : split(found, maxBytes, sizer);
  for (const f of found) {
    const o = outlines.get(f);
    if (o === undefined) put(values, f.path, f.value);
    else put(outlined, f.path, o);
  }
  return {
    values,
    ...(outlines.size > 0 ? { outline: outlined } : {}),
    ...(missing.length > 0 ? { missing } : {}),
    truncated: outlines.size > 0,
    sizeBytes,
  };
}

/**
 * The UTF-8 length of a JSON value's compact JSON text, `JSON.stringify`
 * without a replacer, measured without building the text.
 *
 * @param value A JSON value (what `JSON.parse` returns).
 * @returns Its size in bytes.
 *
 * @example
 * ```ts
 * import { jsonSize } from "@mcpstate/core";
 * jsonSize({ note: "héllo", n: [1, 2] }); // 27, as new TextEncoder().encode(JSON.stringify(…)).length
 * ```
 */
export function jsonSize(value: unknown): number {
  return typeof value === "object" && value !== null ? nativeSize(value) : scalarSize(value);
}

/**
 * Encodes path segments as a JSON Pointer (`""` for none).
 *
 * @param segments Object keys and list indexes, unescaped.
 * @returns The pointer, with `~` written `~0` and `/` written `~1`.
 *
 * @example
 * ```ts
 * import { toPointer } from "@mcpstate/core";
 * toPointer(["a/b", "~c", "0"]); // "/a~1b/~0c/0"
 * ```
 */
export function toPointer(segments: readonly string[]): string {
  let out = "";
  for (const s of segments) out += "/" + escapeSegment(s);
  return out;
}

// ---------------------------------------------------------------- validation

/**
 * Checks the arguments of a budgeted read before anything is read.
 *
 * @param maxBytes The budget, or `undefined` for none.
 * @param paths The paths, or `undefined` to read the whole state.
 * @throws {InvalidArgument} As {@link readPaths} does.
 */
export function checkReadArgs(maxBytes: unknown, paths: unknown): void {
  if (maxBytes !== undefined) checkMaxBytes(maxBytes);
  if (paths !== undefined) checkPaths(paths);
}

function checkMaxBytes(maxBytes: unknown): void {
  if (!Number.isSafeInteger(maxBytes) || (maxBytes as number) < MIN_READ_BYTES) {
    throw new InvalidArgument(
      `max_bytes must be a whole number of bytes, at least ${MIN_READ_BYTES}; omit it to read without a limit.`,
      { field: "max_bytes", min: MIN_READ_BYTES },
    );
  }
}

/** Validates the paths and returns each distinct one with its canonical pointer. */
function checkPaths(paths: unknown): Map<string, string> {
  if (!Array.isArray(paths)) {
    throw new InvalidArgument(
      `paths must be a list of at most ${MAX_READ_PATHS} paths, dotted ("profile.tags") or JSON Pointers ("/sources/0").`,
      { field: "paths" },
    );
  }
  if (paths.length > MAX_READ_PATHS) {
    throw new InvalidArgument(
      `A read takes at most ${MAX_READ_PATHS} paths, not ${paths.length}; read them in several calls.`,
      { field: "paths", limit: MAX_READ_PATHS, count: paths.length },
    );
  }
  const out = new Map<string, string>();
  for (let i = 0; i < paths.length; i++) {
    const path: unknown = paths[i];
    if (typeof path !== "string") {
      throw new InvalidArgument(
        `paths[${i}] must be a string: a dotted path or a JSON Pointer.`,
        { field: "paths", index: i },
      );
    }
    let segments: string[];
    try {
      segments = parsePath(path);
    } catch (e) {
      if (!(e instanceof PatchError)) throw e;
      throw new InvalidArgument(`paths[${i}]: ${e.message}`, { field: "paths", index: i, path });
    }
    out.set(path, toPointer(segments));
  }
  return out;
}
