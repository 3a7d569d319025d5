/**
 * Soak: concurrent clients (the official MCP client over Streamable HTTP,
 * both protocol eras, several users with bearer tokens) run a mixed workload
 * against one real `mcpstate serve --transport http` process for a fixed
 * time. Afterwards every counter must equal the sum of the increments the
 * clients saw acknowledged, and no call may have failed (a `stale_write` in a
 * read-modify-write loop is the expected conflict signal and is retried, not
 * an error). The server's RSS is sampled from `/proc/<pid>/status` and every
 * call's latency is recorded. The server runs with `--metrics-port`: at the
 * end, its `/metrics` must count exactly the tool calls the clients made,
 * tool by tool, and exactly the stale writes they were answered. It runs
 * with every quota on, set above what the workload needs: no call may be
 * refused, and afterwards each user's usage, as the backend kept it through
 * the concurrent mints, patches, saves and deletes, must equal what their
 * records hold.
 *
 * @module
 */

import { type Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  type Era,
  freePort,
  newClient,
  payloadOf,
  startIssuer,
  type TestIssuer,
} from "../tests/_server_harness.ts";
import { type RedisServer, startRedis } from "../tests/_redis.ts";
import { scrape } from "../tests/_metrics.ts";
import { startServer } from "./_server.ts";
import { HandleStore } from "../mod.ts";
import { messageOf, quantile, randomSeed, Rng, round, rssKiB } from "./_util.ts";

/** The backends the soak runs on. */
export type SoakBackend = "sqlite" | "redis";

