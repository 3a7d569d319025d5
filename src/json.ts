/**
 * Validation and encoding of states: only values that JSON carries faithfully
 * are accepted, and the size of a state is the UTF-8 length of its compact
 * JSON text.
 *
 * @module
 */

import { InvalidArgument, StateTooLarge } from "./errors.ts";

/** A JSON object: the only shape a state's root may have. */
export type JsonObject = Record<string, unknown>;

/** Deepest nesting a state may have; the root object is depth 1. */
export const MAX_DEPTH = 64;

const encoder = new TextEncoder();
/** UTF-16 units `utf8Length` encodes into its buffer (3 bytes each at most). */
const SCRATCH_UNITS = 16_384;
const scratch = new Uint8Array(3 * SCRATCH_UNITS);

/**
 * Checks that `value` is made of plain JSON values only and throws
 * `invalid_argument` naming the first offending place otherwise.
 *
 * @param value The candidate value.
 * @param what How to name it in messages ("state", "value").
 * @param root Whether the root must be a plain object.
 * @param maxBytes The size cap: a value with more parts than this is
 * `state_too_large` before it is ever stringified.
 */
export function assertJson(
  value: unknown,
  what = "state",
  root = true,
  maxBytes = Number.MAX_SAFE_INTEGER,
): void {
  if (root && !isPlainObject(value)) {
    throw new InvalidArgument(
      `The ${what} must be a JSON object at its root (got ${
        describe(value)
      }). Wrap it, e.g. {"items": [...]}.`,
      { field: what },
    );
  }
  const w: Walk = { what, path: [], ancestors: [], left: maxBytes, maxBytes };
  if (typeof value === "object" && value !== null) walk(value, w, 0);
  else checkLeaf(value, w, 0);
}

/**
 * The state of one walk. Every value takes at least one byte of JSON, so a
 * walk that meets more values than the size cap allows stops early: a value
 * built from shared subtrees can't make validation exponential. The place of
 * a value (`state.items[3].title`) is only spelled out when it is refused:
 * `path[d]` is the key or index at depth `d`, and `ancestors[d]` the
 * container there, overwritten as the walk goes (nothing is pushed or
 * popped per value).
 */
interface Walk {
  what: string;
  path: (string | number)[];
  ancestors: object[];
  left: number;
  maxBytes: number;
}

/** The place at `depth` (its first `depth` keys and indexes), for a message. */
function placeOf(w: Walk, depth: number): string {
  let at = w.what;
  for (let d = 0; d < depth; d++) {
    const p = w.path[d]!;
    at += typeof p === "number" ? `[${p}]` : `.${p}`;
  }
  return at;
}

/** Checks a value that is not a non-null object, at `depth`. */
function checkLeaf(value: unknown, w: Walk, depth: number): void {
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) fail(placeOf(w, depth), `the number ${String(value)}`);
      return;
    default:
      if (value !== null) fail(placeOf(w, depth), describe(value));
  }
}

/** One value inside a container, at `depth` (its key or index is `w.path[depth - 1]`). */
function child(value: unknown, w: Walk, depth: number): void {
  if (--w.left < 0) throw new StateTooLarge(w.maxBytes + 1, w.maxBytes);
  if (typeof value === "object") {
    if (value !== null) walk(value, w, depth);
  } else if (typeof value !== "string" && typeof value !== "boolean") checkLeaf(value, w, depth);
}

const getOwn = Object.getOwnPropertyDescriptor;

/** A container at `depth`: its own properties, then each value in turn. */
function walk(value: object, w: Walk, depth: number): void {
  if (depth >= MAX_DEPTH) {
    const at = placeOf(w, depth);
    throw new InvalidArgument(
      `The state nests deeper than ${MAX_DEPTH} levels at ${at}. Flatten it.`,
      { field: at, max_depth: MAX_DEPTH },
    );
  }
  const { ancestors, path } = w;
  for (let d = 0; d < depth; d++) {
    if (ancestors[d] === value) {
      const at = placeOf(w, depth);
      throw new InvalidArgument(
        `The state contains a cycle at ${at}. JSON cannot carry cycles: store references instead.`,
        { field: at },
      );
    }
  }
  ancestors[depth] = value;
  const inner = depth + 1;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) {
      fail(placeOf(w, depth), "an array subclass");
    }
    const n = value.length;
    for (let i = 0; i < n; i++) {
      path[depth] = i;
      const desc = getOwn(value, i);
      if (!desc) fail(placeOf(w, inner), "a hole in an array");
      if (!("value" in desc)) fail(placeOf(w, inner), "a getter");
      child(desc.value, w, inner);
    }
    // Indexes and `length` only: JSON.stringify drops every other property.
    if (Object.getOwnPropertyNames(value).length !== n + 1) {
      fail(placeOf(w, depth), "an array with named properties");
    }
    if (Object.getOwnPropertySymbols(value).length > 0) fail(placeOf(w, depth), "a symbol key");
  } else {
    if (!isPlainObject(value)) fail(placeOf(w, depth), describe(value));
    if (Object.getOwnPropertySymbols(value).length > 0) fail(placeOf(w, depth), "a symbol key");
    const keys = Object.getOwnPropertyNames(value);
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k]!;
      path[depth] = key;
      const desc = getOwn(value, key);
      if (!desc || !("value" in desc)) fail(placeOf(w, inner), "a getter");
      // JSON.stringify drops non-enumerable properties.
      if (!desc.enumerable) fail(placeOf(w, inner), "a non-enumerable property");
      child(desc.value, w, inner);
    }
  }
}

