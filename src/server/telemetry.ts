/**
 * Instrumentation of the mcpstate server, written once for every tool and
 * every backend: {@link Telemetry.observeTool} wraps each tool handler (the
 * one place the tools are registered), {@link Telemetry.instrument} wraps a
 * {@link Backend}'s primitives. Each records Prometheus metrics (see
 * {@link StateMetrics}) and OpenTelemetry spans through
 * `@opentelemetry/api`, which Deno's built-in OpenTelemetry support
 * (`OTEL_DENO=true` and the standard `OTEL_*` variables) exports.
 *
 * Spans follow the OpenTelemetry semantic conventions for MCP and databases:
 *
 * - one `SERVER` span per tool call, named `tools/call <tool>`, with
 *   `mcp.method.name` (`tools/call`), `gen_ai.tool.name`,
 *   `gen_ai.operation.name` (`execute_tool`) and `jsonrpc.request.id`; a call
 *   that answers an error has status `ERROR`, `error.type` `tool_error` and
 *   `mcpstate.error.code` (e.g. `stale_write`);
 * - one `CLIENT` span per backend primitive inside it, named after the
 *   primitive, with `db.system.name` (`sqlite`, `redis`, `postgresql`, and,
 *   where the conventions name no value, `deno.kv` and `memory`) and
 *   `db.operation.name` (`insert`, `read`, `save`, …). A failed primitive
 *   has status `ERROR` and `error.type` its error's class name.
 *
 * No attribute carries state, a state key, a handle, a user, a writer label,
 * an idempotency key, an error message or a credential: on an anonymous
 * server a handle is the secret that guards its state, and a message may
 * quote a handle. Backend work outside a tool call (the background reclaim,
 * the watches of live updates) is measured but not traced.
 *
 * With neither metrics nor tracing, nothing is wrapped: {@link Telemetry.create}
 * answers `undefined`, the tools call their handlers directly and the store
 * talks to the backend itself.
 *
 * @module
 */

import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from "@opentelemetry/api";
import { McpStateError } from "../errors.ts";
import { VERSION } from "../version.ts";
import type { Backend } from "./types.ts";
import { StateMetrics } from "./metrics.ts";

/** The instrumentation scope name of mcpstate's spans. */
export const TRACER_NAME = "mcpstate";

/**
 * What a tool handler reports of its outcome to {@link Telemetry.observeTool}:
 * nothing for a success, the error payload the model saw for a failure.
 */
export interface ToolOutcome {
  /** The error payload (`{ code, message, ...details }`) of a failed call. */
  error?: { code: string } & Record<string, unknown>;
  /** Set when the call succeeded by merging disjoint edits (its result says `merged: true`). */
  merged?: boolean;
}

/** Options of {@link Telemetry.create}. */
export interface TelemetryOptions {
  /** Record Prometheus metrics: `true` for a new {@link StateMetrics}, or the one to record into. Default off. */
  metrics?: boolean | StateMetrics;
  /**
   * Trace with OpenTelemetry: `"auto"` (the default) traces when a tracer
   * provider is registered, as Deno registers one under `OTEL_DENO=true`;
   * `false` never does; `true` always starts spans (no-ops without a provider).
   */
  tracing?: boolean | "auto";
}

/** The context entry that marks a tool call's span, so backend spans nest only under one. */
const IN_TOOL_CALL = createContextKey("mcpstate.tool_call");

/**
 * The `db.system.name` of each backend: the semantic conventions' value where
 * they have one, else the backend's own name.
 */
const DB_SYSTEM: Readonly<Record<string, string>> = Object.freeze({
  sqlite: "sqlite",
  redis: "redis",
  postgres: "postgresql",
  denokv: "deno.kv",
  memory: "memory",
});

/** The metric name of each built-in backend class. */
const BACKEND_NAMES: Readonly<Record<string, string>> = Object.freeze({
  SqliteBackend: "sqlite",
  RedisBackend: "redis",
  PostgresBackend: "postgres",
  DenoKvBackend: "denokv",
  MemoryBackend: "memory",
});

/**
 * The name a backend has in metrics: `sqlite`, `redis`, `postgres`, `denokv`
 * or `memory` for the built-in ones, else its class name, lowercased and
 * without a `Backend` suffix.
 *
 * @param backend A backend.
 * @returns Its name.
 */
export function backendNameOf(backend: Backend): string {
  const cls = (backend as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof cls !== "string" || cls === "" || cls === "Object") return "custom";
  return BACKEND_NAMES[cls] ?? (cls.replace(/Backend$/, "").toLowerCase() || "custom");
}

/**
 * Whether an OpenTelemetry tracer provider is registered (Deno registers
 * its own under `OTEL_DENO=true`); without one, every span is a no-op.
 *
 * @returns `true` when spans would be recorded and exported.
 */
