/**
 * Quotas through the server: `mcpstate serve --quota-*` over real HTTP with
 * real tokens, two instances on one SQLite file, the official client, and
 * the refusals counted in `/metrics`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseServeArgs } from "../src/cli/serve_config.ts";
import { scrape } from "./_metrics.ts";
import { freePort, httpClient, startHttpServer } from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";

Deno.test("quotas over HTTP: quota_exceeded with its details, per user, held across two instances, counted in /metrics", async () => {
  const dir = await Deno.makeTempDir();
  await using issuer = await startIssuer();
  const metricsPort = freePort();
  const flags = [
    "--backend",
    `sqlite:///${dir}/state.db`,
    "--quota-handles",
    "2",
    "--quota-bytes",
    "200",
    ...issuer.serveArgs,
  ];
  await using one = await startHttpServer([...flags, "--metrics-port", String(metricsPort)]);
  await using two = await startHttpServer(flags);
  const alice = await issuer.token({ sub: "quota-alice", aud: one.url.href });
  const alice2 = await issuer.token({ sub: "quota-alice", aud: two.url.href });
  const bob = await issuer.token({ sub: "quota-bob", aud: one.url.href });
  const a1 = await httpClient(one.url, "2026-07-28", alice);
  const a2 = await httpClient(two.url, "2025-11-25", alice2);
  const b1 = await httpClient(one.url, "2026-07-28", bob);
  try {
    const h = String((await ok(a1, "state_save", { kind: "note", state: { n: 1 } })).handle);
    await ok(a2, "state_save", { kind: "note", state: { n: 2 } });
    // The third handle, through either instance, is refused; nothing is written.
    for (const client of [a1, a2]) {
      const e = await fails(
        client,
        "state_save",
        { kind: "note", state: { n: 3 } },
        "quota_exceeded",
      );
      assert.equal(e.quota, "handles");
      assert.equal(e.limit, 2);
      assert.equal(e.usage, 2);
      assert.equal(e.retry_after_seconds, undefined);
      assert.match(String(e.message), /state_delete/);
    }
    assert.equal((await ok(a1, "state_list", {}) as { handles: unknown[] }).handles.length, 2);
    // Another user has a quota of their own.
    await ok(b1, "state_save", { kind: "note", state: { n: 1 } });
    // Growing past the bytes quota is refused; shrinking is not.
    const big = { text: "x".repeat(200) };
    const e = await fails(
      a1,
      "state_save",
      { handle: h, state: big, expect_version: 1 },
      "quota_exceeded",
    );
    assert.equal(e.quota, "bytes");
    assert.equal(e.limit, 200);
    await ok(a1, "state_save", { handle: h, state: {}, expect_version: 1 });
    // Deleting frees a handle.
    await ok(a2, "state_delete", { handle: h });
    await ok(a2, "state_save", { kind: "note", state: { n: 3 } });
    const m = await scrape(metricsPort);
    assert.equal(m.value("mcpstate_quota_refusals_total", { quota: "handles" }), 1);
    assert.equal(m.value("mcpstate_quota_refusals_total", { quota: "bytes" }), 1);
    assert.equal(m.value("mcpstate_quota_refusals_total", { quota: "writes_per_minute" }), 0);
    assert.equal(
      m.value("mcpstate_tool_calls_total", { tool: "state_save", code: "quota_exceeded" }),
      2,
    );
  } finally {
    await Promise.all([a1.close(), a2.close(), b1.close()]);
    await one.stop();
    await two.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("quotas over HTTP: the rate limit answers retry_after_seconds", async () => {
  await using server = await startHttpServer([
    "--backend",
    "memory://",
    "--allow-anonymous",
    "--quota-writes-per-minute",
    "3",
  ]);
  const client = await httpClient(server.url, "2026-07-28");
  // The window is a minute of the clock: start well inside one.
  const left = 60_000 - Date.now() % 60_000;
  if (left < 10_000) await new Promise((r) => setTimeout(r, left + 100));
  try {
    const h = String((await ok(client, "state_save", { kind: "note", state: { n: 0 } })).handle);
    await ok(client, "state_patch", { handle: h, ops: [{ op: "increment", path: "", key: "n" }] });
    await ok(client, "state_patch", { handle: h, ops: [{ op: "increment", path: "", key: "n" }] });
    const e = await fails(client, "state_patch", {
      handle: h,
      ops: [{ op: "increment", path: "", key: "n" }],
    }, "quota_exceeded");
    assert.equal(e.quota, "writes_per_minute");
    assert.equal(e.limit, 3);
    assert.equal(e.usage, 3);
    const retry = e.retry_after_seconds as number;
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, String(retry));
    assert.match(String(e.message), /[Ww]ait \d+ seconds/);
    // Reads are never refused.
    assert.equal((await ok(client, "state_load", { handle: h })).version, 3);
  } finally {
    await client.close();
  }
});

Deno.test("quota flags: defaults, MCPSTATE_* twins, flags over variables, bad values refused", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const parse = (args: string[], vars: Record<string, string>) => {
    const c = parseServeArgs(args, env(vars));
    assert.ok(c !== "help");
    return c;
  };
  assert.equal(parse([], {}).quotas, undefined);
  const c = parseServeArgs(
    ["--quota-handles", "100"],
    env({
      MCPSTATE_QUOTA_HANDLES: "5",
      MCPSTATE_QUOTA_BYTES: "1000000",
      MCPSTATE_QUOTA_WRITES_PER_MINUTE: "60",
    }),
  );
  assert.deepEqual(c !== "help" && c.quotas, {
    maxHandles: 100,
    maxBytes: 1_000_000,
    writesPerMinute: 60,
  });
  for (
    const [flag, value] of [["--quota-handles", "0"], ["--quota-bytes", "-1"], [
      "--quota-writes-per-minute",
      "1.5",
    ]]
  ) {
    assert.throws(() => parse([flag!, value!], {}), new RegExp(flag!.slice(2)));
  }
});
