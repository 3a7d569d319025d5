import assert from "node:assert/strict";
import { ERAS, stdioSession } from "./_server_harness.ts";
import { fails, ok } from "./_tool_calls.ts";

for (const era of ERAS) {
  Deno.test(`state_changes and state_restore over stdio (${era})`, async (t) => {
    const dir = await Deno.makeTempDir();
    await using session = await stdioSession(era, {
      MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
      MCPSTATE_WRITER: "laptop/test",
    });
    const { client } = session;
    try {
      const { handle } = await ok(client, "state_save", { kind: "trip", state: { stops: [] } });
      await ok(client, "state_patch", {
        handle,
        ops: [{ op: "append", path: "stops", value: "Oslo" }],
      });
      await ok(client, "state_save", { handle, expect_version: 2, state: { stops: ["Bergen"] } });

      await t.step("state_changes lists what happened since a version", async () => {
        const r = await ok(client, "state_changes", { handle, since_version: 1 });
        assert.equal(r.truncated, false);
        assert.equal(r.version, 3);
        const changes = r.changes as Record<string, unknown>[];
        assert.deepEqual(changes.map((c) => [c.version, c.op, c.writer]), [
          [2, "patch", "laptop/test"],
          [3, "save", "laptop/test"],
        ]);
        assert.deepEqual(changes[1]!.patch, [{ op: "replace", path: "/stops/0", value: "Bergen" }]);
        await fails(client, "state_changes", { handle, since_version: 9 }, "invalid_argument");
      });

      await t.step("a stale state_save names its base version and the changes since", async () => {
        const e = await fails(
          client,
          "state_save",
          { handle, expect_version: 1, state: { stops: [] } },
          "stale_write",
        );
        assert.equal(e.base_version, 1);
        assert.deepEqual((e.changes as { version: number }[]).map((c) => c.version), [2, 3]);
        assert.equal((e.current as { version: number }).version, 3);
      });

      await t.step("state_delete can be undone with state_restore", async () => {
        await ok(client, "state_delete", { handle });
        await fails(client, "state_load", { handle }, "handle_not_found");
        const back = await ok(client, "state_restore", { handle });
        assert.equal(back.restored, true);
        assert.equal(back.version, 3);
        assert.deepEqual(back.state, { stops: ["Bergen"] });
        await fails(client, "state_restore", { handle }, "handle_not_found");
        assert.equal((await ok(client, "state_load", { handle })).version, 3);
      });
    } finally {
      await session.close();
      await Deno.remove(dir, { recursive: true });
    }
  });
}
