/**
 * HTTP abuse against a real `mcpstate serve --transport http` process with
 * bearer authentication: bodies over the limit, slow and stalled bodies,
 * 1,000 connections at once (busy and idle), bytes that are not UTF-8, wrong
 * content types and methods, and forged or misdirected JWTs; and one tenant
 * against another: `subscriptions/listen` on another user's handle behind
 * escaped method names, byte order marks and batches, two users' handles of
 * one name, 1,030 listen streams from one user, odd JWT subjects, and JSON
 * nested 100,000 levels deep. Each must be refused properly, change nothing,
 * and leave the server serving.
 *
 * @module
 */

import { type Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import {
  cleanEnv,
  newClient,
  payloadOf as resultPayload,
  SERVE,
  startIssuer,
  type TestIssuer,
} from "../tests/_server_harness.ts";
import { DEFAULT_MAX_LISTEN_STREAMS_PER_USER } from "../src/server/live.ts";
import {
  listenBody,
  mcpHeaders,
  MODERN_META,
  oddSubjects,
  post,
  type Posted,
  sameHandleFor,
} from "../tests/_tenants.ts";
import { bytesOf, concat, exchange, type RawResponse, requestBytes } from "./_raw_http.ts";
import { type ServerProcess, startServer } from "./_server.ts";
import { messageOf, openFds, quantile, round, rssKiB, sleep, timer } from "./_util.ts";

/** Options of {@link runAbuse}. */
export interface AbuseOptions {
  /** How many times each cheap check is repeated. */
  repeat: number;
  /** Connections opened at once. Default 1,000. */
  connections?: number;
  /** Rounds of the busy-connections check. Default 1. */
  connectionRounds?: number;
  /** Body timeout given to the server (`--body-timeout-ms`), when it has that option. Default 2,000. */
  bodyTimeoutMs?: number;
  /** How long a slow or stalled client may wait for an answer before it counts as unbounded. */
  slowBoundMs: number;
  /** `subscriptions/listen` streams one user opens at once in the listen flood. Default 1,030. */
  listenFlood?: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** One kind of abuse and how it went. */
export interface AbuseCheck {
  /** The group (body limits, slow clients, …). */
  part: string;
  /** What was sent. */
  name: string;
  /** What a proper refusal is. */
  expected: string;
  /** How many times it was tried. */
  tries: number;
  /** How many times the server answered as expected. */
  held: number;
  /** What was seen (statuses, timings). */
  observed: string;
  /** `true` when this is a known limitation outside mcpstate's code, not counted as a failure. */
  limitation?: boolean;
}

/** What {@link runAbuse} found. */
export interface AbuseReport {
  /** Every check. */
  checks: AbuseCheck[];
  /** Whether the server has `--body-timeout-ms`. */
  bodyTimeoutOption: boolean;
  /** Connections opened at once. */
  connections: number;
  /** Server RSS in KiB: at start, highest seen, at the end. */
  rssKiB: { start: number | null; peak: number | null; end: number | null };
  /** Server RSS in KiB after each part. */
  rssAfter: Record<string, number | null>;
  /** Whether the server was alive and healthy at the end. */
  serverHealthy: boolean;
  /** Wall time, ms. */
  durationMs: number;
  /** Every violation; empty when everything held. */
  failures: string[];
}

const ACCEPT = "application/json, text/event-stream";

/** Whether `mcpstate serve` knows `--body-timeout-ms`. */
export async function hasBodyTimeoutOption(): Promise<boolean> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...SERVE, "--help"],
    env: cleanEnv(),
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return new TextDecoder().decode(out.stdout).includes("--body-timeout-ms");
}

interface Captured {
  headers: Record<string, string>;
  body: string;
}

function capturing(into: Captured[]) {
  return (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (typeof init?.body === "string") {
      into.push({
        headers: Object.fromEntries(new Headers(init.headers).entries()),
        body: init.body,
      });
    }
    return fetch(input, init);
  };
}

/**
 * Runs the HTTP abuse checks against a fresh server.
 *
 * @param options Repetitions, connection count, time bounds.
 * @returns The report; `failures` is empty when everything held.
 */
