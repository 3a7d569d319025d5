/**
 * The HTTP server's defences and its anonymous mode, against real server
 * processes: fail-closed startup, flags, Host/Origin checks, body limits,
 * garbage, and the shared bucket where a handle is the only secret.
 */

import assert from "node:assert/strict";
import {
  closeAndStop,
  ERAS,
  freePort,
  httpClient,
  runServe,
  startHttpServer,
} from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";
import { listenBody, mcpHeaders, MODERN_META, post, type Posted } from "./_tenants.ts";

/** One raw HTTP/1.1 exchange, so that Host can be anything. */
async function raw(
  port: number,
  head: string,
  body = "",
): Promise<{ status: number; text: string }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const bytes = new TextEncoder().encode(body);
  await conn.write(
    new TextEncoder().encode(
      `${head}\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`,
    ),
  );
  await conn.write(bytes);
  let text = "";
  const dec = new TextDecoder();
  for await (const chunk of conn.readable) text += dec.decode(chunk, { stream: true });
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  return { status, text };
}

const RPC = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
const HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

Deno.test("serve: bad configuration is one line on stderr and exit code 2", async (t) => {
  await t.step("HTTP without auth or --allow-anonymous refuses to start and says why", async () => {
    const r = await runServe(["--backend", "memory://", "--transport", "http", "--port", "0"]);
    assert.equal(r.code, 2);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(r.stderr, /--auth-issuer/);
    assert.match(r.stderr, /--allow-anonymous/);
  });
  await t.step("the env twin MCPSTATE_TRANSPORT=http is held to the same rule", async () => {
    const r = await runServe(["--backend", "memory://"], { MCPSTATE_TRANSPORT: "http" });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Refusing to serve HTTP without authentication/);
  });
  for (
    const [args, pattern] of [
      [["--bogus"], /bogus/],
      [["--transport", "pigeon"], /stdio or http/],
      [["--port", "99999"], /--port/],
      [["--port", "12ab"], /--port/],
      [["--max-body-bytes", "-1"], /--max-body-bytes/],
      [["--auth-audience", "x"], /--auth-issuer/],
      [["--transport", "http", "--auth-issuer", "http://idp.example.com"], /https/],
      [["--transport", "http", "--auth-issuer", "not a url"], /URL/],
      [
        ["--transport", "http", "--allow-anonymous", "--auth-issuer", "https://idp.example"],
        /not both/,
      ],
      [["positional"], /positional|argument/i],
    ] as [string[], RegExp][]
  ) {
    await t.step(`serve ${args.join(" ")}`, async () => {
      const r = await runServe(["--backend", "memory://", ...args]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(r.stderr, pattern);
    });
  }
  await t.step("a bad boolean variable", async () => {
    const r = await runServe(["--transport", "http"], { MCPSTATE_ALLOW_ANONYMOUS: "maybe" });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /MCPSTATE_ALLOW_ANONYMOUS/);
  });
  await t.step("an unknown backend scheme", async () => {
    const r = await runServe(["--backend", "ftp://user:hunter2@host/x"]);
    assert.equal(r.code, 2);
    assert.ok(!r.stderr.includes("hunter2"), r.stderr);
  });
  await t.step("an unreachable backend: exit 1, its credentials redacted", async () => {
    const port = freePort();
    for (
      const url of [
        `redis://admin:hunter2@127.0.0.1:${port}/0`,
        `postgres://admin:hunter2@127.0.0.1:${port}/db`,
      ]
    ) {
      const r = await runServe(["--backend", url]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /could not open the backend/);
      assert.ok(!r.stderr.includes("hunter2"), r.stderr);
    }
  });
  await t.step("--help prints the usage and every variable", async () => {
    const r = await runServe(["--help"]);
    assert.equal(r.code, 0);
    for (
      const v of [
        "MCPSTATE_BACKEND",
        "MCPSTATE_TRANSPORT",
        "MCPSTATE_USER",
        "MCPSTATE_WRITER",
        "MCPSTATE_MAX_STATE_BYTES",
        "MCPSTATE_AUTH_ISSUER",
        "MCPSTATE_AUTH_AUDIENCE",
        "MCPSTATE_AUTH_JWKS_URL",
        "MCPSTATE_ALLOW_ANONYMOUS",
        "MCPSTATE_ALLOWED_HOSTS",
        "MCPSTATE_ALLOWED_ORIGINS",
        "MCPSTATE_MAX_BODY_BYTES",
        "MCPSTATE_MAX_LISTEN_STREAMS",
        "MCPSTATE_MAX_LISTEN_STREAMS_PER_USER",
        "MCPSTATE_MAX_WATCHES_PER_USER",
      ]
    ) assert.ok(r.stdout.includes(v), v);
  });
});

