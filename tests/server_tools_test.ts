/**
 * Every tool over stdio and over authenticated HTTP, as a 2026-07-28 client
 * and as a 2025-11-25 client, against real server processes on SQLite.
 */

import assert from "node:assert/strict";
import {
  ERAS,
  freePort,
  httpClient,
  spawnServe,
  startHttpServer,
  stdioSession,
} from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";
import { toolScenario } from "./_server_scenario.ts";

const HOST = Deno.hostname();

Deno.test("server tools over stdio, both eras", async (t) => {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  try {
    for (const era of ERAS) {
      const tag = era === "2026-07-28" ? "s26" : "s25";
      const session = await stdioSession(era, { MCPSTATE_BACKEND: backend }, [], "test-client");
      try {
        await t.step(`stdio ${era}`, async (t) => {
          await toolScenario(t, session.client, {
            kind: `note-${tag}`,
            writer: `${HOST}/test-client`,
            era,
          });
        });
      } finally {
        await session.close();
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("server tools over HTTP with bearer tokens, both eras", async (t) => {
  const dir = await Deno.makeTempDir();
  await using issuer = await startIssuer();
  await using server = await startHttpServer([
    "--backend",
    `sqlite:///${dir}/state.db`,
    ...issuer.serveArgs,
  ]);
  try {
    const token = await issuer.token({ sub: "alice", aud: server.url.href });
    for (const era of ERAS) {
      const tag = era === "2026-07-28" ? "h26" : "h25";
      const client = await httpClient(server.url, era, token);
      try {
        await t.step(`http ${era}`, async (t) => {
          // Stateless 2025 HTTP requests carry no client info: their User-Agent names the client.
          const writer = `${HOST}/${era === "2026-07-28" ? "test-client" : navigator.userAgent}`;
          await toolScenario(t, client, { kind: `note-${tag}`, writer, era });
        });
      } finally {
        await client.close();
      }
    }
  } finally {
    const status = await server.stop();
    assert.equal(status.code, 0, server.stderr());
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("stdio honours MCPSTATE_WRITER and MCPSTATE_MAX_STATE_BYTES; flags win over env", async () => {
  await using a = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: "memory://",
    MCPSTATE_WRITER: "desk/from-env",
    MCPSTATE_MAX_STATE_BYTES: "200",
  });
  const h = (await ok(a.client, "state_save", { kind: "note", state: { a: 1 } })).handle;
  assert.equal((await ok(a.client, "state_load", { handle: h })).last_writer, "desk/from-env");
  const e = await fails(
    a.client,
    "state_save",
    { kind: "note", state: { big: "x".repeat(300) } },
    "state_too_large",
  );
  assert.equal(e.limit_bytes, 200);
  await a.close();

  await using b = await stdioSession("2025-11-25", {
    MCPSTATE_BACKEND: "memory://",
    MCPSTATE_WRITER: "desk/from-env",
  }, ["--writer", "desk/from-flag"]);
  const h2 = (await ok(b.client, "state_save", { kind: "note", state: {} })).handle;
  assert.equal((await ok(b.client, "state_load", { handle: h2 })).last_writer, "desk/from-flag");
});

Deno.test("stdio exits 0 when stdin closes or on SIGTERM; HTTP exits 0 on SIGTERM", async () => {
  const child = spawnServe(["--backend", "memory://"]);
  await new Promise((r) => setTimeout(r, 300));
  await child.stdin.close();
  const out = await child.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(out.stdout.length, 0, "nothing but protocol on stdout");

  const stdio = spawnServe(["--backend", "memory://"]);
  // Wait for the first answer, so the server is up (signal handlers installed).
  const writer = stdio.stdin.getWriter();
  await writer.write(new TextEncoder().encode(
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "raw", version: "1" },
      },
    }) + "\n",
  ));
  const reader = stdio.stdout.getReader();
  const first = await reader.read();
  assert.match(new TextDecoder().decode(first.value), /"serverInfo"/);
  reader.releaseLock();
  stdio.kill("SIGTERM");
  const term = await stdio.output();
  await writer.close().catch(() => {});
  assert.equal(term.code, 0, new TextDecoder().decode(term.stderr));

  const port = freePort();
  const http = spawnServe(
    ["--backend", "memory://", "--transport", "http", "--port", String(port), "--allow-anonymous"],
    { stdin: "null", stdout: "null" },
  );
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      await r.body?.cancel();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  http.kill("SIGTERM");
  const res = await http.output();
  assert.equal(res.code, 0, new TextDecoder().decode(res.stderr));
});
