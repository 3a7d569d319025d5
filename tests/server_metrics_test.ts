/**
 * Prometheus metrics of `mcpstate serve --metrics-port`: real server
 * processes over real HTTP and stdio, the official MCP client, and `/metrics`
 * scraped over HTTP from the metrics listener while the workload runs. The
 * counters move as the calls go (by tool and outcome code, stale writes),
 * the histograms count every call and every backend primitive by backend and
 * op, the live-update gauges go up with a listen stream and back down when
 * it closes; the flags and their twins parse; and the backend wrapper keeps
 * a backend's capabilities.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { HandleStore } from "../mod.ts";
import { ConfigError, parseServeArgs, type ServeConfig, USAGE } from "../src/cli/serve_config.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { SqliteBackend } from "../src/backends/sqlite.ts";
import { RedisBackend } from "../src/backends/redis.ts";
import { PostgresBackend } from "../src/backends/postgres.ts";
import { DenoKvBackend } from "../src/backends/denokv.ts";
import type { Backend } from "../src/backend.ts";
import { backendNameOf, StateMetrics, Telemetry } from "../src/server/mod.ts";
import { BACKEND_OPS, parseMetrics, type Scrape, scrape, waitForMetrics } from "./_metrics.ts";
import {
  freePort,
  httpClient,
  runServe,
  startHttpServer,
  stdioSession,
} from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";

const CALLS = "mcpstate_tool_calls_total";
const TOOL_COUNT = "mcpstate_tool_duration_seconds_count";
const OP_COUNT = "mcpstate_backend_op_duration_seconds_count";

/** Polls the scrape until `check` holds (gauges follow a closed stream a moment later). */
async function eventually(port: number, check: (s: Scrape) => boolean, what: string) {
  const deadline = Date.now() + 10_000;
  let last: Scrape;
  do {
    last = await scrape(port);
    if (check(last)) return last;
    await new Promise((r) => setTimeout(r, 50));
  } while (Date.now() < deadline);
  assert.fail(`${what} never held; last scrape:\n${last.text}`);
}

/**
 * The workload both transports run, with the counters checked after it:
 * a mint, a load, two saves from one version that merge, a stale save, a load of a handle that does not exist, a
 * patch with a bad op, a save without a kind, then a listen stream opened
 * and closed. Returns the handle minted.
 */
async function workload(client: Client, port: number, backend: string): Promise<string> {
  const before = await waitForMetrics(port);
  assert.equal(before.sum(CALLS), 0, "no call counted before the first");
  assert.equal(before.value("mcpstate_stale_writes_total"), 0);
  assert.equal(before.value("mcpstate_merges_total"), 0);
  for (const quota of ["handles", "bytes", "writes_per_minute"]) {
    assert.equal(before.value("mcpstate_quota_refusals_total", { quota }), 0, quota);
  }
  assert.equal(before.value("mcpstate_listen_streams"), 0);
  assert.equal(before.value("mcpstate_watched_handles"), 0);

  const { handle } = await ok(client, "state_save", { kind: "plan", state: { steps: [] } }) as {
    handle: string;
  };
  await ok(client, "state_load", { handle });
  // Two saves from version 1 that touch different keys: the second merges.
  await ok(client, "state_save", { handle, expect_version: 1, state: { steps: ["a"] } });
  const merged = await ok(client, "state_save", {
    handle,
    expect_version: 1,
    state: { steps: [], note: "n" },
    on_conflict: "merge",
  });
  assert.equal(merged.merged, true);
  await fails(
    client,
    "state_save",
    { handle, expect_version: 99, state: { steps: ["x"] } },
    "stale_write",
  );
  await fails(client, "state_load", { handle: "plan_doesnotexist" }, "handle_not_found");
  await fails(client, "state_patch", { handle, ops: [{ op: "explode" }] }, "patch_error");
  await fails(client, "state_save", { state: {} }, "invalid_argument");

  const s = await scrape(port);
  const calls = (tool: string, code: string) => s.value(CALLS, { tool, code });
  assert.equal(calls("state_save", "ok"), 3);
  assert.equal(calls("state_save", "stale_write"), 1);
  assert.equal(calls("state_save", "invalid_argument"), 1);
  assert.equal(calls("state_load", "ok"), 1);
  assert.equal(calls("state_load", "handle_not_found"), 1);
  assert.equal(calls("state_patch", "patch_error"), 1);
  assert.equal(s.sum(CALLS), 8, "eight calls, eight counted");
  assert.equal(s.value("mcpstate_stale_writes_total"), 1);
  assert.equal(s.value("mcpstate_merges_total"), 1);
  // Every call is in the latency histogram, under its tool.
  assert.equal(s.value(TOOL_COUNT, { tool: "state_save" }), 5);
  assert.equal(s.value(TOOL_COUNT, { tool: "state_load" }), 2);
  assert.equal(s.value(TOOL_COUNT, { tool: "state_patch" }), 1);
  assert.equal(
    s.value("mcpstate_tool_duration_seconds_bucket", { tool: "state_save", le: "+Inf" }),
    5,
  );
  assert.ok(s.value("mcpstate_tool_duration_seconds_sum", { tool: "state_save" })! > 0);
  // The backend side, by backend and op: the mint's insert, the stale save.
  const ops = s.all(OP_COUNT);
  assert.ok(ops.length > 0, "backend primitives are measured");
  for (const o of ops) {
    assert.equal(o.labels.backend, backend, JSON.stringify(o.labels));
    assert.ok(BACKEND_OPS.has(o.labels.op!), `op label ${o.labels.op}`);
  }
  assert.ok(s.value(OP_COUNT, { backend, op: "insert" })! >= 1, "the mint's insert");
  // With history on, a save is a read-modify-write: the stale one is an `update`.
  assert.ok(s.value(OP_COUNT, { backend, op: "update" })! >= 1, "the stale save's update");
  // The writer's lease rides on each write: no lease call of its own.
  assert.equal(s.value(OP_COUNT, { backend, op: "acquireLease" }), undefined, "a lease call");
  // Nothing of the caller's in any label or value.
  assert.ok(!s.text.includes(handle), "no handle in the metrics");
  assert.ok(!s.text.includes("steps"), "no state in the metrics");

  // A listen stream: the gauges go up while it is open and back down when it closes.
  const sub = await client.listen({ resourceSubscriptions: [`mcpstate://state/${handle}`] });
  try {
    await eventually(
      port,
      (m) => m.value("mcpstate_listen_streams") === 1 && m.value("mcpstate_watched_handles") === 1,
      "one open stream watching one handle",
    );
  } finally {
    await sub.close();
  }
  await eventually(
    port,
    (m) => m.value("mcpstate_listen_streams") === 0 && m.value("mcpstate_watched_handles") === 0,
    "no stream and no watch once the stream closed",
  );
  return handle;
}

