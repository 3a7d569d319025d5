/**
 * What the Deno KV backend stores in each value — a record's head, its
 * chunked state, its changelog entries, its index entry, its trash entry,
 * idempotency records and write intents — and how text becomes bytes.
 *
 * @module
 */

import type { ChangeEntry, ForkPoint, HandleMeta, HandleRecord } from "../../backend.ts";
import { BackendError } from "../../errors.ts";

/** Largest state (bytes) kept inside the head key; larger states are chunked. */
export const INLINE_MAX = 63_488;
/** Bytes per chunk: Deno KV's value limit. */
export const CHUNK_BYTES = 65_536;
/** Chunks per commit: 12 × 64 KiB plus keys stays under the 819,200-byte commit limit. */
export const CHUNKS_PER_COMMIT = 12;
/** Superseded chunks deleted inside a head commit; more are handed to the collector. */
export const DELETE_IN_COMMIT = 48;
/** Keys deleted per commit when collecting a large chunk set. */
export const DELETE_BATCH = 100;
/** Changelog entries deleted inside a write's commit; a longer run is handed to the collector. */
export const LOG_DELETE_IN_COMMIT = 64;
/** Largest changelog entry text (bytes): one entry is one KV value, with its time. */
export const ENTRY_MAX = 65_280;
/** Changelog entries read per batch when retention looks for the first one young enough. */
export const AGE_SCAN_BATCH = 16;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A record's metadata but its handle, as the head and the list index keep it. */
export interface Meta {
  /** Kind. */
  k: string;
  /** Version. */
  v: number;
  /** createdAt. */
  c: number;
  /** updatedAt. */
  u: number;
  /** expiresAt. */
  e: number | null;
  /** lastWriter. */
  l: string | null;
  /** schemaVersion, when the state was written by a typed kind. */
  s?: number;
  /** forkedFrom, when the record is a fork. */
  f?: ForkPoint;
  /** preview, when the record was written with one. */
  p?: string;
}

/** The head of a record: its metadata and its state (inline or a chunk set). */
export interface Head extends Meta {
  /** Id of the write that produced this head (to recognise our own commit). */
  w: string;
  /** The state, inline. */
  b?: Uint8Array;
  /** Id of the chunk set holding the state. */
  d?: string;
  /** Number of chunks. */
  n?: number;
  /** Size of the state in bytes. */
  z: number;
  /** The bytes are UTF-16LE (the text was not well-formed Unicode), not UTF-8. */
  x?: true;
  /**
   * Id of the changelog: entries `g`…`v` all exist under it. Absent: no
   * changelog. A fresh id starts every new log, so a dropped one is collected
   * without ever touching a later one.
   */
  L?: string;
  /** First live changelog version (entries below it are being collected). */
  g?: number;
  /** No live entry is older than this (epoch ms), up to clock skew between writers. */
  ga?: number;
}

/** A trashed record: its head as it was, and the end of its undo window. */
export interface Trashed {
  /** The head, unchanged (its chunks and changelog stay where they are). */
  h: Head;
  /** Epoch ms until which it can be brought back. */
  t: number;
}

/** One changelog entry's value (its version is the last key part). */
export interface LogValue {
  /** Epoch ms of the write. */
  a: number;
  /** The entry text. */
  b: Uint8Array;
  /** The bytes are UTF-16LE, not UTF-8. */
  x?: true;
}

/** A list index entry: metadata only. */
export interface IndexEntry extends Meta {
  /** The handle. */
  h: string;
}

/** An idempotency record. */
export interface IdemValue {
  /** Fingerprint of the first call. */
  f: string;
  /** Expiry (store clock). */
  t: number;
  /** The first call's result (metadata), `null` for a removal. */
  r: IndexEntry | null;
  /** Its state, inline. */
  b?: Uint8Array;
  /** Or the id and size of a chunk copy under the idempotency subspace. */
  d?: string;
  n?: number;
  z?: number;
  x?: true;
}

/**
 * An intent: a chunk set that no head has adopted yet, or keys to collect —
 * `n` chunks, or, with `l`, the changelog entries `f`…`f + n - 1` of log `l`.
 */
export interface Intent {
  n: number;
  dead?: true;
  l?: string;
  f?: number;
}

