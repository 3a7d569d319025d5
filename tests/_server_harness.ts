/**
 * Test harness for the mcpstate server: real `deno run cli.ts serve`
 * processes, the official MCP client over real stdio pipes and real HTTP, and
 * a real OAuth issuer (key pairs, a JWKS on loopback, signed tokens).
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { DENO_FLAGS } from "../src/cli/permissions.ts";
import { exportJWK, exportSPKI, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";

/** Path of `cli.ts`. */
export const CLI = fileURLToPath(new URL("../cli.ts", import.meta.url));

/** `deno` arguments that run `mcpstate serve` with exactly the program's permissions. */
export const SERVE = ["run", ...DENO_FLAGS, CLI, "serve"];

/** The protocol eras the tests speak. */
export type Era = "2026-07-28" | "2025-11-25";

/** Both eras. */
export const ERAS: readonly Era[] = ["2026-07-28", "2025-11-25"];

/** A free loopback TCP port. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The parent environment without `MCPSTATE_*`, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!k.startsWith("MCPSTATE_")) env[k] = v;
  }
  return { ...env, ...extra };
}

/** A new MCP client for an era. */
export function newClient(era: Era, name = "test-client"): Client {
  return new Client(
    { name, version: "1.0.0" },
    era === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
  );
}

/** A client connected over stdio to its own `mcpstate serve` process. */
export interface StdioSession extends AsyncDisposable {
  /** The connected client. */
  client: Client;
  /** Everything the server printed on stderr so far. */
  stderr(): string;
  /** Closes the client (and with it the server's stdin). */
  close(): Promise<void>;
}

/**
 * Spawns `mcpstate serve` (stdio) and connects the official client to it.
 *
 * @param era The protocol era to speak.
 * @param env Extra environment (`MCPSTATE_*`).
 * @param args Extra `serve` arguments.
 * @param clientName The client's name in its client info.
 */
export async function stdioSession(
  era: Era,
  env: Record<string, string> = {},
  args: string[] = [],
  clientName = "test-client",
): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: [...SERVE, ...args],
    env: cleanEnv(env),
    stderr: "pipe",
  });
  let err = "";
  transport.stderr?.on("data", (chunk: Uint8Array | string) => {
    err += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
  });
  const client = newClient(era, clientName);
  await client.connect(transport);
  const close = async () => {
    await client.close();
  };
  return { client, stderr: () => err, close, [Symbol.asyncDispose]: close };
}

/** A running HTTP server process. */
export interface HttpServer extends AsyncDisposable {
  /** Its port. */
  port: number;
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  /** `http://127.0.0.1:<port>/mcp`. */
  url: URL;
  /** Everything it printed on stderr so far. */
  stderr(): string;
  /** SIGTERM, then waits for the exit status. */
  stop(): Promise<Deno.CommandStatus>;
}

/**
 * Spawns `mcpstate serve --transport http --port <free>` with `args` and waits
 * until `/healthz` answers.
 *
 * @param args Extra `serve` arguments.
 * @param env Extra environment.
 */