Deno.test("metrics over HTTP: a real workload moves the counters, histograms and gauges", async () => {
  const dir = await Deno.makeTempDir();
  await using issuer = await startIssuer();
  const metricsPort = freePort();
  await using server = await startHttpServer([
    "--backend",
    `sqlite:///${dir}/state.db`,
    "--metrics-port",
    String(metricsPort),
    ...issuer.serveArgs,
  ]);
  const token = await issuer.token({ sub: "metrics-alice", aud: server.url.href });
  const client = await httpClient(server.url, "2026-07-28", token);
  try {
    assert.match(
      server.stderr(),
      new RegExp(`metrics on http://127\\.0\\.0\\.1:${metricsPort}/metrics`),
    );
    // The metrics are on their own listener, not on the MCP one.
    const onMcp = await fetch(`${server.origin}/metrics`);
    await onMcp.body?.cancel();
    assert.equal(onMcp.status, 404);
    const other = await fetch(`http://127.0.0.1:${metricsPort}/`);
    await other.body?.cancel();
    assert.equal(other.status, 404);
    const post = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: "POST" });
    await post.body?.cancel();
    assert.equal(post.status, 405);
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    await res.body?.cancel();
    assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");

    await workload(client, metricsPort, "sqlite");
    const s = await scrape(metricsPort);
    assert.ok(!s.text.includes("metrics-alice"), "no user in the metrics");
    assert.ok(!s.text.includes(token), "no token in the metrics");
  } finally {
    await client.close();
    const status = await server.stop();
    assert.equal(status.code, 0, server.stderr());
    await Deno.remove(dir, { recursive: true });
  }
  // The metrics listener stopped with the server.
  await assert.rejects(() => fetch(`http://127.0.0.1:${metricsPort}/metrics`));
});