export async function runAbuse(options: AbuseOptions): Promise<AbuseReport> {
  const log = options.log ?? (() => {});
  const started = performance.now();
  const failures: string[] = [];
  const checks: AbuseCheck[] = [];
  const connections = options.connections ?? 1000;
  const bodyTimeoutOption = await hasBodyTimeoutOption();
  const bodyTimeoutMs = options.bodyTimeoutMs ?? 2000;
  const dir = await Deno.makeTempDir({ prefix: "mcpstate-abuse-" });
  const issuer: TestIssuer = await startIssuer();
  const backend = `sqlite:///${dir}/state.db`;
  const server: ServerProcess = await startServer([
    "--backend",
    backend,
    ...issuer.serveArgs,
    "--auth-jwks-cooldown-ms",
    "1000",
    ...(bodyTimeoutOption ? ["--body-timeout-ms", String(bodyTimeoutMs)] : []),
  ]);
  const aud = server.url.href;
  const report: AbuseReport = {
    checks,
    bodyTimeoutOption,
    connections,
    rssKiB: { start: rssKiB(server.pid), peak: rssKiB(server.pid), end: null },
    rssAfter: {},
    serverHealthy: false,
    durationMs: 0,
    failures,
  };
  const sampleRss = () => {
    const r = rssKiB(server.pid);
    if (r !== null && (report.rssKiB.peak === null || r > report.rssKiB.peak)) {
      report.rssKiB.peak = r;
    }
  };
  const rssTimer = setInterval(sampleRss, 250);
  const clients: Client[] = [];
  try {
    // The owner: a real client whose token the abusive requests carry, so that
    // anything a refused request wrongly did would show up in its bucket.
    const ownerToken = await issuer.token({ sub: "owner", aud });
    const captured: Captured[] = [];
    const owner = newClient("2026-07-28", "gauntlet-abuse");
    await owner.connect(
      new StreamableHTTPClientTransport(server.url, {
        requestInit: { headers: { Authorization: `Bearer ${ownerToken}` } },
        fetch: capturing(captured),
      }),
    );
    clients.push(owner);
    const made = await payloadOf(owner, "state_save", { kind: "note", state: { n: 0 } });
    const known = String(made.handle);
    const before = captured.length;
    await payloadOf(owner, "state_load", { handle: known });
    const loadReq = captured[before]!;
    captured.length = 0;
    await payloadOf(owner, "state_save", { kind: "note", state: { minted: "by abuse" } });
    const mintReq = captured[0]!;
    const ownerCount = async () =>
      ((await payloadOf(owner, "state_list", { limit: 500 })).handles as unknown[]).length;
    let expectedCount = await ownerCount();

    const hdrs = (extra: Record<string, string | Uint8Array> = {}) => ({
      Host: `127.0.0.1:${server.port}`,
      ...mintReq.headers,
      authorization: `Bearer ${ownerToken}`,
      ...extra,
    });

    const record = (c: AbuseCheck) => {
      checks.push(c);
      if (c.held !== c.tries && !c.limitation) {
        failures.push(
          `${c.part}: ${c.name}: ${c.held}/${c.tries} held; expected ${c.expected}; observed ${c.observed}`,
        );
      }
      log(`abuse: ${c.part}: ${c.name}: ${c.held}/${c.tries}`);
    };
    const statuses = (list: (number | null | string)[]) => {
      const counts = new Map<string, number>();
      for (const s of list) counts.set(String(s), (counts.get(String(s)) ?? 0) + 1);
      return [...counts].map(([s, n]) => `${s} ×${n}`).join(", ");
    };
    const nothingMinted = async (what: string) => {
      const n = await ownerCount();
      if (n !== expectedCount) {
        failures.push(`${what}: the owner's bucket went from ${expectedCount} to ${n} handles`);
        expectedCount = n;
      }
    };
    const stillServing = async (what: string) => {
      if (!await server.healthy()) failures.push(`${what}: /healthz failed afterwards`);
      report.rssAfter[what] = rssKiB(server.pid);
    };
    const isRpcError = (r: { status: number | null; body: string }, code: number) => {
      try {
        return JSON.parse(r.body).error?.code === code;
      } catch {
        return false;
      }
    };

    // ------------------------------------------------------------ body limits
    {
      const part = "body limits";
      const big = "x".repeat(5 * 1024 * 1024);
      let held = 0;
      const seen: (number | null)[] = [];
      for (let i = 0; i < options.repeat; i++) {
        const body =
          `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_save","arguments":{"kind":"note","state":{"x":"${big}"}}}}`;
        const res = await fetch(server.url, { method: "POST", headers: hdrs(), body });
        const text = await res.text();
        seen.push(res.status);
        if (res.status === 413 && isRpcError({ status: 413, body: text }, -32000)) held++;
      }
      record({
        part,
        name: "5 MiB body with Content-Length (limit 4 MiB)",
        expected: "413 with a JSON-RPC error",
        tries: options.repeat,
        held,
        observed: statuses(seen),
      });

      held = 0;
      seen.length = 0;
      const times: number[] = [];
      const sentAtAnswer: number[] = [];
      const rssBefore = rssKiB(server.pid) ?? 0;
      const streamBytes = 64 * 1024 * 1024;
      for (let i = 0; i < options.repeat; i++) {
        let sent = 0;
        const chunk = new Uint8Array(64 * 1024).fill(0x20);
        const stream = new ReadableStream<Uint8Array>({
          pull(c) {
            if (sent >= streamBytes) return c.close();
            sent += chunk.length;
            c.enqueue(chunk);
          },
        });
        const t0 = performance.now();
        try {
          const res = await fetch(server.url, {
            method: "POST",
            headers: hdrs(),
            body: stream,
            signal: AbortSignal.timeout(30_000),
          });
          // How much of the body had left this process when the answer came back.
          const atAnswer = sent;
          await res.body?.cancel();
          seen.push(res.status);
          times.push(performance.now() - t0);
          sentAtAnswer.push(atAnswer);
          if (res.status === 413 && atAnswer < streamBytes) held++;
        } catch (e) {
          seen.push(null);
          failures.push(`${part}: 64 MiB stream: ${messageOf(e)}`);
        }
      }
      const rssGrowth = (rssKiB(server.pid) ?? 0) - rssBefore;
      sentAtAnswer.sort((a, b) => a - b);
      record({
        part,
        name: "64 MiB streamed body without Content-Length",
        expected: "413 before the whole body has been sent (the server stops reading at the limit)",
        tries: options.repeat,
        held,
        observed: `${statuses(seen)}; answered after ${
          round(quantile(sentAtAnswer, 0.5) / 1048576)
        } MiB sent (p50, max ${round((sentAtAnswer.at(-1) ?? NaN) / 1048576)} MiB), in ${
          round(quantile(times.sort((a, b) => a - b), 0.5))
        } ms (p50); server RSS ${round(rssGrowth / 1024) >= 0 ? "+" : ""}${
          round(rssGrowth / 1024)
        } MiB over the ${options.repeat} bodies`,
      });

      held = 0;
      seen.length = 0;
      for (let i = 0; i < options.repeat; i++) {
        const r = await exchange(server.port, [
          requestBytes("POST", "/mcp", hdrs({ "Content-Length": "10000000000" }), null),
          bytesOf('{"jsonrpc":'),
        ], { maxMs: 5000 });
        seen.push(r.status);
        if (r.status === 413) held++;
      }
      record({
        part,
        name: "Content-Length of 10 GB, 11 bytes sent",
        expected: "413 at once, without waiting for the body",
        tries: options.repeat,
        held,
        observed: statuses(seen),
      });

      held = 0;
      seen.length = 0;
      for (let i = 0; i < options.repeat; i++) {
        const res = await fetch(server.url, {
          method: "POST",
          headers: { "content-type": "application/json", accept: ACCEPT },
          body: big,
        });
        await res.body?.cancel();
        seen.push(res.status);
        if (res.status === 401) held++;
      }
      record({
        part,
        name: "5 MiB body without a token",
        expected: "401 (authentication comes before the body)",
        tries: options.repeat,
        held,
        observed: statuses(seen),
      });
      await nothingMinted(part);
      await stillServing(part);
      sampleRss();
    }

    // ------------------------------------------------------------ slow clients
    {
      const part = "slow clients";
      const bound = bodyTimeoutOption ? bodyTimeoutMs + 3000 : options.slowBoundMs;
      const body = bytesOf(mintReq.body);
      const head = requestBytes("POST", "/mcp", hdrs({ "Content-Length": "1000000" }), null);
      const trickle = [
        head,
        ...Array.from(
          { length: 100_000 },
          (_, i) => body.subarray(i % body.length, (i % body.length) + 1),
        ),
      ];
      const stallHead = requestBytes(
        "POST",
        "/mcp",
        hdrs({ "Content-Length": String(body.length) }),
        null,
      );
      const stall = [concat([stallHead, body.subarray(0, body.length >> 1)])];
      const partialHeaders = bytesOf(
        `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nContent-Type: application/json\r\n`,
      );
      const slowHeaders = [...bytesOf(new TextDecoder().decode(stallHead))].map((b) =>
        new Uint8Array([b])
      );
      const runs = await Promise.all([
        exchange(server.port, trickle, { gapMs: 100, maxMs: bound }),
        exchange(server.port, stall, { maxMs: bound }),
        exchange(server.port, slowHeaders, { gapMs: 100, maxMs: bound }),
        exchange(server.port, [partialHeaders], { maxMs: bound }),
        exchange(server.port, [], { maxMs: bound }),
      ]);
      const answered = (r: RawResponse) =>
        r.status !== null && r.answeredMs !== null && r.answeredMs <= bound
          ? `${r.status} after ${Math.round(r.answeredMs)} ms`
          : r.closedMs !== null
          ? `closed after ${Math.round(r.closedMs)} ms`
          : `no answer in ${bound} ms`;
      const bounded = (r: RawResponse) =>
        (r.status !== null && r.answeredMs !== null) || r.closedMs !== null;
      const [trickled, stalled, slowH, partialH, idle] = runs as [
        RawResponse,
        RawResponse,
        RawResponse,
        RawResponse,
        RawResponse,
      ];
      record({
        part,
        name: "body trickled at 10 bytes/s, never finished",
        expected: `an answer (408) or a close within ${bound} ms`,
        tries: 1,
        held: bounded(trickled) && trickled.status !== 200 ? 1 : 0,
        observed: answered(trickled) +
          (bodyTimeoutOption ? "" : " (this server has no body timeout)"),
      });
      record({
        part,
        name: "half the body, then silence",
        expected: `an answer (408) or a close within ${bound} ms`,
        tries: 1,
        held: bounded(stalled) && stalled.status !== 200 ? 1 : 0,
        observed: answered(stalled) +
          (bodyTimeoutOption ? "" : " (this server has no body timeout)"),
      });
      for (
        const [name, r] of [
          ["headers trickled at 10 bytes/s", slowH],
          ["half the headers, then silence", partialH],
          ["a connection that sends nothing", idle],
        ] as const
      ) {
        record({
          part,
          name,
          expected: `a close within ${bound} ms`,
          tries: 1,
          held: bounded(r) ? 1 : 0,
          observed: `${
            answered(r)
          }: Deno.serve has no header-read or idle timeout; the connection stays open until the client leaves (put a proxy with read timeouts in front)`,
          limitation: true,
        });
      }
      await nothingMinted(part);
      await stillServing(part);
      sampleRss();
    }

    // ------------------------------------------------------------ connections
    {
      const part = "connections";
      const fds0 = openFds(server.pid);
      const rounds = options.connectionRounds ?? 1;
      const req = requestBytes("POST", "/mcp", {
        Host: `127.0.0.1:${server.port}`,
        ...loadReq.headers,
        authorization: `Bearer ${ownerToken}`,
        Connection: "close",
      }, loadReq.body);
      let held = 0;
      const all: (number | null)[] = [];
      const times: number[] = [];
      let worst = 0;
      const rssRounds: string[] = [];
      for (let round_ = 0; round_ < rounds; round_++) {
        const conns = await Promise.all(
          Array.from(
            { length: connections },
            () => Deno.connect({ hostname: "127.0.0.1", port: server.port }),
          ),
        );
        const openNow = openFds(server.pid);
        const t0 = performance.now();
        const results = await Promise.all(conns.map(async (c) => {
          const start = performance.now();
          const deadline = timer(60_000);
          try {
            await c.write(req);
            const chunks: Uint8Array[] = [];
            const buf = new Uint8Array(16 * 1024);
            const read = (async () => {
              for (;;) {
                const n = await c.read(buf);
                if (n === null) return;
                chunks.push(buf.slice(0, n));
              }
            })();
            await Promise.race([read, deadline.done]);
            times.push(performance.now() - start);
            return parseResponseLoose(concat(chunks));
          } catch (e) {
            return { status: null, ok: false, error: messageOf(e) };
          } finally {
            deadline.cancel();
            try {
              c.close();
            } catch {
              // closed by the server
            }
          }
        }));
        worst = Math.max(worst, performance.now() - t0);
        const rss = rssKiB(server.pid);
        rssRounds.push(rss === null ? "?" : `${Math.round(rss / 1024)}`);
        for (const r of results) {
          all.push(r.status);
          if (r.status === 200 && r.ok) held++;
        }
        log(
          `abuse: ${connections} connections, round ${round_ + 1}: ${
            results.filter((r) => r.ok).length
          } ok; server fds ${openNow}`,
        );
      }
      times.sort((a, b) => a - b);
      record({
        part,
        name: `${connections.toLocaleString("en-US")} connections at once, each a state_load`,
        expected: "every one answered 200 with the state",
        tries: connections * rounds,
        held,
        observed: `${statuses(all)}; p50 ${round(quantile(times, 0.5))} ms, p99 ${
          round(quantile(times, 0.99))
        } ms, each round done in ≤ ${Math.round(worst)} ms; server RSS after each round ${
          rssRounds.join(", ")
        } MiB`,
      });

      // Idle connections held open while a real client works.
      const idle = await Promise.all(
        Array.from(
          { length: connections },
          () => Deno.connect({ hostname: "127.0.0.1", port: server.port }),
        ),
      );
      await sleep(200);
      const fdsHeld = openFds(server.pid);
      let served = 0;
      const lat: number[] = [];
      const work = 20;
      for (let i = 0; i < work; i++) {
        const t0 = performance.now();
        try {
          const r = await payloadOf(owner, "state_load", { handle: known });
          if (r.ok === true) served++;
        } catch {
          // counted as not served
        }
        lat.push(performance.now() - t0);
      }
      for (const c of idle) {
        try {
          c.close();
        } catch {
          // gone
        }
      }
      let fdsAfter = openFds(server.pid);
      for (let i = 0; i < 50 && fdsAfter !== null && fds0 !== null && fdsAfter > fds0 + 10; i++) {
        await sleep(100);
        fdsAfter = openFds(server.pid);
      }
      lat.sort((a, b) => a - b);
      record({
        part,
        name: `${
          connections.toLocaleString("en-US")
        } idle connections held open while a client makes ${work} calls`,
        expected:
          "every call served; the server's descriptors return to the baseline once they close",
        tries: work,
        held: fdsAfter !== null && fds0 !== null && fdsAfter > fds0 + 10 ? 0 : served,
        observed: `${served}/${work} served, p99 ${
          round(quantile(lat, 0.99))
        } ms; server fds ${fds0} → ${fdsHeld} with them open → ${fdsAfter} after`,
      });
      await nothingMinted(part);
      await stillServing(part);
      sampleRss();
    }

    // ------------------------------------------------------------ encodings
    {
      const part = "encodings";
      const text = mintReq.body;
      const at = text.indexOf("by abuse") + 3;
      const invalid: [string, number[]][] = [
        ["0xFF", [0xff]],
        ["a lone continuation byte 0x80", [0x80]],
        ["an overlong '/' (0xC0 0xAF)", [0xc0, 0xaf]],
        ["a UTF-8-encoded surrogate (0xED 0xA0 0x80)", [0xed, 0xa0, 0x80]],
        ["a truncated sequence (0xE2 0x82)", [0xe2, 0x82]],
        ["a 5-byte form (0xF8 0x88 0x80 0x80 0x80)", [0xf8, 0x88, 0x80, 0x80, 0x80]],
      ];
      for (const [what, bad] of invalid) {
        let held = 0;
        const seen: (number | null)[] = [];
        for (let i = 0; i < options.repeat; i++) {
          const body = concat([
            bytesOf(text.slice(0, at)),
            new Uint8Array(bad),
            bytesOf(text.slice(at)),
          ]);
          const r = await exchange(server.port, [
            requestBytes("POST", "/mcp", hdrs({ Connection: "close" }), body),
          ], {
            maxMs: 10_000,
          });
          seen.push(r.status);
          if (r.status === 400 && isRpcError(r, -32700)) held++;
          else if (/"ok":true/.test(r.body)) expectedCount++; // the bug: it was stored; count it once
        }
        record({
          part,
          name: `${what} inside a string of state_save`,
          expected: "400 with a JSON-RPC parse error (-32700); nothing stored",
          tries: options.repeat,
          held,
          observed: statuses(seen),
        });
      }
      {
        let held = 0;
        const seen: (number | null)[] = [];
        for (let i = 0; i < options.repeat; i++) {
          const body = concat([
            bytesOf(text.slice(0, 1)),
            new Uint8Array([0xff, 0xfe]),
            bytesOf(text.slice(1)),
          ]);
          const r = await exchange(server.port, [
            requestBytes("POST", "/mcp", hdrs({ Connection: "close" }), body),
          ], {
            maxMs: 10_000,
          });
          seen.push(r.status);
          if (r.status === 400 && isRpcError(r, -32700)) held++;
        }
        record({
          part,
          name: "0xFF 0xFE between JSON tokens",
          expected: "400 with a JSON-RPC parse error (-32700)",
          tries: options.repeat,
          held,
          observed: statuses(seen),
        });
      }
      {
        let held = 0;
        const seen: (number | null)[] = [];
        for (let i = 0; i < options.repeat; i++) {
          const utf16 = new Uint8Array(2 + text.length * 2);
          utf16.set([0xff, 0xfe]);
          for (let j = 0; j < text.length; j++) {
            const c = text.charCodeAt(j);
            utf16[2 + 2 * j] = c & 0xff;
            utf16[3 + 2 * j] = c >> 8;
          }
          const res = await fetch(server.url, {
            method: "POST",
            headers: { ...hdrs(), "content-type": "application/json; charset=utf-16" } as Record<
              string,
              string
            >,
            body: utf16,
          });
          const body = await res.text();
          seen.push(res.status);
          if (res.status === 400 && isRpcError({ status: 400, body }, -32700)) held++;
        }
        record({
          part,
          name: "a UTF-16 body labelled charset=utf-16",
          expected: "400 with a JSON-RPC parse error (JSON is UTF-8)",
          tries: options.repeat,
          held,
          observed: statuses(seen),
        });
      }
      for (
        const [what, path, extra] of [
          ["0xFF in the bearer token", "/mcp", {
            authorization: concat([
              bytesOf(`Bearer ${ownerToken.slice(0, 20)}`),
              new Uint8Array([0xff, 0xc3]),
              bytesOf(ownerToken.slice(20)),
            ]),
          }],
          ["0xFF in a header value", "/mcp", { "mcp-method": new Uint8Array([0x74, 0xff, 0xfe]) }],
          ["0xFF in the path", concat([bytesOf("/mcp"), new Uint8Array([0xff])]), {}],
          ["%FF in the path", "/mcp%FF", {}],
        ] as [string, string | Uint8Array, Record<string, string | Uint8Array>][]
      ) {
        let held = 0;
        const seen: (number | null)[] = [];
        for (let i = 0; i < options.repeat; i++) {
          const r = await exchange(server.port, [
            requestBytes("POST", path, hdrs({ ...extra, Connection: "close" }), mintReq.body),
          ], { maxMs: 10_000 });
          seen.push(r.status);
          const ok = r.status !== null && r.status >= 400 && r.status < 500;
          if (ok || (r.status === null && r.closedMs !== null)) held++;
        }
        record({
          part,
          name: what,
          expected: "a 4xx (or the connection closed), nothing stored",
          tries: options.repeat,
          held,
          observed: statuses(seen),
        });
      }
      await nothingMinted(part);
      await stillServing(part);
      sampleRss();
    }

    // ------------------------------------------------------------ content types and methods
    {
      const part = "content types and methods";
      const legacy = { "content-type": "application/json", authorization: `Bearer ${ownerToken}` };
      const legacyMint = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "state_save", arguments: { kind: "note", state: { minted: "by abuse" } } },
      });
      const cases: [string, RequestInit, number][] = [
        ["Content-Type: text/plain", {
          method: "POST",
          headers: { ...hdrs(), "content-type": "text/plain" } as Record<string, string>,
          body: mintReq.body,
        }, 415],
        ["no Content-Type", {
          method: "POST",
          headers: withoutKey(hdrs(), "content-type"),
          body: bytesOf(mintReq.body) as Uint8Array<ArrayBuffer>,
        }, 415],
        ["application/x-www-form-urlencoded", {
          method: "POST",
          headers: { ...hdrs(), "content-type": "application/x-www-form-urlencoded" } as Record<
            string,
            string
          >,
          body: mintReq.body,
        }, 415],
        ["multipart/form-data", {
          method: "POST",
          headers: { ...hdrs(), "content-type": "multipart/form-data; boundary=x" } as Record<
            string,
            string
          >,
          body: mintReq.body,
        }, 415],
        ["application/jsonx", {
          method: "POST",
          headers: { ...hdrs(), "content-type": "application/jsonx" } as Record<string, string>,
          body: mintReq.body,
        }, 415],
        // The 2025-era transport insists on Accept; the 2026-07-28 path answers whatever it says.
        ["Accept: text/html (a 2025-era request)", {
          method: "POST",
          headers: { ...legacy, accept: "text/html" },
          body: legacyMint,
        }, 406],
        ["no Accept (a 2025-era request)", {
          method: "POST",
          headers: legacy,
          body: legacyMint,
        }, 406],
        ["GET /mcp", {
          method: "GET",
          headers: { ...hdrs(), accept: "text/event-stream" } as Record<string, string>,
        }, 405],
        ["PUT /mcp", {
          method: "PUT",
          headers: hdrs() as Record<string, string>,
          body: mintReq.body,
        }, 405],
        ["DELETE /mcp", { method: "DELETE", headers: hdrs() as Record<string, string> }, 405],
        ["PATCH /mcp", {
          method: "PATCH",
          headers: hdrs() as Record<string, string>,
          body: mintReq.body,
        }, 405],
      ];
      for (const [name, init, want] of cases) {
        let held = 0;
        const seen: number[] = [];
        for (let i = 0; i < options.repeat; i++) {
          const res = await fetch(server.url, init);
          const body = await res.text();
          seen.push(res.status);
          if (res.status === want && isRpcError({ status: want, body }, -32000)) held++;
        }
        record({
          part,
          name,
          expected: `${want} with a JSON-RPC error`,
          tries: options.repeat,
          held,
          observed: statuses(seen),
        });
      }
      await nothingMinted(part);
      await stillServing(part);
    }

    // ------------------------------------------------------------ JWT attacks
    {
      const part = "JWT attacks";
      const now = () => Math.floor(Date.now() / 1000);
      const attacker = await generateKeyPair("RS256", { extractable: true });
      const attackerJwk = { ...(await exportJWK(attacker.publicKey)), kid: "rsa-1", alg: "RS256" };
      let jkuFetches = 0;
      const ac = new AbortController();
      const jkuPort = freeLoopbackPort();
      const jkuServer = Deno.serve({
        hostname: "127.0.0.1",
        port: jkuPort,
        signal: ac.signal,
        onListen() {},
      }, () => {
        jkuFetches++;
        return Response.json({ keys: [attackerJwk] });
      });
      const b64 = (o: unknown) =>
        btoa(JSON.stringify(o)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
      const selfSigned = async (header: Record<string, unknown>, claims: JWTPayload) =>
        await new SignJWT(claims).setProtectedHeader({ alg: "RS256", ...header }).setIssuedAt()
          .setIssuer(issuer.issuer).setExpirationTime("1h").sign(attacker.privateKey);
      const valid = await issuer.token({ sub: "mallory-valid", aud });
      const [vh, vp, vs] = valid.split(".") as [string, string, string];
      const attacks: [string, (sub: string) => Promise<string>][] = [
        ["alg none", (sub) => Promise.resolve(issuer.unsignedToken({ sub, aud }))],
        ["alg none, keeping a signature", async (sub) => {
          const t = await issuer.token({ sub, aud });
          return `${b64({ alg: "none", typ: "JWT" })}.${t.split(".")[1]}.${t.split(".")[2]}`;
        }],
        [
          "alg NoNe",
          (sub) =>
            Promise.resolve(
              `${b64({ alg: "NoNe", typ: "JWT" })}.${
                b64({ iss: issuer.issuer, sub, aud, exp: now() + 3600 })
              }.`,
            ),
        ],
        [
          "HS256 signed with the issuer's RSA public key (algorithm confusion)",
          (sub) => issuer.hs256WithPublicKey({ sub, aud }),
        ],
        ["expired an hour ago", (sub) => issuer.token({ sub, aud, exp: now() - 3600 })],
        [
          "expired 2 minutes ago (beyond the 30 s skew)",
          (sub) => issuer.token({ sub, aud, exp: now() - 120 }),
        ],
        [
          "not valid for another hour (nbf)",
          (sub) => issuer.token({ sub, aud, nbf: now() + 3600 }),
        ],
        ["wrong audience", (sub) => issuer.token({ sub, aud: "https://other.example/mcp" })],
        ["audience with a trailing slash", (sub) => issuer.token({ sub, aud: `${aud}/` })],
        ["no audience", (sub) => issuer.token({ sub })],
        ["wrong issuer", (sub) => issuer.token({ sub, aud }, { iss: "https://evil.example" })],
        [
          "issuer with a trailing slash",
          (sub) => issuer.token({ sub, aud }, { iss: `${issuer.issuer}/` }),
        ],
        [
          "unknown kid (a key the JWKS does not publish)",
          (sub) => issuer.tokenWithUnknownKey({ sub, aud }),
        ],
        [
          "the issuer's kid, signed with another key",
          (sub) => selfSigned({ kid: "rsa-1" }, { sub, aud }),
        ],
        ["the EC key's kid on an RS256 token", (sub) => selfSigned({ kid: "ec-1" }, { sub, aud })],
        ["kid path traversal", (sub) => selfSigned({ kid: "../../../../dev/null" }, { sub, aud })],
        [
          "embedded jwk header (self-signed)",
          (sub) => selfSigned({ jwk: attackerJwk }, { sub, aud }),
        ],
        [
          "jku header pointing at the attacker's JWKS",
          (sub) =>
            selfSigned({ jku: `http://127.0.0.1:${jkuPort}/jwks.json`, kid: "rsa-1" }, {
              sub,
              aud,
            }),
        ],
        [
          "x5u header pointing at the attacker",
          (sub) =>
            selfSigned({ x5u: `http://127.0.0.1:${jkuPort}/cert.pem`, kid: "rsa-1" }, { sub, aud }),
        ],
        ["unknown critical header", (sub) =>
          issuer.token({ sub, aud }).then((t) => {
            const [, p, s] = t.split(".");
            return `${b64({ alg: "RS256", kid: "rsa-1", crit: ["exp-x"], "exp-x": 1 })}.${p}.${s}`;
          })],
        [
          "payload swapped, signature kept",
          (sub) =>
            Promise.resolve(
              `${vh}.${
                b64({ ...JSON.parse(atob(vp.replaceAll("-", "+").replaceAll("_", "/"))), sub })
              }.${vs}`,
            ),
        ],
        ["signature removed", () => Promise.resolve(`${vh}.${vp}.`)],
        ["signature truncated", () => Promise.resolve(`${vh}.${vp}.${vs.slice(0, 20)}`)],
        ["no exp", (sub) => issuer.token({ sub, aud }, { noExp: true })],
        ["no sub", () => issuer.token({ aud })],
        [
          "a forged 30 KB token",
          (sub) => selfSigned({ kid: "rsa-1" }, { sub, aud, pad: "p".repeat(22_000) }),
        ],
        ["a 100 KB Authorization header", () => Promise.resolve("A".repeat(100_000))],
        ["garbage", () => Promise.resolve("not.a.jwt")],
      ];
      const subs: string[] = [];
      for (const [index, [name, forge]] of attacks.entries()) {
        let held = 0;
        const seen: number[] = [];
        const sub = `mallory-${index}`;
        subs.push(sub);
        for (let i = 0; i < options.repeat; i++) {
          const token = await forge(sub);
          const res = await fetch(server.url, {
            method: "POST",
            headers: { ...mintReq.headers, authorization: `Bearer ${token}` },
            body: mintReq.body,
          });
          const body = await res.text();
          seen.push(res.status);
          const challenge = res.headers.get("www-authenticate") ?? "";
          // A header over the runtime's limit never reaches the verifier: 400 or 431.
          const proper = (res.status === 401 && /^Bearer /.test(challenge) &&
            challenge.includes("resource_metadata=")) ||
            (token.length > 64_000 && (res.status === 400 || res.status === 431));
          const echoed = token.length > 8 && (body.includes(token) || challenge.includes(token));
          if (proper && !echoed) held++;
        }
        record({
          part,
          name,
          expected:
            "401 with a Bearer challenge naming the resource metadata, the token not echoed",
          tries: options.repeat,
          held,
          observed: statuses(seen),
        });
      }
      // Query-string and cookie tokens are not bearer headers.
      {
        let held = 0;
        const seen: number[] = [];
        for (let i = 0; i < options.repeat; i++) {
          const token = await issuer.token({ sub: "mallory-query", aud });
          for (
            const [url, extra] of [
              [`${server.url.href}?access_token=${token}`, {}],
              [server.url.href, { cookie: `access_token=${token}` }],
            ] as [string, Record<string, string>][]
          ) {
            const res = await fetch(url, {
              method: "POST",
              headers: { ...withoutKey(mintReq.headers, "authorization"), ...extra },
              body: mintReq.body,
            });
            await res.body?.cancel();
            seen.push(res.status);
            if (res.status === 401) held++;
          }
        }
        subs.push("mallory-query");
        record({
          part,
          name: "a valid token in the query string or a cookie",
          expected: "401 (only the Authorization header counts)",
          tries: options.repeat * 2,
          held,
          observed: statuses(seen),
        });
      }
      ac.abort();
      await jkuServer.finished;
      if (jkuFetches > 0) {
        failures.push(`${part}: the server fetched the attacker's jku/x5u URL ${jkuFetches} times`);
      }
      // Nothing any forged token asked for happened: each attacked subject's bucket is empty.
      let empty = 0;
      for (const sub of subs) {
        const token = await issuer.token({ sub, aud });
        const c = newClient("2025-11-25", "gauntlet-abuse");
        await c.connect(
          new StreamableHTTPClientTransport(server.url, {
            requestInit: { headers: { Authorization: `Bearer ${token}` } },
          }),
        );
        clients.push(c);
        const list = await payloadOf(c, "state_list", {});
        if ((list.handles as unknown[]).length === 0) empty++;
        else {failures.push(
            `${part}: ${sub} owns ${
              (list.handles as unknown[]).length
            } handles after forged requests`,
          );}
      }
      record({
        part,
        name:
          "afterwards: the attacked subjects own nothing; the attacker's key URLs were never fetched",
        expected: "every attacked bucket empty, 0 fetches",
        tries: subs.length,
        held: jkuFetches === 0 ? empty : 0,
        observed: `${empty}/${subs.length} empty, ${jkuFetches} fetches of attacker URLs`,
      });
      await nothingMinted(part);
      await stillServing(part);
    }

    // ------------------------------------------------------------ huge patches
    await hugePatches({ url: server.url, issuer, aud, owner, known, clients, record, failures });
    await stillServing("huge patches");
    sampleRss();
    // ------------------------------------------------------------ tenant isolation
    {
      const tenants: TenantAbuse = {
        server,
        issuer,
        aud,
        backend,
        repeat: options.repeat,
        listenFlood: options.listenFlood ?? 1030,
        owner,
        ownerToken,
        known,
        mintReq,
        connect: async (sub) => {
          const c = newClient("2026-07-28", "gauntlet-abuse");
          await c.connect(
            new StreamableHTTPClientTransport(server.url, {
              requestInit: {
                headers: { Authorization: `Bearer ${await issuer.token({ sub, aud })}` },
              },
            }),
          );
          clients.push(c);
          return c;
        },
        record,
        after: async (part) => {
          await nothingMinted(part);
          await stillServing(part);
          sampleRss();
        },
      };
      await listenOwnershipAbuse(tenants);
      await listenFloodAbuse(tenants);
      await oddSubjectAbuse(tenants);
      await deepNestingAbuse(tenants);
    }

    const r = await payloadOf(owner, "state_load", { handle: known });
    if (r.ok !== true) {
      failures.push(`the owner can't read its handle afterwards: ${JSON.stringify(r)}`);
    }
    report.serverHealthy = server.exited() === undefined && await server.healthy();
    if (!report.serverHealthy) failures.push("the server is not healthy at the end");
  } finally {
    clearInterval(rssTimer);
    sampleRss();
    report.rssKiB.end = rssKiB(server.pid);
    for (const c of clients) await c.close().catch(() => {});
    const status = await server.stop();
    if (status.code !== 0 && status.signal !== "SIGTERM") {
      failures.push(`the server exited with ${status.code}: ${server.stderr().slice(-500)}`);
    }
    if (/panicked|Uncaught|RUST_BACKTRACE/.test(server.stderr())) {
      failures.push(`the server's stderr shows a crash: ${server.stderr().slice(-500)}`);
    }
    await issuer.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  report.durationMs = Math.round(performance.now() - started);
  return report;
}

