/**
 * Compact JSON sizes measured without building the text, and string
 * previews cut to a byte budget.
 *
 * @module
 */

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
export function nativeSize(v: unknown): number {
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
export class Sizer {
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

/** The UTF-8 size of the JSON of a scalar (a string, number, boolean or null). */
export function scalarSize(v: unknown): number {
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
export function stringSize(s: string): number {
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
export function previewOf(
  s: string,
  minChars: number,
  softBytes: number,
  hardBytes: number,
): string {
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
