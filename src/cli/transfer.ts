/**
 * Moving records between backends exactly: walking every record of a
 * backend, and restoring records into another with a per-record SHA-256
 * verification. Shared by `export`, `import` and `migrate`.
 *
 * Re-running is safe by construction: {@link Backend.importRecord} writes a record
 * only when the target has no record with that handle or an older version,
 * each record in one atomic step, so an interrupted run leaves whole records
 * behind and the next run skips them ("identical") and copies the rest.
 *
 * @module
 */

import type { Backend, HandleRecord } from "../backend.ts";
import { CliFailure } from "./_common.ts";
import {
  digestLine,
  isIdentifier,
  NOT_AN_IDENTIFIER,
  recordLine,
  type UserRecord,
} from "./records.ts";
import type { Progress } from "./progress.ts";

/** How long an expired record stays readable before it is reclaimed (the store's default). */
export const GRACE_MS = 7 * 86_400_000;

const PAGE = 500;
/** Records whose `updatedAt` is within this margin of the start of a listing are listed again. */
const CATCH_UP_MS = 5 * 60_000;

/**
 * The scheme of a backend URL, for messages (`sqlite`, `redis`, …).
 *
 * @param url A backend URL.
 * @returns Its scheme, lowercase.
 */
export function schemeOf(url: string): string {
  return /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase() ?? "this";
}

/**
 * Throws a clear failure when a backend lacks a primitive a command needs.
 *
 * @param backend The open backend.
 * @param url Its URL, for the message.
 * @param need The primitive.
 * @param command The command that needs it.
 */
export function requireCapability(
  backend: Backend,
  url: string,
  need: "listUsers" | "importRecord",
  command: string,
): void {
  if (typeof backend[need] === "function") return;
  const what = need === "listUsers" ? "cannot list its users yet" : "cannot restore records yet";
  const hint = need === "listUsers"
    ? ` Pass --user to ${command} one user's records, or upgrade mcpstate.`
    : " Upgrade mcpstate, or use another backend as the target.";
  throw new CliFailure(
    `The ${schemeOf(url)} backend ${what}, which ${command} needs.${hint}`,
  );
}

/**
 * Every user of a backend, sorted by code unit so that output order does not
 * depend on the engine.
 *
 * @param backend A backend with `listUsers`.
 * @returns The users.
 */
export async function allUsers(backend: Backend): Promise<string[]> {
  const users: string[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await backend.listUsers!({
      limit: 1000,
      ...(after === undefined ? {} : { after }),
    });
    users.push(...page);
    if (page.length < 1000) break;
    after = page[page.length - 1];
  }
  return [...new Set(users)].sort(compareCodeUnits);
}

/**
 * Every handle of one user, expired ones included, sorted. Records that were
 * written while the listing ran (and so moved ahead of its cursor, which
 * follows `updatedAt`) are caught by a second pass over the newest records.
 *
 * @param backend The backend.
 * @param user The user.
 * @returns The handles.
 */
export async function allHandles(backend: Backend, user: string): Promise<string[]> {
  const start = Date.now();
  const seen = new Set<string>();
  let after: { updatedAt: number; handle: string } | undefined;
  for (;;) {
    const page = await backend.list(user, { limit: PAGE, ...(after ? { after } : {}) });
    for (const m of page) seen.add(m.handle);
    const last = page[page.length - 1];
    if (page.length < PAGE || !last) break;
    after = { updatedAt: last.updatedAt, handle: last.handle };
  }
  const since = start - CATCH_UP_MS;
  after = undefined;
  catchUp: for (;;) {
    const page = await backend.list(user, { limit: PAGE, ...(after ? { after } : {}) });
    for (const m of page) {
      if (m.updatedAt < since) break catchUp;
      seen.add(m.handle);
    }
    const last = page[page.length - 1];
    if (page.length < PAGE || !last) break;
    after = { updatedAt: last.updatedAt, handle: last.handle };
  }
  return [...seen].sort(compareCodeUnits);
}

