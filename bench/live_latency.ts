/**
 * Cross-instance notification latency: two `mcpstate serve --transport http`
 * processes on one backend; an official client holds a `subscriptions/listen`
 * stream on instance A while another patches through instance B, one patch
 * at a time after a random pause of 0–120 ms (so that writes do not fall
 * into step with a poll interval). For each patch it records the patch call's own time (the write, for reference) and
 * the time from sending the patch to the `notifications/resources/updated`
 * arriving on A. Prints a Markdown table; `--write` puts it into
 * `docs/benchmarks.md` between `<!-- live -->` and `<!-- /live -->`.
 *
 *   deno run --allow-all --unstable-kv bench/live_latency.ts [--patches 100] [--write]
 *
 * @module
 */

import { parseArgs } from "node:util";
import type { Client } from "@modelcontextprotocol/client";
import { httpClient, ok, startHttpServer, startIssuer } from "../tests/_server_harness.ts";
import { startRedis } from "../tests/_redis.ts";

const { values } = parseArgs({
  options: {
    patches: { type: "string", default: "100" },
    write: { type: "boolean", default: false },
    postgres: { type: "string", default: "postgres://postgres@127.0.0.1:5432/test" },
  },
});
const PATCHES = Number(values.patches);
const PUBLIC_URL = "https://state.example.com/mcp";

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

interface Row {
  backend: string;
  write: number[];
  notify: number[];
}

async function measure(name: string, backend: string): Promise<Row> {
  await using issuer = await startIssuer();
  const args = [
    "--backend",
    backend,
    "--public-url",
    PUBLIC_URL,
    ...issuer.serveArgs,
  ];
  await using a = await startHttpServer(args);
  await using b = await startHttpServer(args);
  const token = await issuer.token({ sub: `bench-${crypto.randomUUID()}`, aud: PUBLIC_URL });
  const watcher: Client = await httpClient(a.url, "2026-07-28", token);
  const writer: Client = await httpClient(b.url, "2026-07-28", token);
  const row: Row = { backend: name, write: [], notify: [] };
  try {
    const { handle } = await ok(writer, "state_save", { kind: "bench", state: { n: 0 } }) as {
      handle: string;
    };
    const uri = `mcpstate://state/${handle}`;
    let arrived: (() => void) | undefined;
    watcher.setNotificationHandler("notifications/resources/updated", (n) => {
      if (n.params.uri === uri) arrived?.();
    });
    const sub = await watcher.listen({ resourceSubscriptions: [uri] });
    try {
      for (let i = 0; i < PATCHES + 5; i++) {
        const seen = new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`${name}: no update in 10 s`)), 10_000);
          arrived = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        // A random pause, so that writes do not fall into step with a poll interval.
        await new Promise((r) => setTimeout(r, Math.random() * 120));
        const t0 = performance.now();
        await ok(writer, "state_patch", {
          handle,
          ops: [{ op: "increment", path: "", key: "n" }],
        });
        const t1 = performance.now();
        await seen;
        const t2 = performance.now();
        if (i >= 5) { // warm-up
          row.write.push(t1 - t0);
          row.notify.push(t2 - t0);
        }
      }
    } finally {
      await sub.close();
    }
  } finally {
    await Promise.all([watcher.close(), writer.close()]);
  }
  return row;
}

const dir = await Deno.makeTempDir();
const rows: Row[] = [];
try {
  rows.push(await measure("SQLite file", `sqlite:///${dir}/live.db`));
  {
    await using redis = await startRedis();
    rows.push(await measure("Redis", redis.url));
  }
  rows.push(await measure("Deno KV file", `denokv:///${dir}/live.kv`));
  const schema = `bench_live_${crypto.randomUUID().slice(0, 8)}`;
  rows.push(await measure("PostgreSQL", `${values.postgres}?schema=${schema}`));
} finally {
  await Deno.remove(dir, { recursive: true });
}

const f = (x: number) => x.toFixed(1);
const lines = [
  `| backend | patches | patch p50 ms | update p50 ms | update p99 ms | update max ms |`,
  `| ------- | ------: | -----------: | ------------: | ------------: | ------------: |`,
];
for (const r of rows) {
  const w = [...r.write].sort((x, y) => x - y);
  const n = [...r.notify].sort((x, y) => x - y);
  lines.push(
    `| ${r.backend} | ${n.length} | ${f(pct(w, 50))} | ${f(pct(n, 50))} | ${f(pct(n, 99))} | ${
      f(n[n.length - 1] ?? NaN)
    } |`,
  );
}
const table = lines.join("\n");
console.log(table);
if (values.write) {
  const path = new URL("../docs/benchmarks.md", import.meta.url);
  const doc = await Deno.readTextFile(path);
  const block = `<!-- live -->\n${table}\n<!-- /live -->`;
  const re = /<!-- live -->[\s\S]*?<!-- \/live -->/;
  if (!re.test(doc)) throw new Error("docs/benchmarks.md has no <!-- live --> section.");
  await Deno.writeTextFile(path, doc.replace(re, block));
}