Deno.test("anonymous HTTP: loud warning, 130-bit handles, no state_list, defences", async (t) => {
  await using server = await startHttpServer([
    "--backend",
    "memory://",
    "--allow-anonymous",
    "--max-body-bytes",
    "4096",
    "--allowed-hosts",
    "mcp.example.com",
    "--allowed-origins",
    "app.example.com",
  ]);
  const clients = await Promise.all(ERAS.map((era) => httpClient(server.url, era)));
  const [modern, legacy] = clients as [typeof clients[0], typeof clients[0]];
  let handle = "";
  const stillServing = async () => {
    assert.equal((await ok(modern, "state_load", { handle })).ok, true);
  };
  try {
    await t.step("a loud warning on stderr", () => {
      assert.match(server.stderr(), /WARNING.*does NOT authenticate/);
    });

    await t.step("handles carry 26 random characters and are shared by every caller", async () => {
      const p = await ok(modern, "state_save", { kind: "note", state: { a: 1 } });
      handle = String(p.handle);
      assert.match(handle, /^note_[a-z2-7]{26}$/);
      const q = await ok(legacy, "state_load", { handle });
      assert.deepEqual(q.state, { a: 1 });
    });

    await t.step("state_list answers an error instead of the bucket", async () => {
      for (const c of clients) {
        const e = await fails(c, "state_list", {}, "unauthenticated");
        assert.match(String(e.message), /shared|bucket/);
        assert.ok(!JSON.stringify(e).includes(handle));
      }
    });

    await t.step("a short handle is never confirmed", async () => {
      await fails(modern, "state_load", { handle: "note_abcdefgh" }, "handle_not_found");
      const e = await fails(
        modern,
        "state_load",
        { handle: handle.slice(0, -1) },
        "handle_not_found",
      );
      assert.ok(!String(e.message).includes("state_list"), "no advice to call a disabled tool");
    });

    await t.step("no OAuth metadata without auth", async () => {
      const res = await fetch(`${server.origin}/.well-known/oauth-protected-resource`);
      await res.body?.cancel();
      assert.equal(res.status, 404);
    });

    await t.step("GET /healthz and an unknown path", async () => {
      const res = await fetch(`${server.origin}/healthz`);
      assert.deepEqual((await res.json()).ok, true);
      const nf = await fetch(`${server.origin}/nope`);
      await nf.body?.cancel();
      assert.equal(nf.status, 404);
    });

    await t.step("a foreign Host is 403 (DNS rebinding), the allowed ones pass", async () => {
      const evil = await raw(server.port, "POST /mcp HTTP/1.1\r\nHost: evil.example:80", RPC);
      assert.equal(evil.status, 403, evil.text);
      assert.match(evil.text, /Invalid Host/);
      for (const host of [`localhost:${server.port}`, "mcp.example.com"]) {
        const okRes = await raw(
          server.port,
          `POST /mcp HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream`,
          RPC,
        );
        assert.equal(okRes.status, 200, okRes.text);
      }
      await stillServing();
    });

    await t.step(
      "a foreign Origin is 403; localhost and allowed origins pass with CORS",
      async () => {
        for (const origin of ["https://evil.example", "null"]) {
          const res = await fetch(server.url, {
            method: "POST",
            headers: { ...HEADERS, origin },
            body: RPC,
          });
          const text = await res.text();
          assert.equal(res.status, 403, `${origin}: ${text}`);
        }
        for (const origin of ["http://localhost:3000", "https://app.example.com"]) {
          const res = await fetch(server.url, {
            method: "POST",
            headers: { ...HEADERS, origin },
            body: RPC,
          });
          await res.body?.cancel();
          assert.equal(res.status, 200, origin);
          assert.equal(res.headers.get("access-control-allow-origin"), origin);
        }
        const pre = await fetch(server.url, {
          method: "OPTIONS",
          headers: {
            origin: "https://app.example.com",
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type, mcp-protocol-version",
          },
        });
        await pre.body?.cancel();
        assert.equal(pre.status, 204);
        assert.match(pre.headers.get("access-control-allow-headers") ?? "", /authorization/);
        await stillServing();
      },
    );

    await t.step("an oversized body is 413 with a clear JSON message", async () => {
      const big = JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "state_save", arguments: { kind: "note", state: { x: "y".repeat(8000) } } },
      });
      const res = await fetch(server.url, { method: "POST", headers: HEADERS, body: big });
      assert.equal(res.status, 413);
      const body = await res.json();
      assert.match(body.error.message, /at most 4096 bytes/);
      assert.match(body.error.message, /--max-body-bytes/);
      // The same without a Content-Length: a streamed body is cut off too.
      const stream = new ReadableStream({
        start(c) {
          for (let i = 0; i < 8; i++) c.enqueue(new TextEncoder().encode("x".repeat(1024)));
          c.close();
        },
      });
      const res2 = await fetch(server.url, { method: "POST", headers: HEADERS, body: stream });
      await res2.body?.cancel();
      assert.equal(res2.status, 413);
      await stillServing();
    });

    await t.step("garbage JSON is a JSON-RPC parse error", async () => {
      for (const body of ["{not json", "", "[1,2"]) {
        const res = await fetch(server.url, { method: "POST", headers: HEADERS, body });
        const text = await res.text();
        assert.equal(res.status, 400, text);
        assert.equal(JSON.parse(text).error.code, -32700, text);
      }
      const wrongType = await fetch(server.url, {
        method: "POST",
        headers: { "content-type": "text/plain" },
        body: RPC,
      });
      await wrongType.body?.cancel();
      assert.equal(wrongType.status, 415);
      await stillServing();
    });
  } finally {
    await closeAndStop(clients, server);
  }
});

