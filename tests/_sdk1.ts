/**
 * Clients of SDK 1.x (`@modelcontextprotocol/sdk`, which speaks 2025-11-25)
 * beside the v2 client, for the tests that run one scenario with each.
 *
 * @module
 */

import { Client as Sdk1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as Sdk1StdioTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport as Sdk1HttpTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { cleanEnv, SERVE } from "./_server_harness.ts";
import type { ToolCaller } from "./_tool_calls.ts";

/** The SDK 1.x client's name in its client info. */
export const SDK1_NAME = "sdk1-client";

/** A connected client of either SDK. */
export interface AnyClient extends ToolCaller {
  /** `tools/list`. */
  listTools(): Promise<{ tools: { name: string; outputSchema?: unknown }[] }>;
  /** Closes the client (over stdio, and with it the server's stdin). */
  close(): Promise<void>;
}

/**
 * An SDK 1.x client over stdio to its own `mcpstate serve` process.
 *
 * @param env Extra environment (`MCPSTATE_*`).
 * @param args Extra `serve` arguments.
 */
export async function sdk1Stdio(
  env: Record<string, string>,
  args: string[] = [],
): Promise<AnyClient> {
  const client = new Sdk1Client({ name: SDK1_NAME, version: "1.0.0" });
  await client.connect(
    new Sdk1StdioTransport({
      command: Deno.execPath(),
      args: [...SERVE, ...args],
      env: cleanEnv(env),
      stderr: "ignore",
    }),
  );
  return client;
}

/**
 * An SDK 1.x client over HTTP.
 *
 * @param url The `/mcp` URL.
 * @param headers Headers on every request (`Authorization`, `User-Agent`).
 */
export async function sdk1Http(
  url: URL,
  headers: Record<string, string> = {},
): Promise<AnyClient> {
  const client = new Sdk1Client({ name: SDK1_NAME, version: "1.0.0" });
  await client.connect(new Sdk1HttpTransport(url, { requestInit: { headers } }));
  return client;
}

/**
 * Runs `scenario` as a step for each client, closing the client after it.
 *
 * @param clients Each client's label, how to connect it, and what the
 *   scenario needs to know of it.
 */
export async function eachClient<T>(
  t: Deno.TestContext,
  clients: [label: string, connect: () => Promise<AnyClient>, about: T][],
  scenario: (t: Deno.TestContext, client: AnyClient, about: T) => Promise<void>,
): Promise<void> {
  for (const [label, connect, about] of clients) {
    await t.step(label, async (t) => {
      const client = await connect();
      try {
        await scenario(t, client, about);
      } finally {
        await client.close();
      }
    });
  }
}