/**
 * Walks every record of a backend (or of one user): users in order, each
 * user's handles in order, records read whole.
 *
 * @param backend The source.
 * @param users The users to walk.
 * @returns The records.
 */
export async function* walkRecords(
  backend: Backend,
  users: readonly string[],
): AsyncGenerator<UserRecord> {
  for (const user of users) {
    const handles = await allHandles(backend, user);
    for (let i = 0; i < handles.length; i += 32) {
      const chunk = handles.slice(i, i + 32);
      const records = await Promise.all(chunk.map((h) => backend.read(user, h)));
      for (const record of records) if (record) yield { user, record };
    }
  }
}

/**
 * Counts the records of some users (metadata only), for a progress total.
 *
 * @param backend The source.
 * @param users The users.
 * @returns How many records they have.
 */
export async function countRecords(backend: Backend, users: readonly string[]): Promise<number> {
  let n = 0;
  for (const user of users) {
    let after: { updatedAt: number; handle: string } | undefined;
    for (;;) {
      const page = await backend.list(user, { limit: PAGE, ...(after ? { after } : {}) });
      n += page.length;
      const last = page[page.length - 1];
      if (page.length < PAGE || !last) break;
      after = { updatedAt: last.updatedAt, handle: last.handle };
    }
  }
  return n;
}

/** What a restore (or a check) found and did. */
export interface TransferReport {
  /** Records read from the source. */
  records: number;
  /** Distinct users among them. */
  users: number;
  /** Written: the target had no such handle. */
  inserted: number;
  /** Written over an older version in the target. */
  replaced: number;
  /** Already in the target, identical (a re-run, or migrated before). */
  identical: number;
  /** Kept: the target holds a newer version. */
  newerInTarget: number;
  /** Not written: expired longer ago than the grace period. */
  skippedExpired: number;
  /** `--check` only: absent from the target. */
  missing: number;
  /** `--check` only: the target holds an older version. */
  olderInTarget: number;
  /** Failed verification: a different record at the same version, or a write that did not read back. */
  mismatched: number;
  /** The first mismatch, for the error line. */
  firstProblem: string | null;
}

/** Options of {@link restoreAll}. */
export interface RestoreOptions {
  /** Compare only; write nothing. */
  check: boolean;
  /** At most this many records per second. */
  rate?: number;
  /** The progress bar to tick. */
  progress: Progress;
}

/**
 * Restores records into a backend and verifies each: after the write, the
 * record is read back and the SHA-256 of its canonical line must equal the
 * source's (or the target must hold a newer version, which is kept).
 *
 * @param target The backend to write (it must have `restore` unless checking).
 * @param records The records to restore.
 * @param options Check only, rate limit, progress.
 * @returns The counts.
 */
