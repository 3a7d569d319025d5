/**
 * The Deno KV backend's changelog: one key per entry, set in the commit of
 * its write; what a write does to the log (continue it, start a new one,
 * trim it by retention, drop it) is planned before the commit.
 *
 * @module
 */

import type { ChangeEntry, Retention, WriteContext } from "../../backend.ts";
import {
  AGE_SCAN_BATCH,
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
 * this commit when few, else through a dead intent the collector empties
 * (nobody reads them meanwhile: reads start at the head's `g`, or the log
 * id is no longer any head's). Returns that intent.
 */
export function dropLog(
  db: KvIo,
  op: Deno.AtomicOperation,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  l: string,
  from: number,
  to: number,
): Deno.KvKey | null {
  const n = to - from + 1;
  if (n <= 0) return null;
  if (n <= LOG_DELETE_IN_COMMIT) {
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
