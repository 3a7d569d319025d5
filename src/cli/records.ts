/**
 * The JSON Lines record format of `mcpstate export` and `import`: one record
 * per line, every field of the stored record, in one canonical form whose
 * SHA-256 is the record's digest.
 *
 * ```json
 * {"user":"alice","handle":"research_k3v9x2mq","kind":"research","version":3,"created_at":"2026-07-28T12:00:00.000Z","updated_at":"2026-07-28T12:05:00.000Z","expires_at":null,"last_writer":"laptop/claude-code","state":{"notes":"arm64 wins"}}
 * ```
 *
 * Times are ISO-8601 UTC with milliseconds, as in the wire form. `state` is
 * the stored JSON text spliced in unchanged, so a record moves byte for byte:
 * key order (numeric-looking keys included), number spelling and escapes
 * survive export, import and migrate exactly.
 *
 * @module
 */

import type { HandleRecord } from "../backend.ts";
import { assertJson, isPlainObject, utf8Length } from "../json.ts";
import { McpStateError } from "../errors.ts";

/** A record together with the user it belongs to. */
export interface UserRecord {
  /** The user the record belongs to. */
  user: string;
  /** The record; `state` is JSON text. */
  record: HandleRecord;
}

/** The fields of a line, in canonical order. */
export const FIELDS: readonly string[] = Object.freeze([
  "user",
  "handle",
  "kind",
  "version",
  "created_at",
  "updated_at",
  "expires_at",
  "last_writer",
  "state",
]);

const KIND_RE = /^[a-z][a-z0-9-]{0,31}$/;
const ISO_RE = /^[+-]?\d{4,6}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/;
const encoder = new TextEncoder();

/** A line of JSON Lines input is not a valid record. */
export class CorruptLine extends Error {
  /** 1-based line number. */
  readonly line: number;
  /**
   * Creates the error for one line.
   *
   * @param line The 1-based line number.
   * @param reason What is wrong with it.
   */
  constructor(line: number, reason: string) {
    super(`Line ${line} is not a valid mcpstate record: ${reason}`);
    this.name = "CorruptLine";
    this.line = line;
  }
}

/** Why a name fails {@link isIdentifier}, after the field's name. */
export const NOT_AN_IDENTIFIER =
  "holds U+0000 or a lone surrogate, which mcpstate never stores in a name";

/**
 * Whether a user, handle, kind or writer label is one mcpstate accepts:
 * well-formed Unicode without U+0000 (the store refuses anything else on
 * every backend, so a record holding one is never written).
 *
 * @param s The name.
 * @returns `true` when it may be stored.
 */
export function isIdentifier(s: string): boolean {
  return s.isWellFormed() && !s.includes("\0");
}

/**
 * Renders a record as its canonical line (no newline).
 *
 * @param user The user.
 * @param r The record.
 * @returns The line.
 * @throws {Error} when the stored state is not a JSON object (a damaged source).
 */
export function recordLine(user: string, r: HandleRecord): string {
  return `{"user":${JSON.stringify(user)},"handle":${JSON.stringify(r.handle)},"kind":${
    JSON.stringify(r.kind)
  },"version":${r.version},"created_at":${iso(r.createdAt)},"updated_at":${
    iso(r.updatedAt)
  },"expires_at":${r.expiresAt === null ? "null" : iso(r.expiresAt)},"last_writer":${
    JSON.stringify(r.lastWriter)
  },"state":${stateText(r.state)}}`;
}

function iso(ms: number): string {
  return JSON.stringify(new Date(ms).toISOString());
}

/** The state text as it goes into a line: checked, and unchanged unless it spans lines. */
function stateText(text: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error("the stored state is not valid JSON");
  }
  if (!isPlainObject(value)) throw new Error("the stored state is not a JSON object");
  // A state stored with line breaks (pretty-printed by another tool) can't sit
  // in one line: re-encode it compactly. Anything else stays byte for byte.
  return /[\r\n]/.test(text) ? JSON.stringify(value) : text;
}

/**
 * SHA-256 of a canonical line, in hex.
 *
 * @param line A line from {@link recordLine}.
 * @returns 64 hex digits.
 */
export async function digestLine(line: string): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", encoder.encode(line));
  return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Parses and validates one line of input.
 *
 * @param text The line, without its line break.
 * @param lineNo Its 1-based number, for the error.
 * @param maxStateBytes The largest state accepted, in UTF-8 bytes.
 * @returns The record.
 * @throws {CorruptLine} naming the line and what is wrong.
 */
