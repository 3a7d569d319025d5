/**
 * The tool list's own cost, and the choice of tools: every conversation pays
 * for `tools/list` before its first call. The whole result of a server with
 * default flags stays within 8,192 bytes of JSON, every default tool
 * included (measured on the wire, and as a client sees it over stdio); the
 * bytes of each tool are printed for `docs/benchmarks.md`. `--tools`
 * (`MCPSTATE_TOOLS`) and the `tools` option offer only the tools named.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HandleStore } from "../mod.ts";
import {
  checkReadAndTools,
  createHttpHandler,
  DEFAULT_MAX_READ_BYTES,
  DEFAULT_TOOLS,
  type HttpHandlerOptions,
  resolveToolNames,
  STATE_TOOLS,
} from "../src/server/mod.ts";
import { ConfigError, parseServeArgs, type ServeConfig } from "../src/cli/serve_config.ts";
import { runServe, stdioSession } from "./_server_harness.ts";
import { call, ok } from "./_tool_calls.ts";
import { rawRequest } from "./_raw_mcp.ts";

/** The budget of the whole `tools/list` result (SPEC §7.8). */
const TOOLS_LIST_BUDGET = 8192;

const encoder = new TextEncoder();
const bytes = (v: unknown) => encoder.encode(JSON.stringify(v)).length;

/** The `result` of a 2026-07-28 `tools/list`, as the server writes it on the wire. */
async function rawToolsList(
  options: Partial<HttpHandlerOptions> = {},
): Promise<{ tools: Record<string, unknown>[] } & Record<string, unknown>> {
  await using store = await HandleStore.fromUrl("memory://");
  const app = createHttpHandler(store, {
    publicUrl: new URL("http://127.0.0.1/mcp"),
    anonymous: true,
    ...options,
  });
  try {
    const res = await rawRequest(app.fetch, "tools/list");
    assert.equal(res.status, 200);
    const body = JSON.parse(res.text);
    assert.ok(body.result, res.text);
    return body.result;
  } finally {
    await app.close();
  }
}

Deno.test("tools/list of a server with default flags is at most 8,192 bytes of JSON, every default tool in it", async () => {
  const result = await rawToolsList();
  assert.deepEqual(result.tools.map((t) => t.name), [...DEFAULT_TOOLS]);
  assert.deepEqual(
    [...DEFAULT_TOOLS],
    STATE_TOOLS.filter((t) => t !== "state_share"),
    "every tool but state_share (offered when named) is in the default set",
  );
  const size = bytes(result);
  assert.ok(size <= TOOLS_LIST_BUDGET, `tools/list is ${size} bytes, over ${TOOLS_LIST_BUDGET}`);
  // The same list as a client sees it, from `mcpstate serve` with no flags at all.
  await using s = await stdioSession("2026-07-28", { MCPSTATE_BACKEND: "memory://" });
  const listed = await s.client.listTools();
  assert.deepEqual(listed.tools.map((t) => t.name), [...DEFAULT_TOOLS]);
  assert.ok(bytes(listed) <= TOOLS_LIST_BUDGET, `${bytes(listed)} bytes as the client parsed it`);
});

Deno.test("tools/list: the bytes of each tool (for docs/benchmarks.md)", async () => {
  const result = await rawToolsList();
  const rows = result.tools.map((t) => {
    const { name, description, inputSchema, outputSchema, ...rest } = t;
    return {
      tool: name,
      total: bytes(t),
      description: bytes(description),
      input: bytes(inputSchema),
      output: bytes(outputSchema),
      "name, title, annotations": bytes({ name, ...rest }),
    };
  });
  const total = bytes(result);
  const envelope = total - rows.reduce((n, r) => n + r.total, 0);
  console.log(`tools/list: ${total} bytes of JSON (budget ${TOOLS_LIST_BUDGET}); per tool:`);
  console.table(rows);
  console.log(
    `the rest of the result (resultType, ttlMs, cacheScope, serverInfo): ${envelope} bytes`,
  );
  console.log(`left for more default tools: ${TOOLS_LIST_BUDGET - total} bytes`);
  assert.ok(envelope > 0 && envelope < 300, `${envelope}`);
  for (const r of rows) assert.ok(r.total < 1400, `${r.tool}: ${r.total} bytes`);
});

Deno.test("tools/list: what the descriptions must still teach", async () => {
  const result = await rawToolsList();
  const d = Object.fromEntries(result.tools.map((t) => [t.name, String(t.description)]));
  // The mint / update / stale-write loop, with the merge.
  assert.match(d.state_save!, /omit handle/);
  assert.match(d.state_save!, /expect_version/);
  assert.match(d.state_save!, /stale_write/);
  assert.match(d.state_save!, /on_conflict:"merge"/);
  assert.match(d.state_save!, /error\.current\.state/);
  assert.match(d.state_save!, /error\.conflicts/);
  // When to patch.
  assert.match(d.state_save!, /state_patch/);
  assert.match(d.state_patch!, /never conflicts/);
  for (const op of ["append", "add_to_set", "set_key", "del_key", "merge", "increment"]) {
    assert.match(d.state_patch!, new RegExp(`"${op}"`));
  }
  // Resuming.
  assert.match(d.state_list!, /start of a conversation/);
  // Budgeted reads: the default budget is named.
  assert.match(d.state_load!, new RegExp(`max_bytes \\(default ${DEFAULT_MAX_READ_BYTES}\\)`));
  assert.match(d.state_load!, /outline/);
  assert.match(d.state_load!, /paths/);
  const load = result.tools.find((t) => t.name === "state_load")!;
  const props = (load.inputSchema as { properties: Record<string, unknown> }).properties;
  assert.deepEqual(Object.keys(props), ["handle", "path", "max_bytes", "paths"]);
  // Without a default budget, none is named.
  const unbounded = await rawToolsList({ maxReadBytes: 0 });
  const d0 = String(unbounded.tools.find((t) => t.name === "state_load")!.description);
  assert.doesNotMatch(d0, /default/);
});

