/**
 * Every client reads every error. The official TypeScript SDK 1.x client
 * (`@modelcontextprotocol/sdk`, protocol 2025-11-25) and the v2 client
 * (2026-07-28), over real stdio and real HTTP, list the tools first (SDK 1.x
 * checks a result only against the output schema it cached from
 * `tools/list`), then drive every tool into a success and into each error it
 * can produce: the model-visible result (the text block) carries the whole
 * payload, a stale write's `current.state` included. And 2025-era HTTP
 * clients are told apart by their `User-Agent`: two of one user are two
 * writers and two lease holders.
 */

import assert from "node:assert/strict";
import { type Backend, HandleStore } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { ANONYMOUS_USER, createHttpHandler } from "../src/server/mod.ts";
import { clientLabel } from "../src/server/identity.ts";
import { httpClient, startHttpServer, stdioSession } from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { type AnyClient, eachClient, SDK1_NAME, sdk1Http, sdk1Stdio } from "./_sdk1.ts";
import { fails, ok } from "./_tool_calls.ts";

const HOST = Deno.hostname();
const LIMIT = 2000;

/** The error codes each tool is driven into (`unauthenticated`, `backend_error`, `internal_error`: below). */
const MATRIX: Record<string, string[]> = {
  state_save: [
    "expect_version_required",
    "handle_expired",
    "handle_not_found",
    "invalid_argument",
    "stale_write",
    "state_too_large",
  ],
  state_load: ["handle_expired", "handle_not_found", "invalid_argument", "patch_error"],
  state_list: ["invalid_argument"],
  state_patch: [
    "handle_expired",
    "handle_not_found",
    "invalid_argument",
    "patch_error",
    "state_too_large",
  ],
  state_touch: ["handle_expired", "handle_not_found", "invalid_argument"],
  state_delete: ["handle_not_found", "invalid_argument"],
  state_changes: ["handle_expired", "handle_not_found", "invalid_argument"],
  state_restore: ["handle_not_found", "invalid_argument"],
  state_lease: ["handle_expired", "handle_not_found", "invalid_argument"],
  state_fork: ["handle_expired", "handle_not_found", "invalid_argument"],
  state_merge: ["handle_not_found", "invalid_argument", "stale_write"],
};

/**
 * Lists the tools, then calls every tool into a success and into each error
 * of {@link MATRIX}, checking each result's shape (`ok`/`fails` of the
 * harness: the whole payload in the text block, `structuredContent` only on
 * a success) and the facts a model acts on.
 */