// ------------------------------------------------------------ huge patches

/** What {@link hugePatches} needs from {@link runAbuse}. */
interface HugePatchContext {
  /** The server's MCP endpoint. */
  url: URL;
  /** The issuer whose tokens the server accepts. */
  issuer: TestIssuer;
  /** The audience of those tokens. */
  aud: string;
  /** Another user, who keeps loading `known` while the patches run. */
  owner: Client;
  /** The owner's handle. */
  known: string;
  /** Clients to close at the end. */
  clients: Client[];
  /** Records one check. */
  record: (c: AbuseCheck) => void;
  /** Violations outside any one check. */
  failures: string[];
}

/** How long one patch, or another user's load meanwhile, may take. */
const HUGE_PATCH_BOUND_MS = 2000;
/** Notes (an object) and tags (a list) of the patched state: about 940 KB of JSON. */
const HUGE_NOTES = 6000;
const HUGE_TAGS = 20_000;

/** Calls a tool and returns what the model reads: the JSON of its text block (`{}` when none). */
async function payloadOf(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const res = await client.callTool({ name, arguments: args });
  return resultPayload(res) ?? {};
}

/**
 * Huge patches: one user sends the longest patches allowed (1,000 set_key,
 * add_to_set and append ops, and a mix) against a state near the size cap,
 * then patches over the limit, with a bad last op, with a counter past
 * 2^53 − 1, and a request of nearly 4 MiB of ops. Each must answer within
 * {@link HUGE_PATCH_BOUND_MS}, apply all or nothing, and fail as a structured
 * `patch_error` (or `state_too_large`); meanwhile another user's loads keep
 * being answered within the same bound.
 */
