/**
 * The Streamable HTTP face of the mcpstate server: `/mcp` through the SDK's
 * `createMcpHandler` (2026-07-28, and 2025-era clients statelessly), behind
 * Host/Origin checks, bearer authentication, a body size limit, `/healthz`
 * and the RFC 9728 metadata.
 *
 * @module
 */

import {
  createMcpHandler,
  getOAuthProtectedResourceMetadataUrl,
  hostHeaderValidationResponse,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
  requireBearerAuth,
} from "@modelcontextprotocol/server";
import { redact, Unauthenticated } from "../errors.ts";
import type { HandleStore } from "../store.ts";
import { protectedResourceMetadata, type TokenVerifier, userOfAuthInfo } from "./auth.ts";
import { handleOfUri, LiveUpdates } from "./live.ts";
import { createStateServer } from "./server.ts";
import { SERVER_VERSION, type StateToolsOptions } from "./tools.ts";

/** The bucket every caller shares on a server run with `--allow-anonymous`. */
export const ANONYMOUS_USER = "anonymous";

/** Options of {@link createHttpHandler}. */
export interface HttpHandlerOptions {
  /** The public URL of the MCP endpoint (OAuth resource identifier; its hostname is allowed in Host/Origin). */
  publicUrl: URL;
  /** Bearer authentication: the token verifier and the issuer advertised in the metadata. */
  auth?: { verifier: TokenVerifier; issuer: string } | undefined;
  /** No authentication: every caller shares one bucket. Exactly one of `auth` and `anonymous`. */
  anonymous?: boolean;
  /** Hostnames accepted in `Host` besides the loopback names and the public URL's (`"*"`: any). */
  allowedHosts?: string[];
  /** Hostnames accepted in `Origin` besides the loopback names and the public URL's (`"*"`: any). */
  allowedOrigins?: string[];
  /** Largest request body in bytes. Default 4 MiB. */
  maxBodyBytes?: number;
  /**
   * Ms a request body may take to arrive in full; a body that trickles in or
   * stalls gets 408 instead of holding its handler forever. Default 30,000.
   */
  bodyTimeoutMs?: number;
  /** Writer resolver (see `writerLabel`). */
  writer?: StateToolsOptions["writer"];
  /** Seconds of the lease a write takes implicitly; 0 turns it off. See `StateToolsOptions.leaseSeconds`. */
  leaseSeconds?: number;
  /** Reports unexpected tool errors and rejected requests. Default: a line on stderr. */
  onError?: (error: unknown) => void;
}

/** A fetch handler serving mcpstate over HTTP. */
export interface HttpHandler {
  /** Serves one request. */
  fetch: (request: Request) => Promise<Response>;
  /** Aborts in-flight exchanges; the store stays open. */
  close: () => Promise<void>;
}

const WELL_KNOWN = "/.well-known/oauth-protected-resource";
const CORS_EXPOSE = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version";

/**
 * Creates the HTTP handler of the mcpstate server, for `Deno.serve` or any
 * fetch-shaped host. It fails closed: pass either `auth` or `anonymous: true`.
 *
 * @param store The open store (one per process); the caller closes it.
 * @param options Public URL, authentication, allowed hosts and origins, limits.
 * @returns `{ fetch, close }`.
 *
 * @example Serving with bearer tokens from your own `Deno.serve`
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { createHttpHandler, createJwtVerifier } from "@mcpstate/core/server";
 *
 * const store = await HandleStore.fromUrl();
 * const publicUrl = new URL("https://state.example.com/mcp");
 * const issuer = "https://auth.example.com/";
 * const verifier = await createJwtVerifier({ issuer, audience: publicUrl.href });
 * const app = createHttpHandler(store, { publicUrl, auth: { verifier, issuer } });
 * Deno.serve({ port: 8787 }, app.fetch);
 * ```
 */
