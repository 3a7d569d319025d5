/**
 * The Deno KV backend's `transfer`: a record moves from `(user, handle)` to
 * `(to, handle)` in one atomic commit.
 *
 * A state may be 1 MiB and a changelog many entries of up to 64 KiB each,
 * more than one commit holds (819,200 bytes). So, as a large write does,
 * the copies are written first under fresh ids below the new owner — the
 * state as a new chunk set, the changelog as a new log — each announced by
 * an intent and invisible until a head names it. Then one commit, which
 * checks the old head's versionstamp, the new owner's head and trash entry
 * (both absent) and both intents:
 *
 * - deletes the old head, its listing and expiry index entries and lease, and
 *   hands its chunks and changelog to the collector (a few are deleted in the
 *   commit itself);
 * - writes the new head (next version and `transfer` entry when audited,
 *   retention applied), its index entries and the user name, adopting both
 *   copies (the intents are deleted);
 * - moves the usage of both users (under quotas checked for `to` as a mint,
 *   else marked unknown);
 * - ends every grant in force on the old `(user, handle)` and stores the
 *   kept grant.
 *
 * A copy that no commit adopted (a lost race, a crash) is released at once
 * or collected by `sweep`, like any write's chunk set. What bounds a
 * transfer is the commit itself: the grants it ends, one mutation each, must
 * fit with the rest in Deno KV's 1,000 mutations and 819,200 bytes; a
 * handle with more grants in force is refused with `invalid_argument`,
 * nothing moved.
 *
 * @module
 */

import {
  auditEntry,
  type HandleRecord,
  type TransferContent,
  type TransferOutcome,
  type TransferStep,
  type WriteContext,
} from "../../backend.ts";
import { BackendError, InvalidArgument } from "../../errors.ts";
import { utf8Length } from "../../json.ts";
import { AGAIN, optimistic } from "../_retry.ts";
import { afterCommit, bodyOf, loadRecord, releaseBody } from "./_bodies.ts";
import { copyLog, type LogCopy, planLog, releaseLog } from "./_changelog.ts";
import { type BodyRef, type Head, type LogPlan, newId, type Trashed } from "./_codec.ts";
import type { KvGrants } from "./_grants.ts";
import { dropRecord, landed, putHead } from "./_heads.ts";
import type { KvIo } from "./_io.ts";
import { planUsage, readUsageEntries, staleUsage } from "./_usage.ts";

/** Chunks, and changelog entries, of the old record deleted in the transfer's commit; more go to the collector. */
const DELETE_IN_TRANSFER = 8;
/** Deno KV's most mutations in one atomic commit. */
const KV_MUTATIONS_MAX = 1000;
/** The most mutations of a transfer's commit but the grants it ends (counted: 34). */
const TRANSFER_MUTATIONS = 40;
/** Deno KV's messages for a commit over one of its limits (nothing is written). */
const KV_LIMIT_RE = /too many (mutations|checks)|total (mutation|key) size too large/i;

/** How a transfer ended: its outcome, and the commit that moved the record. */
export interface Transferred {
  /** The outcome. */
  outcome: TransferOutcome;
  /** The commit, when the record moved (`null` when its answer was lost but it landed). */
  res?: Deno.KvCommitResult | null;
}

