/**
 * The cost of metrics and traces on a write: one `tools/call state_patch`
 * through the HTTP handler, in process (no socket), with telemetry off — the
 * baseline: the server as it runs without `--metrics-port`, where nothing is
 * wrapped — beside the same call with Prometheus metrics on and, when this
 * process runs with Deno's OpenTelemetry on, with traces and with both. On
 * `memory://` the overhead is the largest share of a call it can be; on a
 * SQLite file the write's `fsync` is most of the time.
 *
 * The variants take turns: each round runs a batch of calls per variant (in
 * a rotating order), and a variant's figure is the median of its rounds, so
 * that a busy machine slows every variant alike instead of whichever ran
 * while it was busy. Each figure is given as wall time and as CPU time of
 * the process (every thread: the exporter's and the garbage collector's
 * too), which other processes on a shared machine do not inflate. Prints a
 * Markdown table per backend.
 *
 * ```sh
 * deno run --allow-all --unstable-kv bench/telemetry_cost.ts
 * # with traces: a sink for the spans, then the same with Deno's exporter on
 * deno run --allow-net bench/_otlp_sink.ts 4318 &
 * OTEL_DENO=true OTEL_EXPORTER_OTLP_PROTOCOL=http/json \
 *   deno run --allow-all --unstable-kv bench/telemetry_cost.ts
 * ```
 *
 * Options: `--rounds N` (default 40), `--batch N` calls per variant and round (default 100).
 *
 * @module
 */

import { parseArgs } from "node:util";
import process from "node:process";
import { HandleStore, type PatchOp } from "../mod.ts";
import { openBackend } from "../src/url.ts";
import {
  createHttpHandler,
  type HttpHandler,
  Telemetry,
  type TelemetryOptions,
  tracerProviderRegistered,
} from "../src/server/mod.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "40" },
    batch: { type: "string", default: "100" },
  },
});
const ROUNDS = Number(values.rounds);
const BATCH = Number(values.batch);

const PUBLIC_URL = new URL("http://127.0.0.1:8787/mcp");
const META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {},
};

let id = 0;
function toolCall(name: string, args: Record<string, unknown>): Request {
  return new Request(PUBLIC_URL, {
    method: "POST",
    headers: {
      host: PUBLIC_URL.host,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": name,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: ++id,
      method: "tools/call",
      params: { name, arguments: args, _meta: META },
    }),
  });
}

/** The text of a tool result in a JSON-RPC answer (JSON or one SSE event); throws on a failure. */
async function resultText(res: Response): Promise<string> {
  const text = await res.text();
  const json = text.startsWith("{") ? text : text.slice(text.indexOf("{"));
  const answer = JSON.parse(json.split("\n")[0]!) as {
    result?: { content?: { text?: string }[]; isError?: boolean };
  };
  const out = answer.result?.content?.[0]?.text;
  if (answer.result?.isError || typeof out !== "string") throw new Error(`Call failed: ${text}`);
  return out;
}

const variants: [string, TelemetryOptions | undefined][] = [
  ["off", undefined],
  ["metrics", { metrics: true, tracing: false }],
];
if (tracerProviderRegistered()) {
  variants.push(["traces", { metrics: false, tracing: true }]);
  variants.push(["metrics + traces", { metrics: true, tracing: true }]);
}

interface Subject {
  name: string;
  app: HttpHandler;
  call: () => Promise<unknown>;
  /** Wall time per call of each round, ms. */
  perCall: number[];
  /** CPU time (user + system, every thread of the process) per call of each round, ms. */
  cpuPerCall: number[];
}