Deno.test("metrics over stdio: the same workload, the same numbers, from a stdio server", async () => {
  const dir = await Deno.makeTempDir();
  const metricsPort = freePort();
  const session = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
    MCPSTATE_METRICS_PORT: String(metricsPort),
  });
  try {
    await workload(session.client, metricsPort, "sqlite");
  } finally {
    await session.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("metrics flags: --metrics-port and --metrics-host, their twins, and their mistakes", async (t) => {
  const parse = (args: string[], env: Record<string, string> = {}) => {
    const c = parseServeArgs(args, (name) => env[name]);
    assert.notEqual(c, "help");
    return c as ServeConfig;
  };
  await t.step("off by default; loopback by default when on; a flag wins over its twin", () => {
    assert.equal(parse([]).metrics, undefined);
    assert.deepEqual(parse(["--metrics-port", "9464"]).metrics, { host: "127.0.0.1", port: 9464 });
    assert.deepEqual(
      parse([], { MCPSTATE_METRICS_PORT: "9100", MCPSTATE_METRICS_HOST: "0.0.0.0" }).metrics,
      { host: "0.0.0.0", port: 9100 },
    );
    assert.deepEqual(
      parse(["--metrics-port", "0", "--metrics-host", "::1"], { MCPSTATE_METRICS_PORT: "9100" })
        .metrics,
      { host: "::1", port: 0 },
    );
    assert.match(USAGE, /--metrics-port PORT .*MCPSTATE_METRICS_PORT/);
    assert.match(USAGE, /--metrics-host HOST .*MCPSTATE_METRICS_HOST/);
  });
  await t.step("a bad port, or a host without a port, is a configuration mistake", () => {
    for (const port of ["-1", "65536", "abc", "80.5"]) {
      assert.throws(() => parse(["--metrics-port", port]), ConfigError, port);
    }
    assert.throws(
      () => parse(["--metrics-host", "127.0.0.1"]),
      (e: Error) => e instanceof ConfigError && /needs --metrics-port/.test(e.message),
    );
    assert.throws(() => parse([], { MCPSTATE_METRICS_HOST: "127.0.0.1" }), ConfigError);
  });
  await t.step("a metrics port already taken: exit code 1 and one line that says so", async () => {
    using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const out = await runServe([
      "--backend",
      "memory://",
      "--metrics-port",
      String(taken.addr.port),
    ]);
    const stderr = out.stderr;
    assert.equal(out.code, 1, stderr);
    assert.match(stderr, /could not listen for metrics on 127\.0\.0\.1:\d+/);
  });
});

Deno.test("the backend wrapper keeps every capability, measures each primitive, and is skipped when off", async (t) => {
  await t.step("nothing on: no telemetry, so nothing is wrapped", () => {
    assert.equal(Telemetry.create({ metrics: false, tracing: false }), undefined);
    assert.equal(Telemetry.create({ tracing: false }), undefined);
    const on = Telemetry.create({ metrics: true, tracing: false });
    assert.ok(on?.metrics instanceof StateMetrics);
    assert.equal(on.tracing, false);
  });

  await t.step("the built-in backends' names in metrics", () => {
    const names = [MemoryBackend, SqliteBackend, RedisBackend, PostgresBackend, DenoKvBackend].map(
      (cls) => backendNameOf(Object.create(cls.prototype) as Backend),
    );
    assert.deepEqual(names, ["memory", "sqlite", "redis", "postgres", "denokv"]);
  });

  const fnKeys = (b: Backend) =>
    [...BACKEND_OPS, "close"].filter((k) =>
      typeof (b as unknown as Record<string, unknown>)[k] === "function"
    ).sort();

  await t.step("same primitives and properties, same store capabilities", async () => {
    const telemetry = Telemetry.create({ metrics: true, tracing: false })!;
    const backends: Backend[] = [
      new MemoryBackend(),
      await SqliteBackend.fromUrl("sqlite:///:memory:"),
      await DenoKvBackend.fromUrl("denokv:///:memory:"),
    ];
    for (const raw of backends) {
      const wrapped = telemetry.instrument(raw);
      assert.deepEqual(fnKeys(wrapped), fnKeys(raw));
      assert.equal(wrapped.reclaimsExpired, raw.reclaimsExpired);
      assert.equal(wrapped.maxEntryBytes, raw.maxEntryBytes);
      await using plain = new HandleStore(raw, { reclaimIntervalMs: 0 });
      await using store = new HandleStore(wrapped, { reclaimIntervalMs: 0 });
      assert.deepEqual(store.capabilities, plain.capabilities);
    }
  });

  await t.step("a backend without the optional primitives stays without them", async () => {
    const full = new MemoryBackend();
    const bare: Backend = {
      insert: (...a) => full.insert(...a),
      read: (...a) => full.read(...a),
      save: (...a) => full.save(...a),
      update: (...a) => full.update(...a),
      remove: (...a) => full.remove(...a),
      untrash: (...a) => full.untrash(...a),
      changes: (...a) => full.changes(...a),
      list: (...a) => full.list(...a),
      sweep: (...a) => full.sweep(...a),
      close: () => full.close(),
    };
    const telemetry = Telemetry.create({ metrics: true, tracing: false })!;
    const wrapped = telemetry.instrument(bare, "custom");
    assert.deepEqual(fnKeys(wrapped), fnKeys(bare));
    await using store = new HandleStore(wrapped, { reclaimIntervalMs: 0 });
    assert.deepEqual(store.capabilities, { users: false, importRecord: false, grants: false });
    const handle = await store.mint("note", { a: 1 }, { user: "u" });
    await store.get(handle, { user: "u" });
    const s = parseMetrics(await telemetry.metrics!.text());
    assert.equal(s.value(OP_COUNT, { backend: "custom", op: "insert" }), 1);
    assert.equal(s.value(OP_COUNT, { backend: "custom", op: "read" }), 1);
    assert.equal(s.all(OP_COUNT, { op: "readLeased" }).length, 0, "no primitive it lacks");
  });

  await t.step(
    "a failing primitive is measured and its error passes through unchanged",
    async () => {
      const telemetry = Telemetry.create({ metrics: true, tracing: false })!;
      const boom = new Error("engine down");
      const raw = new MemoryBackend();
      raw.read = () => Promise.reject(boom);
      const wrapped = telemetry.instrument(raw);
      await assert.rejects(() => wrapped.read("u", "h"), (e) => e === boom);
      const s = parseMetrics(await telemetry.metrics!.text());
      assert.equal(s.value(OP_COUNT, { backend: "memory", op: "read" }), 1);
    },
  );
});