async function hugePatches(ctx: HugePatchContext): Promise<void> {
  const part = "huge patches";
  const token = await ctx.issuer.token({ sub: "huge-patcher", aud: ctx.aud });
  const patcher = newClient("2026-07-28", "gauntlet-huge-patches");
  await patcher.connect(
    new StreamableHTTPClientTransport(ctx.url, {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  ctx.clients.push(patcher);
  const notes: Record<string, string> = {};
  for (let i = 0; i < HUGE_NOTES; i++) notes[`note-${i}`] = `Finding ${i}: arm64 builds first.`;
  const tags = Array.from({ length: HUGE_TAGS }, (_, i) => `tag-${i}-${(i * 7919) % 100_000}`);
  const state = { notes, tags, stats: { n: 0 } };
  const made = await payloadOf(patcher, "state_save", { kind: "notes", state });
  if (made.ok !== true) {
    ctx.failures.push(`${part}: could not mint the state: ${JSON.stringify(made).slice(0, 300)}`);
    return;
  }
  const handle = String(made.handle);
  let version = Number(made.version);
  const restore = async () => {
    const r = await payloadOf(patcher, "state_save", { handle, state, expect_version: version });
    version = Number(r.version);
  };

  // Another user loads their own handle in a loop for as long as the patches run.
  let running = true;
  const waits: number[] = [];
  let loadFailures = 0;
  const loads = (async () => {
    while (running) {
      const t0 = performance.now();
      const r = await payloadOf(ctx.owner, "state_load", { handle: ctx.known }).catch(() => null);
      waits.push(performance.now() - t0);
      if (r?.ok !== true) loadFailures++;
      await sleep(5);
    }
  })();

  const ops = {
    set_key: (i: number) => ({
      op: "set_key",
      path: "notes",
      key: `note-${(i * 7) % HUGE_NOTES}`,
      value: `revised ${i}`,
    }),
    add_to_set: (i: number) => ({
      op: "add_to_set",
      path: "tags",
      value: i % 2 ? `tag-${i * 13}-${(i * 13 * 7919) % 100_000}` : `new-${i}`,
    }),
    append: (i: number) => ({ op: "append", path: "/tags", value: `new-${i}` }),
  };
  const kinds = Object.keys(ops) as (keyof typeof ops)[];
  const mixes: [string, (i: number) => Record<string, unknown>][] = [
    ...kinds.map((k) => [k, ops[k]] as [string, (i: number) => Record<string, unknown>]),
    ["mixed", (i) => ops[kinds[i % kinds.length]!](i)],
  ];
  try {
    for (const [mix, make] of mixes) {
      await restore();
      const t0 = performance.now();
      const r = await payloadOf(patcher, "state_patch", {
        handle,
        ops: Array.from({ length: 1000 }, (_, i) => make(i)),
      });
      const took = performance.now() - t0;
      const applied = r.ok === true && Number(r.version) === version + 1;
      if (r.ok === true) version = Number(r.version);
      ctx.record({
        part,
        name: `1,000 ${mix} ops on a state of ~940 KB`,
        expected: `applied in one call, answered within ${HUGE_PATCH_BOUND_MS} ms`,
        tries: 1,
        held: applied && took <= HUGE_PATCH_BOUND_MS ? 1 : 0,
        observed: `${
          r.ok === true ? `version ${String(r.version)}` : JSON.stringify(r).slice(0, 200)
        }, ${round(took)} ms`,
      });
    }

    // Refusals: each a structured error, answered promptly, with nothing applied.
    const refusals: [string, unknown[], Record<string, unknown>][] = [
      [
        "1,001 ops (one over the limit)",
        Array.from({ length: 1001 }, (_, i) => ops.set_key(i)),
        { code: "patch_error", reason: "too_many_ops", limit: 1000, count: 1001 },
      ],
      [
        "1,000 ops whose last one appends to an object",
        [...Array.from({ length: 999 }, (_, i) => ops.set_key(i)), {
          op: "append",
          path: "notes",
          value: 1,
        }],
        { code: "patch_error", reason: "not_a_list", op_index: 999 },
      ],
      [
        "an increment past 2^53 − 1",
        [
          { op: "increment", path: "stats", key: "n", by: Number.MAX_SAFE_INTEGER },
          { op: "increment", path: "stats", key: "n", by: 1 },
        ],
        { code: "patch_error", reason: "out_of_range", op_index: 1 },
      ],
      [
        "1,000 add_to_set ops of 3.5 KB each (a request of ~3.6 MB)",
        Array.from({ length: 1000 }, (_, i) => ({
          op: "add_to_set",
          path: "tags",
          value: `${i}-`.padEnd(3500, "x"),
        })),
        { code: "state_too_large" },
      ],
    ];
    for (const [name, list, want] of refusals) {
      const before = version;
      const t0 = performance.now();
      const r = await payloadOf(patcher, "state_patch", { handle, ops: list });
      const took = performance.now() - t0;
      const error = (r.error ?? {}) as Record<string, unknown>;
      const after = await payloadOf(patcher, "state_load", { handle });
      const matches = r.ok === false &&
        Object.entries(want).every(([k, v]) => error[k] === v) &&
        typeof error.message === "string";
      ctx.record({
        part,
        name,
        expected: `${
          Object.entries(want).map(([k, v]) => `${k} ${String(v)}`).join(", ")
        }; nothing applied; answered within ${HUGE_PATCH_BOUND_MS} ms`,
        tries: 1,
        held: matches && after.version === before && took <= HUGE_PATCH_BOUND_MS ? 1 : 0,
        observed: `${JSON.stringify({ ...error, message: undefined }).slice(0, 200)}; version ${
          String(after.version)
        } (was ${before}); ${round(took)} ms`,
      });
    }
  } finally {
    running = false;
    await loads;
  }
  waits.sort((a, b) => a - b);
  const worst = waits.at(-1) ?? NaN;
  ctx.record({
    part,
    name: `another user's state_load while the patches run (${waits.length} loads)`,
    expected: `every load answered, each within ${HUGE_PATCH_BOUND_MS} ms`,
    tries: 1,
    held: loadFailures === 0 && waits.length > 0 && worst <= HUGE_PATCH_BOUND_MS ? 1 : 0,
    observed: `${loadFailures} failed; p50 ${round(quantile(waits, 0.5))} ms, p99 ${
      round(quantile(waits, 0.99))
    } ms, max ${round(worst)} ms`,
  });
}

function withoutKey(h: Record<string, string | Uint8Array>, key: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (k.toLowerCase() !== key && typeof v === "string") out[k] = v;
  }
  return out;
}

function freeLoopbackPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Status and whether the body holds a successful tool result. */
function parseResponseLoose(data: Uint8Array): { status: number | null; ok: boolean } {
  const text = new TextDecoder().decode(data);
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return {
    status: m ? Number(m[1]) : null,
    ok: text.includes('\\"ok\\":true') || text.includes('"ok":true'),
  };
}

// ---------------------------------------------------------------------------
// Tenant isolation: what one user can do to another through live updates,
// tokens and request shapes.

/** What the tenant-isolation parts need from {@link runAbuse}. */
interface TenantAbuse {
  server: ServerProcess;
  issuer: TestIssuer;
  /** The audience tokens must carry. */
  aud: string;
  /** The server's backend URL (for records only a backend can make). */
  backend: string;
  repeat: number;
  /** Listen streams the flooding user opens at once. */
  listenFlood: number;
  /** The owner's client, token and one of its handles. */
  owner: Client;
  ownerToken: string;
  known: string;
  /** The captured mint request of the owner. */
  mintReq: Captured;
  /** A connected 2026-07-28 client of user `sub` (closed at the end of the run). */
  connect: (sub: string) => Promise<Client>;
  record: (c: AbuseCheck) => void;
  /** After a part: nothing minted in the owner's bucket, the server healthy. */
  after: (part: string) => Promise<void>;
}

/**
 * Another user's handle through `subscriptions/listen` spelled every way the
 * JSON-RPC parser reads the same: escaped method names, a byte order mark,
 * batches, the 100-resource limit; and two users' handles of one name.
 */
async function listenOwnershipAbuse(ctx: TenantAbuse): Promise<void> {
  const part = "listen ownership";
  const uri = `mcpstate://state/${ctx.known}`;
  const mallory = await ctx.issuer.token({ sub: "mallory-listen", aud: ctx.aud });
  const plain = listenBody([uri]);
  const legacy = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "subscriptions/listen",
    params: { notifications: { resourceSubscriptions: [uri] } },
  });
  const many = listenBody(Array.from({ length: 101 }, () => uri));
  const escaped = (body: string) => body.replace("/listen", "\\/listen");
  const cases: [string, string, string, number][] = [
    ["the owner's handle, plain", mallory, plain, -32002],
    ["method spelled subscriptions\\/listen", mallory, escaped(plain), -32002],
    [
      "method spelled \\u0073ubscriptions/listen",
      mallory,
      plain.replace('"subscriptions', '"\\u0073ubscriptions'),
      -32002,
    ],
    ["a body starting with a byte order mark", mallory, `\uFEFF${plain}`, -32002],
    ["a BOM and an escaped method", mallory, `\uFEFF${escaped(plain)}`, -32002],
    [
      "the method key twice",
      mallory,
      plain.replace('"method":', '"method":"tools/list","method":'),
      -32002,
    ],
    ["in a 2025-era JSON-RPC batch", mallory, `[${legacy}]`, -32600],
    ["in a batch behind a BOM, method escaped", mallory, `\uFEFF[${escaped(legacy)}]`, -32600],
    ["101 resources, method escaped (the owner's own)", ctx.ownerToken, escaped(many), -32602],
    ["101 resources behind a BOM (the owner's own)", ctx.ownerToken, `\uFEFF${many}`, -32602],
  ];
  for (const [name, token, body, code] of cases) {
    await tryRepeatedly(ctx, {
      part,
      name,
      expected: `a JSON-RPC error ${code}, never a stream`,
    }, async () => {
      // A batch goes as a 2025-era client sends it: without the 2026-07-28 headers.
      const batch = code === -32600;
      const headers = mcpHeaders(token, batch ? undefined : "subscriptions/listen");
      const r = await post(ctx.server.url, headers, body, 3000);
      r.close();
      return [
        r.acknowledged ? `${r.status} subscribed` : `${r.status} ${r.error?.code}`,
        !r.acknowledged && r.error?.code === code,
      ];
    });
  }
  {
    // The same byte order mark from the owner on its own handle is served: one parser for both.
    const headers = mcpHeaders(ctx.ownerToken, "subscriptions/listen");
    const r = await post(ctx.server.url, headers, `\uFEFF${plain}`, 3000);
    r.close();
    ctx.record({
      part,
      name: "the owner's own handle behind a BOM",
      expected: "acknowledged: the check reads the body exactly as the SDK does",
      tries: 1,
      held: r.acknowledged ? 1 : 0,
      observed: `${r.status} ${r.acknowledged ? "acknowledged" : r.text.slice(0, 120)}`,
    });
  }
  {
    // Handles are per user: two users may hold the same name (an import, a chosen name).
    const handle = "twin_gauntlet";
    const users = ["twin-a", "twin-b"];
    await sameHandleFor(ctx.backend, users.map((sub) => `${ctx.issuer.issuer}#${sub}`), handle);
    const writer = await ctx.connect("twin-a");
    const twin = `mcpstate://state/${handle}`;
    const tokens = await Promise.all(users.map((sub) => ctx.issuer.token({ sub, aud: ctx.aud })));
    await tryRepeatedly(ctx, {
      part,
      name: "two users' handles of one name, both subscribed; one is changed",
      expected: "only its owner hears the update",
    }, async () => {
      const [a, b] = await Promise.all(
        tokens.map((t) =>
          post(ctx.server.url, mcpHeaders(t, "subscriptions/listen"), listenBody([twin]))
        ),
      ) as [Posted, Posted];
      const heard = Promise.all([a.updated(twin, 5000), b.updated(twin, 1000)]);
      await payloadOf(writer, "state_patch", {
        handle,
        ops: [{ op: "increment", path: "", key: "n" }],
      });
      const [ha, hb] = await heard;
      a.close();
      b.close();
      return [`owner ${ha ? "heard" : "missed"}, other ${hb ? "heard" : "silent"}`, ha && !hb];
    });
  }
  await ctx.after(part);
}

