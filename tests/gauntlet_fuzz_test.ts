/**
 * The gauntlet's MCP fuzzing, CI size: random tool arguments through the
 * official client and random bytes as HTTP bodies against a real server
 * process. Only structured refusals (the whole payload in the text block),
 * `structuredContent` that passes each tool's declared output schema as
 * SDK 1.x clients check it, no leaks, no change on a refused call, and the
 * server keeps serving. The seed is fixed; `MCPSTATE_FC_SEED`
 * replaces it. `deno task gauntlet` runs 5,000 of each.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runFuzz } from "../gauntlet/fuzz.ts";

function envValue(name: string): string | undefined {
  const granted = Deno.permissions.querySync({ name: "env", variable: name }).state === "granted";
  return granted ? Deno.env.get(name) : undefined;
}

const SEED = Number(envValue("MCPSTATE_FC_SEED") ?? 20261129);

Deno.test("gauntlet: random tool arguments and random HTTP bodies get structured refusals and change nothing", async () => {
  const r = await runFuzz({ toolCalls: 300, rawBodies: 300, seed: SEED, timeLimitMs: 90_000 });
  assert.deepEqual(r.failures, [], `seed ${r.seed}`);
  assert.equal(r.toolCalls.total, 300);
  assert.equal(r.rawBodies.total, 300);
  assert.ok(r.toolCalls.succeeded > 0, "some random calls are valid");
  assert.ok(r.unchangedAfterRefusal > 100, "most random calls are refused, and checked");
  assert.ok(r.serverHealthy);
  assert.equal(r.sharedBucket.calls, 300);
  assert.ok(r.sharedBucket.replays > 0 && r.sharedBucket.newHandles > 0, "keys collided");
});
