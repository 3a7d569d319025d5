/**
 * The Deno KV backend's changelog: one key per entry, set in the commit of
 * its write; what a write does to the log (continue it, start a new one,
 * trim it by retention, drop it) is planned before the commit.
 *
 * @module
 */

import type { ChangeEntry, Retention, WriteContext } from "../../backend.ts";
import { collect } from "./_bodies.ts";
import {
  AGE_SCAN_BATCH,
  CHUNKS_PER_COMMIT,
  type Head,
  type Intent,
  LOG_DELETE_IN_COMMIT,
  type LogPlan,
  type LogValue,
  logValueOf,
  newId,
} from "./_codec.ts";
import type { KvIo } from "./_io.ts";

/**
 * Adds the deletion of the changelog entries `from`…`to` of log `l`: in
 * this commit when at most `inCommit`, else through a dead intent the
 * collector empties (nobody reads them meanwhile: reads start at the head's
 * `g`, or the log id is no longer any head's). Returns that intent.
 */
export function dropLog(
  db: KvIo,
  op: Deno.AtomicOperation,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  l: string,
  from: number,
  to: number,
  inCommit: number = LOG_DELETE_IN_COMMIT,
): Deno.KvKey | null {
  const n = to - from + 1;
  if (n <= 0) return null;
  if (n <= inCommit) {
    for (let v = from; v <= to; v++) op.delete(db.keys.log(u, h, l, v));
    return null;
  }
  const intent = db.keys.intent(0, u, h, `${l}.${from}`);
  op.set(intent, { n, dead: true, l, f: from } satisfies Intent);
  return intent;
}

/**
 * What a write producing `next` does to the changelog. With an entry: the
 * entry continues the head's log (or starts a new one), and retention trims
 * the log from its oldest end — entries more than `maxEntries` behind, then
 * entries older than `maxAgeMs` (read only when the head's `ga` says one
 * may be). Without one: a log that would now have a gap is dropped.
 */
export async function planLog(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  old: Head | null,
  entry: ChangeEntry | undefined,
  ctx: WriteContext,
): Promise<LogPlan> {
  const live = old?.L !== undefined && old.g !== undefined ? old : null;
  if (!entry) {
    return { drops: live ? [[live.L!, live.g!, live.v]] : [] };
  }
  const value = logValueOf(entry);
  if (!live || entry.version !== live.v + 1 || live.g! > live.v) {
    return {
      L: newId(),
      g: entry.version,
      ga: entry.at,
      entry: { version: entry.version, value },
      drops: live ? [[live.L!, live.g!, live.v]] : [],
    };
  }
  const l = live.L!, oldG = live.g!;
  let g = oldG, ga = live.ga ?? entry.at;
  const r: Retention | undefined = ctx.retention;
  if (r) {
    g = Math.max(g, entry.version - r.maxEntries + 1);
    const cutoff = ctx.now - r.maxAgeMs;
    if (ga < cutoff && g < entry.version) {
      const young = await firstYoung(db, u, h, l, g, live.v, cutoff);
      g = young?.version ?? entry.version;
      ga = young?.at ?? entry.at;
    }
  }
  if (g >= entry.version) ga = entry.at;
  ga = Math.min(ga, entry.at);
  return {
    L: l,
    g,
    ga,
    entry: { version: entry.version, value },
    drops: g > oldG ? [[l, oldG, g - 1]] : [],
  };
}

/** The first changelog entry of `from`…`to` written at or after `cutoff`, if any. */
export async function firstYoung(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  l: string,
  from: number,
  to: number,
  cutoff: number,
): Promise<{ version: number; at: number } | null> {
  let found: { version: number; at: number } | null = null;
  await db.range<LogValue>(
    { start: db.keys.log(u, h, l, from), end: db.keys.log(u, h, l, to + 1) },
    { batchSize: AGE_SCAN_BATCH },
    (e) => {
      if (e.value.a < cutoff) return false;
      found = { version: e.key[e.key.length - 1] as number, at: e.value.a };
      return true;
    },
  );
  return found;
}

/** A copy of a run of changelog entries under a fresh log id, announced by an intent, not yet adopted. */
export interface LogCopy {
  /** The new log id. */
  L: string;
  /** Its first version. */
  f: number;
  /** How many entries. */
  n: number;
  /** The intent that announces it. */
  intent: Deno.KvKey;
  /** The intent's versionstamp, which the adopting commit checks. */
  intentVs: string;
}

/**
 * Copies the entries `from`…`to` of log `l` of `(u, h)` to a fresh log of
 * `(tu, h)`, as a large state's chunks are written: announced by an intent
 * written with the first entries, invisible until a head names the new log
 * (its commit checks and deletes the intent), collected by `sweep` when no
 * head ever does. At most {@link CHUNKS_PER_COMMIT} entries (one KV value
 * each) per commit. `"missing"` when an entry is not there (the record
 * changed since it was read), `null` when the intent was collected meanwhile;
 * either way the copy so far is released. With `texts`, each copy holds the
 * text given for its version instead (a transfer's content sealed anew),
 * its `at` kept.
 */
export async function copyLog(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  l: string,
  from: number,
  to: number,
  tu: Deno.KvKeyPart,
  texts?: Map<number, string>,
): Promise<LogCopy | "missing" | null> {
  const L = newId(), n = to - from + 1;
  const intent = db.keys.intent(Date.now(), tu, h, L);
  let intentVs = "";
  for (let first = from; first <= to; first += CHUNKS_PER_COMMIT) {
    const last = Math.min(to, first + CHUNKS_PER_COMMIT - 1);
    const rows = await db.range<LogValue>({
      start: db.keys.log(u, h, l, first),
      end: db.keys.log(u, h, l, last + 1),
    }, { batchSize: last - first + 1 });
    const whole = rows.length === last - first + 1 &&
      rows.every((e, i) => e.key[e.key.length - 1] === first + i);
    const res = !whole ? null : await db.commit((op) => {
      if (first === from) op.set(intent, { n, l: L, f: from } satisfies Intent);
      else op.check({ key: intent, versionstamp: intentVs });
      for (const e of rows) {
        const version = e.key[e.key.length - 1] as number, text = texts?.get(version);
        const value = text === undefined ? e.value : logValueOf({ version, at: e.value.a, text });
        op.set(db.keys.log(tu, h, L, version), value);
      }
    });
    if (res?.ok !== true) {
      if (first > from) await releaseLog(db, { L, f: from, n, intent, intentVs });
      return res ? null : "missing";
    }
    if (first === from) intentVs = res.versionstamp;
  }
  return { L, f: from, n, intent, intentVs };
}

/** Releases a log copy that no head adopted. Errors are left to `sweep`. */
export async function releaseLog(db: KvIo, copy: LogCopy | null | undefined): Promise<void> {
  if (!copy) return;
  await collect(db, copy.intent, copy.intentVs, { n: copy.n, l: copy.L, f: copy.f })
    .catch(() => false);
}
