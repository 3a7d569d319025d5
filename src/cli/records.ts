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

import type { ForkPoint, GrantRecord, HandleRecord } from "../backend.ts";
import { McpStateError, StateTooLarge } from "../errors.ts";
import { isPlainObject } from "../json.ts";
import type { HandleStore } from "../store.ts";

/** A record together with the user it belongs to. */
export interface UserRecord {
  /** The user the record belongs to. */
  user: string;
  /** The record; `state` is JSON text. */
  record: HandleRecord;
}

/**
 * A grant line: a grant in force on the record of the line before it, so
 * that import and migrate carry sharing with the handle.
 *
 * ```json
 * {"grant":"grant_…","alias":"research_…","owner":"alice","handle":"research_k3v9x2mq","to":"bob","rights":"read","by":"alice","parent":null,"created_at":"2026-07-28T12:00:00.000Z","expires_at":null}
 * ```
 */
export interface UserGrant {
  /** The grant, as the backend keeps it (`endedAt` is always `null`). */
  grant: GrantRecord;
}

/** One line of an export: a record, or a grant on the record before it. */
export type ExportLine = UserRecord | UserGrant;

/** The fields of a grant line, in canonical order. */
export const GRANT_FIELDS: readonly string[] = Object.freeze([
  "grant",
  "alias",
  "owner",
  "handle",
  "to",
  "rights",
  "by",
  "parent",
  "created_at",
  "expires_at",
]);

/**
 * Renders a grant as its canonical line (no newline).
 *
 * @param g The grant.
 * @returns The line.
 */
export function grantLine(g: GrantRecord): string {
  return JSON.stringify({
    grant: g.grant,
    alias: g.alias,
    owner: g.owner,
    handle: g.handle,
    to: g.to,
    rights: g.rights,
    by: g.by,
    parent: g.parent,
    created_at: new Date(g.createdAt).toISOString(),
    expires_at: g.expiresAt === null ? null : new Date(g.expiresAt).toISOString(),
  });
}

/**
 * Parses one line of input: a grant line (it has a `grant` field), or a
 * record line ({@link parseRecordLine}).
 *
 * @param text The line, without its line break.
 * @param lineNo Its 1-based number, for the error.
 * @param store The store the record is for.
 * @returns The record or the grant.
 * @throws {CorruptLine} naming the line and what is wrong.
 */
export function parseLine(
  text: string,
  lineNo: number,
  store: Pick<HandleStore, "checkRecord" | "checkGrant">,
): ExportLine {
  if (!/^\s*\{\s*"grant"\s*:/.test(text)) return parseRecordLine(text, lineNo, store);
  const bad = (reason: string) => new CorruptLine(lineNo, reason);
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw bad(`it is not valid JSON (${e instanceof Error ? e.message : String(e)}).`);
  }
  const keys = Object.keys(v);
  if (keys.length !== GRANT_FIELDS.length || !GRANT_FIELDS.every((k) => keys.includes(k))) {
    throw bad(`a grant line has exactly the fields ${GRANT_FIELDS.join(", ")}.`);
  }
  const time = (key: string): number => {
    const x = v[key];
    const ms = typeof x === "string" && ISO_RE.test(x) ? Date.parse(x) : NaN;
    if (!Number.isFinite(ms)) throw bad(`"${key}" must be an ISO-8601 time.`);
    return ms;
  };
  for (const key of ["grant", "alias", "owner", "handle", "to", "rights", "by"]) {
    if (typeof v[key] !== "string") throw bad(`"${key}" must be a string.`);
  }
  if (v.parent !== null && typeof v.parent !== "string") {
    throw bad('"parent" must be a grant id or null.');
  }
  const grant: GrantRecord = {
    grant: v.grant as string,
    alias: v.alias as string,
    owner: v.owner as string,
    handle: v.handle as string,
    to: v.to as string,
    rights: v.rights as string,
    by: v.by as string,
    parent: v.parent as string | null,
    createdAt: time("created_at"),
    expiresAt: v.expires_at === null ? null : time("expires_at"),
    endedAt: null,
  };
  try {
    store.checkGrant(grant);
  } catch (e) {
    if (e instanceof McpStateError) throw bad(e.message);
    throw e;
  }
  return { grant };
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

/**
 * Fields a line may carry beside {@link FIELDS}, before `state`:
 * `schema_version`, only for a record written by a typed kind, and
 * `forked_from` (`{"handle", "version"}`), only for a fork.
 */
export const OPTIONAL_FIELDS: readonly string[] = Object.freeze(["schema_version", "forked_from"]);

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
  }${r.schemaVersion == null ? "" : `,"schema_version":${r.schemaVersion}`}${
    r.forkedFrom == null
      ? ""
      : `,"forked_from":${
        JSON.stringify({ handle: r.forkedFrom.handle, version: r.forkedFrom.version })
      }`
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
 * Parses one line of input and checks its record by the target store's
 * rules ({@link HandleStore.checkRecord}).
 *
 * @param text The line, without its line break.
 * @param lineNo Its 1-based number, for the error.
 * @param store The store the record is for.
 * @returns The record.
 * @throws {CorruptLine} naming the line and what is wrong.
 */
export function parseRecordLine(
  text: string,
  lineNo: number,
  store: Pick<HandleStore, "checkRecord">,
): UserRecord {
  const bad = (reason: string) => new CorruptLine(lineNo, reason);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw bad(`it is not valid JSON (${e instanceof Error ? e.message : String(e)}).`);
  }
  if (!isPlainObject(value)) throw bad("it is not a JSON object.");
  for (const key of Object.keys(value)) {
    if (!FIELDS.includes(key) && !OPTIONAL_FIELDS.includes(key)) {
      throw bad(`unknown field ${JSON.stringify(key)}.`);
    }
  }
  for (const key of FIELDS) {
    if (!Object.hasOwn(value, key)) throw bad(`the field "${key}" is missing.`);
  }
  const v = value as Record<string, unknown>;
  const time = (key: string): number => {
    const x = v[key];
    const ms = typeof x === "string" && ISO_RE.test(x) ? Date.parse(x) : NaN;
    if (!Number.isFinite(ms)) {
      throw bad(`"${key}" must be an ISO-8601 time such as "2026-07-28T12:00:00.000Z".`);
    }
    return ms;
  };
  const createdAt = time("created_at");
  const updatedAt = time("updated_at");
  const expiresAt = v.expires_at === null ? null : time("expires_at");
  const { spans, members } = topLevelSpans(text);
  const span = spans.get("state");
  if (members !== spans.size || !span) throw bad("a field appears more than once.");
  const user = v.user as string;
  const record: HandleRecord = {
    handle: v.handle as string,
    kind: v.kind as string,
    // The state's own text, spliced out of the line: it moves byte for byte.
    state: text.slice(span[0], span[1]),
    version: v.version as number,
    createdAt,
    updatedAt,
    expiresAt,
    lastWriter: v.last_writer as string | null,
  };
  if (v.schema_version !== undefined && v.schema_version !== null) {
    record.schemaVersion = v.schema_version as number;
  }
  if (v.forked_from !== undefined && v.forked_from !== null) {
    record.forkedFrom = v.forked_from as ForkPoint;
  }
  try {
    store.checkRecord(user, record);
  } catch (e) {
    if (e instanceof StateTooLarge) {
      throw bad(
        `its state is ${e.details.size_bytes} bytes, over the limit of ${e.details.limit_bytes} (raise it with --max-state-bytes or MCPSTATE_MAX_STATE_BYTES).`,
      );
    }
    if (e instanceof McpStateError) throw bad(e.message);
    throw e;
  }
  return { user, record };
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
