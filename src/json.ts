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
  walk(value, what, 1, new Set(), { left: maxBytes, maxBytes });
}

/**
 * Every value takes at least one byte of JSON, so a walk that meets more
 * values than the size cap allows stops early: a value built from shared
 * subtrees can't make validation exponential.
 */
interface Budget {
  left: number;
  maxBytes: number;
}

function walk(
  value: unknown,
  at: string,
  depth: number,
  seen: Set<object>,
  budget: Budget,
): void {
  if (--budget.left < 0) throw new StateTooLarge(budget.maxBytes + 1, budget.maxBytes);
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) fail(at, `the number ${String(value)}`);
      return;
    case "object":
      break;
    default:
      fail(at, describe(value));
  }
  if (value === null) return;
  if (depth > MAX_DEPTH) {
    throw new InvalidArgument(
      `The state nests deeper than ${MAX_DEPTH} levels at ${at}. Flatten it.`,
      { field: at, max_depth: MAX_DEPTH },
    );
  }
  if (seen.has(value)) {
    throw new InvalidArgument(
      `The state contains a cycle at ${at}. JSON cannot carry cycles: store references instead.`,
      { field: at },
    );
  }
  seen.add(value);
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) fail(at, "an array subclass");
    for (let i = 0; i < value.length; i++) {
      const desc = Object.getOwnPropertyDescriptor(value, i);
      if (!desc) fail(`${at}[${i}]`, "a hole in an array");
      if (!("value" in desc)) fail(`${at}[${i}]`, "a getter");
      walk(desc.value, `${at}[${i}]`, depth + 1, seen, budget);
    }
    // Indexes and `length` only: JSON.stringify drops every other property.
    if (Object.getOwnPropertyNames(value).length !== value.length + 1) {
      fail(at, "an array with named properties");
    }
    if (Object.getOwnPropertySymbols(value).length > 0) fail(at, "a symbol key");
  } else {
    if (!isPlainObject(value)) fail(at, describe(value));
    if (Object.getOwnPropertySymbols(value).length > 0) fail(at, "a symbol key");
    for (const key of Object.getOwnPropertyNames(value)) {
      const desc = Object.getOwnPropertyDescriptor(value, key);
      if (!desc || !("value" in desc)) fail(`${at}.${key}`, "a getter");
      // JSON.stringify drops non-enumerable properties.
      if (!desc.enumerable) fail(`${at}.${key}`, "a non-enumerable property");
      walk(desc.value, `${at}.${key}`, depth + 1, seen, budget);
    }
  }
  seen.delete(value);
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
