/**
 * Test harness for the mcpstate server: real `deno run cli.ts serve`
 * processes and the official MCP client over real stdio pipes and real HTTP.
 * The checks of every tool result are in `_tool_calls.ts`, the OAuth issuer
 * in `_issuer.ts`; both are re-exported here.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { DENO_FLAGS } from "../src/cli/permissions.ts";

// The tool-call checks and the issuer, for the callers that take everything from here.
export * from "./_tool_calls.ts";
export * from "./_issuer.ts";
import { startIssuer, type TestIssuer } from "./_issuer.ts";

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

/** How {@link spawnServe} wires a server process. */
export interface ServeProcessOptions {
  /** Extra environment (`MCPSTATE_*`), over the parent's without `MCPSTATE_*`. */
  env?: Record<string, string>;
  /** Its stdin: `piped` (the default) or `null`. */
  stdin?: "piped" | "null";
  /** Its stdout: `piped` (the default) or `null`. */
  stdout?: "piped" | "null";
}

/**
 * Spawns `mcpstate serve` with `args` in a clean environment; stderr is
 * piped.
 *
 * @param args Extra `serve` arguments.
 * @param options Its environment and streams.
 */
export function spawnServe(args: string[], options: ServeProcessOptions = {}): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [...SERVE, ...args],
    env: cleanEnv(options.env),
    clearEnv: true,
    stdin: options.stdin ?? "piped",
    stdout: options.stdout ?? "piped",
    stderr: "piped",
  }).spawn();
}

/** What a `mcpstate serve` run that ended printed. */
export interface ServeRun {
  /** Its exit code. */
  code: number;
  /** Its stdout, as text. */
  stdout: string;
  /** Its stderr, as text. */
  stderr: string;
}

/**
 * Runs `mcpstate serve` with `args` and no stdin to its end (a run that
 * fails at startup, or `--help`).
 *
 * @param args Extra `serve` arguments.
 * @param env Extra environment (`MCPSTATE_*`).
 */
export async function runServe(
  args: string[],
  env: Record<string, string> = {},
): Promise<ServeRun> {
  const out = await spawnServe(args, { env, stdin: "null" }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
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
  const child = spawnServe(["--transport", "http", "--port", String(port), ...args], {
    env,
    stdin: "null",
    stdout: "null",
  });
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

/** Closes `clients`, stops `server`, and asserts that it exited 0 (its stderr as the message). */
export async function closeAndStop(clients: { close(): Promise<void> }[], server: HttpServer) {
  for (const c of clients) await c.close();
  const status = await server.stop();
  assert.equal(status.code, 0, server.stderr());
}

/** An HTTP server on a SQLite file of its own that trusts an issuer of its own. */
export interface IssuedServer extends AsyncDisposable {
  /** The issuer the server trusts. */
  issuer: TestIssuer;
  /** The running server. */
  server: HttpServer;
  /** The server's backend URL (`sqlite:///<temp folder>/state.db`), to open beside it. */
  backend: string;
}

/**
 * Starts an issuer and an HTTP server that trusts it, on a SQLite file in a
 * new temporary folder; disposing stops both and removes the folder.
 *
 * @param args Extra `serve` arguments.
 */
export async function startIssuedServer(args: string[] = []): Promise<IssuedServer> {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  const issuer = await startIssuer();
  try {
    const server = await startHttpServer(["--backend", backend, ...issuer.serveArgs, ...args]);
    return {
      issuer,
      server,
      backend,
      [Symbol.asyncDispose]: async () => {
        await server.stop();
        await issuer.close();
        await Deno.remove(dir, { recursive: true });
      },
    };
  } catch (e) {
    await issuer.close();
    await Deno.remove(dir, { recursive: true });
    throw e;
  }
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