export function tracerProviderRegistered(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) ||
    provider.getDelegateTracer(TRACER_NAME) !== undefined;
}

/** Every core primitive of {@link Backend}: a new one fails to compile until it is listed here. */
type Primitive = Exclude<
  {
    [K in keyof Backend]-?: NonNullable<Backend[K]> extends (...args: never[]) => unknown ? K
      : never;
  }[keyof Backend],
  "close"
>;
const PRIMITIVES: Readonly<Record<Primitive, true>> = Object.freeze({
  insert: true,
  read: true,
  save: true,
  update: true,
  remove: true,
  untrash: true,
  changes: true,
  list: true,
  sweep: true,
});
/** Every capability group of {@link Backend}. */
type Group = {
  [K in keyof Backend]-?: NonNullable<Backend[K]> extends object
    ? NonNullable<Backend[K]> extends (...args: never[]) => unknown ? never : K
    : never;
}[keyof Backend];
/**
 * The `op` label (and span name) of each member of each capability group:
 * the name the primitive had before the groups, so that metrics and traces
 * keep their series. A new group or member fails to compile until it is
 * listed here.
 */
const GROUP_OPS: {
  readonly [G in Group]-?: Readonly<Record<keyof NonNullable<Backend[G]>, string>>;
} = Object.freeze({
  records: { users: "listUsers", import: "importRecord" },
  leases: {
    acquire: "acquireLease",
    release: "releaseLease",
    of: "leases",
    readLeased: "readLeased",
  },
  feed: { subscribe: "subscribe" },
  trash: { list: "listTrash", until: "trashedUntil" },
  quotas: { usage: "usage" },
  transfer: { move: "transfer" },
  grants: {
    put: "putGrant",
    read: "readGrant",
    end: "endGrant",
    of: "grantsOf",
    to: "grantsTo",
    sweep: "sweepGrants",
  },
  erasure: { count: "countUser", erase: "eraseUser" },
  keys: {
    get: "readKey",
    create: "createKey",
    rewrap: "rewrapKey",
    delete: "deleteKey",
    list: "listKeys",
  },
  content: { scan: "scanContent", replace: "replaceContent" },
});
/** Every property of {@link Backend} that is neither a primitive nor a group, likewise. */
const PROPERTIES: Readonly<Record<Exclude<keyof Backend, Primitive | Group | "close">, true>> =
  Object.freeze({ reclaimsExpired: true, maxEntryBytes: true });

/**
 * The metrics and tracer of one server. Create it with
 * {@link Telemetry.create}, hand it to the serving entry (`telemetry` option)
 * and wrap the store's backend with {@link Telemetry.instrument}.
 *
 * @example Metrics for a server of your own
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { MemoryBackend } from "@mcpstate/core/memory";
 * import { createHttpHandler, Telemetry } from "@mcpstate/core/server";
 *
 * const telemetry = Telemetry.create({ metrics: true })!;
 * await using store = new HandleStore(telemetry.instrument(new MemoryBackend()));
 * const app = createHttpHandler(store, {
 *   publicUrl: new URL("http://127.0.0.1:8787/mcp"),
 *   anonymous: true,
 *   telemetry,
 * });
 * await store.mint("note", { text: "hi" }, { user: "local" });
 * (await telemetry.metrics!.text()).includes('backend="memory",op="insert"'); // true
 * await app.close();
 * ```
 */
export class Telemetry {
  /** The metrics recorded into, or `undefined` when metrics are off. */
  readonly metrics: StateMetrics | undefined;
  readonly #tracer: Tracer | undefined;

  /**
   * Creates the instrumentation. Prefer {@link Telemetry.create}, which
   * answers `undefined` when there is nothing to record.
   *
   * @param metrics The metrics to record into, if any.
   * @param tracer The tracer to start spans with, if any.
   */
  constructor(metrics: StateMetrics | undefined, tracer: Tracer | undefined) {
    this.metrics = metrics;
    this.#tracer = tracer;
  }

  /**
   * The instrumentation the options ask for, or `undefined` when they ask for
   * nothing (no metrics, and no tracing or no tracer provider): then nothing
   * needs wrapping and the server runs as if uninstrumented.
   *
   * @param options Metrics and tracing.
   * @returns The instrumentation, or `undefined`.
   */
  static create(options: TelemetryOptions = {}): Telemetry | undefined {
    const metrics = options.metrics instanceof StateMetrics
      ? options.metrics
      : options.metrics
      ? new StateMetrics()
      : undefined;
    const tracing = options.tracing ?? "auto";
    const traced = tracing === "auto" ? tracerProviderRegistered() : tracing;
    const tracer = traced ? trace.getTracer(TRACER_NAME, VERSION) : undefined;
    return metrics || tracer ? new Telemetry(metrics, tracer) : undefined;
  }