/**
 * One user opens `listenFlood` listen streams at once (the issue's 1,030):
 * the per-user limit holds them to 16, another user still subscribes and
 * hears its updates, and closing the streams frees their slots.
 */
async function listenFloodAbuse(ctx: TenantAbuse): Promise<void> {
  const part = "many listen streams";
  const cap = DEFAULT_MAX_LISTEN_STREAMS_PER_USER;
  const flooder = await ctx.connect("mallory-flood");
  const handle = String(
    (await payloadOf(flooder, "state_save", { kind: "flood", state: {} })).handle,
  );
  const token = await ctx.issuer.token({ sub: "mallory-flood", aud: ctx.aud });
  const body = listenBody([`mcpstate://state/${handle}`]);
  const flood = async (n: number) => {
    const t0 = performance.now();
    const streams = await Promise.all(
      Array.from(
        { length: n },
        () => post(ctx.server.url, mcpHeaders(token, "subscriptions/listen"), body, 15_000),
      ),
    );
    const acked = streams.filter((a) => a.acknowledged).length;
    const refused =
      streams.filter((a) =>
        (a.error?.data as { limit?: unknown } | undefined)?.limit === "max-listen-streams-per-user"
      ).length;
    const close = () => streams.forEach((s) => s.close());
    return { acked, refused, other: n - acked - refused, ms: performance.now() - t0, close };
  };
  const f = await flood(ctx.listenFlood);
  try {
    ctx.record({
      part,
      name: `one user opens ${ctx.listenFlood.toLocaleString("en-US")} listen streams at once`,
      expected: `${cap} acknowledged, every other one refused naming --max-listen-streams-per-user`,
      tries: ctx.listenFlood,
      held: f.acked === cap && f.other === 0 ? f.acked + f.refused : Math.min(f.acked, cap),
      observed:
        `${f.acked} acknowledged, ${f.refused} refused by the per-user limit, ${f.other} other, in ${
          round(f.ms)
        } ms`,
    });

    const uri = `mcpstate://state/${ctx.known}`;
    await tryRepeatedly(ctx, {
      part,
      name: "another user, while the flooder holds its streams",
      expected: "subscribes and hears its update",
    }, async (i) => {
      const headers = mcpHeaders(ctx.ownerToken, "subscriptions/listen");
      const own = await post(ctx.server.url, headers, listenBody([uri]));
      try {
        if (!own.acknowledged) {
          return [`refused: ${String(own.error?.message).slice(0, 80)}`, false];
        }
        const heard = own.updated(uri, 5000);
        await payloadOf(ctx.owner, "state_patch", {
          handle: ctx.known,
          ops: [{ op: "set_key", path: "", key: "flood", value: i }],
        });
        return (await heard)
          ? ["subscribed, heard", true]
          : ["subscribed, missed the update", false];
      } finally {
        own.close();
      }
    });
  } finally {
    f.close();
  }
  // Closed streams free their slots: the flooder gets its full share again.
  let again = await flood(cap);
  for (const deadline = Date.now() + 10_000; again.acked < cap && Date.now() < deadline;) {
    again.close();
    await sleep(200);
    again = await flood(cap);
  }
  again.close();
  ctx.record({
    part,
    name: `after closing them, the same user opens ${cap} again`,
    expected: `all ${cap} acknowledged within 10 s (closing frees the slots)`,
    tries: cap,
    held: again.acked,
    observed: `${again.acked} acknowledged, ${again.refused} refused`,
  });
  await ctx.after(part);
}

