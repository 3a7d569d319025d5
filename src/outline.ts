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

/** The smallest budget a read accepts, in bytes. */
export const MIN_READ_BYTES = 256;

/** The most paths one read accepts. */
export const MAX_READ_PATHS = 32;

/** The most code points a string's `preview` holds while the budget is spent breadth first. */
export const PREVIEW_CHARS = 64;

/** A value shown complete and exact. */
export interface ShownNode {
  /** The value at this place. */
  value: unknown;
}

/** An object that is not shown in full. */
export interface ObjectNode {
  /** Always `"object"`. */
  type: "object";
  /** Its JSON Pointer from the root of the state. */
  path: string;
  /** The UTF-8 size of its compact JSON. */
  bytes: number;
  /** How many keys it has. */
  keys: number;
  /** The keys shown (the first ones, in order) and their nodes. */
  entries?: Record<string, OutlineNode>;
}

/** A list that is not shown in full. */
export interface ListNode {
  /** Always `"list"`. */
  type: "list";
  /** Its JSON Pointer from the root of the state. */
  path: string;
  /** The UTF-8 size of its compact JSON. */
  bytes: number;
  /** How many items it has. */
  length: number;
  /** The items shown, by decimal index, and their nodes. */
  items?: Record<string, OutlineNode>;
}

/** A string that is not shown in full. */
export interface StringNode {
  /** Always `"string"`. */
  type: "string";
  /** Its JSON Pointer from the root of the state. */
  path: string;
  /** The UTF-8 size of its compact JSON (quotes and escapes included). */
  bytes: number;
  /** Its beginning: up to {@link PREVIEW_CHARS} code points (more when budget is left), never all of it. */
  preview?: string;
}

/** One node of an outline: a value shown whole, or a description of one that is not. */
export type OutlineNode = ShownNode | ObjectNode | ListNode | StringNode;

/** Answer of {@link outline}: the value itself, or an outline of it. */
export type Budgeted<T = unknown> =
  | {
    /** Nothing was left out. */
    truncated: false;
    /** The value, unchanged (the same reference). */
    value: T;
    /** The UTF-8 size of its compact JSON. */
    sizeBytes: number;
  }
  | {
    /** Something was left out. */
    truncated: true;
    /** The outline; its compact JSON takes at most the budget. */
    outline: OutlineNode;
    /** The UTF-8 size of the whole value's compact JSON. */
    sizeBytes: number;
  };

/** Options of {@link outline}. */
export interface OutlineOptions {
  /**
   * The JSON Pointer of the value inside its state, so that the paths in the
   * outline read from the state's root. Default `""`: the value is the root.
   */
  pointer?: string;
}

/** Answer of {@link readPaths}. */
export interface PathsRead {
  /** Each path (as passed) whose value is returned whole, to that value. */
  values: Record<string, unknown>;
  /** Each path (as passed) whose value was over its share of the budget, to its outline. */
  outline?: Record<string, OutlineNode>;
  /** The paths (as passed) that do not exist in the state; absent when none. */
  missing?: string[];
  /** Whether anything was left out: `true` exactly when `outline` is present. */
  truncated: boolean;
  /** The sum of the UTF-8 sizes of the compact JSON of every value found. */
  sizeBytes: number;
}

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

