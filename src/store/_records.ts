/**
 * Records in and out: a user's records and grants exported as the backend
 * keeps them, checked and imported exactly as given (a restore, a
 * migration); and a user's usage against the quotas.
 *
 * @module
 */

import type { Backend, GrantRecord, HandleMeta, HandleRecord } from "../backend.ts";
import { InvalidArgument } from "../errors.ts";
import { GrantEnded, grantGone } from "../grants.ts";
import { decodeState } from "../json.ts";
import { previewOf } from "../preview.ts";
import type { ImportRecordOptions, ImportResult, UsageInfo } from "../types.ts";
import {
  checkGrantRecord,
  checkListedUser,
  checkOptions,
  checkRecordRest,
  checkRecordTimes,
  checkUser,
  isIdentifier,
  unsupported,
} from "./_check.ts";
import { call, type Core } from "./_core.ts";
import { compareCodeUnits } from "./_cursor.ts";
import { grantBackend, needGrants } from "./_share.ts";

/** Metadata rows per backend listing when a whole user is walked. */
const WALK_PAGE = 500;
/** Records read at once when a user's records are exported. */
const EXPORT_READS = 32;
/** Handles whose `updatedAt` is within this margin of the start of an export's listing are listed again. */
const EXPORT_CATCH_UP_MS = 5 * 60_000;

/** Every record of a user (see {@link HandleStore.exportRecords}). */
export function exportRecords(core: Core, user: string): AsyncIterableIterator<HandleRecord> {
  checkListedUser(user);
  return exportAll(core, user);
}

/** How many records {@link exportRecords} would give now. */
export async function countRecords(core: Core, user: string): Promise<number> {
  checkListedUser(user);
  let n = 0;
  await walk(core, user, () => {
    n++;
  });
  return n;
}

/** The generator of {@link exportRecords}. */
async function* exportAll(core: Core, user: string): AsyncGenerator<HandleRecord> {
  const start = core.clock();
  const seen = new Set<string>();
  await walk(core, user, (m) => {
    seen.add(m.handle);
  });
  // A handle written while the listing ran moved ahead of its cursor (the
  // order follows updatedAt): a second pass over the newest catches it.
  const since = start - EXPORT_CATCH_UP_MS;
  await walk(core, user, (m) => {
    if (m.updatedAt < since) return false;
    seen.add(m.handle);
    return true;
  });
  const handles = [...seen].sort(compareCodeUnits);
  for (let i = 0; i < handles.length; i += EXPORT_READS) {
    const chunk = handles.slice(i, i + EXPORT_READS);
    const records = await call(
      core,
      () => Promise.all(chunk.map((h) => core.backend.read(user, h))),
    );
    for (const record of records) if (record) yield withoutPreview(record);
  }
}

/** Lists a user's metadata, newest first, expired included, until `visit` answers `false`. */
async function walk(
  core: Core,
  user: string,
  visit: (m: HandleMeta) => boolean | void,
): Promise<void> {
  let after: { updatedAt: number; handle: string } | undefined;
  for (;;) {
    const page = await call(
      core,
      () => core.backend.list(user, { limit: WALK_PAGE, ...(after ? { after } : {}) }),
    );
    for (const m of page) if (visit(m) === false) return;
    const last = page[page.length - 1];
    if (page.length < WALK_PAGE || !last) return;
    after = { updatedAt: last.updatedAt, handle: last.handle };
  }
}

/** Checks a record by the rules {@link importRecord} applies (see {@link HandleStore.checkRecord}). */
export function checkRecord(core: Core, user: string, record: HandleRecord): void {
  checkRecordTimes(record);
  checkRecordRest(user, record, core.maxBytes);
}