/** Options of {@link runSoak}. */
export interface SoakOptions {
  /** The backend. */
  backend: SoakBackend;
  /** How long the load runs, ms. */
  durationMs: number;
  /** Concurrent clients. Default 32. */
  clients?: number;
  /** Users the clients are spread over. Default 4. */
  users?: number;
  /** Seed of the workload mix. Default random. */
  seed?: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** Latency percentiles, ms. */
export interface Latency {
  /** Calls measured. */
  count: number;
  /** Median. */
  p50: number;
  /** 90th percentile. */
  p90: number;
  /** 99th percentile. */
  p99: number;
  /** Slowest. */
  max: number;
}

/** What {@link runSoak} found. */
export interface SoakReport {
  /** The backend (and how it was configured). */
  backend: string;
  /** The seed. */
  seed: number;
  /** Concurrent clients and users. */
  clients: number;
  /** Users. */
  users: number;
  /** How long the load ran, ms. */
  durationMs: number;
  /** Tool calls completed, by tool. */
  calls: Record<string, number>;
  /** All calls. */
  totalCalls: number;
  /** Calls per second. */
  throughput: number;
  /** Calls that failed (errors other than the expected conflict). */
  errors: number;
  /** The first few errors. */
  errorSamples: string[];
  /** `stale_write` answers in read-modify-write loops, each re-read and retried. */
  staleWritesRetried: number;
  /** Increments acknowledged by the clients vs counted in the stored counters. */
  increments: { acknowledged: number; stored: number; perClientMismatches: number };
  /** Server RSS, KiB: before the load, after the warm-up (first 10%), at the end, highest. */
  rssKiB: { start: number | null; warm: number | null; end: number | null; peak: number | null };
  /** RSS samples, KiB, one per second. */
  rssSeries: number[];
  /** Latency of every call, and per tool. */
  latency: Latency & { byTool: Record<string, Latency> };
  /**
   * What the server's `/metrics` counted at the end: every tool call (setup
   * and checks included) and the stale writes; `null` when the scrape failed.
   */
  metrics: { calls: number; staleWrites: number } | null;
  /** Every violation; empty when everything held. */
  failures: string[];
}

/** Every quota on, above what the workload needs (nothing may be refused). */
const SOAK_QUOTAS = { maxHandles: 10_000, maxBytes: 1_000_000_000, writesPerMinute: 10_000_000 };

/**
 * Each user's usage as the backend kept it, against what their records
 * hold (live handles, UTF-8 bytes of their states): one line per mismatch.
 */
async function usageMismatches(url: string, users: string[]): Promise<string[]> {
  await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  const out: string[] = [];
  const encoder = new TextEncoder();
  for (const user of users) {
    const kept = await store.usage(user);
    const infos = await store.list(user, { includeExpired: true });
    let bytes = 0;
    for (const info of infos) {
      bytes +=
        encoder.encode(JSON.stringify((await store.get(info.handle, { user })).state)).length;
    }
    if (kept.handles !== infos.length || kept.bytes !== bytes) {
      out.push(
        `usage of ${user}: kept ${kept.handles} handles and ${kept.bytes} bytes, the records hold ${infos.length} and ${bytes}`,
      );
    }
  }
  return out;
}

function latencyOf(values: number[]): Latency {
  const s = [...values].sort((a, b) => a - b);
  return {
    count: s.length,
    p50: round(quantile(s, 0.5)),
    p90: round(quantile(s, 0.9)),
    p99: round(quantile(s, 0.99)),
    max: round(s.at(-1) ?? NaN),
  };
}

interface ToolResult {
  payload: Record<string, unknown>;
  isError: boolean;
}

/**
 * Runs the soak on one backend.
 *
 * @param options Backend, duration, clients.
 * @returns The report; `failures` is empty when everything held.
 */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const seed = options.seed ?? randomSeed();
  const clientCount = options.clients ?? 32;
  const userCount = options.users ?? 4;
  const log = options.log ?? (() => {});
  const failures: string[] = [];
  let redis: RedisServer | undefined;
  let dir: string | undefined;
  let backendUrl: string;
  let backendName: string;
  if (options.backend === "redis") {
    redis = await startRedis();
    backendUrl = redis.url;
    backendName = "Redis (AOF, appendfsync everysec)";
  } else {
    dir = await Deno.makeTempDir({ prefix: "mcpstate-soak-" });
    backendUrl = `sqlite:///${dir}/state.db`;
    backendName = "SQLite file (WAL, synchronous=FULL)";
  }
  const issuer: TestIssuer = await startIssuer();
  const metricsPort = freePort();
  const server = await startServer([
    "--backend",
    backendUrl,
    "--metrics-port",
    String(metricsPort),
    "--quota-handles",
    String(SOAK_QUOTAS.maxHandles),
    "--quota-bytes",
    String(SOAK_QUOTAS.maxBytes),
    "--quota-writes-per-minute",
    String(SOAK_QUOTAS.writesPerMinute),
    ...issuer.serveArgs,
  ]);
  const aud = server.url.href;
  const report: SoakReport = {
    backend: backendName,
    seed,
    clients: clientCount,
    users: userCount,
    durationMs: 0,
    calls: {},
    totalCalls: 0,
    throughput: 0,
    errors: 0,
    errorSamples: [],
    staleWritesRetried: 0,
    increments: { acknowledged: 0, stored: 0, perClientMismatches: 0 },
    rssKiB: { start: rssKiB(server.pid), warm: null, end: null, peak: null },
    rssSeries: [],
    latency: { ...latencyOf([]), byTool: {} },
    metrics: null,
    failures,
  };
  /** Every tool call answered, by tool, setup and checks included: what /metrics must count. */
  const made: Record<string, number> = {};
  const clients: Client[] = [];
  const latencies: Record<string, number[]> = {};
  const all: number[] = [];
  try {
    // Setup: one client per user makes the shared counter and a shared document.
    const tokens: string[] = [];
    const shared: { counter: string; doc: string }[] = [];
    const connect = async (era: Era, token: string, name: string) => {
      const c = newClient(era, name);
      await c.connect(
        new StreamableHTTPClientTransport(server.url, {
          requestInit: { headers: { Authorization: `Bearer ${token}` } },
        }),
      );
      clients.push(c);
      return c;
    };
    const call = async (
      c: Client,
      name: string,
      args: Record<string, unknown>,
    ): Promise<ToolResult> => {
      const t0 = performance.now();
      const res = await c.callTool({ name, arguments: args });
      made[name] = (made[name] ?? 0) + 1;
      const ms = performance.now() - t0;
      (latencies[name] ??= []).push(ms);
      all.push(ms);
      report.calls[name] = (report.calls[name] ?? 0) + 1;
      return {
        payload: payloadOf(res) ?? {},
        isError: res.isError === true,
      };
    };
    for (let u = 0; u < userCount; u++) {
      const token = await issuer.token({ sub: `soak-${u}`, aud }, { expiresIn: "2h" });
      tokens.push(token);
      const c = await connect("2026-07-28", token, "soak-setup");
      const counter = await call(c, "state_save", { kind: "counter", state: { n: 0, per: {} } });
      const doc = await call(c, "state_save", { kind: "doc", state: { rev: 0, lines: [] } });
      if (counter.isError || doc.isError) throw new Error("soak setup failed");
      shared.push({ counter: String(counter.payload.handle), doc: String(doc.payload.handle) });
    }
    for (const k of Object.keys(latencies)) delete latencies[k];
    all.length = 0;
    for (const k of Object.keys(report.calls)) delete report.calls[k];

    const acked = new Array<number>(clientCount).fill(0);
    const ackedCalls = new Array<number>(clientCount).fill(0);
    const errorOf = (where: string, detail: string) => {
      report.errors++;
      if (report.errorSamples.length < 10) {
        report.errorSamples.push(`${where}: ${detail.slice(0, 300)}`);
      }
    };

    const started = performance.now();
    const deadline = started + options.durationMs;
    const warmAt = started + options.durationMs * 0.1;
    const sampler = setInterval(() => {
      const r = rssKiB(server.pid);
      if (r === null) return;
      report.rssSeries.push(r);
      if (report.rssKiB.warm === null && performance.now() >= warmAt) report.rssKiB.warm = r;
    }, 1000);

    const worker = async (id: number) => {
      const user = id % userCount;
      const era: Era = id % 2 === 0 ? "2026-07-28" : "2025-11-25";
      const c = await connect(era, tokens[user]!, `soak-${id}`);
      const rng = new Rng(seed * 131 + id);
      const { counter, doc } = shared[user]!;
      const mine = await call(c, "state_save", {
        kind: "notes",
        state: { owner: id, items: [] },
        ttl_days: 30,
      });
      if (mine.isError) return errorOf(`client ${id} mint`, JSON.stringify(mine.payload));
      const own = String(mine.payload.handle);
      let scratch: string | undefined;
      let trashed: string | undefined;
      let counterSeen = 1;
      let seq = 0;
      while (performance.now() < deadline) {
        const op = rng.weighted(
          [
            [30, "increment"],
            [15, "append"],
            [10, "save-own"],
            [5, "save-shared"],
            [17, "load"],
            [3, "changes"],
            [5, "list"],
            [5, "touch"],
            [5, "scratch"],
            [5, "load-path"],
          ] as const,
        );
        const where = `client ${id} ${op}`;
        try {
          if (op === "increment") {
            const by = rng.int(1, 5);
            const r = await call(c, "state_patch", {
              handle: counter,
              ops: [
                { op: "increment", path: "", key: "n", by },
                { op: "increment", path: "per", key: `c${id}`, by: 1 },
              ],
            });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
            else {
              acked[id] = acked[id]! + by;
              ackedCalls[id] = ackedCalls[id]! + 1;
              counterSeen = Number(r.payload.version);
            }
          } else if (op === "append") {
            const r = await call(c, "state_patch", {
              handle: own,
              ops: [{ op: "append", path: "items", value: { seq: seq++, at: Date.now() } }],
            });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else if (op === "save-own") {
            // Keep the list short: rewrite it with the last 20 items.
            const cur = await call(c, "state_load", { handle: own });
            if (cur.isError) {
              errorOf(where, JSON.stringify(cur.payload));
              continue;
            }
            const state = cur.payload.state as { items: unknown[] };
            const r = await call(c, "state_save", {
              handle: own,
              expect_version: cur.payload.version,
              state: { owner: id, items: state.items.slice(-20) },
            });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else if (op === "save-shared") {
            // Read-modify-write against the other clients of this user.
            let cur = await call(c, "state_load", { handle: doc });
            for (let attempt = 0; attempt < 20; attempt++) {
              if (cur.isError) {
                errorOf(where, JSON.stringify(cur.payload));
                break;
              }
              const state = cur.payload.state as { rev: number; lines: string[] };
              const r = await call(c, "state_save", {
                handle: doc,
                expect_version: cur.payload.version,
                state: { rev: state.rev + 1, lines: [...state.lines.slice(-9), `c${id}:${seq++}`] },
              });
              if (!r.isError) break;
              const error = r.payload.error as Record<string, unknown>;
              if (error.code !== "stale_write") {
                errorOf(where, JSON.stringify(r.payload));
                break;
              }
              report.staleWritesRetried++;
              const current = error.current as Record<string, unknown>;
              cur = { payload: { ...current, ok: true }, isError: false };
              if (attempt === 19) errorOf(where, "20 stale writes in a row");
            }
          } else if (op === "load") {
            const r = await call(c, "state_load", { handle: rng.next() < 0.5 ? own : counter });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else if (op === "changes") {
            // What changed on the counter lately (possibly truncated: then the snapshot).
            const r = await call(c, "state_changes", {
              handle: counter,
              since_version: Math.max(0, counterSeen - 10),
            });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else if (op === "load-path") {
            const r = await call(c, "state_load", { handle: counter, path: "per" });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else if (op === "list") {
            const r = await call(c, "state_list", { limit: 20 });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else if (op === "touch") {
            const r = await call(c, "state_touch", { handle: own, ttl_days: rng.int(7, 30) });
            if (r.isError) errorOf(where, JSON.stringify(r.payload));
          } else {
            // Scratch handles: mint, delete, sometimes restore from the trash and delete again.
            if (trashed !== undefined) {
              const r = await call(c, "state_restore", { handle: trashed });
              if (r.isError) errorOf(where, JSON.stringify(r.payload));
              else scratch = trashed;
              trashed = undefined;
            } else if (scratch === undefined) {
              const r = await call(c, "state_save", { kind: "scratch", state: { id, seq: seq++ } });
              if (r.isError) errorOf(where, JSON.stringify(r.payload));
              else scratch = String(r.payload.handle);
            } else {
              const r = await call(c, "state_delete", { handle: scratch });
              if (r.isError) errorOf(where, JSON.stringify(r.payload));
              else if (rng.next() < 0.5) trashed = scratch;
              scratch = undefined;
            }
          }
        } catch (e) {
          errorOf(where, messageOf(e));
        }
      }
    };

    const progress = setInterval(() => {
      log(
        `soak ${options.backend}: ${
          Math.round((performance.now() - started) / 1000)
        } s, ${all.length} calls, ${report.errors} errors`,
      );
    }, 10_000);
    try {
      await Promise.all(Array.from({ length: clientCount }, (_, id) => worker(id)));
    } finally {
      clearInterval(progress);
      clearInterval(sampler);
    }
    report.durationMs = Math.round(performance.now() - started);
    report.rssKiB.end = rssKiB(server.pid);
    report.rssKiB.peak = Math.max(...report.rssSeries, report.rssKiB.end ?? 0);
    report.rssKiB.warm ??= report.rssSeries[0] ?? null;

    // Every acknowledged increment is in the counters, exactly once.
    const checker = await connect("2026-07-28", tokens[0]!, "soak-check");
    for (let u = 0; u < userCount; u++) {
      const c = u === 0 ? checker : await connect("2026-07-28", tokens[u]!, "soak-check");
      const r = await c.callTool({ name: "state_load", arguments: { handle: shared[u]!.counter } });
      made.state_load = (made.state_load ?? 0) + 1;
      const p = payloadOf(r) ?? {};
      const state = p.state as { n: number; per: Record<string, number> };
      let want = 0;
      for (let id = u; id < clientCount; id += userCount) {
        want += acked[id]!;
        if ((state.per[`c${id}`] ?? 0) !== ackedCalls[id]) {
          report.increments.perClientMismatches++;
          failures.push(
            `user ${u}: client ${id} had ${
              ackedCalls[id]
            } patches acknowledged, the counter holds ${state.per[`c${id}`] ?? 0}`,
          );
        }
      }
      report.increments.acknowledged += want;
      report.increments.stored += state.n;
      if (state.n !== want) {
        failures.push(`user ${u}: ${want} increments acknowledged, ${state.n} stored`);
      }
    }
    if (report.errors > 0) {
      failures.push(`${report.errors} calls failed: ${report.errorSamples.join(" | ")}`);
    }
    // The server counted exactly the calls made, tool by tool, and the stale writes answered.
    try {
      const m = await scrape(metricsPort);
      const calls = "mcpstate_tool_calls_total";
      report.metrics = {
        calls: m.sum(calls),
        staleWrites: m.value("mcpstate_stale_writes_total") ?? 0,
      };
      for (
        const tool of new Set([
          ...Object.keys(made),
          ...m.all(calls).map((x) => x.labels.tool!),
        ])
      ) {
        const counted = m.sum(calls, { tool });
        if (counted !== (made[tool] ?? 0)) {
          failures.push(
            `/metrics counts ${counted} ${tool} calls, the clients made ${made[tool] ?? 0}`,
          );
        }
      }
      const refused = m.sum("mcpstate_quota_refusals_total");
      if (refused !== 0) failures.push(`/metrics counts ${refused} quota refusals, expected none`);
      if (report.metrics.staleWrites !== report.staleWritesRetried) {
        failures.push(
          `/metrics counts ${report.metrics.staleWrites} stale writes, the clients were answered ${report.staleWritesRetried}`,
        );
      }
    } catch (e) {
      failures.push(`scraping /metrics failed: ${messageOf(e)}`);
    }
    if (!await server.healthy()) failures.push("the server is not healthy after the soak");
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    const status = await server.stop();
    if (status.code !== 0 && status.signal !== "SIGTERM") {
      failures.push(`the server exited with ${status.code}: ${server.stderr().slice(-500)}`);
    }
    try {
      const users = Array.from({ length: userCount }, (_, u) => `${issuer.issuer}#soak-${u}`);
      failures.push(...await usageMismatches(backendUrl, users));
    } catch (e) {
      failures.push(`checking the usage failed: ${messageOf(e)}`);
    }
    await issuer.close();
    if (redis) await redis.stop();
    if (dir) await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  report.totalCalls = all.length;
  report.throughput = report.durationMs > 0 ? round(all.length / (report.durationMs / 1000)) : 0;
  const byTool: Record<string, Latency> = {};
  for (const [k, v] of Object.entries(latencies)) byTool[k] = latencyOf(v);
  report.latency = { ...latencyOf(all), byTool };
  return report;
}