/** Tokens whose `sub` is not a non-empty string of at most 1,024 characters. */
async function oddSubjectAbuse(ctx: TenantAbuse): Promise<void> {
  const part = "odd JWT subjects";
  for (const [name, sub] of oddSubjects("owner")) {
    await tryRepeatedly(ctx, {
      part,
      name: `sub ${name}`,
      expected: "401 invalid_token, never 500 and never another user's bucket",
    }, async () => {
      const token = await ctx.issuer.token({ sub, aud: ctx.aud } as unknown as JWTPayload);
      const res = await fetch(ctx.server.url, {
        method: "POST",
        headers: { ...ctx.mintReq.headers, authorization: `Bearer ${token}` },
        body: ctx.mintReq.body,
      });
      await res.body?.cancel();
      const challenge = res.headers.get("www-authenticate") ?? "";
      return [String(res.status), res.status === 401 && /^Bearer /.test(challenge)];
    });
  }
  await ctx.after(part);
}

/** Request JSON nested 10,000 and 100,000 levels deep, where a walker might recurse. */
async function deepNestingAbuse(ctx: TenantAbuse): Promise<void> {
  const part = "deep nesting";
  const lists = (n: number) => "[".repeat(n) + "]".repeat(n);
  const objects = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
  const meta = JSON.stringify(MODERN_META);
  const request = (method: string, params: string) =>
    `{"jsonrpc":"2.0","id":1,"method":"${method}","params":${params}}`;
  const call = (tool: string, args: string) =>
    request("tools/call", `{"_meta":${meta},"name":"${tool}","arguments":${args}}`);
  // [what, Mcp-Method (and Mcp-Name), body, the JSON-RPC error code it must get]
  const cases: [string, string[], string, number | undefined][] = [];
  for (const n of [10_000, 100_000]) {
    const at = n.toLocaleString("en-US");
    const listen = ["subscriptions/listen"];
    cases.push(
      [
        `a subscribed URI of ${at} nested lists`,
        listen,
        listenBody(["X"]).replace('"X"', lists(n)),
        -32602,
      ],
      [
        `resourceSubscriptions an object ${at} deep`,
        listen,
        request(
          "subscriptions/listen",
          `{"_meta":${meta},"notifications":{"resourceSubscriptions":${objects(n)}}}`,
        ),
        -32602,
      ],
      [
        `a tool argument ${at} lists deep`,
        ["tools/call", "state_list"],
        call("state_list", `{"x":${lists(n)}}`),
        undefined,
      ],
      [
        `a state ${at} objects deep`,
        ["tools/call", "state_save"],
        call("state_save", `{"kind":"deep","state":${objects(n)}}`),
        undefined,
      ],
      [
        `_meta ${at} lists deep`,
        ["tools/list"],
        request("tools/list", `{"_meta":{"x":${lists(n)},${meta.slice(1)}}`),
        undefined,
      ],
      [`a batch of one ${at}-deep list`, [], `[${lists(n)}]`, undefined],
    );
  }
  for (const [name, [method, tool], body, code] of cases) {
    await tryRepeatedly(ctx, {
      part,
      name,
      expected: code === undefined
        ? "a JSON-RPC error or a tool result, never a 500"
        : `a JSON-RPC error ${code}, never a 500`,
    }, async () => {
      const headers = {
        ...mcpHeaders(ctx.ownerToken, method),
        ...(tool ? { "mcp-name": tool } : {}),
      };
      const r = await post(ctx.server.url, headers, body);
      r.close();
      const answered = r.status !== null && r.status < 500 &&
        (r.error !== undefined || /"result"/.test(r.text));
      return [
        `${r.status}${r.error ? ` ${r.error.code}` : ""}`,
        answered && (code === undefined || r.error?.code === code),
      ];
    });
  }
  const overflowed = /Maximum call stack/.test(ctx.server.stderr());
  ctx.record({
    part,
    name: "the server's log afterwards",
    expected: "no stack overflow",
    tries: 1,
    held: overflowed ? 0 : 1,
    observed: overflowed ? "Maximum call stack size exceeded" : "none",
  });
  await ctx.after(part);
}

/**
 * Tries one abuse `ctx.repeat` times and records how often it held: each
 * attempt says what it saw and whether that was the proper answer.
 */
async function tryRepeatedly(
  ctx: TenantAbuse,
  check: Pick<AbuseCheck, "part" | "name" | "expected">,
  attempt: (i: number) => Promise<[seen: string, held: boolean]>,
): Promise<void> {
  let held = 0;
  const seen: string[] = [];
  for (let i = 0; i < ctx.repeat; i++) {
    const [what, ok] = await attempt(i);
    seen.push(what);
    if (ok) held++;
  }
  ctx.record({ ...check, tries: ctx.repeat, held, observed: tally(seen) });
}

/** `"a ×3, b ×1"`. */
function tally(list: string[]): string {
  const counts = new Map<string, number>();
  for (const s of list) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts].map(([s, n]) => `${s} ×${n}`).join(", ");
}