async function everyToolEveryError(client: AnyClient, writer: string): Promise<void> {
  const listed = await client.listTools();
  assert.equal(listed.tools.length, Object.keys(MATRIX).length);
  for (const tool of listed.tools) {
    assert.ok(MATRIX[tool.name], tool.name);
    assert.ok(tool.outputSchema, `${tool.name} declares an output schema`);
  }
  const seen: Record<string, Set<string>> = {};
  const failing = async (tool: string, args: Record<string, unknown>, code: string) => {
    const error = await fails(client, tool, args, code);
    (seen[tool] ??= new Set()).add(code);
    return error;
  };
  const missing = "note_zzzzzzzz";
  const kind = "note";

  // Expires in a second; driven into handle_expired at the end.
  const brief = String(
    (await ok(client, "state_save", { kind, state: { brief: true }, ttl_days: 1 / 86_400 }))
      .handle,
  );
  const briefUntil = Date.now() + 1_100;

  // state_save
  const handle = String((await ok(client, "state_save", { kind, state: { items: ["a"] } })).handle);
  await ok(client, "state_save", { handle, state: { items: ["a", "b"] }, expect_version: 1 });
  assert.equal((await failing("state_save", { state: {} }, "invalid_argument")).field, "kind");
  await failing("state_save", { handle, state: {} }, "expect_version_required");
  const stale = await failing(
    "state_save",
    { handle, state: { items: [] }, expect_version: 1 },
    "stale_write",
  );
  assert.equal(stale.expected_version, 1);
  const current = stale.current as Record<string, unknown>;
  assert.equal(current.version, 2);
  assert.deepEqual(current.state, { items: ["a", "b"] }, "the winner's state reaches the model");
  assert.match(String(stale.message), /re-apply/i);
  await failing(
    "state_save",
    { handle: missing, state: {}, expect_version: 1 },
    "handle_not_found",
  );
  const big = { blob: "x".repeat(LIMIT) };
  const tooLarge = await failing("state_save", { kind, state: big }, "state_too_large");
  assert.equal(tooLarge.limit_bytes, LIMIT);
  await failing("state_save", { handle, state: big, expect_version: 2 }, "state_too_large");

  // state_load
  const loaded = await ok(client, "state_load", { handle });
  assert.equal(loaded.last_writer, writer);
  assert.equal((await ok(client, "state_load", { handle, path: "/items/1" })).state, "b");
  await failing("state_load", { handle, path: "nope.deep" }, "patch_error");
  assert.equal(
    (await failing("state_load", { handle: missing }, "handle_not_found")).handle,
    missing,
  );
  await failing("state_load", { handle: 42 }, "invalid_argument");

  // state_patch
  const append = [{ op: "append", path: "items", value: "c" }];
  const key = crypto.randomUUID();
  const patched = await ok(client, "state_patch", { handle, ops: append, idempotency_key: key });
  assert.deepEqual(patched.state, { items: ["a", "b", "c"] });
  const bad = await failing(
    "state_patch",
    { handle, ops: [...append, { op: "explode" }] },
    "patch_error",
  );
  assert.equal(bad.op_index, 1);
  await failing(
    "state_patch",
    { handle, ops: [{ op: "append", path: "items", value: big.blob }] },
    "state_too_large",
  );
  await failing("state_patch", { handle: missing, ops: append }, "handle_not_found");
  const reused = await failing(
    "state_patch",
    { handle, ops: [{ op: "append", path: "items", value: "d" }], idempotency_key: key },
    "invalid_argument",
  );
  assert.equal(reused.field, "idempotency_key");

  // state_touch
  assert.equal((await ok(client, "state_touch", { handle })).expires_at, null);
  await failing("state_touch", { handle, ttl_days: 0 }, "invalid_argument");
  await failing("state_touch", { handle: missing }, "handle_not_found");

  // state_list
  const page = await ok(client, "state_list", { kind, limit: 1 });
  assert.equal((page.handles as unknown[]).length, 1);
  await failing("state_list", { cursor: "bogus" }, "invalid_argument");

  // state_changes
  const changes = await ok(client, "state_changes", { handle, since_version: 1 });
  assert.equal(changes.truncated, false);
  await failing("state_changes", { handle, since_version: "1" }, "invalid_argument");
  await failing("state_changes", { handle: missing, since_version: 1 }, "handle_not_found");

  // state_lease
  assert.equal((await ok(client, "state_lease", { handle, seconds: 30 })).acquired, true);
  await failing("state_lease", { handle, seconds: 0 }, "invalid_argument");
  await failing("state_lease", { handle: missing }, "handle_not_found");

  // state_fork and state_merge
  const fork = await ok(client, "state_fork", { handle });
  const sub = String(fork.handle);
  assert.equal((fork.forked_from as Record<string, unknown>).handle, handle);
  await ok(client, "state_patch", {
    handle: sub,
    ops: [{ op: "set_key", path: "", key: "k", value: 1 }],
  });
  await ok(client, "state_patch", {
    handle,
    ops: [{ op: "set_key", path: "", key: "k", value: 2 }],
  });
  const clash = await failing("state_merge", { handle: sub }, "stale_write");
  assert.deepEqual(clash.conflicts, ["/k"]);
  await failing("state_merge", { handle }, "invalid_argument");
  await failing("state_merge", { handle: missing }, "handle_not_found");
  await failing("state_fork", { handle: missing }, "handle_not_found");
  await failing("state_fork", {}, "invalid_argument");

  // state_delete and state_restore
  assert.equal((await ok(client, "state_delete", { handle })).deleted, true);
  await failing("state_delete", { handle }, "handle_not_found");
  await failing("state_delete", { handle: [] }, "invalid_argument");
  assert.deepEqual((await ok(client, "state_restore", { handle })).state, {
    items: ["a", "b", "c"],
    k: 2,
  });
  await failing("state_restore", { handle: missing }, "handle_not_found");
  await failing("state_restore", {}, "invalid_argument");

  // handle_expired, wherever a live handle is needed
  await new Promise((r) => setTimeout(r, Math.max(0, briefUntil - Date.now())));
  const expired = await failing("state_load", { handle: brief }, "handle_expired");
  assert.equal(expired.handle, brief);
  await failing("state_save", { handle: brief, state: {}, expect_version: 1 }, "handle_expired");
  await failing("state_patch", { handle: brief, ops: [] }, "handle_expired");
  await failing("state_touch", { handle: brief }, "handle_expired");
  await failing("state_changes", { handle: brief, since_version: 1 }, "handle_expired");
  await failing("state_lease", { handle: brief }, "handle_expired");
  await failing("state_fork", { handle: brief }, "handle_expired");

  const got = Object.fromEntries(Object.entries(seen).map(([k, v]) => [k, [...v].sort()]));
  assert.deepEqual(got, MATRIX, "every tool was driven into every error it can produce");
}

