/**
 * The Deno KV backend's head commits: the mutations that make a record the
 * head of its handle (with its listing and expiry index entries, the adoption
 * of its chunk set and the changelog its write plans) or delete it.
 *
 * @module
 */

import type { HandleRecord } from "../../backend.ts";
import { dropChunks } from "./_bodies.ts";
import { dropLog } from "./_changelog.ts";
import { type BodyRef, forkPointOf, type Head, indexOf, type LogPlan } from "./_codec.ts";
import type { KvIo } from "./_io.ts";

/**
 * Adds the mutations that make `next` the head: head, list index, expiry
 * index, adoption of its chunk set, release of the superseded one, and the
 * changelog as `log` plans it. Returns the intents to collect after the
 * commit (a large superseded chunk set, a long run of dropped entries).
 */
export function putHead(
  db: KvIo,
  op: Deno.AtomicOperation,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  old: Head | null,
  next: HandleRecord,
  body: BodyRef,
  w: string,
  log: LogPlan,
): Deno.KvKey[] {
  const after: Deno.KvKey[] = [];
  const head: Head = {
    k: next.kind,
    v: next.version,
    c: next.createdAt,
    u: next.updatedAt,
    e: next.expiresAt,
    l: next.lastWriter,
    w,
    z: body.z,
  };
  if (next.schemaVersion != null) head.s = next.schemaVersion;
  if (next.forkedFrom != null) head.f = forkPointOf(next.forkedFrom);
  if (next.preview !== undefined) head.p = next.preview;
  if ("inline" in body) head.b = body.inline;
  else {
    head.d = body.d;
    head.n = body.n;
  }
  if (body.utf16) head.x = true;
  if (log.L !== undefined) {
    head.L = log.L;
    head.g = log.g!;
    head.ga = log.ga!;
  }
  op.set(db.keys.head(u, h), head);
  if (log.entry) op.set(db.keys.log(u, h, log.L!, log.entry.version), log.entry.value);
  for (const [l, from, to] of log.drops) {
    const intent = dropLog(db, op, u, h, l, from, to);
    if (intent) after.push(intent);
  }
  op.set(db.keys.index(u, next.updatedAt, h), indexOf(next));
  if (old && old.u !== next.updatedAt) op.delete(db.keys.index(u, old.u, h));
  if (old && old.e !== null && old.e !== next.expiresAt) {
    op.delete(db.keys.expiry(old.e, u, h));
  }
  if (next.expiresAt !== null && old?.e !== next.expiresAt) {
    op.set(db.keys.expiry(next.expiresAt, u, h), 0);
  }
  if ("set" in body && body.set) {
    op.check({ key: body.set.intent, versionstamp: body.set.intentVs }).delete(body.set.intent);
  }
  if (old?.d !== undefined && !("d" in body && body.d === old.d)) {
    const intent = dropChunks(db, op, u, h, old);
    if (intent) after.push(intent);
  }
  return after;
}

/**
 * Adds the deletion of a record's keys: its chunks and changelog and, when
 * it is `live` (not a trashed record, whose trash entry the caller deletes),
 * its head and its list and expiry index entries. Chunks and entries beyond
 * `inCommit` (default: as many as a head commit deletes) are handed to the
 * collector. Returns the intents to collect after the commit.
 */
export function dropRecord(
  db: KvIo,
  op: Deno.AtomicOperation,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  old: Head,
  live: boolean,
  inCommit?: number,
): Deno.KvKey[] {
  if (live) {
    op.delete(db.keys.head(u, h));
    op.delete(db.keys.index(u, old.u, h));
    if (old.e !== null) op.delete(db.keys.expiry(old.e, u, h));
  }
  const after: Deno.KvKey[] = [];
  if (old.d !== undefined) {
    const intent = dropChunks(db, op, u, h, old, inCommit);
    if (intent) after.push(intent);
  }
  if (old.L !== undefined && old.g !== undefined && old.g <= old.v) {
    const intent = dropLog(db, op, u, h, old.L, old.g, old.v, inCommit);
    if (intent) after.push(intent);
  }
  return after;
}

/** Whether the head now carries write `w` (a commit whose answer was lost still landed). */
export async function landed(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  w: string,
): Promise<boolean> {
  return (await db.get<Head>(db.keys.head(u, h))).value?.w === w;
}
