/**
 * Handles a model can find again, over the real MCP client and a real
 * `mcpstate serve` process: `state_list` with `previews: true`, and a
 * deleted handle that says it is in the trash and how to bring it back.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ERAS, stdioSession } from "./_server_harness.ts";
import { fails, ok } from "./_tool_calls.ts";

Deno.test("server: state_list previews and a trashed handle's error, both eras", async (t) => {
  for (const era of ERAS) {
    await t.step(era, async () => {
      await using s = await stdioSession(era, { MCPSTATE_BACKEND: "memory://" });
      const c = s.client;
      const h = (await ok(c, "state_save", {
        kind: "research",
        state: { topic: "Rust async runtimes", sources: ["a", "b"], done: false },
      })).handle as string;
      const g = (await ok(c, "state_save", { kind: "note", state: { text: "x".repeat(500) } }))
        .handle as string;

      // Without previews: no preview key at all.
      const plain = await ok(c, "state_list", {});
      for (const e of plain.handles as Record<string, unknown>[]) assert.ok(!("preview" in e));

      const listed = await ok(c, "state_list", { previews: true });
      const byHandle = new Map(
        (listed.handles as Record<string, unknown>[]).map((e) => [e.handle, e.preview]),
      );
      assert.equal(byHandle.get(h), 'topic: "Rust async runtimes", sources: [2], done: false');
      const long = byHandle.get(g) as string;
      assert.ok(long.length <= 120 && long.startsWith('text: "xxx') && long.endsWith('…"'), long);

      // A patch moves the preview.
      await ok(c, "state_patch", {
        handle: h,
        ops: [{ op: "set_key", path: "", key: "done", value: true }],
      });
      const after = await ok(c, "state_list", { previews: true, kind: "research" });
      assert.deepEqual(
        (after.handles as Record<string, unknown>[]).map((e) => e.preview),
        ['topic: "Rust async runtimes", sources: [2], done: true'],
      );

      // Deleted: state_load, state_patch and state_delete say it is in the trash.
      await ok(c, "state_delete", { handle: h });
      for (
        const [tool, args] of [
          ["state_load", { handle: h }],
          ["state_patch", { handle: h, ops: [{ op: "increment", path: "", key: "n" }] }],
          ["state_save", { handle: h, expect_version: 2, state: {} }],
          ["state_delete", { handle: h }],
        ] as const
      ) {
        const e = await fails(c, tool, args, "handle_not_found");
        assert.equal(e.in_trash, true, tool);
        assert.equal(typeof e.restorable_until, "string", tool);
        assert.ok(Date.parse(e.restorable_until as string) > Date.now(), tool);
        assert.match(e.message as string, /state_restore/, tool);
      }
      // A handle that never existed says nothing of a trash.
      const never = await fails(
        c,
        "state_load",
        { handle: "research_neverexisted" },
        "handle_not_found",
      );
      assert.equal(never.in_trash, undefined);
      assert.equal(never.restorable_until, undefined);
      // state_restore brings it back, and the preview with it.
      await ok(c, "state_restore", { handle: h });
      const back = await ok(c, "state_list", { previews: true, kind: "research" });
      assert.deepEqual(
        (back.handles as Record<string, unknown>[]).map((e) => e.preview),
        ['topic: "Rust async runtimes", sources: [2], done: true'],
      );
      await s.close();
    });
  }
});
