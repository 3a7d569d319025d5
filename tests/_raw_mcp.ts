/**
 * One raw 2026-07-28 request to an HTTP handler in the same process (no
 * socket): what a client puts on the wire, and the exact JSON the server
 * writes back, for measuring bytes and for benchmarks.
 *
 * @module
 */

import { MODERN_META } from "./_tenants.ts";

/**
 * POSTs a JSON-RPC request of `method` to `fetch` as a 2026-07-28 client does.
 *
 * @param fetch The handler's `fetch` (an anonymous one: no token is sent).
 * @param method The JSON-RPC method (`tools/list`, `tools/call`).
 * @param params Its params; `_meta` with the protocol version is added.
 * @param name The `Mcp-Name` header of a `tools/call` (the tool).
 * @returns The HTTP status and the response's text.
 */
export async function rawRequest(
  fetch: (request: Request) => Promise<Response>,
  method: string,
  params: Record<string, unknown> = {},
  name?: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(
    new Request("http://127.0.0.1/mcp", {
      method: "POST",
      headers: {
        host: "127.0.0.1",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        ...(name === undefined ? {} : { "mcp-name": name }),
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method,
        params: { _meta: MODERN_META, ...params },
      }),
    }),
  );
  return { status: res.status, text: await res.text() };
}
