/**
 * Moving records between stores exactly: walking every record of a store,
 * and importing records into another with a per-record SHA-256
 * verification. Shared by `export`, `import` and `migrate`.
 *
 * Re-running is safe by construction: {@link HandleStore.importRecord}
 * writes a record only when the target has no record with that handle or an
 * older version, each record in one atomic step, so an interrupted run leaves
 * whole records behind and the next run skips them ("identical") and copies
 * the rest.
 *
 * @module
 */

import type { HandleRecord } from "../backend.ts";
import { McpStateError } from "../errors.ts";
import type { HandleStore } from "../store.ts";
import type { ImportResult } from "../types.ts";
import { CliFailure, EXIT_FAILURE, EXIT_OK } from "./_command.ts";
import { note, printResult } from "./_output.ts";
import {
  digestLine,
  type ExportLine,
  recordLine,
  type UserGrant,
  type UserRecord,
} from "./records.ts";
import type { Progress } from "./progress.ts";

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
 * Throws a clear failure when a store's backend lacks what a command needs.
 *
 * @param store The open store.
 * @param url Its URL, for the message.
 * @param need The capability.
 * @param command The command that needs it.
 */
export function requireCapability(
  store: HandleStore,
  url: string,
  need: "users" | "importRecord",
  command: string,
): void {
  if (store.capabilities[need]) return;
  const what = need === "users" ? "cannot list its users yet" : "cannot restore records yet";
  const hint = need === "users"
    ? ` Pass --user to ${command} one user's records, or upgrade mcpstate.`
    : " Upgrade mcpstate, or use another backend as the target.";
  throw new CliFailure(
    `The ${schemeOf(url)} backend ${what}, which ${command} needs.${hint}`,
  );
}

/**
 * Every user of a store, sorted by code unit so that output order does not
 * depend on the engine.
 *
 * @param store A store whose backend lists its users.
 * @returns The users.
 */
export async function allUsers(store: HandleStore): Promise<string[]> {
  const users: string[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await store.users({ limit: 1000, ...(after === undefined ? {} : { after }) });
    users.push(...page);
    if (page.length < 1000) break;
    after = page[page.length - 1];
  }
  return [...new Set(users)].sort(compareCodeUnits);
}

/**
 * Walks every record of some users of a store: users in order, each user's
 * records in handle order, each record followed by its grants in force.
 *
 * @param store The source.
 * @param users The users to walk.
 * @returns The records and grants.
 */
export async function* walkRecords(
  store: HandleStore,
  users: readonly string[],
): AsyncGenerator<ExportLine> {
  for (const user of users) {
    for await (const record of store.exportRecords(user)) {
      yield { user, record };
      for (const grant of await store.exportGrants(user, record.handle)) yield { grant };
    }
  }
}

/**
 * Counts the records of some users (metadata only), for a progress total.
 *
 * @param store The source.
 * @param users The users.
 * @returns How many records they have.
 */
export async function countRecords(store: HandleStore, users: readonly string[]): Promise<number> {
  let n = 0;
  for (const user of users) n += await store.countRecords(user);
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
  /** Grants read from the source. */
  grants: number;
  /** Grants written, or (`--check`) found identical in the target. */
  grantsVerified: number;
  /** Grants not carried: ended or expired meanwhile. */
  grantsEnded: number;
  /** Grants absent from the target (`--check`), or whose handle is. */
  grantsMissing: number;
}

/** Options of {@link restoreAll}. */
export interface RestoreOptions {
  /** Compare only; write nothing. */
  check: boolean;
  /** At most this many records per second. */
  rate?: number | undefined;
  /** The progress bar to tick. */
  progress: Progress;
}

/**
 * Imports records into a store and verifies each: after the write, the
 * record is read back and the SHA-256 of its canonical line must equal the
 * source's (or the target must hold a newer version, which is kept). A
 * record the target store's rules refuse is reported, not written.
 *
 * @param target The store to write (its backend must import records unless checking).
 * @param records The records to import.
 * @param options Check only, rate limit, progress.
 * @returns The counts.
 */
