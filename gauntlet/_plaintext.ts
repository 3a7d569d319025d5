/**
 * The crash gauntlet's plaintext scan: the engine's storage read whole (`tests/_storage_scan.ts`) to look for the
 * mark every state of the run carries. With keys it must be found nowhere:
 * not in a record, a changelog entry, a preview, an idempotency result, a
 * chunk — after a kill as after a clean close. Without keys the same scan
 * must find it (the control: the scan sees the engine's storage).
 *
 * @module
 */

import postgres from "postgres";
import { DenoKvBackend } from "../src/backends/denokv.ts";
import { dumpRedis, type RedisServer } from "../tests/_redis.ts";
import { kvDump, postgresCells, sqliteFileCells, type Stored } from "../tests/_storage_scan.ts";

/** A new mark for the states of one iteration. */
export function freshMark(): string {
  return `canary-${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
}

/** Where an engine keeps its data. */
export type Storage =
  | { sqlite: string }
  | { denokv: string }
  | { redis: RedisServer }
  | { postgres: { url: string; schema: string } };

/** Reads the engine's storage whole, as text. */
export async function dump(storage: Storage): Promise<Stored[]> {
  if ("sqlite" in storage) {
    return sqliteFileCells(storage.sqlite).map((c) => ({
      where: `${c.table}.${c.column}`,
      what: c.text,
    }));
  }
  if ("denokv" in storage) return await kvDump(storage.denokv);
  if ("redis" in storage) return await dumpRedis([storage.redis]);
  const { url, schema } = storage.postgres;
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    return (await postgresCells(sql, schema)).map((c) => ({
      where: `${c.table}.${c.column}`,
      what: c.text,
    }));
  } finally {
    await sql.end();
  }
}

/**
 * Where the storage holds any of `marks`.
 *
 * @returns `where: mark` for each stored item that holds one, sorted.
 */
export async function plaintextIn(storage: Storage, marks: readonly string[]): Promise<string[]> {
  const out = new Set<string>();
  for (const s of await dump(storage)) {
    for (const m of marks) {
      if (s.where.includes(m) || s.what.includes(m)) out.add(`${s.where.slice(0, 120)}: ${m}`);
    }
  }
  return [...out].sort();
}

/**
 * On Deno KV, collects the chunk sets of writes that never swapped their
 * head in (a SIGKILLed writer's), which `sweep` otherwise leaves for 5
 * minutes and `mcpstate encrypt` does not reach: a keyless writer's are
 * plaintext. Nothing else is swept (no record expired, no trash past its
 * window). Elsewhere a no-op.
 */
export async function sweepCrashedChunks(storage: Storage): Promise<void> {
  if (!("denokv" in storage)) return;
  const backend = await DenoKvBackend.fromUrl(`denokv:///${storage.denokv}`, { orphanAgeMs: 0 });
  try {
    await backend.sweep(null, 0, Date.now());
  } finally {
    await backend.close();
  }
}
