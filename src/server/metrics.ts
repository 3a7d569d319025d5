/**
 * Prometheus metrics of the mcpstate server: what `mcpstate serve
 * --metrics-port P` serves as text at `GET /metrics` on a listener of its
 * own. The exposition format is `prom-client`'s; the registry is this
 * object's own (never the library's global one), so that two servers in one
 * process keep their numbers apart.
 *
 * Names (labels in braces):
 *
 * - `mcpstate_tool_calls_total{tool, code}`: tool calls by outcome, `code`
 *   `ok` or the error code the model saw (`stale_write`, `handle_not_found`, …)
 * - `mcpstate_tool_duration_seconds{tool}`: histogram of tool call latency
 * - `mcpstate_backend_op_duration_seconds{backend, op}`: histogram of backend
 *   primitive latency, `backend` one of `sqlite`, `redis`, `postgres`,
 *   `denokv`, `memory`; `op` the primitive (`insert`, `read`, `save`, …)
 * - `mcpstate_stale_writes_total`, `mcpstate_merges_total`
 * - `mcpstate_quota_refusals_total{quota}`: `quota` one of `handles`,
 *   `bytes`, `writes_per_minute`
 * - `mcpstate_listen_streams`, `mcpstate_watched_handles` (gauges)
 *
 * No label carries a user, a handle, a key or any state: every label value
 * comes from a fixed set of the server's own.
 *
 * Node's default process metrics of `prom-client` are not collected: under
 * Deno its event-loop-lag gauges read `NaN` and a meaningless minimum.
 *
 * @module
 */

import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { once } from "./_once.ts";

/** Buckets of `mcpstate_tool_duration_seconds`, in seconds: 0.5 ms to 10 s. */
export const TOOL_BUCKETS: readonly number[] = Object.freeze(
  [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
);

/** Buckets of `mcpstate_backend_op_duration_seconds`, in seconds: 50 µs to 5 s. */
export const BACKEND_BUCKETS: readonly number[] = Object.freeze(
  [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
);

/** The quotas of `mcpstate_quota_refusals_total{quota}`, each exported from the start at 0. */
export const QUOTA_NAMES: readonly string[] = Object.freeze([
  "handles",
  "bytes",
  "writes_per_minute",
]);

/** What the live-update gauges read at each scrape: a `LiveUpdates` has both. */
export interface LiveCounts {
  /** Open `subscriptions/listen` streams. */
  readonly streams: number;
  /** Distinct `(user, handle)` pairs watched. */
  readonly watchedHandles: number;
}

/**
 * The metrics of one server (one registry). The tool and backend sides
 * record through `Telemetry`; {@link StateMetrics.merge} and
 * {@link StateMetrics.quotaRefusal} are the hooks of the features that
 * produce those events.
 *
 * @example Recording and reading the text
 * ```ts
 * import { StateMetrics } from "@mcpstate/core/server";
 *
 * const metrics = new StateMetrics();
 * metrics.toolCall("state_load", "ok", 0.002);
 * const text = await metrics.text();
 * text.includes('mcpstate_tool_calls_total{tool="state_load",code="ok"} 1'); // true
 * ```
 */
export class StateMetrics {
  readonly #registry = new Registry();
  readonly #calls: Counter<"tool" | "code">;
  readonly #toolSeconds: Histogram<"tool">;
  readonly #backendSeconds: Histogram<"backend" | "op">;
  readonly #staleWrites: Counter;
  readonly #merges: Counter;
  readonly #quotaRefusals: Counter<"quota">;
  readonly #live = new Set<LiveCounts>();

  /** Creates the metrics, every one registered (the counters without labels at 0). */
  constructor() {
    const registers = [this.#registry];
    this.#calls = new Counter({
      name: "mcpstate_tool_calls_total",
      help: "Tool calls, by tool and outcome code (ok, or the error code the model saw).",
      labelNames: ["tool", "code"],
      registers,
    });
    this.#toolSeconds = new Histogram({
      name: "mcpstate_tool_duration_seconds",
      help: "Tool call latency in seconds, from arguments received to result built.",
      labelNames: ["tool"],
      buckets: [...TOOL_BUCKETS],
      registers,
    });
    this.#backendSeconds = new Histogram({
      name: "mcpstate_backend_op_duration_seconds",
      help: "Backend primitive latency in seconds, by backend and primitive.",
      labelNames: ["backend", "op"],
      buckets: [...BACKEND_BUCKETS],
      registers,
    });
    this.#staleWrites = new Counter({
      name: "mcpstate_stale_writes_total",
      help: "Writes refused as stale_write: the writer had read an older version.",
      registers,
    });
    this.#merges = new Counter({
      name: "mcpstate_merges_total",
      help: "Saves from an older version merged automatically with disjoint edits.",
      registers,
    });
    this.#quotaRefusals = new Counter({
      name: "mcpstate_quota_refusals_total",
      help: "Calls refused with quota_exceeded, by quota.",
      labelNames: ["quota"],
      registers,
    });
    for (const quota of QUOTA_NAMES) this.#quotaRefusals.inc({ quota }, 0);
    const live = this.#live;
    const sum = (key: keyof LiveCounts) => {
      let n = 0;
      for (const source of live) n += source[key];
      return n;
    };
    // Read at each scrape: following and unfollowing never touch a metric.
    new Gauge({
      name: "mcpstate_listen_streams",
      help: "Open subscriptions/listen streams.",
      registers,
      collect() {
        this.set(sum("streams"));
      },
    });
    new Gauge({
      name: "mcpstate_watched_handles",
      help: "Handles watched for live updates: distinct (user, handle) pairs.",
      registers,
      collect() {
        this.set(sum("watchedHandles"));
      },
    });
  }

  /**
   * Records one tool call. A `stale_write` also counts in
   * `mcpstate_stale_writes_total`, and a `quota_exceeded` in
   * `mcpstate_quota_refusals_total` under `quota` (when given).
   *
   * @param tool The tool's name.
   * @param code `ok`, or the error code the model saw.
   * @param seconds How long the call took.
   * @param quota The quota a `quota_exceeded` names (its `quota` detail).
   */
  toolCall(tool: string, code: string, seconds: number, quota?: string): void {
    this.#calls.inc({ tool, code });
    this.#toolSeconds.observe({ tool }, seconds);
    if (code === "stale_write") this.#staleWrites.inc();
    else if (code === "quota_exceeded" && quota !== undefined) this.quotaRefusal(quota);
  }

  /**
   * Records one backend primitive.
   *
   * @param backend `sqlite`, `redis`, `postgres`, `denokv` or `memory` (or a custom backend's name).
   * @param op The primitive, e.g. `save`.
   * @param seconds How long it took, failures included.
   */
  backendOp(backend: string, op: string, seconds: number): void {
    this.#backendSeconds.observe({ backend, op }, seconds);
  }

  /**
   * The hook of automatic merges: call it once for every save that was
   * merged with disjoint edits instead of answering `stale_write`.
   */
  merge(): void {
    this.#merges.inc();
  }

  /**
   * The hook of quotas: counts one refusal. Tool calls answered with
   * `quota_exceeded` are counted already (see {@link StateMetrics.toolCall},
   * from the error's `quota` detail); call this only for a refusal made
   * outside a tool call, so that none counts twice.
   *
   * @param quota `handles`, `bytes` or `writes_per_minute`.
   */
  quotaRefusal(quota: string): void {
    this.#quotaRefusals.inc({ quota });
  }

  /**
   * Adds a source of the live-update gauges; they read it at every scrape,
   * so following and unfollowing cost nothing.
   *
   * @param source Open streams and watched handles (a `LiveUpdates`).
   * @returns Removes the source (call it when the source closes).
   */
  observeLive(source: LiveCounts): () => void {
    this.#live.add(source);
    return () => this.#live.delete(source);
  }

  /** The `Content-Type` of {@link StateMetrics.text}: Prometheus text format 0.0.4. */
  get contentType(): string {
    return this.#registry.contentType;
  }

  /**
   * Every metric in the Prometheus text format.
   *
   * @returns The exposition text.
   */
  text(): Promise<string> {
    return this.#registry.metrics();
  }
}

