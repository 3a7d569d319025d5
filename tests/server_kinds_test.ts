/**
 * Typed kinds through the server: `mcpstate serve --kinds MODULE` offers each
 * kind's JSON Schema in `state_save`, refuses states the schema rejects with
 * `invalid_state` issues (nothing written), and reads states of older schema
 * versions upcast, writing them back upgraded — over the official client on
 * real stdio, against a real SQLite file.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Append, HandleStore } from "../mod.ts";
import { stdioSession } from "./_server_harness.ts";
import { fails, ok } from "./_tool_calls.ts";
import { assertOneLineError, mcpstate, tempHome } from "./_cli_run.ts";
import { ResearchV1 } from "./_kinds_module.ts";

const MODULE = fileURLToPath(new URL("./_kinds_module.ts", import.meta.url));

Deno.test("serve --kinds: schemas offered, invalid states refused, old states upcast", async (t) => {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  // A state written by an older release of the kind (schema version 1), straight through the library.
  const lib = await HandleStore.fromUrl(backend);
  const old = await lib.kind("research", ResearchV1).mint({ sources: ["https://a"], notes: "" }, {
    user: "alice",
  });
  await lib.close();

  await using s = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: backend,
    MCPSTATE_USER: "alice",
  }, ["--kinds", MODULE]);
  const { client } = s;

  await t.step("state_save offers the kind's JSON Schema to the model", async () => {
    const { tools } = await client.listTools();
    const description = tools.find((x) => x.name === "state_save")?.description ?? "";
    assert.ok(description.includes("invalid_state"), description);
    const line = description.split("\n").find((l) => l.startsWith("research: "));
    assert.ok(line, description);
    const schema = JSON.parse(line.slice("research: ".length));
    assert.deepEqual(Object.keys(schema.properties).sort(), ["notes", "sources"]);
    assert.equal(schema.properties.sources.items.properties.url.type, "string");
  });

  await t.step(
    "a mint, save or patch that breaks the schema is invalid_state; nothing is written",
    async () => {
      const e = await fails(client, "state_save", {
        kind: "research",
        state: { sources: [{ url: 1, read: false }], notes: "" },
      }, "invalid_state");
      assert.equal(e.kind, "research");
      assert.deepEqual((e.issues as { path: string }[]).map((i) => i.path), ["/sources/0/url"]);
      assert.match(String(e.message), /\/sources\/0\/url/);
      const list = await ok(client, "state_list", { kind: "research" });
      assert.equal((list.handles as unknown[]).length, 1, "only the old handle");

      const minted = await ok(client, "state_save", {
        kind: "research",
        state: { sources: [], notes: "" },
      });
      const handle = String(minted.handle);
      await fails(client, "state_save", {
        handle,
        expect_version: 1,
        state: { sources: [], notes: "x".repeat(201) },
      }, "invalid_state");
      const bad = await fails(client, "state_patch", {
        handle,
        ops: [Append("sources", { url: "https://b" })],
      }, "invalid_state");
      assert.deepEqual((bad.issues as { path: string }[]).map((i) => i.path), ["/sources/0/read"]);
      const now = await ok(client, "state_load", { handle });
      assert.deepEqual([now.version, now.state, now.schema_version], [
        1,
        { sources: [], notes: "" },
        2,
      ]);
      // A kind the module does not name stays free-form.
      await ok(client, "state_save", { kind: "note", state: { anything: [1, "two"] } });
    },
  );

  await t.step(
    "a state of schema version 1 reads upcast, and the next write upgrades it",
    async () => {
      const read = await ok(client, "state_load", { handle: old });
      assert.deepEqual(read.state, { sources: [{ url: "https://a", read: false }], notes: "" });
      assert.equal(read.schema_version, 1, "not written yet");
      const patched = await ok(client, "state_patch", {
        handle: old,
        ops: [Append("sources", { url: "https://b", read: true })],
      });
      assert.equal(patched.schema_version, 2);
      assert.equal(patched.version, 2);
      assert.deepEqual(patched.state, {
        sources: [{ url: "https://a", read: false }, { url: "https://b", read: true }],
        notes: "",
      });
    },
  );
});

Deno.test("serve --kinds: a module without kinds is a configuration error (exit 2, one line)", async () => {
  const home = await tempHome();
  const missing = await mcpstate(home, ["serve", "--kinds", "./no-such-kinds.ts"]);
  assertOneLineError(missing, 2, /--kinds/);
  const none = await mcpstate(home, ["serve"], {
    env: { MCPSTATE_KINDS: fileURLToPath(new URL("./_helpers.ts", import.meta.url)) },
  });
  assertOneLineError(none, 2, /no "kinds" export/);
});
