/**
 * OpenTelemetry traces of `mcpstate serve`: a real server process with
 * Deno's built-in OpenTelemetry on (`OTEL_DENO=true`), exporting OTLP/HTTP
 * JSON to a receiver this test runs on loopback. Every tool call is a span
 * named `tools/call <tool>` with the MCP attributes, its backend primitives
 * are child spans with the database attributes, a failed call is marked,
 * and nothing the caller sent or is — state, handle, user, token,
 * idempotency key — appears anywhere in what is exported.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { freePort, httpClient, startHttpServer, stdioSession } from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";
import { BACKEND_OPS } from "./_metrics.ts";

/** One exported span, attributes flattened. */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number };
  scope: string;
}

/** A local OTLP/HTTP receiver: it keeps every body it is sent, and the spans. */
interface Receiver extends AsyncDisposable {
  endpoint: string;
  spans: OtlpSpan[];
  /** Every body received on any path (traces, logs, metrics), as text. */
  bodies: string[];
}

const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;

function startReceiver(): Receiver {
  const spans: OtlpSpan[] = [];
  const bodies: string[] = [];
  const port = freePort();
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port, signal: ac.signal, onListen() {} },
    async (req) => {
      const text = await req.text();
      bodies.push(text);
      if (new URL(req.url).pathname === "/v1/traces") {
        const body = JSON.parse(text) as {
          resourceSpans: {
            scopeSpans: {
              scope: { name: string };
              spans: (Omit<OtlpSpan, "attributes" | "scope"> & {
                attributes: { key: string; value: Record<string, unknown> }[];
              })[];
            }[];
          }[];
        };
        for (const rs of body.resourceSpans) {
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) {
              const attributes: Record<string, unknown> = {};
              for (const a of s.attributes) attributes[a.key] = Object.values(a.value)[0];
              spans.push({ ...s, attributes, scope: ss.scope.name });
            }
          }
        }
      }
      return Response.json({});
    },
  );
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    [Symbol.asyncDispose]: async () => {
      ac.abort();
      await server.finished;
    },
  };
}

/** The environment that turns Deno's exporter on, towards `receiver`. */
function otelEnv(receiver: Receiver): Record<string, string> {
  return {
    OTEL_DENO: "true",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "100",
    OTEL_SERVICE_NAME: "mcpstate-test",
  };
}

