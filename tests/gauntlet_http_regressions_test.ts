/**
 * Regression tests for the bugs the gauntlet found in the HTTP transport:
 *
 * - a request body that trickles in or stalls held its handler forever (no
 *   answer, ever): it must get 408 within `--body-timeout-ms` (default 30 s),
 *   while a declared `Content-Length` over the limit stays an immediate 413;
 * - bytes that are not UTF-8 were silently replaced by U+FFFD and stored:
 *   they must be a JSON-RPC parse error, with nothing stored.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runServe } from "./_server_harness.ts";
import { bytesOf, concat, exchange, requestBytes } from "../gauntlet/_raw_http.ts";
import { startServer } from "../gauntlet/_server.ts";

const ACCEPT = "application/json, text/event-stream";

function mint(state: string): string {
  return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_save","arguments":{"kind":"note","state":${state}}}}`;
}

Deno.test("HTTP: a body that trickles in or stalls gets 408 within --body-timeout-ms", async (t) => {
  const dir = await Deno.makeTempDir();
  await using server = await startServer([
    "--backend",
    `sqlite:///${dir}/state.db`,
    "--allow-anonymous",
    "--body-timeout-ms",
    "1000",
  ]);
  const headers = (length: number) => ({
    Host: `127.0.0.1:${server.port}`,
    "Content-Type": "application/json",
    Accept: ACCEPT,
    "Content-Length": String(length),
  });
  const body = bytesOf(mint('{"a":1}'));

  await t.step("10 bytes a second, never finishing", async () => {
    const parts = [
      requestBytes("POST", "/mcp", headers(100_000), null),
      ...Array.from(
        { length: 200 },
        (_, i) => body.subarray(i % body.length, (i % body.length) + 1),
      ),
    ];
    const r = await exchange(server.port, parts, { gapMs: 100, maxMs: 6000 });
    assert.equal(r.status, 408, `answer: ${r.status} ${r.body}`);
    assert.ok(r.answeredMs !== null && r.answeredMs < 4000, `answered after ${r.answeredMs} ms`);
    assert.equal(JSON.parse(r.body).error.code, -32000);
  });

  await t.step("half the body, then silence", async () => {
    const r = await exchange(server.port, [
      concat([requestBytes("POST", "/mcp", headers(body.length), null), body.subarray(0, 20)]),
    ], { maxMs: 6000 });
    assert.equal(r.status, 408, `answer: ${r.status} ${r.body}`);
    assert.ok(r.answeredMs !== null && r.answeredMs < 4000, `answered after ${r.answeredMs} ms`);
  });

  await t.step(
    "a declared Content-Length over the limit is 413 at once, before any body",
    async () => {
      const r = await exchange(server.port, [
        concat([requestBytes("POST", "/mcp", headers(10_000_000_000), null), body.subarray(0, 11)]),
      ], { maxMs: 6000 });
      assert.equal(r.status, 413, `answer: ${r.status} ${r.body}`);
      assert.ok(r.answeredMs !== null && r.answeredMs < 500, `answered after ${r.answeredMs} ms`);
    },
  );

  await t.step("a body that arrives slowly but in time is served", async () => {
    const parts = [
      requestBytes("POST", "/mcp", headers(body.length), null),
      body.subarray(0, 30),
      body.subarray(30),
    ];
    const r = await exchange(server.port, parts, { gapMs: 300, maxMs: 6000 });
    assert.equal(r.status, 200, r.body);
    assert.match(r.body, /\\"ok\\":true|"ok":true/);
  });

  assert.ok(await server.healthy());
});

Deno.test("HTTP: serve --help documents the body timeout and its default", async () => {
  const text = (await runServe(["--help"])).stdout;
  assert.match(text, /--body-timeout-ms N/);
  assert.match(text, /MCPSTATE_BODY_TIMEOUT_MS/);
  assert.match(text, /default 30000/);
});

Deno.test("HTTP: bytes that are not UTF-8 are a parse error and nothing is stored", async (t) => {
  const dir = await Deno.makeTempDir();
  await using server = await startServer([
    "--backend",
    `sqlite:///${dir}/state.db`,
    "--allow-anonymous",
  ]);
  const post = (body: Uint8Array, parts?: Uint8Array[]) =>
    exchange(
      server.port,
      parts ?? [
        requestBytes("POST", "/mcp", {
          Host: `127.0.0.1:${server.port}`,
          "Content-Type": "application/json",
          Accept: ACCEPT,
          Connection: "close",
        }, body),
      ],
      { maxMs: 10_000 },
    );
  const [before, after] = mint('{"text":"AB"}').split("AB") as [string, string];
  for (
    const [what, bad] of [
      ["0xFF", [0xff]],
      ["a lone continuation byte", [0x80]],
      ["an overlong encoding", [0xc0, 0xaf]],
      ["an encoded surrogate", [0xed, 0xa0, 0x80]],
      ["a truncated sequence", [0xe2, 0x82]],
    ] as [string, number[]][]
  ) {
    await t.step(what, async () => {
      const r = await post(concat([bytesOf(before), new Uint8Array(bad), bytesOf(after)]));
      assert.equal(r.status, 400, `answer: ${r.status} ${r.body}`);
      assert.equal(JSON.parse(r.body).error.code, -32700);
      assert.doesNotMatch(r.body, /handle/, "nothing was minted");
    });
  }

  await t.step(
    "valid UTF-8 split across writes in the middle of characters is intact",
    async () => {
      const text = "é漢😀ß";
      const body = bytesOf(mint(JSON.stringify({ text })));
      const cut = bytesOf(before).length + 2; // inside the 2-byte é... and onwards
      const head = requestBytes("POST", "/mcp", {
        Host: `127.0.0.1:${server.port}`,
        "Content-Type": "application/json",
        Accept: ACCEPT,
        "Content-Length": String(body.length),
        Connection: "close",
      }, null);
      const r = await exchange(server.port, [
        head,
        body.subarray(0, cut),
        body.subarray(cut, cut + 3),
        body.subarray(cut + 3),
      ], { gapMs: 50, maxMs: 10_000 });
      assert.equal(r.status, 200, r.body);
      const handle = /"handle\\?":\\?"([a-z0-9_-]+)\\?"/.exec(r.body)?.[1];
      assert.ok(handle, r.body);
      const load = await fetch(server.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: ACCEPT },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: { name: "state_load", arguments: { handle } },
        }),
      });
      const loaded = await load.text();
      assert.ok(loaded.includes(JSON.stringify(JSON.stringify({ text })).slice(1, -1)), loaded);
    },
  );

  assert.ok(await server.healthy());
});