/** Decides which values are outlined, and outlines them (see {@link readPaths}). */
function split(
  found: { pointer: string; value: unknown; size: number }[],
  maxBytes: number,
  sizer: Sizer,
): Map<unknown, OutlineNode> {
  const order = found.map((f, i) => ({ f, i })).sort((a, b) => a.f.size - b.f.size || a.i - b.i);
  const least = order.map(({ f }) => Math.min(f.size, leastNode(f.value, f.size, sizer)));
  // What the values not yet placed need at the least, so that each still gets an answer.
  let reserve = 0;
  for (const n of least) reserve += n;
  if (reserve > maxBytes) {
    throw new InvalidArgument(
      `max_bytes ${maxBytes} is too small for these ${order.length} paths: the shortest answer for each takes ${reserve} bytes in all. Pass max_bytes of at least ${reserve}, or fewer paths.`,
      { field: "max_bytes", min: reserve },
    );
  }
  let left = maxBytes;
  let k = 0;
  for (; k < order.length; k++) {
    const { f } = order[k]!;
    const others = reserve - least[k]!;
    if (f.size > Math.floor(left / (order.length - k)) || left - f.size < others) break;
    left -= f.size;
    reserve = others;
  }
  const outlines = new Map<unknown, OutlineNode>();
  for (; k < order.length; k++) {
    const { f } = order[k]!;
    reserve -= least[k]!;
    // Its least cost, and an equal part of what the least costs of all leave.
    const share = least[k]! + Math.floor((left - reserve - least[k]!) / (order.length - k));
    if (f.size <= share) {
      left -= f.size;
      continue;
    }
    const done = new Outliner(sizer, share).run(f.value, f.pointer, f.size);
    outlines.set(f, done.node);
    left -= done.used;
  }
  return outlines;
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

/** Sets an own data property (so `__proto__` is a key like any other). */
function put(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(obj, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else {
    obj[key] = value;
  }
}

function escapeSegment(s: string): string {
  return s.includes("~") || s.includes("/") ? s.replaceAll("~", "~0").replaceAll("/", "~1") : s;
}

// ---------------------------------------------------------------- sizes

/** Containers at least this large keep their size, so measuring them again costs nothing. */
const MEMO_MIN = 256;

/** Strings at least this long are measured by the engine's own JSON encoder. */
const LONG_STRING = 64;

/**
 * Strings at least this long keep their size too, so a long string is
 * measured once when its parent is and not again when it is shown. (The
 * engine computes a string's hash once and keeps it; a very long string's
 * hash comes from its length alone.)
 */
const LONG_STRING_MEMO = 4096;

const encoder = new TextEncoder();
let scratch: Uint8Array | null = null;

/** The UTF-8 length of a well-formed string, encoded in chunks into one reused buffer. */
function utf8Length(text: string): number {
  scratch ??= new Uint8Array(1 << 16);
  if (text.length * 3 <= scratch.length) return encoder.encodeInto(text, scratch).written;
  let total = 0;
  for (let pos = 0; pos < text.length;) {
    const r = encoder.encodeInto(pos === 0 ? text : text.slice(pos), scratch);
    pos += r.read;
    total += r.written;
  }
  return total;
}

/** The UTF-8 length of `JSON.stringify(v)`, which must be JSON text. */
function nativeSize(v: unknown): number {
  const text = JSON.stringify(v);
  if (typeof text !== "string") {
    throw new TypeError(`Only JSON values can be measured, not ${typeof v}.`);
  }
  return utf8Length(text);
}

/**
 * Measures compact JSON sizes. A container is measured by the engine's own
 * `JSON.stringify` (several times faster than any walk in JavaScript), which
 * costs its whole size each time; an outline measures the root, then only the
 * children it shows, so this usually stays near one pass. Should the shown
 * parts nest so that the total passes twice the size of the first value
 * measured (a deep chain of large objects), a walk that remembers the size of
 * every container of {@link MEMO_MIN} bytes or more takes over, so the cost
 * stays within a few passes over the value however deep it is.
 */
class Sizer {
  readonly #memo = new Map<object, number>();
  readonly #strings = new Map<string, number>();
  readonly #keys = new Map<object, string[]>();
  #native = 0;
  #cap = -1;

  /**
   * Measures a value an outline starts from: an object by its keys and the
   * sizes of its values, so the values it will show next are measured once.
   */
  top(v: unknown): number {
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      const n = this.of(v);
      this.#grant(n);
      return n;
    }
    const known = this.#memo.get(v);
    if (known !== undefined) return known;
    const keys = Object.keys(v);
    this.#keys.set(v, keys);
    let n = keys.length > 0 ? keys.length * 2 + 1 : 2;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      n += stringSize(k) + this.of((v as Record<string, unknown>)[k]);
    }
    this.#grant(n);
    if (n >= MEMO_MIN) this.#memo.set(v, n);
    return n;
  }

  /** Allows measuring twice `n` more bytes natively, for the value of `n` bytes just measured. */
  #grant(n: number): void {
    this.#cap = Math.max(0, this.#cap) + 2 * n + 65_536;
  }

  of(v: unknown): number {
    if (typeof v === "string" && v.length >= LONG_STRING_MEMO) {
      let n = this.#strings.get(v);
      if (n === undefined) this.#strings.set(v, n = stringSize(v));
      return n;
    }
    if (typeof v !== "object" || v === null) return scalarSize(v);
    const known = this.#memo.get(v);
    if (known !== undefined) return known;
    if (this.#cap >= 0 && this.#native > this.#cap) return this.#walk(v);
    const n = nativeSize(v);
    this.#native += n;
    if (n >= MEMO_MIN) this.#memo.set(v, n);
    return n;
  }

  /** `Object.keys(v)`, without enumerating a large object twice. */
  keysOf(v: object): string[] {
    return this.#keys.get(v) ?? Object.keys(v);
  }

  #walk(v: unknown): number {
    if (typeof v !== "object" || v === null) return scalarSize(v);
    const known = this.#memo.get(v);
    if (known !== undefined) return known;
    let n: number;
    if (Array.isArray(v)) {
      n = v.length > 0 ? v.length + 1 : 2;
      for (let i = 0; i < v.length; i++) n += this.#walk(v[i]);
    } else {
      const keys = Object.keys(v);
      n = keys.length > 0 ? keys.length * 2 + 1 : 2;
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!;
        n += stringSize(k) + this.#walk((v as Record<string, unknown>)[k]);
      }
    }
    if (n >= MEMO_MIN) this.#memo.set(v, n);
    return n;
  }
}

