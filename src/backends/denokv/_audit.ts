/**
 * The Deno KV backend's audit entries: the changelog entry that a grant
 * change leaves as the record's next version (`AuditStep`), added to the
 * commit of that change. The commit checks the head's versionstamp and
 * writes the head's next version (state, expiry, writer kept) with the entry,
 * trimming the changelog by retention, as any write's head commit does.
 *
 * @module
 */

import { auditEntry, type AuditStep, type WriteContext } from "../../backend.ts";
import { bodyRefOf } from "./_bodies.ts";
import { planLog } from "./_changelog.ts";
import { type Head, newId, recordOf } from "./_codec.ts";
import { putHead } from "./_heads.ts";
import type { KvIo } from "./_io.ts";

/** What an audit adds to a commit. */
export interface AuditCommit {
  /** The user of the record. */
  readonly user: string;
  /** Its handle. */
  readonly handle: string;
  /** Adds the check of the head and the entry's mutations; returns the intents to collect after the commit. */
  add(op: Deno.AtomicOperation): Deno.KvKey[];
}

/**
 * Plans `audit` on the live record `(user, handle)`, numbered after the head
 * read (the commit checks that head): `"absent"` when there is none.
 */
export async function planAudit(
  db: KvIo,
  user: string,
  handle: string,
  audit: AuditStep,
  now: number,
): Promise<AuditCommit | "absent"> {
  const u = db.keys.user(user), h = db.keys.handle(handle);
  const head = await db.get<Head>(db.keys.head(u, h));
  const old = head.value;
  if (old === null) return "absent";
  const entry = auditEntry(audit, old.v + 1);
  const ctx: WriteContext = { now, graceMs: 0, retention: audit.retention };
  const log = await planLog(db, u, h, old, entry, ctx);
  // The state stays where it is (inline, or the same chunk set): only the metadata moves on.
  const next = { ...recordOf(handle, old, ""), version: entry.version, updatedAt: entry.at };
  return {
    user,
    handle,
    add(op) {
      op.check(head);
      return putHead(db, op, u, h, old, next, bodyRefOf(old), newId(), log);
    },
  };
}
