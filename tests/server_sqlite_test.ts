/**
 * Continuity across clients and conversations on one machine: separate stdio
 * server processes on one SQLite file see each other's writes, conflict
 * correctly, keep users apart, and survive restarts.
 */

import assert from "node:assert/strict";
import { stdioSession } from "./_server_harness.ts";
import { fails, ok, payloadOf } from "./_tool_calls.ts";

Deno.test("two stdio servers on one SQLite file: shared writes, stale writes, users, restarts", async (t) => {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  const a = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: backend,
    MCPSTATE_USER: "alice",
    MCPSTATE_WRITER: "laptop/client-a",
  });
  const b = await stdioSession("2025-11-25", {
    MCPSTATE_BACKEND: backend,
    MCPSTATE_USER: "alice",
    MCPSTATE_WRITER: "laptop/client-b",
  });
  let handle = "";
  try {
    await t.step("a write through one server is read through the other", async () => {
      handle = String(
        (await ok(a.client, "state_save", {
          kind: "research",
          state: { sources: [], notes: "" },
        })).handle,
      );
      const seen = await ok(b.client, "state_load", { handle });
      assert.deepEqual(seen.state, { sources: [], notes: "" });
      assert.equal(seen.last_writer, "laptop/client-a");
      const listed = await ok(b.client, "state_list", {});
      assert.deepEqual((listed.handles as { handle: string }[]).map((h) => h.handle), [handle]);
    });

    await t.step("a save based on an old version loses with the winner's state", async () => {
      // Both read version 1; A saves first.
      await ok(a.client, "state_save", {
        handle,
        state: { sources: ["a"], notes: "from A" },
        expect_version: 1,
      });
      const e = await fails(b.client, "state_save", {
        handle,
        state: { sources: ["b"], notes: "from B" },
        expect_version: 1,
      }, "stale_write");
      const current = e.current as Record<string, unknown>;
      assert.deepEqual(current.state, { sources: ["a"], notes: "from A" });
      assert.equal(current.version, 2);
      assert.equal(current.last_writer, "laptop/client-a");
      // The recovery loop: re-apply to the current state, save with its version.
      const merged = { sources: ["a", "b"], notes: "from A; from B" };
      const saved = await ok(b.client, "state_save", {
        handle,
        state: merged,
        expect_version: current.version,
      });
      assert.equal(saved.version, 3);
      assert.deepEqual((await ok(a.client, "state_load", { handle })).state, merged);
    });

    await t.step("concurrent saves from one version: exactly one wins", async () => {
      const results = await Promise.all(
        [a, b, a, b].map((s, i) =>
          s.client.callTool({
            name: "state_save",
            arguments: { handle, state: { winner: i }, expect_version: 3 },
          })
        ),
      );
      const winners = results.filter((r) => !r.isError);
      assert.equal(winners.length, 1);
      for (const r of results.filter((r) => r.isError)) {
        assert.equal((payloadOf(r)?.error as { code: string }).code, "stale_write");
      }
      assert.equal((await ok(b.client, "state_load", { handle })).version, 4);
    });

    await t.step("concurrent patches from both servers all land", async () => {
      await ok(a.client, "state_save", {
        handle,
        state: { items: [], count: 0 },
        expect_version: 4,
      });
      const calls = [];
      for (let i = 0; i < 20; i++) {
        for (const [s, who] of [[a, "a"], [b, "b"]] as const) {
          calls.push(ok(s.client, "state_patch", {
            handle,
            ops: [
              { op: "append", path: "items", value: `${who}${i}` },
              { op: "increment", path: "", key: "count" },
            ],
          }));
        }
      }
      await Promise.all(calls);
      const p = await ok(a.client, "state_load", { handle });
      const state = p.state as { items: string[]; count: number };
      assert.equal(state.items.length, 40);
      assert.equal(new Set(state.items).size, 40);
      assert.equal(state.count, 40);
      assert.equal(p.version, 5 + 40);
    });

    await t.step("another MCPSTATE_USER on the same file sees nothing of alice's", async () => {
      await using bob = await stdioSession("2026-07-28", {
        MCPSTATE_BACKEND: backend,
        MCPSTATE_USER: "bob",
      });
      await fails(bob.client, "state_load", { handle }, "handle_not_found");
      assert.deepEqual((await ok(bob.client, "state_list", {})).handles, []);
    });
  } finally {
    await a.close();
    await b.close();
  }

  await t.step("a new conversation (a new server process) resumes the state", async () => {
    await using c = await stdioSession("2026-07-28", {
      MCPSTATE_BACKEND: backend,
      MCPSTATE_USER: "alice",
    });
    const listed = await ok(c.client, "state_list", { kind: "research" });
    assert.deepEqual((listed.handles as { handle: string }[]).map((h) => h.handle), [handle]);
    const p = await ok(c.client, "state_load", { handle });
    assert.ok((p.version as number) >= 4);
  });
  await Deno.remove(dir, { recursive: true });
});
