/**
 * The gauntlet's crash-consistency test, CI size: on every backend a child
 * process does mixed writes (forks, shares, transfers included) and is
 * SIGKILLed at random moments; after each kill the store must open as it is
 * and hold every acknowledged write, grant and move, and nothing partial or
 * doubled. With encryption keys (SQLite, Redis, PostgreSQL), no state's
 * plaintext may be anywhere in the engine's storage. Twice per run a user is
 * erased with `mcpstate erase`, SIGKILLed and run again: nothing of it may
 * be left, nothing of the others may change. And `mcpstate encrypt` (on
 * SQLite) and `mcpstate keys rotate` (on Redis) run beside the writer, are
 * SIGKILLed too and run again: everything acknowledged then reads with the
 * keys, no plaintext is left, and the old key can leave the ring.
 * `deno task gauntlet` runs 200 kills per backend, 100 with keys, 50 each
 * killing encrypt and rotate, erasing after every tenth.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CRASH_BACKENDS, type CrashBackend, runCrash } from "../gauntlet/crash.ts";
import type { KeyMode } from "../gauntlet/_maintenance.ts";

const KILLS = 10;
/** Kills of the runs with encryption keys (SQLite, Redis, PostgreSQL). */
const SEALED_KILLS = 6;
/** Kills of the runs that also kill `mcpstate encrypt` (SQLite) and `keys rotate` (Redis). */
const MAINTENANCE_KILLS = 4;

const runs: { backend: CrashBackend; kills: number; keys: KeyMode }[] = [
  ...CRASH_BACKENDS.map((backend) => ({ backend, kills: KILLS, keys: "plain" as const })),
  ...(["sqlite", "redis", "postgres"] as const).map((backend) => ({
    backend,
    kills: SEALED_KILLS,
    keys: "keys" as const,
  })),
  { backend: "sqlite", kills: MAINTENANCE_KILLS, keys: "encrypt" },
  { backend: "redis", kills: MAINTENANCE_KILLS, keys: "rotate" },
];

const WHAT: Record<KeyMode, string> = {
  plain: "lose nothing acknowledged",
  keys: "with encryption keys lose nothing acknowledged and store no plaintext",
  encrypt:
    "while mcpstate encrypt runs beside them and is killed too lose nothing acknowledged and leave no plaintext",
  rotate:
    "while mcpstate keys rotate runs beside them and is killed too lose nothing, and the old key can go",
};

for (const { backend, kills, keys } of runs) {
  Deno.test(`gauntlet: ${kills} SIGKILLs during mixed writes on ${backend} ${WHAT[keys]}`, async () => {
    const maintenance = keys === "encrypt" || keys === "rotate";
    const r = await runCrash({
      backend,
      iterations: kills,
      serverKillEvery: 3,
      timeLimitMs: 120_000,
      keys,
      // Two erases of a user with the CLI, each SIGKILLed and run again (the runs
      // that kill encrypt or rotate leave erasing to the others).
      eraseEvery: maintenance ? 0 : Math.floor(kills / 2),
    });
    const where = `${backend} (${keys}), seed ${r.seed}`;
    assert.deepEqual(r.failures, [], where);
    assert.equal(r.iterations, kills, where);
    const acknowledged = Object.values(r.acknowledged).reduce((a, b) => a + b, 0);
    assert.ok(acknowledged > 0, `${where}: no write was acknowledged before the kills`);
    const travelled = ["fork", "share", "transfer"].reduce(
      (n, o) => n + (r.acknowledged[o] ?? 0),
      0,
    );
    assert.ok(travelled > 0, `${where}: no fork, share or transfer was acknowledged`);
    assert.equal(r.finalRecheck, r.recordsChecked, where);
    // With keys, a scan after every kill and one at the end; without, the end's control.
    assert.equal(r.plaintextScans, keys === "plain" ? 1 : kills + 1, where);
    if (backend === "sqlite" || backend === "denokv") assert.equal(r.integrityOk, kills, where);
    if (backend === "redis") assert.equal(r.serverKills, Math.floor(kills / 3), where);
    if (maintenance) assert.ok(r.maintenanceRuns >= 1, `${where}: no ${keys} ran`);
    else assert.ok(r.eraseRuns >= 1, `${where}: no erase ran`);
  });
}

Deno.test("gauntlet: the crash checker catches a writer that acknowledges patches before sending them", async () => {
  const r = await runCrash({
    backend: "postgres",
    iterations: 6,
    brokenWriter: "early-ack",
    eraseEvery: 0,
    timeLimitMs: 60_000,
  });
  assert.ok(
    r.failures.some((f) => /is lost|expected v|found v/.test(f)),
    `seed ${r.seed}: the checker saw no lost write: ${JSON.stringify(r.failures)}`,
  );
});

Deno.test("gauntlet: the crash checker catches a writer that acknowledges unshares it never sent", async () => {
  const r = await runCrash({
    backend: "sqlite",
    iterations: 4,
    maxRunMs: 1500,
    brokenWriter: "lost-unshare",
    eraseEvery: 0,
    timeLimitMs: 60_000,
  });
  assert.ok(
    r.failures.some((f) => /of the ended grant .* still reads/.test(f)),
    `seed ${r.seed}: the checker saw no alias outliving its grant: ${JSON.stringify(r.failures)}`,
  );
});