export async function startHttpServer(
  args: string[],
  env: Record<string, string> = {},
): Promise<HttpServer> {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: [...SERVE, "--transport", "http", "--port", String(port), ...args],
    env: cleanEnv(env),
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let err = "";
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) err += dec.decode(chunk, { stream: true });
  })();
  const origin = `http://127.0.0.1:${port}`;
  let status: Deno.CommandStatus | undefined;
  child.status.then((s) => status = s);
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (status) {
      await pump;
      throw new Error(`The server exited (${status.code}) before listening:\n${err}`);
    }
    try {
      const res = await fetch(`${origin}/healthz`);
      await res.body?.cancel();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`The server did not answer /healthz in 30 s:\n${err}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  let stopped: Promise<Deno.CommandStatus> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      const s = await child.status;
      await pump;
      return s;
    })();
    return stopped;
  };
  return {
    port,
    origin,
    url: new URL(`${origin}/mcp`),
    stderr: () => err,
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}

/**
 * Connects the official client to an HTTP server.
 *
 * @param url The `/mcp` URL.
 * @param era The protocol era.
 * @param token A bearer token, if any.
 */
export async function httpClient(url: URL, era: Era, token?: string): Promise<Client> {
  const client = newClient(era);
  const transport = new StreamableHTTPClientTransport(
    url,
    token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {},
  );
  await client.connect(transport);
  return client;
}

/**
 * What the tool helpers need of a client: the v2 `Client` and SDK 1.x's
 * `Client` (`@modelcontextprotocol/sdk`) alike.
 */
export interface ToolCaller {
  /** `tools/call`. */
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>;
}

/** One tool call's outcome. */
export interface Outcome {
  /** The payload the model sees: the text block's JSON (for a success, also `structuredContent`). */
  payload: Record<string, unknown>;
  /** `isError`. */
  isError: boolean;
}

/**
 * The payload a tool result carries for the model: its first text block,
 * parsed; `undefined` when there is none or it is not a JSON object.
 *
 * @param res A `tools/call` result.
 * @returns The payload.
 */
export function payloadOf(res: unknown): Record<string, unknown> | undefined {
  const content = (res as { content?: { type?: string; text?: unknown }[] } | undefined)?.content;
  const text = Array.isArray(content) ? content[0]?.text : undefined;
  if (typeof text !== "string") return undefined;
  try {
    const payload = JSON.parse(text);
    return typeof payload === "object" && payload !== null && !Array.isArray(payload)
      ? payload
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks the shape every tool result must have and returns what the model
 * sees: one text block holding the whole payload as JSON, `ok` the opposite
 * of `isError`; a success also as `structuredContent` (the same object), a
 * failure never as `structuredContent` (the output schemas describe
 * successes, and SDK 1.x clients check it even on errors), its `error` with
 * a `code` and a `message`.
 *
 * @param name The tool, for messages.
 * @param res The `tools/call` result.
 * @returns The payload and `isError`.
 */
export function outcomeOf(name: string, res: unknown): Outcome {
  const r = res as { content?: unknown; structuredContent?: unknown; isError?: unknown };
  const content = r.content as { type: string; text?: string }[];
  assert.equal(content?.length, 1, `${name}: exactly one content block`);
  assert.equal(content[0]?.type, "text");
  const payload = payloadOf(res);
  assert.ok(payload, `${name}: the text block is a JSON object: ${content[0]?.text}`);
  const isError = r.isError === true;
  assert.equal(payload.ok, !isError, `${name}: ok is the opposite of isError`);
  if (isError) {
    assert.equal(r.structuredContent, undefined, `${name}: a failure has no structuredContent`);
    const error = payload.error as Record<string, unknown>;
    assert.equal(typeof error?.code, "string", `${name}: error.code`);
    assert.equal(typeof error?.message, "string", `${name}: error.message`);
  } else {
    assert.deepEqual(r.structuredContent, payload, `${name}: text equals structuredContent`);
  }
  return { payload, isError };
}

/**
 * Calls a tool and checks its result's shape (see {@link outcomeOf}).
 *
 * @param client A connected client.
 * @param name The tool.
 * @param args Its arguments.
 */
export async function call(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown>,
): Promise<Outcome> {
  return outcomeOf(name, await client.callTool({ name, arguments: args }));
}

/** Calls a tool that must succeed and returns its payload. */
export async function ok(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const r = await call(client, name, args);
  assert.equal(r.isError, false, `${name} failed: ${JSON.stringify(r.payload)}`);
  return r.payload;
}

/** Calls a tool that must fail and returns its `error` object. */
export async function fails(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown>,
  code?: string,
): Promise<Record<string, unknown>> {
  const r = await call(client, name, args);
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.payload)}`);
  const error = r.payload.error as Record<string, unknown>;
  assert.equal(typeof error.message, "string");
  if (code) assert.equal(error.code, code, JSON.stringify(error));
  return error;
}

// ---------------------------------------------------------------------------
// A real OAuth issuer on loopback.

interface IssuerKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