  /** Whether tool calls and backend primitives are traced. */
  get tracing(): boolean {
    return this.#tracer !== undefined;
  }

  /**
   * Runs one tool call under a `tools/call <tool>` span and counts it. The
   * handler reports a failure by setting `outcome.error` to the payload the
   * model sees; a success leaves it unset.
   *
   * @param tool The tool's name.
   * @param requestId The JSON-RPC request id, if any.
   * @param run The handler.
   * @returns What the handler returned.
   */
  async observeTool<T>(
    tool: string,
    requestId: string | number | undefined,
    run: (outcome: ToolOutcome) => Promise<T>,
  ): Promise<T> {
    const outcome: ToolOutcome = {};
    const t0 = performance.now();
    const tracer = this.#tracer;
    let span: Span | undefined;
    let ctx: Context | undefined;
    if (tracer) {
      const attributes: Attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "gen_ai.operation.name": "execute_tool",
      };
      if (requestId !== undefined) attributes["jsonrpc.request.id"] = String(requestId);
      span = tracer.startSpan(`tools/call ${tool}`, { kind: SpanKind.SERVER, attributes });
      ctx = trace.setSpan(context.active(), span).setValue(IN_TOOL_CALL, true);
    }
    let code = "ok";
    try {
      const out = ctx ? await context.with(ctx, run, undefined, outcome) : await run(outcome);
      code = outcome.error?.code ?? "ok";
      if (span && outcome.error) {
        span.setAttributes({ "error.type": "tool_error", "mcpstate.error.code": code });
        span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      }
      return out;
    } catch (e) {
      code = "internal_error";
      failed(span, e);
      throw e;
    } finally {
      span?.end();
      if (outcome.merged) this.metrics?.merge();
      const quota = outcome.error?.quota;
      this.metrics?.toolCall(
        tool,
        code,
        (performance.now() - t0) / 1000,
        typeof quota === "string" ? quota : undefined,
      );
    }
  }

  /**
   * Wraps a backend so that each primitive is timed into
   * `mcpstate_backend_op_duration_seconds{backend, op}` and, inside a tool
   * call, traced as a child span. The wrapper has exactly the capability
   * groups and optional primitives the backend has, so the store sees the
   * same capabilities; a group member keeps the `op` name the primitive had
   * as a method of its own (`putGrant` for `grants.put`).
   * `close` is passed through.
   *
   * @param backend The backend to wrap; the wrapper closes it on `close`.
   * @param name Its name in metrics; default {@link backendNameOf}.
   * @returns The instrumented backend.
   */
  instrument(backend: Backend, name: string = backendNameOf(backend)): Backend {
    const system = DB_SYSTEM[name] ?? name;
    const source = backend as unknown as Record<string, unknown>;
    const wrapped: Record<string, unknown> = { close: () => backend.close() };
    for (const op of Object.keys(PRIMITIVES)) {
      const primitive = source[op];
      if (typeof primitive !== "function") continue;
      wrapped[op] = (...args: unknown[]) =>
        this.#backendOp(name, system, op, () => primitive.apply(backend, args));
    }
    for (const [group, ops] of Object.entries(GROUP_OPS)) {
      const members = source[group] as Record<string, unknown> | undefined;
      if (members === undefined) continue;
      const timed: Record<string, unknown> = {};
      for (const [member, op] of Object.entries(ops)) {
        const primitive = members[member];
        if (typeof primitive !== "function") continue;
        timed[member] = (...args: unknown[]) =>
          this.#backendOp(name, system, op, () => primitive.apply(members, args));
      }
      wrapped[group] = timed;
    }
    for (const property of Object.keys(PROPERTIES)) {
      if (source[property] !== undefined) wrapped[property] = source[property];
    }
    return wrapped as unknown as Backend;
  }

  async #backendOp<T>(
    name: string,
    system: string,
    op: string,
    run: () => Promise<T>,
  ): Promise<T> {
    const t0 = performance.now();
    const tracer = this.#tracer;
    const span = tracer && context.active().getValue(IN_TOOL_CALL) === true
      ? tracer.startSpan(op, {
        kind: SpanKind.CLIENT,
        attributes: { "db.system.name": system, "db.operation.name": op },
      })
      : undefined;
    try {
      return await run();
    } catch (e) {
      failed(span, e);
      throw e;
    } finally {
      span?.end();
      this.metrics?.backendOp(name, op, (performance.now() - t0) / 1000);
    }
  }
}

/**
 * Marks a span as ended by an exception: `error.type` is the error's code or
 * class, never its message (which may quote a handle or a host).
 */
function failed(span: Span | undefined, e: unknown): void {
  if (!span) return;
  const name = (e as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  span.setAttribute(
    "error.type",
    e instanceof McpStateError ? e.code : typeof name === "string" && name !== "" ? name : "Error",
  );
  span.setStatus({ code: SpanStatusCode.ERROR });
}
