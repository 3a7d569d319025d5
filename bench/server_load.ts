/**
 * Load benchmark of `mcpstate serve --transport http` on SQLite: concurrent
 * official MCP clients (half 2026-07-28, half 2025-11-25), each its own
 * authenticated user, run a mixed workload (mint, load, patch, save, list)
 * for a fixed number of calls. Any failed call fails the run.
 *
 *   deno run --allow-all --unstable-kv bench/server_load.ts [--clients 32] [--ops 250]
 *
 * @module
 */

import { parseArgs } from "node:util";
import type { Client } from "@modelcontextprotocol/client";
import {
  type Era,
  httpClient,
  payloadOf,
  startHttpServer,
  startIssuer,
} from "../tests/_server_harness.ts";

const { values } = parseArgs({
  options: {
    clients: { type: "string", default: "32" },
    ops: { type: "string", default: "250" },
    backend: { type: "string" },
  },
});
const CLIENTS = Number(values.clients);
const OPS = Number(values.ops);

type Tool = "state_save(mint)" | "state_load" | "state_patch" | "state_save" | "state_list";

function pick(r: number): Tool {
  if (r < 0.1) return "state_save(mint)";
  if (r < 0.45) return "state_load";
  if (r < 0.75) return "state_patch";
  if (r < 0.9) return "state_save";
  return "state_list";
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const dir = await Deno.makeTempDir();
const backend = values.backend ?? `sqlite:///${dir}/load.db`;
const issuer = await startIssuer();
const server = await startHttpServer([
  "--backend",
  backend,
  ...issuer.serveArgs,
]);

const latencies = new Map<Tool, number[]>();
const errors: string[] = [];

async function worker(client: Client, id: number): Promise<void> {
  const handles: { handle: string; version: number }[] = [];
  const call = async (tool: Tool, args: Record<string, unknown>) => {
    const t0 = performance.now();
    const res = await client.callTool({
      name: tool === "state_save(mint)" ? "state_save" : tool,
      arguments: args,
    });
    const ms = performance.now() - t0;
    let list = latencies.get(tool);
    if (!list) latencies.set(tool, list = []);
    list.push(ms);
    const payload = payloadOf(res);
    if (res.isError) {
      errors.push(`${tool} (client ${id}): ${JSON.stringify(payload?.error)}`);
      return undefined;
    }
    return payload;
  };
  for (let i = 0; i < OPS; i++) {
    const tool = handles.length === 0 ? "state_save(mint)" : pick(Math.random());
    const target = handles[Math.floor(Math.random() * handles.length)];
    switch (tool) {
      case "state_save(mint)": {
        const p = await call(tool, {
          kind: "bench",
          state: { owner: id, notes: "x".repeat(512), items: [] },
          ttl_days: 1,
        });
        if (p) handles.push({ handle: String(p.handle), version: 1 });
        break;
      }
      case "state_load": {
        const p = await call(tool, { handle: target!.handle });
        if (p) target!.version = Number(p.version);
        break;
      }
      case "state_patch": {
        const p = await call(tool, {
          handle: target!.handle,
          ops: [{ op: "append", path: "items", value: { i, at: Date.now() } }],
        });
        if (p) target!.version = Number(p.version);
        break;
      }
      case "state_save": {
        const p = await call(tool, {
          handle: target!.handle,
          state: { owner: id, notes: `rewrite ${i}`, items: [] },
          expect_version: target!.version,
        });
        if (p) target!.version = Number(p.version);
        break;
      }
      case "state_list":
        await call(tool, { kind: "bench", limit: 20 });
        break;
    }
  }
}

let exitCode = 0;
try {
  const clients = await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      const era: Era = i % 2 === 0 ? "2026-07-28" : "2025-11-25";
      const token = await issuer.token({ sub: `bench-${i}`, aud: server.url.href }, {
        expiresIn: "2h",
      });
      return await httpClient(server.url, era, token);
    }),
  );
  const t0 = performance.now();
  await Promise.all(clients.map((c, i) => worker(c, i)));
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(clients.map((c) => c.close()));

  const all = [...latencies.values()].flat().sort((a, b) => a - b);
  const fmt = (n: number) => n.toFixed(1).padStart(7);
  console.log(
    `mcpstate serve (HTTP, bearer JWT, ${
      backend.startsWith("sqlite") ? "SQLite synchronous=FULL" : backend.split(":")[0]
    }): ${CLIENTS} concurrent clients × ${OPS} calls (half 2026-07-28, half 2025-11-25)`,
  );
  console.log(
    `calls ${all.length}, errors ${errors.length}, ${seconds.toFixed(2)} s, ${
      (all.length / seconds).toFixed(0)
    } calls/s`,
  );
  console.log(
    `${"tool".padEnd(18)} ${"count".padStart(6)} ${"p50 ms".padStart(7)} ${"p99 ms".padStart(7)} ${
      "max ms".padStart(7)
    }`,
  );
  for (const [tool, list] of [...latencies.entries()].sort()) {
    list.sort((a, b) => a - b);
    console.log(
      `${tool.padEnd(18)} ${String(list.length).padStart(6)} ${fmt(pct(list, 50))} ${
        fmt(pct(list, 99))
      } ${fmt(list[list.length - 1]!)}`,
    );
  }
  console.log(
    `${"all".padEnd(18)} ${String(all.length).padStart(6)} ${fmt(pct(all, 50))} ${
      fmt(pct(all, 99))
    } ${fmt(all[all.length - 1]!)}`,
  );
  if (errors.length > 0) {
    console.error(`FAILED: ${errors.length} calls failed; first: ${errors[0]}`);
    exitCode = 1;
  }
} finally {
  const status = await server.stop();
  if (status.code !== 0) {
    console.error(`server exited with ${status.code}:\n${server.stderr()}`);
    exitCode = 1;
  }
  await issuer.close();
  await Deno.remove(dir, { recursive: true });
}
Deno.exit(exitCode);