/** Imports a record exactly as given (see {@link HandleStore.importRecord}). */
export async function importRecord(
  core: Core,
  user: string,
  record: HandleRecord,
  options: ImportRecordOptions = {},
): Promise<ImportResult> {
  checkOptions(options, "importRecord");
  checkRecordTimes(record);
  const now = core.clock();
  // Nothing of a record past its grace is kept, whatever else it holds.
  if (record.expiresAt !== null && record.expiresAt + core.graceMs <= now) {
    return { outcome: "expired" };
  }
  checkRecordRest(user, record, core.maxBytes);
  const clean: HandleRecord = {
    handle: record.handle,
    kind: record.kind,
    state: record.state,
    version: record.version,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    expiresAt: record.expiresAt,
    lastWriter: record.lastWriter,
    ...(record.schemaVersion == null ? {} : { schemaVersion: record.schemaVersion }),
    ...(record.forkedFrom == null
      ? {}
      : { forkedFrom: { handle: record.forkedFrom.handle, version: record.forkedFrom.version } }),
    // checkRecordRest checked that the state is a JSON object.
    preview: previewOf(decodeState(record.state)),
  };
  const read = async () =>
    withoutPreview(await call(core, () => core.backend.read(user, clean.handle)));
  if (options.dryRun) {
    const current = await read();
    const outcome = current === null
      ? "inserted"
      : current.version < clean.version
      ? "replaced"
      : "kept";
    return { outcome, current };
  }
  const write = importer(core);
  if (!write) throw unsupported("import records");
  const outcome = await call(core, () => write(user, clean, { now, graceMs: core.graceMs }));
  return { outcome, current: await read() };
}

/** The backend's import primitive, bound, or `undefined` when it has none. */
export function importer(core: Core): NonNullable<Backend["records"]>["import"] | undefined {
  const records = core.backend.records;
  return records?.import.bind(records);
}

/** A user's usage (see {@link HandleStore.usage}). */
export async function usage(core: Core, user: string): Promise<UsageInfo> {
  checkUser({ user });
  const b = core.backend;
  const quotas = b.quotas;
  if (!quotas) throw unsupported("report usage");
  const now = core.clock();
  return await call(core, () => quotas.usage(user, now));
}

/** The grants in force on a user's handle, whole (see {@link HandleStore.exportGrants}). */
export async function exportGrants(
  core: Core,
  user: string,
  handle: string,
): Promise<GrantRecord[]> {
  const b = grantBackend(core);
  // A name the store would refuse (a record written from outside) has no grants: `share` checks.
  if (!b || !isIdentifier(user) || !isIdentifier(handle)) return [];
  const now = core.clock();
  const all = await call(core, () => b.grants.of(user, handle));
  // Oldest first, and each re-share after the grant it re-shares (two
  // grants of one millisecond may come back in either order).
  const pending = all.filter((g) => grantGone(g, now) === null);
  const ids = new Set(pending.map((g) => g.grant));
  const placed = new Set<string>();
  const out: GrantRecord[] = [];
  while (pending.length > 0) {
    const i = pending.findIndex((g) =>
      g.parent === null || !ids.has(g.parent) || placed.has(g.parent)
    );
    const [g] = pending.splice(i < 0 ? 0 : i, 1);
    placed.add(g!.grant);
    out.push(g!);
  }
  return out;
}

/** Imports a grant exactly as exported (see {@link HandleStore.importGrant}). */
export async function importGrant(
  core: Core,
  grant: GrantRecord,
  options: { dryRun?: boolean } = {},
): Promise<"inserted" | "identical" | "ended" | "missing"> {
  checkGrantRecord(grant);
  const b = needGrants(core);
  const now = core.clock();
  const same = (g: GrantRecord) => GRANT_KEYS.every((k) => g[k] === grant[k]);
  for (const id of [grant.grant, grant.alias]) {
    const held = await call(core, () => b.grants.read(id));
    if (!held) continue;
    if (same(held)) return grantGone(held, now) === null ? "identical" : "ended";
    throw new InvalidArgument(
      `The target holds another grant under ${id}; this one was not imported.`,
      { field: id === grant.grant ? "grant" : "alias" },
    );
  }
  if (grantGone(grant, now) !== null) return "ended";
  const record = await call(core, () => b.read(grant.owner, grant.handle));
  if (!record || options.dryRun) return "missing";
  const res = await call(core, () => b.grants.put({ ...grant, endedAt: null }, now)).catch(
    (e) => {
      if (e instanceof GrantEnded) return "ended" as const;
      throw e;
    },
  );
  return res === "ended" ? "ended" : "inserted";
}

/** The fields that make two grants the same grant (times and ending aside). */
const GRANT_KEYS = ["grant", "alias", "owner", "handle", "to", "rights", "by", "parent"] as const;

/**
 * A record as the store hands records out (export, import): without its
 * preview, which is derived from the state and computed again on import.
 */
function withoutPreview<R extends HandleRecord | null>(r: R): R {
  if (r === null || r.preview === undefined) return r;
  const { preview: _, ...rest } = r;
  return rest as R;
}
