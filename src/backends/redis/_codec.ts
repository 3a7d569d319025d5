/**
 * How the Redis backend writes records into Redis values and script
 * arguments, and reads them back (see the layout in `_scripts.ts`). Lua never
 * parses a state or an entry: they travel as text, byte for byte.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type {
  AuditStep,
  ChangeEntry,
  ForkPoint,
  HandleMeta,
  HandleRecord,
  LeaseRecord,
  Replayed,
  WriteContext,
} from "../../backend.ts";
import { QuotaExceeded, type QuotaName } from "../../errors.ts";
import { retryAfterSeconds } from "../_quota.ts";

/** A script's reply of several values. */
export type Reply = (string | null)[];

const RAW_HANDLE = /^[a-z0-9_-]{1,256}$/;
const TWO_53 = 2n ** 53n;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Bytes as base64url. */
function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64url");
}

/**
 * Encodes any string into `[A-Za-z0-9_-]` injectively: `u` + base64url of
 * its UTF-8 when well formed, else `j` + base64url of its JSON form (which
 * spells lone surrogates out), so no two strings share a code.
 */
export function encodeName(s: string): string {
  return s.isWellFormed()
    ? "u" + b64url(encoder.encode(s))
    : "j" + b64url(encoder.encode(JSON.stringify(s)));
}

/** The string {@link encodeName} encoded. */
export function decodeName(code: string): string {
  const text = decoder.decode(Buffer.from(code.slice(1), "base64url"));
  return code[0] === "j" ? JSON.parse(text) as string : text;
}

/** A handle as a key part: as it is when it is plain, else `~` + {@link encodeName}. */
export function encodeHandle(handle: string): string {
  return RAW_HANDLE.test(handle) ? handle : "~" + encodeName(handle);
}

/** The handle {@link encodeHandle} encoded. */
export function decodeHandle(code: string): string {
  return code.startsWith("~") ? decodeName(code.slice(1)) : code;
}

/** The index member of a record: listing order is its byte order. */
export function member(updatedAt: number, enc: string): string {
  const u = Math.floor(updatedAt);
  // 2^53 - u is exact in a double for every safe integer u >= 0.
  const d = Number.isSafeInteger(u) && u >= 0
    ? (2 ** 53 - u).toString(16)
    : (TWO_53 - BigInt(u)).toString(16);
  return d.padStart(14, "0") + enc;
}

/** A writer label as the metadata keeps it: JSON text, `""` for none. */
export function writerText(w: string | null): string {
  return w === null ? "" : JSON.stringify(w);
}

/**
 * The metadata field `m`: kind, version, createdAt, updatedAt, expiresAt,
 * writer, then, when there are, the schema version (`""`: none) and
 * tagged fields, tab-separated: `P` + the preview (a tab or newline in it
 * written as a space) and `F` + the fork point as JSON (which never holds a
 * tab).
 */
export function metaText(r: HandleMeta): string {
  const sv = r.schemaVersion == null ? "" : String(r.schemaVersion);
  const p = r.preview === undefined ? "" : `\tP${r.preview.replace(/[\t\n]/g, " ")}`;
  const f = r.forkedFrom == null
    ? ""
    : `\tF${JSON.stringify({ handle: r.forkedFrom.handle, version: r.forkedFrom.version })}`;
  const tail = p === "" && f === "" ? (sv === "" ? "" : `\t${sv}`) : `\t${sv}${p}${f}`;
  return `${r.kind}\t${r.version}\t${r.createdAt}\t${r.updatedAt}\t${
    r.expiresAt === null ? "" : r.expiresAt
  }\t${writerText(r.lastWriter)}${tail}`;
}

/** Metadata from its `m` field. */
export function metaOf(handle: string, m: string): HandleMeta {
  const [kind = "", v, c, u, e = "", w = "", sv = "", ...tagged] = m.split("\t");
  const p = tagged.find((f) => f.startsWith("P"));
  const fk = tagged.find((f) => f.startsWith("F"));
  return {
    handle,
    kind,
    version: Number(v),
    createdAt: Number(c),
    updatedAt: Number(u),
    expiresAt: e === "" ? null : Number(e),
    lastWriter: w === "" ? null : JSON.parse(w) as string,
    ...(sv === "" ? {} : { schemaVersion: Number(sv) }),
    ...(p === undefined ? {} : { preview: p.slice(1) }),
    ...(fk === undefined ? {} : { forkedFrom: JSON.parse(fk.slice(1)) as ForkPoint }),
  };
}

/** A record from its state text and its `m` field. */
export function recordOf(handle: string, s: string | null | undefined, m: string): HandleRecord {
  const [kind = "", v, c, u, e = "", w = "", sv = "", ...tagged] = m.split("\t");
  const record: HandleRecord = {
    handle,
    kind,
    state: s ?? "",
    version: Number(v),
    createdAt: Number(c),
    updatedAt: Number(u),
    expiresAt: e === "" ? null : Number(e),
    lastWriter: w === "" ? null : JSON.parse(w) as string,
  };
  if (sv !== "") record.schemaVersion = Number(sv);
  for (const f of tagged) {
    if (f.startsWith("P") && record.preview === undefined) record.preview = f.slice(1);
    else if (f.startsWith("F") && record.forkedFrom === undefined) {
      record.forkedFrom = JSON.parse(f.slice(1)) as ForkPoint;
    }
  }
  return record;
}