export function createHttpHandler(store: HandleStore, options: HttpHandlerOptions): HttpHandler {
  const { auth, publicUrl } = options;
  const anonymous = options.anonymous ?? false;
  if (!auth === !anonymous) {
    throw new TypeError(
      "createHttpHandler needs exactly one of auth (verify bearer tokens) and anonymous: true (one shared bucket).",
    );
  }
  const report = options.onError ??
    ((e: unknown) =>
      console.error(`mcpstate: ${redact(e instanceof Error ? e.message : String(e))}`));
  const publicHost = publicUrl.hostname;
  const hosts = [...localhostAllowedHostnames(), publicHost, ...(options.allowedHosts ?? [])];
  const origins = [...localhostAllowedOrigins(), publicHost, ...(options.allowedOrigins ?? [])];
  const anyHost = hosts.includes("*");
  const anyOrigin = origins.includes("*");
  const maxBody = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const bodyTimeoutMs = options.bodyTimeoutMs ?? 30_000;

  const metadataUrl = getOAuthProtectedResourceMetadataUrl(publicUrl);
  const metadataPaths = new Set([
    WELL_KNOWN,
    `${WELL_KNOWN}/mcp`,
    new URL(metadataUrl).pathname,
  ]);
  const gate = auth
    ? requireBearerAuth({ verifier: auth.verifier, resourceMetadataUrl: metadataUrl })
    : undefined;

  const user: StateToolsOptions["user"] = anonymous ? () => ANONYMOUS_USER : ({ authInfo }) => {
    const u = userOfAuthInfo(authInfo);
    if (u === undefined) throw new Unauthenticated();
    return u;
  };
  const mcp = createMcpHandler(
    ({ era }) =>
      createStateServer(store, {
        user,
        anonymous,
        // A 2025-era stateless exchange has no stream to deliver updates on.
        subscriptions: era === "modern",
        ...(options.writer ? { writer: options.writer } : {}),
        ...(options.leaseSeconds === undefined ? {} : { leaseSeconds: options.leaseSeconds }),
        onInternalError: (e, tool) => report(new Error(`${tool} failed: ${describe(e)}`)),
      }),
    { legacy: "stateless", maxRequestBodySize: maxBody, onerror: report },
  );
  // Open subscriptions/listen streams hear of changes made on any instance:
  // each subscribed handle is watched on the backend's change feed.
  const live = new LiveUpdates(store, (uri) => mcp.notify.resourceUpdated(uri));

  const tooLarge = () =>
    rpcError(
      413,
      -32000,
      `Request body too large: this server accepts at most ${maxBody} bytes per request (--max-body-bytes). States are capped at ${store.maxStateBytes} bytes; store less or split it across several handles.`,
    );

  const serve = async (request: Request, path: string): Promise<Response> => {
    if (path === "/healthz" && (request.method === "GET" || request.method === "HEAD")) {
      return Response.json({ ok: true, name: "mcpstate", version: SERVER_VERSION });
    }
    if (metadataPaths.has(path) && auth) {
      if (request.method !== "GET" && request.method !== "HEAD") {
        return jsonError(405, "Use GET for the protected-resource metadata.", {
          Allow: "GET, HEAD",
        });
      }
      return Response.json(protectedResourceMetadata(publicUrl, auth.issuer), {
        headers: { "Access-Control-Allow-Origin": "*", "Cache-Control": "max-age=3600" },
      });
    }
    if (path !== "/mcp") {
      return jsonError(404, `Not found: the MCP endpoint is /mcp.`);
    }
    let authInfo;
    if (gate) {
      const verdict = await gate(request);
      if (verdict instanceof Response) return verdict;
      authInfo = verdict;
    }
    if (request.method === "POST" && request.body) {
      // A declared length over the limit is refused at once, before any body.
      const declared = Number(request.headers.get("content-length") ?? NaN);
      if (declared > maxBody) {
        request.body.cancel().catch(() => {});
        return tooLarge();
      }
      const read = await readBody(request, maxBody, bodyTimeoutMs);
      if (read === TOO_LARGE) return tooLarge();
      if (read instanceof Response) return read;
      // The text is valid UTF-8, re-encoded to the same bytes.
      request = new Request(request, { body: read });
      if (read.includes("subscriptions/listen")) {
        const who = anonymous ? ANONYMOUS_USER : userOfAuthInfo(authInfo);
        const listen = who === undefined ? undefined : await checkListen(store, who, read);
        if (listen instanceof Response) return listen;
        if (listen && who !== undefined) {
          const ended = new AbortController();
          request.signal.addEventListener("abort", () => ended.abort(), { once: true });
          // The acknowledgement goes out only once every watch has its starting version.
          await live.follow(who, listen, ended.signal);
          const res = await mcp.fetch(request, authInfo ? { authInfo } : undefined);
          return untilClosed(res, ended);
        }
      }
    }
    const res = await mcp.fetch(request, authInfo ? { authInfo } : undefined);
    if (res.status === 413) {
      await res.body?.cancel();
      return tooLarge();
    }
    return res;
  };

  return {
    fetch: async (request: Request): Promise<Response> => {
      const path = new URL(request.url).pathname.replace(/(.)\/$/, "$1");
      if (path === "/healthz") return await serve(request, path);
      if (!anyHost) {
        const rejected = hostHeaderValidationResponse(request, hosts);
        if (rejected) return rejected;
      }
      const origin = request.headers.get("origin");
      if (!anyOrigin) {
        const rejected = originValidationResponse(request, origins);
        if (rejected) return rejected;
      }
      if (origin && request.method === "OPTIONS") {
        return new Response(null, {
          status: 204,
          headers: {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS",
            "Access-Control-Allow-Headers": request.headers.get("access-control-request-headers") ??
              "Authorization, Content-Type, Mcp-Protocol-Version",
            "Access-Control-Max-Age": "600",
            Vary: "Origin",
          },
        });
      }
      let res: Response;
      try {
        res = await serve(request, path);
      } catch (e) {
        report(e);
        res = jsonError(500, "Internal server error.");
      }
      if (origin) {
        res = new Response(res.body, res);
        res.headers.set("Access-Control-Allow-Origin", origin);
        res.headers.set("Access-Control-Expose-Headers", CORS_EXPOSE);
        res.headers.append("Vary", "Origin");
      }
      return res;
    },
    close: async () => {
      live.close();
      await mcp.close();
    },
  };
}