Deno.test("SDK 1.x and v2 clients over stdio read every tool's every error", async (t) => {
  const dir = await Deno.makeTempDir();
  const env = {
    MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
    MCPSTATE_MAX_STATE_BYTES: String(LIMIT),
  };
  await eachClient(t, [
    ["SDK 1.x (2025-11-25)", () => sdk1Stdio(env), `${HOST}/${SDK1_NAME}`],
    // Closing the client closes the server's stdin, and the server exits.
    [
      "v2 (2026-07-28)",
      async () => (await stdioSession("2026-07-28", env)).client,
      `${HOST}/test-client`,
    ],
  ], (_t, client, writer) => everyToolEveryError(client, writer));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("SDK 1.x and v2 clients over HTTP read every tool's every error", async (t) => {
  await using issuer = await startIssuer();
  await using server = await startHttpServer([
    ...["--backend", "memory://", "--max-state-bytes", String(LIMIT)],
    ...issuer.serveArgs,
  ]);
  const token = await issuer.token({ sub: "alice", aud: server.url.href });
  const headers = { Authorization: `Bearer ${token}`, "User-Agent": "sdk1-agent/1.0" };
  await eachClient(t, [
    ["SDK 1.x (2025-11-25)", () => sdk1Http(server.url, headers), `${HOST}/sdk1-agent/1.0`],
    ["v2 (2026-07-28)", () => httpClient(server.url, "2026-07-28", token), `${HOST}/test-client`],
  ], (_t, client, writer) => everyToolEveryError(client, writer));
  assert.equal((await server.stop()).code, 0, server.stderr());
});

Deno.test("SDK 1.x and v2 clients read unauthenticated, backend_error and internal_error", async () => {
  const inner = new MemoryBackend();
  let mode: "fine" | "throw" | "corrupt" = "fine";
  // A real memory backend that fails on demand: every call throws, or reads return broken JSON.
  // `prop` names a primitive, or a group member as `group.member`.
  const failing =
    (prop: string, value: (...args: unknown[]) => unknown, self: unknown) =>
    async (...args: unknown[]) => {
      if (mode === "throw") throw new Error("connect ECONNREFUSED 10.1.2.3:6379");
      const out = await value.apply(self, args) as { record?: object } | null;
      if (mode !== "corrupt" || !out) return out;
      if (prop === "read") return { ...out, state: "{broken" };
      return prop === "leases.readLeased"
        ? { ...out, record: { ...out.record, state: "{broken" } }
        : out;
    };
  const groups = new Map<string | symbol, Record<string, unknown>>();
  const backend = new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value === "object" && value !== null && typeof prop === "string") {
        let group = groups.get(prop);
        if (!group) {
          const members = Object.entries(value as Record<string, (...a: unknown[]) => unknown>)
            .map(([m, f]) => [m, failing(`${prop}.${m}`, f, value)]);
          groups.set(prop, group = Object.fromEntries(members));
        }
        return group;
      }
      if (typeof value !== "function" || prop === "close" || prop === "sweep") return value;
      return failing(String(prop), value, target);
    },
  }) as Backend;
  const store = new HandleStore(backend);
  const app = createHttpHandler(store, {
    publicUrl: new URL("http://127.0.0.1/mcp"),
    anonymous: true,
    onError: () => {},
  });
  const ac = new AbortController();
  const http = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    app.fetch,
  );
  const url = new URL(`http://127.0.0.1:${http.addr.port}/mcp`);
  const clients: AnyClient[] = [await sdk1Http(url), await httpClient(url, "2026-07-28")];
  try {
    const handle = await store.mint("note", { a: 1 }, { user: ANONYMOUS_USER, randomChars: 26 });
    for (const client of clients) {
      await client.listTools();
      mode = "fine";
      await fails(client, "state_list", {}, "unauthenticated");
      mode = "throw";
      const down = await fails(client, "state_load", { handle }, "backend_error");
      assert.ok(!JSON.stringify(down).includes("10.1.2.3"));
      await fails(client, "state_save", { kind: "note", state: {} }, "backend_error");
      mode = "corrupt";
      const broken = await fails(client, "state_load", { handle }, "internal_error");
      assert.equal(broken.error_class, "SyntaxError");
      mode = "fine";
      assert.deepEqual((await ok(client, "state_load", { handle })).state, { a: 1 });
    }
  } finally {
    for (const c of clients) await c.close();
    await app.close();
    ac.abort();
    await http.finished;
    await store.close();
  }
});