/** A test authorization server: keys, a JWKS endpoint and token minting. */
export interface TestIssuer extends AsyncDisposable {
  /** The issuer identifier (`http://127.0.0.1:<port>`). */
  issuer: string;
  /** The JWKS URL. */
  jwksUrl: string;
  /** The `serve` flags that trust this issuer: `--auth-issuer … --auth-jwks-url …`. */
  serveArgs: string[];
  /** How many times the JWKS was fetched. */
  jwksFetches(): number;
  /** Signs a token with the current RS256 key (or `opts.key`). */
  token(
    claims: JWTPayload & { sub?: string },
    opts?: {
      alg?: "RS256" | "ES256";
      kid?: string;
      expiresIn?: string | number;
      iss?: string;
      noExp?: boolean;
    },
  ): Promise<string>;
  /** Signs with a fresh key the JWKS does not publish. */
  tokenWithUnknownKey(claims: JWTPayload): Promise<string>;
  /** An unsigned `alg: none` token. */
  unsignedToken(claims: JWTPayload): string;
  /** HS256 with the RSA public key's PEM as the HMAC secret (the key-confusion attack). */
  hs256WithPublicKey(claims: JWTPayload): Promise<string>;
  /** Replaces the RS256 key with a new one (new kid); the JWKS then publishes only the new keys. */
  rotate(): Promise<string>;
  /** Stops the JWKS server. */
  close(): Promise<void>;
}

async function newKey(alg: "RS256" | "ES256", kid: string): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
  return { kid, alg, privateKey, publicKey, jwk };
}

function b64url(obj: unknown): string {
  return btoa(JSON.stringify(obj)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

/**
 * Starts a test issuer: one RSA and one EC key, the JWKS and OpenID metadata
 * served on a loopback port.
 */
export async function startIssuer(): Promise<TestIssuer> {
  let rsa = await newKey("RS256", "rsa-1");
  const ec = await newKey("ES256", "ec-1");
  let rotations = 1;
  let fetches = 0;
  const ac = new AbortController();
  const port = freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const jwksUrl = `${issuer}/jwks.json`;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port, signal: ac.signal, onListen() {} },
    (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/jwks.json") {
        fetches++;
        return Response.json({ keys: [rsa.jwk, ec.jwk] });
      }
      if (path === "/.well-known/openid-configuration") {
        return Response.json({ issuer, jwks_uri: jwksUrl });
      }
      return new Response("not found", { status: 404 });
    },
  );
  const now = () => Math.floor(Date.now() / 1000);
  const sign = async (
    key: IssuerKey,
    claims: JWTPayload,
    iss = issuer,
    expiresIn: string | number | null = "1h",
  ) => {
    const jwt = new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT" })
      .setIssuedAt().setIssuer(iss);
    if (claims.exp === undefined && expiresIn !== null) jwt.setExpirationTime(expiresIn);
    return await jwt.sign(key.privateKey);
  };
  const close = async () => {
    ac.abort();
    await server.finished;
  };
  return {
    issuer,
    jwksUrl,
    serveArgs: ["--auth-issuer", issuer, "--auth-jwks-url", jwksUrl],
    jwksFetches: () => fetches,
    token: (claims, opts = {}) => {
      const key = opts.alg === "ES256" ? ec : rsa;
      return sign(
        opts.kid ? { ...key, kid: opts.kid } : key,
        claims,
        opts.iss ?? issuer,
        opts.noExp ? null : opts.expiresIn ?? "1h",
      );
    },
    tokenWithUnknownKey: async (claims) => sign(await newKey("RS256", "unknown-kid"), claims),
    unsignedToken: (claims) =>
      `${b64url({ alg: "none", typ: "JWT" })}.${
        b64url({ iss: issuer, iat: now(), exp: now() + 3600, ...claims })
      }.`,
    hs256WithPublicKey: async (claims) => {
      const pem = await exportSPKI(rsa.publicKey);
      return await new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: rsa.kid })
        .setIssuedAt().setIssuer(issuer).setExpirationTime("1h")
        .sign(new TextEncoder().encode(pem));
    },
    rotate: async () => {
      rotations++;
      rsa = await newKey("RS256", `rsa-${rotations}`);
      return rsa.kid;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
