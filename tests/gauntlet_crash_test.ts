/**
 * The gauntlet's crash-consistency test, CI size: on every backend a child
 * process does mixed writes and is SIGKILLed at random moments; after each
 * kill the store must open as it is and hold every acknowledged write, and
 * nothing partial or doubled. `deno task gauntlet` runs 200 kills per backend.
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
    assert.equal(r.finalRecheck, r.recordsChecked, where);
    if (backend === "sqlite" || backend === "denokv") assert.equal(r.integrityOk, KILLS, where);
    if (backend === "redis") assert.ok(r.serverKills >= 3, where);
  });
}

Deno.test("gauntlet: the crash checker catches a writer that acknowledges patches before sending them", async () => {
  const r = await runCrash({
    backend: "postgres",
    iterations: 6,
    brokenWriter: true,
    timeLimitMs: 60_000,
  });
  assert.ok(
    r.failures.some((f) => /is lost|expected v|found v/.test(f)),
    `seed ${r.seed}: the checker saw no lost write: ${JSON.stringify(r.failures)}`,
  );
});