const dir = await Deno.makeTempDir({ prefix: "mcpstate-telemetry-cost-" });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(0)} µs`;
try {
  console.log(
    `Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores; ${ROUNDS} rounds of ${BATCH} calls per variant; OTEL_DENO ${
      tracerProviderRegistered() ? "on" : "off"
    }\n`,
  );
  for (const [label, url] of [["memory", "memory://"], ["SQLite file", `sqlite:///${dir}/c.db`]]) {
    const backend = await openBackend(url);
    const subjects: Subject[] = [];
    for (const [name, options] of variants) {
      const telemetry = options ? Telemetry.create(options) : undefined;
      const store = new HandleStore(telemetry ? telemetry.instrument(backend) : backend, {
        reclaimIntervalMs: 0,
      });
      const app = createHttpHandler(store, {
        publicUrl: PUBLIC_URL,
        anonymous: true,
        ...(telemetry ? { telemetry } : {}),
        onError: () => {},
      });
      const minted = JSON.parse(
        await resultText(
          await app.fetch(toolCall("state_save", { kind: "bench", state: { n: 0 } })),
        ),
      ) as { handle: string };
      const args = { handle: minted.handle, ops: [{ op: "increment", path: "", key: "n" }] };
      subjects.push({
        name,
        app,
        call: async () => await resultText(await app.fetch(toolCall("state_patch", args))),
        perCall: [],
        cpuPerCall: [],
      });
    }
    // Warm every variant's path before any is measured.
    for (const s of subjects) for (let i = 0; i < 300; i++) await s.call();
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < subjects.length; k++) {
        const s = subjects[(round + k) % subjects.length]!;
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < BATCH; i++) await s.call();
        const cpu = process.cpuUsage(cpu0);
        s.perCall.push((performance.now() - t0) / BATCH);
        s.cpuPerCall.push((cpu.user + cpu.system) / 1000 / BATCH);
      }
    }
    const base = median(subjects[0]!.perCall);
    const cpuBase = median(subjects[0]!.cpuPerCall);
    console.log(`#### state_patch over HTTP (in process), ${label}\n`);
    console.log("| telemetry | wall per call | × off | CPU per call | × off |");
    console.log("| --- | ---: | ---: | ---: | ---: |");
    for (const s of subjects) {
      const m = median(s.perCall);
      const c = median(s.cpuPerCall);
      console.log(
        `| ${s.name} | ${fmt(m)} | ${(m / base).toFixed(2)}× | ${fmt(c)} | ${
          (c / cpuBase).toFixed(2)
        }× |`,
      );
    }
    console.log();
    for (const s of subjects) await s.app.close();
    await backend.close();
  }

  // The backend wrapper alone: store.patch on memory, through the raw backend and the wrapped one.
  const raw = await openBackend("memory://");
  const stores = variants.map(([name, options]) => {
    const telemetry = options ? Telemetry.create(options) : undefined;
    return {
      name,
      store: new HandleStore(telemetry ? telemetry.instrument(raw) : raw, { reclaimIntervalMs: 0 }),
      cpuPerCall: [] as number[],
    };
  });
  const handle = await stores[0]!.store.mint("bench", { n: 0 }, { user: "u" });
  const ops: PatchOp[] = [{ op: "increment", path: "", key: "n", by: 1 }];
  for (const s of stores) {
    for (let i = 0; i < 2000; i++) await s.store.patch(handle, ops, { user: "u" });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < stores.length; k++) {
      const s = stores[(round + k) % stores.length]!;
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < BATCH * 20; i++) await s.store.patch(handle, ops, { user: "u" });
      const cpu = process.cpuUsage(cpu0);
      s.cpuPerCall.push((cpu.user + cpu.system) / 1000 / (BATCH * 20));
    }
  }
  const cpuBase = median(stores[0]!.cpuPerCall);
  console.log("#### store.patch on memory, the backend wrapper alone (no tool call)\n");
  console.log("| telemetry | CPU per patch | × off |");
  console.log("| --- | ---: | ---: |");
  for (const s of stores) {
    const c = median(s.cpuPerCall);
    console.log(`| ${s.name} | ${(c * 1000).toFixed(1)} µs | ${(c / cpuBase).toFixed(2)}× |`);
  }
  console.log();
  await raw.close();
} finally {
  await Deno.remove(dir, { recursive: true });
}
