/**
 * The gauntlet's crash-consistency test, CI size: on every backend a child
 * process does mixed writes (forks, shares, transfers included) and is
 * SIGKILLed at random moments; after each kill the store must open as it is
 * and hold every acknowledged write, grant and move, and nothing partial or
 * doubled. With encryption keys (SQLite, Redis, PostgreSQL), no state's
 * plaintext may be anywhere in the engine's storage. Twice per run a user is
 * erased with `mcpstate erase`, SIGKILLed and run again: nothing of it may
 * be left, nothing of the others may change. `deno task gauntlet` runs 200
 * kills per backend, and 100 with keys, erasing after every tenth.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CRASH_BACKENDS, runCrash } from "../gauntlet/crash.ts";

const KILLS = 10;
/** Kills of the runs with encryption keys (SQLite, Redis, PostgreSQL). */
const SEALED_KILLS = 6;

const runs = [
  ...CRASH_BACKENDS.map((backend) => ({ backend, kills: KILLS, encryption: false })),
  ...(["sqlite", "redis", "postgres"] as const).map((backend) => ({
    backend,
    kills: SEALED_KILLS,
    encryption: true,
  })),
];

for (const { backend, kills, encryption } of runs) {
  const name = encryption
    ? `gauntlet: ${kills} SIGKILLs during mixed writes on ${backend} with encryption keys lose nothing acknowledged and store no plaintext`
    : `gauntlet: ${kills} SIGKILLs during mixed writes on ${backend} lose nothing acknowledged`;
  Deno.test(name, async () => {
    const r = await runCrash({
      backend,
      iterations: kills,
      serverKillEvery: 3,
      timeLimitMs: 120_000,
      encryption,
      // Two erases of a user with the CLI, each SIGKILLed and run again.
      eraseEvery: Math.floor(kills / 2),
    });
    const where = `${backend}${encryption ? " with keys" : ""}, seed ${r.seed}`;
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
    assert.equal(r.plaintextScans, encryption ? kills + 1 : 1, where);
    if (backend === "sqlite" || backend === "denokv") assert.equal(r.integrityOk, kills, where);
    if (backend === "redis") assert.equal(r.serverKills, Math.floor(kills / 3), where);
    assert.ok(r.eraseRuns >= 1, `${where}: no erase ran`);
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
