/**
 * The gauntlet's HTTP abuse, CI size: oversized, slow and stalled bodies,
 * 1,000 connections at once, bytes that are not UTF-8, wrong content types
 * and methods, forged and misdirected JWTs against a real server process.
 * Each is refused properly and the server keeps serving. Known limitations of
 * the runtime (no header-read or idle timeout) are reported, not failed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runAbuse } from "../gauntlet/abuse.ts";

Deno.test("gauntlet: HTTP abuse is refused properly and the server stays up", async () => {
  const r = await runAbuse({ repeat: 1, connections: 1000, slowBoundMs: 6000 });
  assert.deepEqual(r.failures, []);
  assert.ok(r.serverHealthy);
  const limitations = r.checks.filter((c) => c.limitation);
  assert.ok(limitations.every((c) => c.part === "slow clients"), "only runtime limits are excused");
});
