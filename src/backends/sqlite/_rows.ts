/**
 * Rows of the SQLite backend's tables, as `node:sqlite` returns them, turned
 * into records.
 *
 * @module
 */

import type { SQLOutputValue, StatementSync } from "node:sqlite";
import type {
  ChangeEntry,
  ForkPoint,
  HandleMeta,
  HandleRecord,
  LeaseRecord,
} from "../../backend.ts";
import { forkedFromText, recordCells } from "../_sql.ts";

/** A row as `node:sqlite` returns it: an object, or an array after `setReturnArrays(true)`. */
export type Row = Record<string, SQLOutputValue> | SQLOutputValue[];

/** The metadata columns, in the order {@link metaOf} reads them. */
export const META = "handle, kind, version, created_ms, updated_ms, expires_ms, last_writer";

/** A record's columns but the handle, in the order {@link recordOf} reads them. */
export const RECORD =
  "kind, state, version, created_ms, updated_ms, expires_ms, last_writer, schema_version, " +
  "preview, forked_from";

/** How many columns {@link RECORD} names: a column selected after them is at this index. */
export const RECORD_COLUMNS = RECORD.split(",").length;

/**
 * Asks a statement for rows as arrays, which skips building an object per
 * row (`setReturnArrays` exists at runtime but not in the bundled types).
 */
export function returnArrays(stmt: StatementSync): StatementSync {
  const s = stmt as unknown as { setReturnArrays?: (on: boolean) => void };
  if (typeof s.setReturnArrays === "function") s.setReturnArrays(true);
  return stmt;
}

/** The cells of a row in column order, whichever form it came in. */
export function cells(row: Row): SQLOutputValue[] {
  return Array.isArray(row) ? row : Object.values(row);
}

/** A record from a row of {@link RECORD} columns. */
export function recordOf(handle: string, r: Row): HandleRecord {
  const row = cells(r);
  return {
    handle,
    kind: row[0] as string,
    state: row[1] as string,
    ...tail(row),
    ...schemaVersionOf(row[7]),
    ...(row[8] == null ? {} : { preview: row[8] as string }),
    ...forkedFromOf(row[9]),
  };
}

/** Metadata from a row of {@link META} columns. */
export function metaOf(r: Row): HandleMeta {
  const row = cells(r);
  return { handle: row[0] as string, kind: row[1] as string, ...tail(row) };
}

/** The fields from `version` on: columns 2 to 6 of both {@link RECORD} and {@link META} rows. */
function tail(row: SQLOutputValue[]): Omit<HandleMeta, "handle" | "kind"> {
  return {
    version: row[2] as number,
    createdAt: row[3] as number,
    updatedAt: row[4] as number,
    expiresAt: row[5] as number | null,
    lastWriter: row[6] as string | null,
  };
}

/**
 * The `schemaVersion` field of a record from its column: absent when `NULL`
 * (a state written without a typed kind).
 *
 * @param cell The `schema_version` cell.
 * @returns `{ schemaVersion }` or `{}`.
 */
export function schemaVersionOf(cell: SQLOutputValue | undefined): { schemaVersion?: number } {
  return cell == null ? {} : { schemaVersion: Number(cell) };
}

/**
 * The `forkedFrom` field of a record from its `forked_from` column (the
 * fork point as JSON text): absent when `NULL` (a handle that is no fork).
 *
 * @param cell The `forked_from` cell.
 * @returns `{ forkedFrom }` or `{}`.
 */
export function forkedFromOf(cell: SQLOutputValue | undefined): { forkedFrom?: ForkPoint } {
  return cell == null ? {} : { forkedFrom: JSON.parse(cell as string) as ForkPoint };
}

/** A changelog entry from a `version, at, text` row. */
export function entryOf(r: Row): ChangeEntry {
  const row = cells(r);
  return { version: row[0] as number, at: row[1] as number, text: row[2] as string };
}

/** A lease from a `holder, expires_at` row. */
export function leaseOf(row: Record<string, SQLOutputValue>): LeaseRecord {
  return { holder: row.holder as string, expiresAt: row.expires_at as number };
}

/**
 * A record's column values after `user, handle`, in {@link RECORD} order.
 *
 * @param r The record.
 * @returns The values.
 */
export function recordValues(
  r: HandleRecord,
): [
  string,
  string,
  number,
  number,
  number,
  number | null,
  string | null,
  number | null,
  string | null,
  string | null,
] {
  return [...recordCells(r), r.schemaVersion ?? null, r.preview ?? null, forkedFromText(r)];
}