Deno.test("subscriptions/listen: ownership is checked on the parsed message, never on the body's text", async (t) => {
  await using issuer = await startIssuer();
  await using server = await startHttpServer(["--backend", "memory://", ...issuer.serveArgs]);
  const aud = server.url.href;
  const aliceToken = await issuer.token({ sub: "alice", aud });
  const bob = await issuer.token({ sub: "bob", aud });
  const alice = await httpClient(server.url, "2026-07-28", aliceToken);
  const listen = mcpHeaders(bob, "subscriptions/listen");
  const posted: Posted[] = [];
  const send = async (headers: Record<string, string>, body: string) => {
    const r = await post(server.url, headers, body, 3000);
    posted.push(r);
    return r;
  };
  /** The answer is a refusal with `code`, never the acknowledgement of a stream. */
  const refused = (r: Posted, code: number, what: string) => {
    assert.ok(!r.acknowledged, `${what}: subscribed: ${r.text}`);
    assert.equal(r.error?.code, code, `${what}: ${r.status} ${r.text}`);
  };
  try {
    const { handle } = await ok(alice, "state_save", { kind: "secret", state: { pin: 1 } });
    const uri = `mcpstate://state/${handle}`;
    const plain = listenBody([uri]);
    const spellings: [string, string][] = [
      ["plain", plain],
      ["the method with an escaped slash", plain.replace("/listen", "\\/listen")],
      ["the method with a \\u escape", plain.replace('"subscriptions', '"\\u0073ubscriptions')],
      ["a body that starts with a byte order mark", `\uFEFF${plain}`],
      ["a BOM and an escaped method", `\uFEFF${plain.replace("/listen", "\\/listen")}`],
      [
        "the method key twice, the last one listen",
        plain.replace('"method":', '"method":"tools/list","method":'),
      ],
    ];
    for (const [what, body] of spellings) {
      await t.step(`another user's handle: ${what} → resource not found`, async () => {
        refused(await send(listen, body), -32002, what);
      });
    }

    await t.step("the 100-resource limit holds for an escaped method and a BOM", async () => {
      const many = listenBody(Array.from({ length: 101 }, () => uri));
      for (const body of [many.replace("/listen", "\\/listen"), `\uFEFF${many}`]) {
        const r = await send(mcpHeaders(aliceToken, "subscriptions/listen"), body);
        refused(r, -32602, "101 URIs");
        assert.match(String(r.error?.message), /at most 100/);
      }
    });

    await t.step("a listen inside a JSON-RPC batch is refused as a whole", async () => {
      // A 2025-era batch (no envelope) is one the SDK accepts; a 2026-07-28 one it refuses itself.
      const legacy = JSON.stringify({
        jsonrpc: "2.0",
        id: 3,
        method: "subscriptions/listen",
        params: { notifications: { resourceSubscriptions: [uri] } },
      });
      const list = JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tools/list", params: {} });
      for (
        const body of [
          `[${list},${legacy}]`,
          `\uFEFF[${legacy.replace("/listen", "\\/listen")}]`,
          `[${plain}]`,
        ]
      ) {
        const r = await send(mcpHeaders(bob), body);
        assert.equal(r.status, 400, r.text);
        refused(r, -32600, "batch");
        assert.match(String(r.error?.message), /batch/);
      }
    });

    await t.step("a BOM is read as the SDK reads it: Alice's own handle is served", async () => {
      const own = await send(mcpHeaders(aliceToken, "subscriptions/listen"), `\uFEFF${plain}`);
      assert.ok(own.acknowledged, own.text);
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/list",
        params: { _meta: MODERN_META },
      });
      const tools = await send(mcpHeaders(aliceToken, "tools/list"), `\uFEFF${body}`);
      assert.equal(tools.status, 200, tools.text);
      assert.match(tools.text, /state_save/);
    });

    await t.step(
      "10,000 nested lists as a subscribed URI: a structured error, not a 500",
      async () => {
        const body = listenBody(["X"]).replace('"X"', "[".repeat(10_000) + "]".repeat(10_000));
        for (const token of [aliceToken, bob]) {
          const r = await send(mcpHeaders(token, "subscriptions/listen"), body);
          assert.equal(r.status, 200, r.text);
          refused(r, -32602, "deep URI");
          assert.match(String(r.error?.message), /resourceSubscriptions\[0\] is a list, not a URI/);
          assert.deepEqual(r.error?.data, { index: 0 });
        }
        const notAList = listenBody([]).replace(
          "[]",
          '{"a":'.repeat(5000) + "1" + "}".repeat(5000),
        );
        refused(await send(listen, notAList), -32602, "deep object");
      },
    );

    await t.step("the server kept serving, and logged no crash", async () => {
      assert.equal((await ok(alice, "state_load", { handle })).ok, true);
      assert.doesNotMatch(server.stderr(), /Maximum call stack|Internal server error/);
    });
  } finally {
    for (const r of posted) r.close();
    await alice.close();
  }
});