Deno.test("two 2025-era HTTP clients of one user are two writers and two lease holders", async () => {
  await using issuer = await startIssuer();
  await using server = await startHttpServer(["--backend", "memory://", ...issuer.serveArgs]);
  const token = await issuer.token({ sub: "carol", aud: server.url.href });
  const as = (ua: string) =>
    sdk1Http(server.url, { Authorization: `Bearer ${token}`, "User-Agent": ua });
  const a = await as("editor-a/1.0");
  const b = await as("editor-b/2.0 (linux)");
  // Control characters are dropped and the label is bounded.
  const c = await as(`\tnoisy\u0085agent\t/3 ${"x".repeat(300)}`);
  try {
    const { handle } = await ok(a, "state_save", { kind: "note", state: { n: 0 } });
    assert.equal((await ok(b, "state_load", { handle })).last_writer, `${HOST}/editor-a/1.0`);
    const ops = [{ op: "increment", path: "", key: "n", by: 1 }];
    const patched = await ok(b, "state_patch", { handle, ops });
    assert.equal(patched.last_writer, `${HOST}/editor-b/2.0 (linux)`);
    // A's implicit lease from its save is another holder's to B.
    assert.deepEqual((patched.active_lease as { holder: string }).holder, `${HOST}/editor-a/1.0`);

    const taken = await ok(a, "state_lease", { handle, seconds: 600 });
    assert.equal(taken.acquired, true);
    const refused = await ok(b, "state_lease", { handle, seconds: 600 });
    assert.equal(refused.acquired, false);
    assert.equal((refused.active_lease as { holder: string }).holder, `${HOST}/editor-a/1.0`);
    assert.equal((await ok(a, "state_load", { handle })).active_lease, undefined, "A's own");
    assert.ok((await ok(b, "state_load", { handle })).active_lease, "B sees A at work");

    const noisy = await ok(c, "state_patch", { handle, ops });
    const label = String(noisy.last_writer);
    assert.ok(label.startsWith(`${HOST}/noisy agent /3 xxx`), label);
    assert.equal(label.length, HOST.length + 1 + 100);
    assert.doesNotMatch(label, /\p{Cc}/u);
  } finally {
    for (const client of [a, b, c]) await client.close();
  }
});

Deno.test("clientLabel keeps what names a client and nothing that could break a label", () => {
  assert.equal(clientLabel("claude-code/2.1"), "claude-code/2.1");
  assert.equal(clientLabel("  a\r\n\tb\u0000c\u2028d  "), "a b c d");
  assert.equal(clientLabel("zero\u200bwidth\u202eflip"), "zerowidthflip");
  assert.equal(clientLabel("lone \ud800 half"), "lone half");
  assert.equal(clientLabel("é".repeat(150)), "é".repeat(100));
  assert.equal(clientLabel("x".repeat(99) + "😀"), "x".repeat(99), "never half a pair");
  assert.equal(clientLabel(" \u0001 "), undefined);
  assert.equal(clientLabel(42), undefined);
  assert.equal(clientLabel(undefined), undefined);
});
