/**
 * Rows of the PostgreSQL backend's tables turned into records, records into
 * statement parameters, and the change feed's channel and payloads.
 *
 * @module
 */

import type {
  AuditStep,
  ChangeEntry,
  ForkPoint,
  HandleMeta,
  HandleRecord,
  LeaseOutcome,
  LeaseRecord,
  WriteContext,
} from "../../backend.ts";
import { recordCells } from "../_sql.ts";

/** The largest `NOTIFY` payload sent; a longer one (the limit is 8,000 bytes) becomes `"*"`. */
const MAX_PAYLOAD_BYTES = 7_900;

/**
 * An entry's parameters of `writeLogged`: the entry, then the retention
 * bounds (delete `version <=` the first, or `at <` the second).
 */
export function entryParams(e: ChangeEntry, ctx: WriteContext): (string | number)[] {
  const r = ctx.retention;
  return [
    e.version,
    e.at,
    e.text,
    r ? e.version - r.maxEntries : 0,
    r ? ctx.now - r.maxAgeMs : Number.MIN_SAFE_INTEGER,
  ];
}

/** A record's columns after `user_id`, in the order of {@link RECORD_COLUMNS}. */
export function recordParams(r: HandleRecord): (string | number | null)[] {
  return [r.handle, ...recordCells(r)];
}

/** A lease from a `holder, expires_at` row. */
export function leaseOf(row: readonly unknown[]): LeaseRecord {
  return { holder: String(row[0]), expiresAt: Number(row[1]) };
}

/**
 * The `NOTIFY` channel of a schema's change feed: `mcpstate_<schema>`, or,
 * past PostgreSQL's 63 bytes, its first 54 characters and a hash of the schema.
 */
export function channelOf(schema: string): string {
  const name = `mcpstate_${schema}`;
  if (name.length <= 63) return name;
  return `${name.slice(0, 54)}_${(hash32(schema) >>> 0).toString(16).padStart(8, "0")}`;
}

const encoder = new TextEncoder();

/** The `NOTIFY` payload of a write: `[user, handle]` as JSON, or `"*"` (everyone) when too long. */
export function payloadOf(user: string, handle: string): string {
  const text = JSON.stringify([user, handle]);
  return encoder.encode(text).length <= MAX_PAYLOAD_BYTES ? text : "*";
}

/** A record from a row of `RECORD_COLUMNS`. */
export function recordOf(row: readonly unknown[]): HandleRecord {
  return {
    handle: String(row[0]),
    kind: String(row[1]),
    state: String(row[2]),
    ...tail(row, 3),
    ...(row[8] == null ? {} : { schemaVersion: Number(row[8]) }),
    ...(row[9] == null ? {} : { preview: String(row[9]) }),
    ...(row[10] == null ? {} : { forkedFrom: JSON.parse(String(row[10])) as ForkPoint }),
  };
}

/** Metadata from a row of `META_COLUMNS`. */
export function metaOf(row: readonly unknown[]): HandleMeta {
  return { handle: String(row[0]), kind: String(row[1]), ...tail(row, 2) };
}

/** The fields from `version` on, which start at column `at` of the row. */
function tail(row: readonly unknown[], at: number): Omit<HandleMeta, "handle" | "kind"> {
  return {
    version: Number(row[at]),
    createdAt: Number(row[at + 1]),
    updatedAt: Number(row[at + 2]),
    expiresAt: row[at + 3] == null ? null : Number(row[at + 3]),
    lastWriter: row[at + 4] == null ? null : String(row[at + 4]),
  };
}

/** FNV-1a of `text`, as a signed 32-bit integer. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of encoder.encode(text)) h = Math.imul(h ^ byte, 0x01000193);
  return h | 0;
}

/**
 * Adds the outcome of `ctx.lease` to a write's answer from the four lease
 * columns of a leased statement: the lease taken, or else the one in force
 * (left out when neither is there: another holder's lease lapsed or went
 * between the statement's snapshot and its upsert, and the store then takes
 * the lease by itself).
 */
export function leasedOutcome<T extends object>(
  out: T,
  ctx: WriteContext,
  cols: readonly unknown[],
): T & { lease?: LeaseOutcome } {
  if (!ctx.lease) return out;
  if (cols[0] != null) return { ...out, lease: { acquired: true, lease: leaseOf(cols) } };
  if (cols[2] != null && Number(cols[3]) > ctx.now) {
    return { ...out, lease: { acquired: false, lease: leaseOf(cols.slice(2)) } };
  }
  return out;
}

/** The parameters of the `audit` statement: `audit` on `(user, handle)`. */
export function auditParams(user: string, handle: string, audit: AuditStep): never[] {
  const { at, tail, retention } = audit;
  return [
    user,
    handle,
    at,
    tail,
    retention.maxEntries,
    at - retention.maxAgeMs,
    payloadOf(user, handle),
  ] as never[];
}