Deno.test("--tools offers only the tools named, with or without the state_ prefix", async () => {
  await using s = await stdioSession("2026-07-28", { MCPSTATE_BACKEND: "memory://" }, [
    "--tools",
    "save,load,state_patch, list",
  ]);
  const listed = await s.client.listTools();
  assert.deepEqual(listed.tools.map((t) => t.name), [
    "state_save",
    "state_load",
    "state_list",
    "state_patch",
  ]);
  const h = (await ok(s.client, "state_save", { kind: "note", state: { a: 1 } })).handle;
  await ok(s.client, "state_patch", { handle: h, ops: [] });
  // A tool not offered is unknown: a protocol error, as for any unknown tool.
  await assert.rejects(() => call(s.client, "state_delete", { handle: h }));
  await s.close();

  await using e = await stdioSession("2025-11-25", {
    MCPSTATE_BACKEND: "memory://",
    MCPSTATE_TOOLS: "state_load,changes",
  });
  const names = (await e.client.listTools()).tools.map((t) => t.name);
  assert.deepEqual(names, ["state_load", "state_changes"]);
});

Deno.test("the tools option of the server entries: resolved once, unknown names refused at start", async () => {
  const only = await rawToolsList({ tools: ["lease", "state_restore"] });
  assert.deepEqual(only.tools.map((t) => t.name), ["state_restore", "state_lease"]);
  assert.deepEqual(resolveToolNames(["state_save", "save", " load "]), [
    "state_save",
    "state_load",
  ]);
  for (const bad of [["nope"], [], ["state_"], ["SAVE"], [""]]) {
    assert.throws(() => resolveToolNames(bad), TypeError, JSON.stringify(bad));
  }
  assert.throws(
    () => checkReadAndTools({ tools: ["spoon"] }),
    /Unknown tool "spoon"; the tools are save, load, list, patch, touch, delete, changes, restore, lease, fork, merge, share\./,
  );
  for (const maxReadBytes of [1, 255, -1, 1.5, NaN]) {
    assert.throws(() => checkReadAndTools({ maxReadBytes }), TypeError, String(maxReadBytes));
  }
  assert.deepEqual(checkReadAndTools({}), {
    maxReadBytes: DEFAULT_MAX_READ_BYTES,
    tools: [...DEFAULT_TOOLS],
  });
  await using store = await HandleStore.fromUrl("memory://");
  assert.throws(
    () =>
      createHttpHandler(store, {
        publicUrl: new URL("http://127.0.0.1/mcp"),
        anonymous: true,
        tools: ["nope"],
      }),
    TypeError,
  );
});

function parse(args: string[], env: Record<string, string> = {}): ServeConfig {
  const c = parseServeArgs(args, (name) => env[name]);
  assert.notEqual(c, "help");
  return c as ServeConfig;
}

Deno.test("serve config: --max-read-bytes and --tools, their MCPSTATE_* twins, bad values refused", () => {
  assert.equal(parse([]).maxReadBytes, 131_072);
  assert.equal(parse([]).tools, undefined);
  assert.equal(parse([], { MCPSTATE_MAX_READ_BYTES: "4096" }).maxReadBytes, 4096);
  assert.equal(
    parse(["--max-read-bytes", "0"], { MCPSTATE_MAX_READ_BYTES: "4096" }).maxReadBytes,
    0,
  );
  assert.equal(parse(["--max-read-bytes", "256"]).maxReadBytes, 256);
  for (const bad of ["255", "1", "-1", "1e3", "x", "4096.5"]) {
    assert.throws(() => parse(["--max-read-bytes", bad]), ConfigError, bad);
  }
  assert.deepEqual(parse(["--tools", "list,save"]).tools, ["state_save", "state_list"]);
  assert.deepEqual(parse([], { MCPSTATE_TOOLS: "state_patch" }).tools, ["state_patch"]);
  assert.deepEqual(parse(["--tools", "load"], { MCPSTATE_TOOLS: "patch" }).tools, ["state_load"]);
  assert.throws(
    () => parse(["--tools", "save,spoon"]),
    (e) =>
      e instanceof ConfigError && !e.message.includes("\n") &&
      /--tools \(MCPSTATE_TOOLS\): Unknown tool "spoon"; the tools are save, load, list/.test(
        e.message,
      ),
  );
  assert.throws(() => parse(["--tools", ","]), ConfigError);
});

Deno.test("serve: an unknown tool is exit 2 and one line naming the valid tools", async () => {
  for (
    const [args, env] of [[["--tools", "save,nope"], {}], [[], { MCPSTATE_TOOLS: "nope" }]] as const
  ) {
    const out = await runServe(["--backend", "memory://", ...args], env);
    assert.equal(out.code, 2);
    const err = out.stderr.trim();
    assert.equal(err.split("\n").length, 1, err);
    assert.match(
      err,
      /Unknown tool "nope"; the tools are save, load, list, patch, touch, delete, changes, restore, lease, fork, merge, share\./,
    );
    assert.equal(out.stdout.length, 0);
  }
});