export function parseRecordLine(text: string, lineNo: number, maxStateBytes: number): UserRecord {
  const bad = (reason: string) => new CorruptLine(lineNo, reason);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw bad(`it is not valid JSON (${e instanceof Error ? e.message : String(e)}).`);
  }
  if (!isPlainObject(value)) throw bad("it is not a JSON object.");
  for (const key of Object.keys(value)) {
    if (!FIELDS.includes(key)) throw bad(`unknown field ${JSON.stringify(key)}.`);
  }
  for (const key of FIELDS) {
    if (!Object.hasOwn(value, key)) throw bad(`the field "${key}" is missing.`);
  }
  const v = value as Record<string, unknown>;
  const str = (key: string, max: number): string => {
    const x = v[key];
    if (typeof x !== "string" || x.length === 0 || x.length > max) {
      throw bad(`"${key}" must be a non-empty string of at most ${max} characters.`);
    }
    if (!isIdentifier(x)) throw bad(`"${key}" ${NOT_AN_IDENTIFIER}.`);
    return x;
  };
  const time = (key: string): number => {
    const x = v[key];
    const ms = typeof x === "string" && ISO_RE.test(x) ? Date.parse(x) : NaN;
    if (!Number.isFinite(ms)) {
      throw bad(`"${key}" must be an ISO-8601 time such as "2026-07-28T12:00:00.000Z".`);
    }
    return ms;
  };
  const user = str("user", 1024);
  const handle = str("handle", 256);
  const kind = str("kind", 32);
  if (!KIND_RE.test(kind)) throw bad(`"kind" ${JSON.stringify(kind)} is not a valid kind.`);
  const version = v.version;
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 1) {
    throw bad(`"version" must be a whole number, 1 or more.`);
  }
  const createdAt = time("created_at");
  const updatedAt = time("updated_at");
  const expiresAt = v.expires_at === null ? null : time("expires_at");
  const writer = v.last_writer;
  if (writer !== null && (typeof writer !== "string" || writer.length > 256)) {
    throw bad(`"last_writer" must be null or a string of at most 256 characters.`);
  }
  if (writer !== null && !isIdentifier(writer)) throw bad(`"last_writer" ${NOT_AN_IDENTIFIER}.`);
  if (!isPlainObject(v.state)) throw bad(`"state" must be a JSON object.`);
  try {
    assertJson(v.state);
  } catch (e) {
    throw bad(e instanceof McpStateError ? e.message : String(e));
  }
  const { spans, members } = topLevelSpans(text);
  const span = spans.get("state");
  if (members !== spans.size || !span) throw bad("a field appears more than once.");
  const state = text.slice(span[0], span[1]);
  const size = utf8Length(state);
  if (size > maxStateBytes) {
    throw bad(
      `its state is ${size} bytes, over the limit of ${maxStateBytes} (raise it with --max-state-bytes or MCPSTATE_MAX_STATE_BYTES).`,
    );
  }
  return {
    user,
    record: {
      handle,
      kind,
      state,
      version,
      createdAt,
      updatedAt,
      expiresAt,
      lastWriter: writer as string | null,
    },
  };
}

/**
 * Finds where each top-level member's value starts and ends in a JSON object
 * text that `JSON.parse` has accepted, and counts the members (more members
 * than distinct keys means a duplicate key).
 */
function topLevelSpans(text: string): { spans: Map<string, [number, number]>; members: number } {
  const spans = new Map<string, [number, number]>();
  let members = 0;
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i] as string)) i++;
  };
  const skipString = () => {
    i++; // opening quote
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++; // closing quote
  };
  const skipValue = () => {
    const c = text[i];
    if (c === '"') return skipString();
    if (c === "{" || c === "[") {
      let depth = 0;
      do {
        const d = text[i];
        if (d === '"') {
          skipString();
          continue;
        }
        if (d === "{" || d === "[") depth++;
        else if (d === "}" || d === "]") depth--;
        i++;
      } while (depth > 0 && i < text.length);
      return;
    }
    while (i < text.length && !",}] \t\n\r".includes(text[i] as string)) i++;
  };
  ws();
  i++; // "{"
  for (;;) {
    ws();
    if (text[i] !== '"') break; // "}" of an empty object
    const keyStart = i;
    skipString();
    const key = JSON.parse(text.slice(keyStart, i)) as string;
    ws();
    i++; // ":"
    ws();
    const start = i;
    skipValue();
    members++;
    if (!spans.has(key)) spans.set(key, [start, i]);
    ws();
    if (text[i] !== ",") break;
    i++;
  }
  return { spans, members };
}

/**
 * Splits a byte stream into numbered lines, decoding each as strict UTF-8.
 * A trailing `\r` (CRLF files) and a leading byte-order mark are dropped.
 *
 * @param stream The bytes.
 * @returns The lines with their 1-based numbers.
 * @throws {CorruptLine} for a line that is not valid UTF-8.
 */
export async function* readLines(
  stream: ReadableStream<Uint8Array>,
): AsyncGenerator<{ no: number; text: string }> {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  let pending: Uint8Array[] = [];
  let no = 0;
  const decode = (parts: Uint8Array[]): string => {
    let bytes: Uint8Array;
    if (parts.length === 1) bytes = parts[0] as Uint8Array;
    else {
      bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let off = 0;
      for (const p of parts) {
        bytes.set(p, off);
        off += p.length;
      }
    }
    try {
      const text = decoder.decode(bytes);
      return text.endsWith("\r") ? text.slice(0, -1) : text;
    } catch {
      throw new CorruptLine(no, "it is not valid UTF-8.");
    }
  };
  for await (const chunk of stream) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, start)) {
      pending.push(chunk.subarray(start, nl));
      no++;
      yield { no, text: decode(pending) };
      pending = [];
      start = nl + 1;
    }
    if (start < chunk.length) pending.push(chunk.slice(start));
  }
  if (pending.some((p) => p.length > 0)) {
    no++;
    yield { no, text: decode(pending) };
  }
}