/**
 * For a `subscriptions/listen` request: the handles it subscribes to, after
 * checking each is the caller's (a refusal names the first one that is not);
 * `undefined` for any other body.
 */
async function checkListen(
  store: HandleStore,
  user: string,
  body: string,
): Promise<string[] | Response | undefined> {
  let msg: unknown;
  try {
    msg = JSON.parse(body);
  } catch {
    return undefined;
  }
  const m = msg as { method?: unknown; id?: unknown; params?: { notifications?: unknown } };
  if (typeof msg !== "object" || msg === null || m.method !== "subscriptions/listen") {
    return undefined;
  }
  const uris = (m.params?.notifications as { resourceSubscriptions?: unknown } | undefined)
    ?.resourceSubscriptions;
  if (!Array.isArray(uris)) return undefined;
  const id = typeof m.id === "string" || typeof m.id === "number" ? m.id : null;
  if (uris.length > MAX_LISTEN_URIS) {
    return Response.json({
      jsonrpc: "2.0",
      id,
      error: {
        code: -32602,
        message:
          `A subscription may name at most ${MAX_LISTEN_URIS} resources; open another for more.`,
      },
    });
  }
  const handles: string[] = [];
  for (const uri of uris) {
    const handle = typeof uri === "string" ? handleOfUri(uri) : undefined;
    let known = handle !== undefined;
    if (handle !== undefined) {
      try {
        await store.get(handle, { user });
      } catch {
        known = false;
      }
    }
    if (!known) {
      return Response.json({
        jsonrpc: "2.0",
        id,
        error: {
          code: -32002,
          message: `Resource not found: ${
            String(uri).slice(0, 300)
          }. Subscribe to mcpstate://state/{handle} URIs of your own handles (resources/list).`,
          data: { uri: String(uri).slice(0, 300) },
        },
      });
    }
    handles.push(handle!);
  }
  return handles;
}

/** Passes `res` through, aborting `ended` when its body ends or the client goes away. */
function untilClosed(res: Response, ended: AbortController): Response {
  if (!res.body) {
    ended.abort();
    return res;
  }
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          ended.abort();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (e) {
        ended.abort();
        controller.error(e);
      }
    },
    cancel(reason) {
      ended.abort();
      return reader.cancel(reason);
    },
  });
  return new Response(body, res);
}

const TOO_LARGE: unique symbol = Symbol("too large");

/** Resources one `subscriptions/listen` request may name (each is watched on the backend). */
const MAX_LISTEN_URIS = 100;

/** A JSON-RPC error answer with no id. */
function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status });
}

/**
 * Reads a request body within `timeoutMs` and `maxBytes`, and decodes it as
 * strict UTF-8 (bytes that are not UTF-8 are a parse error, never replaced by
 * U+FFFD and stored). Answers 408 or 400 as a `Response`, or
 * {@link TOO_LARGE}, instead.
 */
async function readBody(
  request: Request,
  maxBytes: number,
  timeoutMs: number,
): Promise<string | Response | typeof TOO_LARGE> {
  const reader = request.body!.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((r) => {
      timer = setTimeout(() => r("late"), Math.max(0, deadline - Date.now()));
    });
    const next = await Promise.race([reader.read(), late]).finally(() => clearTimeout(timer));
    if (next === "late") {
      reader.cancel().catch(() => {});
      return rpcError(
        408,
        -32000,
        `The request body did not arrive within ${timeoutMs} ms (--body-timeout-ms); send it again.`,
      );
    }
    if (next.done) break;
    size += next.value.byteLength;
    if (size > maxBytes) {
      reader.cancel().catch(() => {});
      return TOO_LARGE;
    }
    chunks.push(next.value);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return rpcError(400, -32700, "Parse error: the request body is not valid UTF-8.");
  }
}

function jsonError(status: number, message: string, headers: HeadersInit = {}): Response {
  return Response.json({ error: message }, { status, headers });
}

function describe(e: unknown): string {
  return redact(e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e));
}