function scalarSize(v: unknown): number {
  switch (typeof v) {
    case "string":
      return stringSize(v);
    case "number":
      return Number.isFinite(v) ? String(v).length : 4;
    case "boolean":
      return v ? 4 : 5;
    default:
      if (v === null) return 4;
      throw new TypeError(`Only JSON values can be measured, not ${typeof v}.`);
  }
}

/** The UTF-8 size of `JSON.stringify(s)`. */
function stringSize(s: string): number {
  if (s.length >= LONG_STRING) return utf8Length(JSON.stringify(s));
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += c >= 0x20 ? (c === 0x22 || c === 0x5c ? 2 : 1) : shortEscape(c) ? 2 : 6;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && isLow(s.charCodeAt(i + 1))) {
      n += 4;
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) n += 6;
    else n += 3;
  }
  return n;
}

function shortEscape(c: number): boolean {
  return c === 8 || c === 9 || c === 10 || c === 12 || c === 13;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * The longest beginning of `s` whose JSON (quotes included) takes at most
 * `hardBytes`, and at most `softBytes` once it holds `minChars` code points;
 * always shorter than `s`, never ending inside a surrogate pair.
 */
function previewOf(s: string, minChars: number, softBytes: number, hardBytes: number): string {
  let n = 2;
  let i = 0;
  let last = 0;
  for (let chars = 0; i < s.length; chars++) {
    const c = s.charCodeAt(i);
    let width = 1;
    let bytes: number;
    if (c < 0x80) bytes = c >= 0x20 ? (c === 0x22 || c === 0x5c ? 2 : 1) : shortEscape(c) ? 2 : 6;
    else if (c < 0x800) bytes = 2;
    else if (c >= 0xd800 && c <= 0xdbff && isLow(s.charCodeAt(i + 1))) {
      bytes = 4;
      width = 2;
    } else if (c >= 0xd800 && c <= 0xdfff) bytes = 6;
    else bytes = 3;
    if (n + bytes > hardBytes || (chars >= minChars && n + bytes > softBytes)) break;
    n += bytes;
    last = i;
    i += width;
  }
  // A preview never holds the whole string: a node with a preview is one that was cut.
  return s.slice(0, i === s.length ? last : i);
}

// ---------------------------------------------------------------- outlines

const KIND_OBJECT = 0;
const KIND_LIST = 1;
const KIND_STRING = 2;

/** The compact JSON length of a whole number. */
function digits(n: number): number {
  return String(n).length;
}

// Fixed parts of the nodes' JSON, measured from the text they stand for.
const SHOWN = '{"value":}'.length;
const HEAD = [
  '{"type":"object","path":,"bytes":,"keys":}'.length,
  '{"type":"list","path":,"bytes":,"length":}'.length,
  '{"type":"string","path":,"bytes":}'.length,
];
const HEAD_NO_PATH = HEAD.map((n) => n - ',"path":'.length);
const OPEN = [',"entries":{}'.length, ',"items":{}'.length];

/**
 * The size of the smallest node that can stand for `value` (of `bytes`): its
 * top node without a path and without children; a scalar, which no node
 * describes, costs its own size.
 */
function leastNode(value: unknown, bytes: number, sizer: Sizer): number {
  if (typeof value === "string") return HEAD_NO_PATH[KIND_STRING]! + digits(bytes);
  if (Array.isArray(value)) return HEAD_NO_PATH[KIND_LIST]! + digits(bytes) + digits(value.length);
  if (typeof value === "object" && value !== null) {
    return HEAD_NO_PATH[KIND_OBJECT]! + digits(bytes) + digits(sizer.keysOf(value).length);
  }
  return bytes;
}
const PREVIEW = ',"preview":'.length;
/** A child shown whole at once may cost up to this much more than its description. */
const SLACK = 128;

/** A value that is described, not shown: one node of the outline being built. */
interface Stub {
  kind: number;
  value: unknown;
  pointer: string;
  bytes: number;
  /** The size of its node as first placed. */
  cost: number;
  node: Record<string, unknown>;
  /** The map its node sits in, and under which key (none for the top node). */
  parent: Record<string, unknown> | null;
  label: string;
  /** An object's keys (`null` for a list or a string). */
  keys: string[] | null;
  /** How many keys or items it has. */
  count: number;
  /** How many children were placed so far. */
  next: number;
  /** Its `entries` or `items` map, once it has one. */
  children: Record<string, unknown> | null;
  /** The children placed as stubs, for the next level. */
  kids: Stub[];
}

/** One outline within one budget; see the module doc for the order of work. */
class Outliner {
  readonly #sizer: Sizer;
  readonly #budget: number;
  /** How much more than its description a child may cost and still be shown whole at once. */
  readonly #slack: number;
  #left = 0;
  /** The strings given a preview, in the order they got it. */
  readonly #previews: Stub[] = [];

  constructor(sizer: Sizer, budget: number) {
    this.#sizer = sizer;
    this.#budget = budget;
    this.#slack = Math.min(SLACK, Math.floor(budget / 32));
  }

  /** Outlines `value` (of `bytes`, over the budget); `used` is the size of the result. */
  run(value: unknown, pointer: string, bytes: number): { node: OutlineNode; used: number } {
    let top = this.#stub(value, pointer, bytes, null, "", true);
    // Only a pointer longer than the budget itself can be left out, and only on the top node.
    if (top.cost > this.#budget) top = this.#stub(value, pointer, bytes, null, "", false);
    this.#left = this.#budget - top.cost;
    let level = [top];
    while (level.length > 0) {
      const pending: Stub[] = [];
      for (let i = 0; i < level.length; i++) {
        const s = level[i]!;
        const extra = s.bytes + SHOWN - s.cost;
        if (s.parent !== null && extra <= Math.floor(this.#left / (level.length - i))) {
          put(s.parent, s.label, { value: s.value });
          this.#left -= extra;
        } else {
          pending.push(s);
        }
      }
      let active = pending;
      while (active.length > 0) {
        const still: Stub[] = [];
        for (const s of active) if (this.#step(s)) still.push(s);
        active = still;
      }
      level = [];
      for (const s of pending) {
        if (s.kind === KIND_LIST) s.kids.sort((a, b) => Number(a.label) - Number(b.label));
        for (const k of s.kids) level.push(k);
      }
    }
    this.#lengthen();
    return { node: top.node as unknown as OutlineNode, used: this.#budget - this.#left };
  }

  /** Shares what is left once nothing else fits among the previews, lengthening them. */
  #lengthen(): void {
    for (let i = 0; i < this.#previews.length && this.#left > 0; i++) {
      const s = this.#previews[i]!;
      const before = s.node.preview as string;
      const cost = stringSize(before);
      const share = Math.floor(this.#left / (this.#previews.length - i));
      const after = previewOf(s.value as string, 0, cost + share, cost + this.#left);
      if (after.length > before.length) {
        s.node.preview = after;
        this.#left -= stringSize(after) - cost;
      }
    }
  }

  #stub(
    value: unknown,
    pointer: string,
    bytes: number,
    parent: Record<string, unknown> | null,
    label: string,
    withPath: boolean,
  ): Stub {
    let kind: number;
    let keys: string[] | null = null;
    let count = 0;
    let node: Record<string, unknown>;
    if (typeof value === "string") {
      kind = KIND_STRING;
      node = withPath ? { type: "string", path: pointer, bytes } : { type: "string", bytes };
    } else if (Array.isArray(value)) {
      kind = KIND_LIST;
      count = value.length;
      node = withPath
        ? { type: "list", path: pointer, bytes, length: count }
        : { type: "list", bytes, length: count };
    } else {
      kind = KIND_OBJECT;
      keys = this.#sizer.keysOf(value as object);
      count = keys.length;
      node = withPath
        ? { type: "object", path: pointer, bytes, keys: count }
        : { type: "object", bytes, keys: count };
    }
    let cost = (withPath ? HEAD[kind]! + stringSize(pointer) : HEAD_NO_PATH[kind]!) + digits(bytes);
    if (kind !== KIND_STRING) cost += digits(count);
    return {
      kind,
      value,
      pointer,
      bytes,
      cost,
      node,
      parent,
      label,
      keys,
      count,
      next: 0,
      children: null,
      kids: [],
    };
  }

  /** Shows one more part of `s` if it fits; returns whether `s` has more to show. */
  #step(s: Stub): boolean {
    if (s.kind === KIND_STRING) {
      const room = this.#left - PREVIEW;
      const preview = previewOf(s.value as string, PREVIEW_CHARS, 0, room);
      if (preview.length > 0) {
        s.node.preview = preview;
        this.#left = room - stringSize(preview);
        this.#previews.push(s);
      }
      return false;
    }
    let label: string;
    let child: unknown;
    if (s.kind === KIND_LIST) {
      // From both ends: 0, n-1, 1, n-2, …
      const k = s.next;
      const index = k % 2 === 0 ? k / 2 : s.count - 1 - (k - 1) / 2;
      label = String(index);
      child = (s.value as unknown[])[index];
    } else {
      label = s.keys![s.next]!;
      child = (s.value as Record<string, unknown>)[label];
    }
    const size = this.#sizer.of(child);
    const shown = size + SHOWN;
    let stub: Stub | null = null;
    let cost = shown;
    if (typeof child === "object" && child !== null || typeof child === "string") {
      const candidate = this.#stub(
        child,
        s.pointer + "/" + escapeSegment(label),
        size,
        null,
        label,
        true,
      );
      if (candidate.cost + this.#slack < shown) [stub, cost] = [candidate, candidate.cost];
    }
    cost += (s.next === 0 ? OPEN[s.kind]! : 1) + stringSize(label) + 1;
    if (cost > this.#left) return false;
    this.#left -= cost;
    if (s.children === null) {
      s.children = {};
      s.node[s.kind === KIND_LIST ? "items" : "entries"] = s.children;
    }
    if (stub) {
      stub.parent = s.children;
      put(s.children, label, stub.node);
      s.kids.push(stub);
    } else {
      put(s.children, label, { value: child });
    }
    return ++s.next < s.count;
  }
}
