/**
 * The gauntlet's soak, CI size: 32 concurrent MCP clients with a mixed
 * workload over HTTP for 10 s, against SQLite and against Redis. Zero errors,
 * and every acknowledged increment counted exactly once. `deno task
 * gauntlet` runs 60 s per backend and reports RSS and latency.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runSoak, type SoakBackend } from "../gauntlet/soak.ts";

for (const backend of ["sqlite", "redis"] as SoakBackend[]) {
  Deno.test(`gauntlet: 32 clients for 10 s on ${backend}: zero errors, zero lost increments`, async () => {
    const r = await runSoak({ backend, durationMs: 10_000, clients: 32 });
    assert.deepEqual(r.failures, [], `seed ${r.seed}`);
    assert.equal(r.errors, 0);
    assert.ok(r.increments.acknowledged > 0);
    assert.equal(r.increments.stored, r.increments.acknowledged);
    assert.ok(r.totalCalls > 100, `only ${r.totalCalls} calls in 10 s`);
  });
}