function fail(at: string, what: string): never {
  throw new InvalidArgument(
    `The value at ${at} is ${what}, which JSON cannot carry faithfully. Use only objects, arrays, strings, finite numbers, booleans and null (dates as ISO strings).`,
    { field: at },
  );
}

/**
 * Whether `value` is a plain object (prototype `Object.prototype` or `null`).
 *
 * @param value Anything.
 * @returns `true` for `{}` literals and `JSON.parse` objects.
 */
export function isPlainObject(value: unknown): value is JsonObject {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const name = (value as object).constructor?.name;
    return name ? `a ${name} instance` : "an object with a foreign prototype";
  }
  if (typeof value === "function") return "a function";
  return `a ${typeof value}`;
}

/**
 * Validates a state and returns its compact JSON text and UTF-8 size.
 *
 * @param state The candidate state.
 * @param maxBytes The size cap.
 * @returns The JSON text.
 * @throws {InvalidArgument} when the state holds values JSON can't carry.
 * @throws {StateTooLarge} when the text is over `maxBytes`.
 */
export function encodeState(state: unknown, maxBytes: number): string {
  assertJson(state, "state", true, maxBytes);
  const text = JSON.stringify(state);
  checkSize(text, maxBytes);
  return text;
}

/**
 * Encodes a state built only from parsed JSON and values that passed
 * {@link assertJson} (what a patch produces): only its depth and size are
 * left to check.
 *
 * @param state The state.
 * @param maxBytes The size cap.
 * @returns The JSON text.
 * @throws {InvalidArgument} when the state nests deeper than {@link MAX_DEPTH}.
 * @throws {StateTooLarge} when the text is over `maxBytes`.
 */
export function encodeParsed(state: JsonObject, maxBytes: number): string {
  if (depthOver(state, 1)) {
    throw new InvalidArgument(`The state would nest deeper than ${MAX_DEPTH} levels. Flatten it.`, {
      field: "state",
      max_depth: MAX_DEPTH,
    });
  }
  const text = JSON.stringify(state);
  checkSize(text, maxBytes);
  return text;
}

function depthOver(value: unknown, depth: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (depth > MAX_DEPTH) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (depthOver(value[i], depth + 1)) return true;
  } else {
    for (const key in value) {
      if (depthOver((value as JsonObject)[key], depth + 1)) return true;
    }
  }
  return false;
}

/**
 * Throws {@link StateTooLarge} when the UTF-8 length of `text` is over `maxBytes`.
 *
 * @param text Compact JSON text.
 * @param maxBytes The cap.
 */
export function checkSize(text: string, maxBytes: number): void {
  // Every UTF-16 unit is at most 3 UTF-8 bytes: skip the exact count when safe.
  if (text.length * 3 <= maxBytes) return;
  const size = utf8Length(text);
  if (size > maxBytes) throw new StateTooLarge(size, maxBytes);
}

/**
 * The number of bytes `text` takes in UTF-8.
 *
 * @param text Any well-formed string.
 * @returns Its UTF-8 length.
 */
export function utf8Length(text: string): number {
  // A short text is encoded into one buffer kept for it: nothing allocated.
  if (text.length <= SCRATCH_UNITS) return encoder.encodeInto(text, scratch).written;
  return encoder.encode(text).length;
}

/**
 * Parses a stored state. Objects come back with `__proto__` as an own key,
 * exactly as `JSON.parse` builds them.
 *
 * @param text JSON text written by {@link encodeState}.
 * @returns The state.
 */
export function decodeState<S = JsonObject>(text: string): S {
  return JSON.parse(text) as S;
}