/** Options of {@link serveMetrics}. */
export interface MetricsServeOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  hostname?: string;
  /** Port to listen on; 0 picks a free one. */
  port: number;
  /** Called once the listener is up, with its address. */
  onListen?: (addr: Deno.NetAddr) => void;
}

/** A metrics listener at work. */
export interface MetricsServing {
  /** The address it listens on. */
  addr: Deno.NetAddr;
  /** Stops listening and waits until it has stopped. Idempotent. */
  close(): Promise<void>;
}

/**
 * Serves {@link StateMetrics.text} at `GET /metrics` (and `HEAD`) on a
 * listener of its own, apart from the MCP endpoint, so that it can stay on
 * loopback or a private interface while `/mcp` is public. Every other path
 * is 404, every other method 405.
 *
 * @param metrics The metrics to serve.
 * @param options Where to listen.
 * @returns The listener.
 * @throws {Deno.errors.AddrInUse} (or another listen error) when the port cannot be had.
 *
 * @example Scraping a free port
 * ```ts
 * import { serveMetrics, StateMetrics } from "@mcpstate/core/server";
 *
 * const serving = serveMetrics(new StateMetrics(), { port: 0 });
 * const res = await fetch(`http://127.0.0.1:${serving.addr.port}/metrics`);
 * (await res.text()).includes("mcpstate_stale_writes_total 0"); // true
 * await serving.close();
 * ```
 */
export function serveMetrics(metrics: StateMetrics, options: MetricsServeOptions): MetricsServing {
  const abort = new AbortController();
  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port,
    signal: abort.signal,
    onListen: (addr) => options.onListen?.(addr),
  }, async (request) => {
    if (new URL(request.url).pathname !== "/metrics") {
      return new Response("Not found: metrics are at /metrics.\n", { status: 404 });
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("Use GET.\n", { status: 405, headers: { allow: "GET, HEAD" } });
    }
    const body = await metrics.text();
    return new Response(request.method === "HEAD" ? null : body, {
      headers: { "content-type": metrics.contentType, "cache-control": "no-store" },
    });
  });
  return {
    addr: server.addr,
    close: once(async () => {
      abort.abort();
      await server.finished.catch(() => {});
    }),
  };
}