/** See `TransferPrimitives.move`. */
export async function transfer(
  db: KvIo,
  grants: KvGrants,
  user: string,
  handle: string,
  to: string,
  ctx: WriteContext,
  step: TransferStep,
): Promise<Transferred> {
  const k = db.keys;
  const u = k.user(user), h = k.handle(handle), t = k.user(to);
  return await optimistic(async (): Promise<Transferred | typeof AGAIN> => {
    const [first, target, trash] = await db.io(() =>
      db.kv.getMany<[Head, Head, Trashed]>([k.head(u, h), k.head(t, h), k.trash(t, h)])
    );
    if (first.value === null) return { outcome: "absent" };
    if (target.value !== null || trash.value !== null) return { outcome: "taken" };
    const audit = step.audit;
    const loaded = await loadRecord(db, u, h, handle, first);
    const entry = loaded.entry, old = entry.value, record = loaded.record;
    // A newer write released the chunks read: start over from its head.
    if (entry.versionstamp !== first.versionstamp || !old || !record) return AGAIN;
    const [usageTo, usageFrom] = ctx.quota
      ? await Promise.all([readUsageEntries(db, t), readUsageEntries(db, u)])
      : [null, null];
    const addUsageTo = usageTo &&
      await planUsage(db, t, usageTo, ctx.quota, {
        handles: 1,
        bytes: utf8Length(step.content?.state ?? record.state),
      }, ctx.now);
    const addUsageFrom = usageFrom &&
      await planUsage(db, u, usageFrom, undefined, { handles: -1, bytes: -old.z }, ctx.now, false);
    const ending = (await grants.of(user, handle)).filter((g) => g.endedAt === null);
    if (ending.length + TRANSFER_MUTATIONS > KV_MUTATIONS_MAX) {
      throw tooManyGrants(handle, ending.length);
    }
    // The log under `to`: the old one (trimmed by retention when an entry is appended), copied.
    const added = audit && auditEntry(audit, old.v + 1);
    const plan: LogPlan = audit && added
      ? await planLog(db, u, h, old, added, { ...ctx, retention: audit.retention })
      : old.L !== undefined && old.g !== undefined && old.g <= old.v
      ? { L: old.L, g: old.g, ga: old.ga ?? ctx.now, drops: [] }
      : { drops: [] };
    const keeps = plan.L !== undefined && plan.L === old.L && plan.g! <= old.v;
    const moved = resealed(record, keeps ? plan.g! : old.v + 1, step.content);
    if (!moved) return { outcome: "changed" };
    const next = added
      ? { ...moved.record, version: added.version, updatedAt: added.at }
      : moved.record;
    let body: BodyRef | null = null, copy: LogCopy | null = null, ok = false;
    try {
      body = await bodyOf(db, t, h, moved.record.state);
      if (!body) return AGAIN;
      if (keeps) {
        const copied = await copyLog(db, u, h, old.L!, plan.g!, old.v, t, moved.texts);
        if (copied === "missing") return await gone(db, u, h, entry, handle);
        if (!copied) return AGAIN;
        copy = copied;
      }
      // The same plan, under the copy's log id (or a fresh one): the old log is dropped whole.
      const log: LogPlan = plan.L === undefined
        ? { drops: [] }
        : { ...plan, L: copy?.L ?? newId(), drops: [] };
      const w = newId();
      let after: Deno.KvKey[] = [];
      let res: Deno.KvCommitResult | Deno.KvCommitError;
      try {
        res = await db.commit((op) => {
          op.check(entry).check(target).check(trash);
          after = dropRecord(db, op, u, h, old, true, DELETE_IN_TRANSFER);
          op.delete(k.lease(user, handle));
          after.push(...putHead(db, op, t, h, null, next, body!, w, log));
          if (copy) op.check({ key: copy.intent, versionstamp: copy.intentVs }).delete(copy.intent);
          op.set(k.userName(t), to);
          if (addUsageTo) addUsageTo(op);
          else staleUsage(db, op, t);
          if (addUsageFrom) addUsageFrom(op);
          else staleUsage(db, op, u);
          grants.endIn(op, ending, ctx.now);
          if (step.keep) grants.add(op, step.keep);
        });
      } catch (e) {
        if (e instanceof Error && KV_LIMIT_RE.test(e.message)) {
          throw tooManyGrants(handle, ending.length, e);
        }
        throw e;
      }
      ok = res.ok || await landed(db, t, h, w);
      if (!ok) return AGAIN;
      if (res.ok) await afterCommit(db, after, res.versionstamp);
      return { outcome: "moved", res: res.ok ? res : null };
    } finally {
      if (!ok) {
        await releaseBody(db, body);
        await releaseLog(db, copy);
      }
    }
  }, db.contended(handle));
}

/**
 * The record a transfer writes, and the texts of the entries `from`…its
 * version it copies: as they are, or `content`'s (see `TransferContent`);
 * `null` when `content` was made from another version or lacks one of them.
 */
function resealed(
  record: HandleRecord,
  from: number,
  content: TransferContent | undefined,
): { record: HandleRecord; texts?: Map<number, string> } | null {
  if (!content) return { record };
  if (record.version !== content.version) return null;
  const texts = new Map(content.entries.map((e) => [e.version, e.text]));
  for (let v = from; v <= record.version; v++) if (!texts.has(v)) return null;
  const { preview: _, ...rest } = record;
  const state = content.state;
  return {
    record: content.preview === undefined
      ? { ...rest, state }
      : { ...rest, state, preview: content.preview },
    texts,
  };
}

/**
 * After a changelog copy found an entry missing: start over when the record
 * changed meanwhile; a head still the same names entries that are not there
 * (its store is damaged).
 */
async function gone(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  read: Deno.KvEntryMaybe<Head>,
  handle: string,
): Promise<typeof AGAIN> {
  const again = await db.get<Head>(db.keys.head(u, h));
  if (again.versionstamp !== read.versionstamp) return AGAIN;
  throw new BackendError(
    `The changelog of "${handle}" is incomplete in Deno KV (entries are missing); it cannot be transferred. Nothing was moved.`,
  );
}

/** The refusal of a transfer whose commit cannot hold the ends of `n` grants with the move. */
function tooManyGrants(handle: string, n: number, cause?: unknown): InvalidArgument {
  const e = new InvalidArgument(
    `"${handle}" has ${n} grants in force: Deno KV cannot end that many in the one commit that moves the handle (at most ${KV_MUTATIONS_MAX} changes and 819,200 bytes). Nothing was transferred. Unshare some of them, then transfer again.`,
    { field: "handle", grants_in_force: n },
  );
  if (cause !== undefined) Object.defineProperty(e, "cause", { value: cause });
  return e;
}
