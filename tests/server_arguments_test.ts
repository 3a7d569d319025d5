/**
 * A call that leaves out a required argument is told, in plain words, which
 * argument is missing (never zod's own words such as "nonoptional").
 *
 * @module
 */

import assert from "node:assert/strict";
import { stdioSession } from "./_server_harness.ts";
import { fails } from "./_tool_calls.ts";

Deno.test("server arguments: a missing required argument is named in plain words", async () => {
  await using s = await stdioSession("2026-07-28", { MCPSTATE_BACKEND: "memory://" });
  const save = await fails(s.client, "state_save", {}, "invalid_argument");
  assert.doesNotMatch(String(save.message), /nonoptional|received undefined|Invalid input/);
  assert.match(String(save.message), /state_save needs the argument "state", which is missing/);
  assert.equal(save.field, "state");
  const patch = await fails(s.client, "state_patch", { ops: [] }, "invalid_argument");
  assert.match(String(patch.message), /state_patch needs the argument "handle", which is missing/);
  assert.doesNotMatch(String(patch.message), /nonoptional|received undefined/);
});