/** Waits until `count` spans named `name` arrived. */
async function spansNamed(receiver: Receiver, name: string, count = 1): Promise<OtlpSpan[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const found = receiver.spans.filter((s) => s.name === name);
    if (found.length >= count) return found;
    if (Date.now() > deadline) {
      assert.fail(
        `${count} span(s) "${name}" never arrived; got: ${receiver.spans.map((s) => s.name)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The backend spans of a tool span: its children, each checked. */
function childrenOf(receiver: Receiver, parent: OtlpSpan, system: string): OtlpSpan[] {
  const children = receiver.spans.filter((s) =>
    s.parentSpanId === parent.spanId && s.traceId === parent.traceId
  );
  assert.ok(children.length > 0, `${parent.name} has backend spans`);
  for (const c of children) {
    assert.equal(c.scope, "mcpstate");
    assert.equal(c.kind, SPAN_KIND_CLIENT, c.name);
    assert.equal(c.attributes["db.system.name"], system);
    assert.equal(c.attributes["db.operation.name"], c.name);
    assert.ok(BACKEND_OPS.has(c.name), `a primitive: ${c.name}`);
    const { "db.system.name": _s, "db.operation.name": _o, ...rest } = c.attributes;
    // A primitive that failed says how, by class or code only (a stale save's change aborts it).
    if (c.status.code === STATUS_ERROR) assert.equal(typeof rest["error.type"], "string");
    else assert.deepEqual(rest, {}, c.name);
  }
  return children;
}

/** The tool span's attributes, checked: exactly the MCP ones (and the error ones on a failure). */
function checkToolSpan(span: OtlpSpan, tool: string, code?: string): void {
  assert.equal(span.scope, "mcpstate");
  assert.equal(span.kind, SPAN_KIND_SERVER);
  const { "jsonrpc.request.id": id, ...rest } = span.attributes;
  assert.equal(typeof id, "string");
  assert.deepEqual(rest, {
    "mcp.method.name": "tools/call",
    "gen_ai.tool.name": tool,
    "gen_ai.operation.name": "execute_tool",
    ...(code ? { "error.type": "tool_error", "mcpstate.error.code": code } : {}),
  });
  assert.equal(span.status.code ?? 0, code ? STATUS_ERROR : 0);
}

/**
 * Runs a mint (with an idempotency key), a load, a stale save and a patch,
 * then checks the spans; returns the secrets that must appear nowhere.
 */
async function traced(
  receiver: Receiver,
  client: Client,
  system: string,
): Promise<{ secrets: string[]; toolSpans: OtlpSpan[] }> {
  const secret = `secret-state-${crypto.randomUUID()}`;
  const key = `idem-${crypto.randomUUID()}`;
  const minted = await ok(client, "state_save", {
    kind: "trip",
    state: { note: secret },
    idempotency_key: key,
  });
  const handle = String(minted.handle);
  await ok(client, "state_load", { handle });
  await fails(
    client,
    "state_save",
    { handle, expect_version: 42, state: { note: secret } },
    "stale_write",
  );
  await ok(client, "state_patch", {
    handle,
    ops: [{ op: "set_key", path: "", key: "more", value: secret }],
  });

  const saves = await spansNamed(receiver, "tools/call state_save", 2);
  const [load] = await spansNamed(receiver, "tools/call state_load");
  const [patch] = await spansNamed(receiver, "tools/call state_patch");
  const mint = saves.find((s) => s.status.code !== STATUS_ERROR)!;
  const stale = saves.find((s) => s.status.code === STATUS_ERROR)!;
  assert.ok(mint && stale, "one save succeeded, one failed");
  checkToolSpan(mint, "state_save");
  checkToolSpan(stale, "state_save", "stale_write");
  checkToolSpan(load!, "state_load");
  checkToolSpan(patch!, "state_patch");

  // The backend primitives, each a child of its call: give the exporter a moment for the last.
  await new Promise((r) => setTimeout(r, 500));
  const ops = (span: OtlpSpan) => childrenOf(receiver, span, system).map((c) => c.name);
  // One primitive: the insert takes the writer's lease with it.
  assert.deepEqual(ops(mint), ["insert"], `the mint inserts and takes its lease: ${ops(mint)}`);
  assert.ok(ops(load!).length >= 1);
  assert.ok(ops(stale).includes("update"), `the stale save: ${ops(stale)}`);
  const aborted = childrenOf(receiver, stale, system).find((c) => c.name === "update")!;
  assert.equal(aborted.status.code, STATUS_ERROR);
  assert.equal(aborted.attributes["error.type"], "stale_write");
  assert.ok(ops(patch!).includes("update"), `the patch: ${ops(patch!)}`);
  return { secrets: [secret, key, handle], toolSpans: [mint, stale, load!, patch!] };
}

/** Nothing of `secrets` in anything exported (traces, logs, metrics). */
function assertNoLeak(receiver: Receiver, secrets: string[]): void {
  const all = receiver.bodies.join("\n");
  assert.ok(all.length > 0);
  for (const s of secrets) assert.ok(!all.includes(s), `"${s}" was exported`);
}

Deno.test("traces over HTTP: tool spans under Deno's HTTP spans, backend spans under them, no secrets", async () => {
  await using receiver = startReceiver();
  const dir = await Deno.makeTempDir();
  await using issuer = await startIssuer();
  await using server = await startHttpServer(
    ["--backend", `sqlite:///${dir}/state.db`, ...issuer.serveArgs],
    otelEnv(receiver),
  );
  const sub = `otel-user-${crypto.randomUUID()}`;
  const token = await issuer.token({ sub, aud: server.url.href });
  const client = await httpClient(server.url, "2026-07-28", token);
  try {
    const { secrets, toolSpans } = await traced(receiver, client, "sqlite");
    // Each tool span is a child of the HTTP request's span that Deno exports itself.
    for (const span of toolSpans) {
      const parent = receiver.spans.find((s) =>
        s.spanId === span.parentSpanId && s.traceId === span.traceId
      );
      assert.ok(parent, `${span.name} has its HTTP request span as parent`);
      assert.notEqual(parent.scope, "mcpstate");
      assert.equal(parent.kind, SPAN_KIND_SERVER);
    }
    assertNoLeak(receiver, [...secrets, sub, `${issuer.issuer}#${sub}`, token]);
  } finally {
    await client.close();
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("traces over stdio: each tool call is a root span with its backend spans", async () => {
  await using receiver = startReceiver();
  const dir = await Deno.makeTempDir();
  const user = `stdio-user-${crypto.randomUUID()}`;
  const session = await stdioSession("2026-07-28", {
    ...otelEnv(receiver),
    MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
    MCPSTATE_USER: user,
    MCPSTATE_WRITER: `writer-${user}`,
  });
  try {
    const { secrets, toolSpans } = await traced(receiver, session.client, "sqlite");
    for (const span of toolSpans) assert.equal(span.parentSpanId, "", `${span.name} is a root`);
    assertNoLeak(receiver, [...secrets, user]);
  } finally {
    await session.close();
    await Deno.remove(dir, { recursive: true });
  }
});