export async function restoreAll(
  target: Backend,
  records: AsyncIterable<UserRecord>,
  options: RestoreOptions,
): Promise<TransferReport> {
  const report: TransferReport = {
    records: 0,
    users: 0,
    inserted: 0,
    replaced: 0,
    identical: 0,
    newerInTarget: 0,
    skippedExpired: 0,
    missing: 0,
    olderInTarget: 0,
    mismatched: 0,
    firstProblem: null,
  };
  const users = new Set<string>();
  const problem = (user: string, handle: string, what: string) => {
    report.mismatched++;
    report.firstProblem ??= `user ${JSON.stringify(user)}, handle ${
      JSON.stringify(handle)
    }: ${what}`;
  };
  const one = async ({ user, record }: UserRecord): Promise<void> => {
    report.records++;
    users.add(user);
    const now = Date.now();
    if (record.expiresAt !== null && record.expiresAt + GRACE_MS <= now) {
      report.skippedExpired++;
      return;
    }
    const names = [user, record.handle, record.kind, record.lastWriter ?? ""];
    if (!names.every(isIdentifier)) {
      problem(
        user,
        record.handle,
        `its user, handle, kind or writer ${NOT_AN_IDENTIFIER} (not written)`,
      );
      return;
    }
    let line: string;
    try {
      line = recordLine(user, record);
    } catch (e) {
      problem(user, record.handle, `the source record is damaged: ${(e as Error).message}`);
      return;
    }
    const digest = await digestLine(line);
    let outcome: "inserted" | "replaced" | "kept" | null = null;
    if (!options.check) {
      outcome = await target.importRecord!(user, record, { now, graceMs: GRACE_MS });
    }
    const back = await target.read(user, record.handle);
    if (back === null) {
      if (options.check) report.missing++;
      else problem(user, record.handle, "the target does not hold it after writing it");
      return;
    }
    if (await sameRecord(user, back, digest)) {
      if (outcome === "inserted") report.inserted++;
      else if (outcome === "replaced") report.replaced++;
      else report.identical++;
    } else if (back.version > record.version) {
      report.newerInTarget++;
    } else if (options.check && back.version < record.version) {
      report.olderInTarget++;
    } else if (back.version === record.version) {
      problem(
        user,
        record.handle,
        `the target holds a different record at the same version ${record.version} (kept; nothing was overwritten)`,
      );
    } else {
      problem(
        user,
        record.handle,
        `the target holds version ${back.version} after writing ${record.version}`,
      );
    }
  };

  const rate = options.rate;
  const batch = rate === undefined ? 32 : Math.max(1, Math.min(32, Math.floor(rate / 20)));
  const started = performance.now();
  let chunk: UserRecord[] = [];
  const flush = async () => {
    await Promise.all(chunk.map(one));
    options.progress.tick(chunk.length);
    chunk = [];
    if (rate !== undefined) {
      const due = (report.records / rate) * 1000 - (performance.now() - started);
      if (due > 0) await new Promise((r) => setTimeout(r, due));
    }
  };
  try {
    for await (const rec of records) {
      chunk.push(rec);
      if (chunk.length >= batch) await flush();
    }
    if (chunk.length > 0) await flush();
  } finally {
    options.progress.finish();
  }
  report.users = users.size;
  return report;
}

async function sameRecord(user: string, back: HandleRecord, digest: string): Promise<boolean> {
  try {
    return await digestLine(recordLine(user, back)) === digest;
  } catch {
    return false;
  }
}

/**
 * The report as a snake_case JSON object for `--json`.
 *
 * @param r The report.
 * @returns The summary.
 */
export function reportJson(r: TransferReport): Record<string, unknown> {
  return {
    records: r.records,
    users: r.users,
    inserted: r.inserted,
    replaced: r.replaced,
    identical: r.identical,
    newer_in_target: r.newerInTarget,
    skipped_expired: r.skippedExpired,
    missing: r.missing,
    older_in_target: r.olderInTarget,
    mismatched: r.mismatched,
    verified: r.inserted + r.replaced + r.identical,
  };
}

/**
 * The report as one sentence for people.
 *
 * @param r The report.
 * @param verb "Imported", "Migrated" or "Checked".
 * @param check Whether nothing was written.
 * @returns The summary line.
 */
export function reportText(r: TransferReport, verb: string, check: boolean): string {
  const n = (x: number) => x.toLocaleString("en-US");
  const verified = r.inserted + r.replaced + r.identical;
  const parts = check
    ? [
      `${n(r.identical)} identical in the target`,
      `${n(r.missing)} missing`,
      `${n(r.olderInTarget)} older in the target`,
      `${n(r.newerInTarget)} newer in the target`,
    ]
    : [
      `${n(r.inserted)} inserted`,
      `${n(r.replaced)} replaced`,
      `${n(r.identical)} already identical`,
      `${n(r.newerInTarget)} kept (newer in the target)`,
    ];
  if (r.skippedExpired > 0) {
    parts.push(`${n(r.skippedExpired)} skipped (expired past the grace period)`);
  }
  if (r.mismatched > 0) parts.push(`${n(r.mismatched)} conflicting`);
  return `${verb} ${n(r.records)} record${r.records === 1 ? "" : "s"} of ${n(r.users)} user${
    r.users === 1 ? "" : "s"
  }: ${parts.join(", ")}. ${
    check
      ? "Compared each record by SHA-256."
      : `Verified ${n(verified)} by reading each back (SHA-256).`
  }`;
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
