/**
 * `state_fork` and `state_merge` over the real MCP client and a real
 * `mcpstate serve` process: a sub-agent's fork, its changes brought home,
 * an overlapping merge refused with the conflicting paths.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ERAS, stdioSession } from "./_server_harness.ts";
import { fails, ok } from "./_tool_calls.ts";

Deno.test("state_fork and state_merge over stdio, both eras", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    for (const era of ERAS) {
      await t.step(era, async () => {
        await using s = await stdioSession(era, {
          MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
          MCPSTATE_USER: `fork-${era}`,
        });
        const c = s.client;
        // The client caches the output schemas and checks every result against them.
        const names = (await c.listTools()).tools.map((x) => x.name);
        assert.ok(names.includes("state_fork") && names.includes("state_merge"));
        const { handle: origin } = await ok(c, "state_save", {
          kind: "plan",
          state: { steps: ["outline"], title: "t", notes: {} },
        }) as { handle: string };
        const fork = await ok(c, "state_fork", { handle: origin });
        const sub = fork.handle as string;
        assert.match(sub, /^plan_/);
        assert.equal(fork.version, 1);
        assert.deepEqual(fork.forked_from, { handle: origin, version: 1 });
        const loaded = await ok(c, "state_load", { handle: sub });
        assert.deepEqual(loaded.forked_from, { handle: origin, version: 1 });
        // state_list shows the lineage too (and none on the origin).
        const listed = (await ok(c, "state_list", {})).handles as Record<string, unknown>[];
        assert.deepEqual(listed.find((h) => h.handle === sub)?.forked_from, {
          handle: origin,
          version: 1,
        });
        assert.equal("forked_from" in listed.find((h) => h.handle === origin)!, false);
        assert.deepEqual(loaded.state, { steps: ["outline"], title: "t", notes: {} });
        // The sub-agent works on its fork; the parent goes on meanwhile.
        await ok(c, "state_patch", {
          handle: sub,
          ops: [{ op: "append", path: "steps", value: "measure" }, {
            op: "set_key",
            path: "notes",
            key: "sub",
            value: "done",
          }],
        });
        await ok(c, "state_patch", {
          handle: origin,
          ops: [{ op: "set_key", path: "", key: "title", value: "T" }],
        });
        const merged = await ok(c, "state_merge", { handle: sub });
        assert.equal(merged.handle, origin);
        assert.equal(merged.version, 3);
        assert.deepEqual(merged.merged_from, { handle: sub, version: 2 });
        assert.equal("state" in merged, false, "the result is metadata: state_load reads it");
        assert.deepEqual((await ok(c, "state_load", { handle: origin })).state, {
          steps: ["outline", "measure"],
          title: "T",
          notes: { sub: "done" },
        });
        const log = await ok(c, "state_changes", { handle: origin, since_version: 2 });
        const entry = (log.changes as Record<string, unknown>[])[0]!;
        assert.equal(entry.op, "merge");
        assert.deepEqual(entry.from, { handle: sub, version: 2 });
        // Both sides change the title: refused with the path, nothing merged.
        const other = (await ok(c, "state_fork", { handle: origin })).handle as string;
        await ok(c, "state_patch", {
          handle: other,
          ops: [{ op: "set_key", path: "", key: "title", value: "fork" }],
        });
        await ok(c, "state_patch", {
          handle: origin,
          ops: [{ op: "set_key", path: "", key: "title", value: "origin" }],
        });
        const e = await fails(c, "state_merge", { handle: other }, "stale_write");
        assert.deepEqual(e.conflicts, ["/title"]);
        assert.equal((await ok(c, "state_load", { handle: origin })).version, 4);
        await fails(c, "state_merge", { handle: origin }, "invalid_argument");
        await fails(c, "state_fork", { handle: "plan_zzzzzzzz" }, "handle_not_found");
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
