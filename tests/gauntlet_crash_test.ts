/**
 * The gauntlet's crash-consistency test, CI size: on every backend a child
 * process does mixed writes (forks, shares, transfers included) and is
 * SIGKILLed at random moments; after each kill the store must open as it is
 * and hold every acknowledged write, grant and move, and nothing partial or
 * doubled. `deno task gauntlet` runs 200 kills per backend.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CRASH_BACKENDS, runCrash } from "../gauntlet/crash.ts";

const KILLS = 10;

for (const backend of CRASH_BACKENDS) {
  Deno.test(`gauntlet: ${KILLS} SIGKILLs during mixed writes on ${backend} lose nothing acknowledged`, async () => {
    const r = await runCrash({
      backend,
      iterations: KILLS,
      serverKillEvery: 3,
      timeLimitMs: 120_000,
    });
    const where = `${backend}, seed ${r.seed}`;
    assert.deepEqual(r.failures, [], where);
    assert.equal(r.iterations, KILLS, where);
    const acknowledged = Object.values(r.acknowledged).reduce((a, b) => a + b, 0);
    assert.ok(acknowledged > 0, `${where}: no write was acknowledged before the kills`);
    const travelled = ["fork", "share", "transfer"].reduce(
      (n, o) => n + (r.acknowledged[o] ?? 0),
      0,
    );
    assert.ok(travelled > 0, `${where}: no fork, share or transfer was acknowledged`);
    assert.equal(r.finalRecheck, r.recordsChecked, where);
    if (backend === "sqlite" || backend === "denokv") assert.equal(r.integrityOk, KILLS, where);
    if (backend === "redis") assert.ok(r.serverKills >= 3, where);
  });
}

Deno.test("gauntlet: the crash checker catches a writer that acknowledges patches before sending them", async () => {
  const r = await runCrash({
    backend: "postgres",
    iterations: 6,
    brokenWriter: "early-ack",
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
    timeLimitMs: 60_000,
  });
  assert.ok(
    r.failures.some((f) => /of the ended grant .* still reads/.test(f)),
    `seed ${r.seed}: the checker saw no alias outliving its grant: ${JSON.stringify(r.failures)}`,
  );
});
