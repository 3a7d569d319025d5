/**
 * Previews: a line of at most {@link PREVIEW_MAX_CHARS} characters that
 * describes a state, so that a model that lost a handle can recognise it in a
 * listing. The store computes one on every write and the backend keeps it
 * beside the record's metadata: a listing with previews never reads a state.
 *
 * The line is a short outline of the state's top level, in key order: each
 * key with its value when that is short (strings quoted and cut, numbers,
 * booleans, `null`; control characters escaped as in JSON), `[n]` for a list of `n` items and `{n}` for an object of
 * `n` keys, separated by `, `, and cut with `…` at the limit.
 *
 * @example
 * ```ts
 * import { previewOf } from "@mcpstate/core";
 * previewOf({ topic: "Rust async runtimes", sources: ["a", "b"], done: false });
 * // 'topic: "Rust async runtimes", sources: [2], done: false'
 * ```
 *
 * @module
 */

/**
 * The longest preview, in characters (UTF-16 code units, so never more code
 * points).
 *
 * @since 0.5.0
 */
export const PREVIEW_MAX_CHARS = 120;

/** The longest string value shown, in code units, before it is cut. */
const STRING_CHARS = 40;

/**
 * The preview of a state: a short outline of its top level, at most
 * {@link PREVIEW_MAX_CHARS} characters. Work stops once the line is full, so
 * a large state costs no more than a small one.
 *
 * @param state A JSON object (a state).
 * @returns The preview line (`""` for an empty object).
 *
 * @since 0.5.0
 */
export function previewOf(state: Readonly<Record<string, unknown>>): string {
  let out = "";
  for (const key in state) {
    if (!Object.hasOwn(state, key)) continue;
    // A key as JSON writes it, unquoted: control characters and lone
    // surrogates escaped, so the line is well-formed text every engine keeps.
    const name = JSON.stringify(key).slice(1, -1);
    const part = `${out === "" ? "" : ", "}${name}: ${shortValue(state[key])}`;
    if (out.length + part.length > PREVIEW_MAX_CHARS) return cut(out + part);
    out += part;
  }
  return out;
}

function shortValue(v: unknown): string {
  if (v === null || typeof v === "number" || typeof v === "boolean") return String(v);
  if (typeof v === "string") {
    return JSON.stringify(cut(v, STRING_CHARS));
  }
  if (Array.isArray(v)) return `[${v.length}]`;
  if (typeof v === "object") {
    let n = 0;
    for (const k in v) if (Object.hasOwn(v, k)) n++;
    return `{${n}}`;
  }
  return "?";
}

/** `s` cut to at most `max` code units ending with `…`, never inside a surrogate pair. */
function cut(s: string, max = PREVIEW_MAX_CHARS): string {
  if (s.length <= max) return s;
  let end = max - 1;
  const c = s.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return s.slice(0, end) + "…";
}