/** A record from its `d` field (metadata, newline, state), or `null` when absent. */
export function recordOfD(handle: string, d: string | null | undefined): HandleRecord | null {
  if (typeof d !== "string") return null;
  const nl = d.indexOf("\n");
  return recordOf(handle, d.slice(nl + 1), d.slice(0, nl));
}

/**
 * A record from its `d` field as bytes, or `null` when absent. The state
 * is decoded on its own: `JSON.parse` of a slice of a longer string costs
 * about twice a parse of a string of its own.
 */
export function recordOfBytes(
  handle: string,
  d: Uint8Array | null | undefined,
): HandleRecord | null {
  if (!(d instanceof Uint8Array)) return null;
  const b = Buffer.isBuffer(d) ? d : Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  // The metadata holds no raw newline, and no UTF-8 sequence holds byte 10.
  const nl = b.indexOf(10);
  return recordOf(handle, b.toString("utf8", nl + 1), b.toString("utf8", 0, nl));
}

/** A lease from its stored text (expiresAt, tab, holder). */
export function leaseOf(text: string): LeaseRecord {
  const tab = text.indexOf("\t");
  return { holder: text.slice(tab + 1), expiresAt: Number(text.slice(0, tab)) };
}

/** An expiry as the scripts take it: `""` for never. */
export function expiresText(e: number | null): string {
  return e === null ? "" : String(e);
}

/**
 * The changelog fields of a script header — entry version, at, maxEntries,
 * and the cutoff below which entries are too old — empty without an entry.
 */
export function logHead(
  entry: ChangeEntry | undefined,
  ctx: Pick<WriteContext, "now" | "retention">,
): string {
  if (!entry) return "\t\t\t";
  const r = ctx.retention;
  const cutoff = r ? ctx.now - r.maxAgeMs : NaN;
  return `${entry.version}\t${entry.at}\t${r ? r.maxEntries : ""}\t${
    Number.isFinite(cutoff) ? cutoff : ""
  }`;
}

/**
 * The audit step arguments of a grant or transfer script — two unused
 * fields, the record's new index member, the entry's `at`, `maxEntries` and
 * the age cutoff; and the entry's `at`, a tab and its text after its version
 * (the script numbers it: see `auditEntry`) — or two `""` without a step.
 */
export function auditArgs(audit: AuditStep | undefined, enc: string): [string, string] {
  if (!audit) return ["", ""];
  const { at, tail, retention: r } = audit;
  return [`\t${member(at, enc)}\t\t${at}\t${r.maxEntries}\t${at - r.maxAgeMs}`, `${at}\t${tail}`];
}

/** The script arguments after the header: the entry as stored (`at`, tab, text), if any. */
export function logArgs(entry: ChangeEntry | undefined): string[] {
  return entry ? [`${entry.at}\t${entry.text}`] : [];
}

/** Milliseconds until Redis may drop a record (`-1`: never), relative to the store's clock. */
export function ttlOf(expiresAt: number | null, ctx: WriteContext): number {
  if (expiresAt === null) return -1;
  return Math.max(Math.ceil(expiresAt + ctx.graceMs - ctx.now), 1);
}

/** Unicode code point order (the byte order of UTF-8). */
export function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator](), ib = b[Symbol.iterator]();
  while (true) {
    const x = ia.next(), y = ib.next();
    if (x.done || y.done) return x.done ? (y.done ? 0 : -1) : 1;
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

/** The replay answer of a script (`{'R', f, n, h, d}`). */
export function replayOf(reply: Reply, handle: string | null): Replayed {
  // {'R', f, n, h, d}
  const fingerprint = reply[1] ?? "";
  if (reply[2] === "1") return { replayed: true, fingerprint, result: null };
  const h = reply[3] ? decodeHandle(reply[3]) : handle ?? "";
  return { replayed: true, fingerprint, result: recordOfD(h, reply[4]) };
}

/** fp, till, ittl, h of the idempotency claim (empty fields without one). */
export function idemArgs(ctx: WriteContext, enc: string): string {
  const c = ctx.idempotency;
  if (!c) return "\t\t\t";
  return `${c.fingerprint}\t${c.expiresAt}\t${Math.max(c.expiresAt - ctx.now, 1)}\t${enc}`;
}

/** Whether a script's reply says it wrote (`1`). */
export const wroteOne = (reply: unknown): boolean => reply === 1;

/**
 * The quota argument a script reads last (`Q`, tab, maxHandles, maxBytes,
 * writesPerMinute, `""` = none), or nothing when the write has no quotas.
 */
export function quotaArgs(ctx: WriteContext): string[] {
  const q = ctx.quota;
  if (!q) return [];
  return [`Q\t${q.maxHandles ?? ""}\t${q.maxBytes ?? ""}\t${q.writesPerMinute ?? ""}`];
}

/**
 * Throws the {@link QuotaExceeded} of a script's refusal
 * (`{'Q', quota, limit, usage}`); returns for any other reply.
 */
export function refuseQuota(reply: Reply, ctx: WriteContext): void {
  if (reply[0] !== "Q") return;
  const quota = reply[1] as QuotaName;
  const retry = quota === "writes_per_minute" ? retryAfterSeconds(ctx.now) : undefined;
  throw new QuotaExceeded(quota, Number(reply[2]), Number(reply[3]), retry);
}