export async function restoreAll(
  target: HandleStore,
  records: AsyncIterable<ExportLine>,
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
    grants: 0,
    grantsVerified: 0,
    grantsEnded: 0,
    grantsMissing: 0,
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
    let result: ImportResult;
    try {
      result = await target.importRecord(user, record, { dryRun: options.check });
    } catch (e) {
      if (!(e instanceof McpStateError) || !REFUSED.has(e.code)) throw e;
      problem(user, record.handle, `${e.message.replace(/\.$/, "")} (not written)`);
      return;
    }
    if (result.outcome === "expired") {
      report.skippedExpired++;
      return;
    }
    // The store checked the record: its state is a JSON object, so it has a line.
    const digest = await digestLine(recordLine(user, record));
    const back = result.current;
    if (back === null) {
      if (options.check) report.missing++;
      else problem(user, record.handle, "the target does not hold it after writing it");
      return;
    }
    if (await sameRecord(user, back, digest)) {
      if (!options.check && result.outcome === "inserted") report.inserted++;
      else if (!options.check && result.outcome === "replaced") report.replaced++;
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

  // Grants after every record, one at a time: a re-share after its parent.
  const grants: UserGrant[] = [];
  const oneGrant = async ({ grant }: UserGrant): Promise<void> => {
    report.grants++;
    let outcome: Awaited<ReturnType<HandleStore["importGrant"]>>;
    try {
      outcome = await target.importGrant(grant, { dryRun: options.check });
    } catch (e) {
      if (!(e instanceof McpStateError) || !REFUSED.has(e.code)) throw e;
      problem(grant.owner, grant.handle, `grant ${grant.grant}: ${e.message.replace(/\.$/, "")}`);
      return;
    }
    if (outcome === "ended") report.grantsEnded++;
    else if (outcome === "missing") report.grantsMissing++;
    else report.grantsVerified++;
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
    for await (const line of records) {
      if ("grant" in line) {
        grants.push(line);
        continue;
      }
      chunk.push(line);
      if (chunk.length >= batch) await flush();
    }
    if (chunk.length > 0) await flush();
    for (const g of grants) await oneGrant(g);
  } finally {
    options.progress.finish();
  }
  report.users = users.size;
  return report;
}

/** The codes of a record the target store refuses by its rules. */
const REFUSED = new Set(["invalid_argument", "state_too_large"]);

async function sameRecord(user: string, back: HandleRecord, digest: string): Promise<boolean> {
  try {
    return await digestLine(recordLine(user, back)) === digest;
  } catch {
    return false;
  }
}

/** How {@link finishTransfer} words a transfer. */
export interface TransferWording {
  /** The command, for its notes (`import`, `migrate`). */
  command: string;
  /** The summary's verb when writing (`Imported`, `Migrated`). */
  verb: string;
  /** What `--check` found when records are missing, after "N record(s) ". */
  whenMissing: string;
}

/**
 * Imports records into a store ({@link restoreAll}), prints the summary
 * (JSON with `--json`) and gives the exit code: 1 when a record did not
 * verify or, with `--check`, when records are missing or older in the target.
 *
 * @param target The store to write.
 * @param records The records.
 * @param options Check only, rate, progress, `--json`, and the wording.
 * @returns The exit code.
 */
export async function transfer(
  target: HandleStore,
  records: AsyncIterable<ExportLine>,
  options: RestoreOptions & TransferWording & { json: boolean | undefined },
): Promise<number> {
  return await finishTransfer(await restoreAll(target, records, options), options);
}

/** Prints a transfer's summary and gives its exit code (see {@link transfer}). */
async function finishTransfer(
  report: TransferReport,
  options: TransferWording & { json: boolean | undefined; check: boolean },
): Promise<number> {
  const { command, check } = options;
  await printResult(
    options.json,
    reportJson(report),
    reportText(report, check ? "Checked" : options.verb, check),
  );
  if (report.mismatched > 0) {
    note(
      `mcpstate ${command}: ${report.mismatched} record(s) did not verify; first: ${report.firstProblem}.`,
    );
    return EXIT_FAILURE;
  }
  const behind = report.missing + report.olderInTarget + (check ? report.grantsMissing : 0);
  if (check && behind > 0) {
    note(`mcpstate ${command}: ${behind} record(s) ${options.whenMissing}.`);
    return EXIT_FAILURE;
  }
  return EXIT_OK;
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
    grants: r.grants,
    grants_verified: r.grantsVerified,
    grants_ended: r.grantsEnded,
    grants_missing: r.grantsMissing,
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
  if (r.grants > 0) {
    parts.push(
      `${n(r.grants)} grant${r.grants === 1 ? "" : "s"} (${n(r.grantsVerified)} ${
        check ? "identical" : "in force in the target"
      }${r.grantsEnded > 0 ? `, ${n(r.grantsEnded)} ended meanwhile` : ""}${
        r.grantsMissing > 0 ? `, ${n(r.grantsMissing)} missing` : ""
      })`,
    );
  }
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