/** What a write does to the changelog: the head's log fields after it, and the keys to write or drop. */
export interface LogPlan {
  L?: string;
  g?: number;
  ga?: number;
  /** The entry to append. */
  entry?: { version: number; value: LogValue };
  /** Runs of entries to drop: `[log id, first version, last version]`. */
  drops: [string, number, number][];
}

/** Encoded state text. */
export interface Encoded {
  bytes: Uint8Array;
  utf16: boolean;
}

/** A chunk set written and announced by an intent, not yet adopted. */
export interface ChunkSet {
  d: string;
  n: number;
  intent: Deno.KvKey;
  intentVs: string;
}

/** Where a head's state lives after a commit. */
export type BodyRef =
  | { inline: Uint8Array; z: number; utf16: boolean }
  | { d: string; n: number; z: number; utf16: boolean; set?: ChunkSet };

/** Signals that a read raced a newer write and must start over. */
export class Raced extends Error {}

/** A state or entry text as bytes: UTF-8, or UTF-16LE when it is not well-formed Unicode. */
export function encodeText(text: string): Encoded {
  if (text.isWellFormed()) return { bytes: encoder.encode(text), utf16: false };
  const bytes = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    bytes[2 * i] = c & 0xff;
    bytes[2 * i + 1] = c >> 8;
  }
  return { bytes, utf16: true };
}

/** The text of {@link encodeText} bytes. */
export function decodeBytes(bytes: Uint8Array, utf16: boolean): string {
  if (!utf16) return decoder.decode(bytes);
  let out = "";
  for (let i = 0; i + 1 < bytes.length; i += 2) {
    out += String.fromCharCode(bytes[i]! | (bytes[i + 1]! << 8));
  }
  return out;
}

/**
 * The stored value of a changelog entry: its text byte for byte.
 *
 * @throws {BackendError} when the text is more than one KV value holds
 *   ({@link DenoKvBackend.maxEntryBytes}; the store never hands over such an entry).
 */
export function logValueOf(entry: ChangeEntry): LogValue {
  const enc = encodeText(entry.text);
  if (enc.bytes.length > ENTRY_MAX) {
    throw new BackendError(
      `A changelog entry of ${enc.bytes.length} bytes is more than one Deno KV value holds (${ENTRY_MAX} bytes). Nothing was written; keep entries within the backend's maxEntryBytes, as HandleStore does.`,
    );
  }
  const value: LogValue = { a: entry.at, b: enc.bytes };
  if (enc.utf16) value.x = true;
  return value;
}

/** A record from its head (or any of its metadata: an index entry) and its state text. */
export function recordOf(handle: string, head: Meta, state: string): HandleRecord {
  return { handle, kind: head.k, state, ...tail(head) };
}

/** The listing index entry (metadata only) of a record. */
export function indexOf(r: HandleRecord): IndexEntry {
  return {
    h: r.handle,
    k: r.kind,
    v: r.version,
    c: r.createdAt,
    u: r.updatedAt,
    e: r.expiresAt,
    l: r.lastWriter,
    ...(r.schemaVersion == null ? {} : { s: r.schemaVersion }),
    ...(r.forkedFrom == null ? {} : { f: forkPointOf(r.forkedFrom) }),
    ...(r.preview === undefined ? {} : { p: r.preview }),
  };
}

/**
 * A fork point as the head keeps it: exactly its two fields.
 *
 * @param f The fork point.
 * @returns A copy.
 */
export function forkPointOf(f: ForkPoint): ForkPoint {
  return { handle: f.handle, version: f.version };
}

/** The metadata of a listing index entry. */
export function metaOfIndex(i: IndexEntry): HandleMeta {
  return { handle: i.h, kind: i.k, ...tail(i) };
}

/** The metadata from `version` on. */
function tail(m: Meta): Omit<HandleMeta, "handle" | "kind"> {
  return {
    version: m.v,
    createdAt: m.c,
    updatedAt: m.u,
    expiresAt: m.e,
    lastWriter: m.l,
    ...(m.s == null ? {} : { schemaVersion: m.s }),
    ...(m.f == null ? {} : { forkedFrom: forkPointOf(m.f) }),
    ...(m.p === undefined ? {} : { preview: m.p }),
  };
}

/** A fresh random id (chunk sets, logs, writes). */
export function newId(): string {
  const b = crypto.getRandomValues(new Uint8Array(10));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
