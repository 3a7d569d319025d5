/**
 * The Streamable HTTP face of the mcpstate server: `/mcp` through the SDK's
 * `createMcpHandler` (2026-07-28, and 2025-era clients statelessly), behind
 * Host/Origin checks, bearer authentication, a body size limit, `/healthz`
 * and the RFC 9728 metadata. Each body is parsed once, and the SDK serves
 * that parsed value: a `subscriptions/listen` request is checked against its
 * caller on exactly what is then served, bounded per user and in all
 * (`ListenLimits`), and served by an entry of the caller's own, so an update
 * reaches only the user whose handle changed (`_http_listen.ts`; the body is
 * read within its limits by `_http_body.ts`).
 *
 * @module
 */

import {
  createMcpHandler,
  getOAuthProtectedResourceMetadataUrl,
  hostHeaderValidationResponse,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  type McpServerFactory,
  originValidationResponse,
  requireBearerAuth,
} from "@modelcontextprotocol/server";
import { redact, Unauthenticated } from "../errors.ts";
import type { HandleStore } from "./types.ts";
import { protectedResourceMetadata, type TokenVerifier, userOfAuthInfo } from "./auth.ts";
import { DEFAULT_MAX_LISTEN_STREAMS_PER_USER } from "./live.ts";
import { checkReadAndTools, SERVER_VERSION, type StateToolsOptions } from "./tools.ts";
import { createStateServer } from "./server.ts";
import { isListen, ListenRouter, parseBody } from "./_http_listen.ts";
import { readBody, rpcError, TOO_LARGE } from "./_http_body.ts";
import type { Telemetry } from "./telemetry.ts";

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
  /** The read budget of a call without `max_bytes`; 0: none. See `StateToolsOptions.maxReadBytes`. */
  maxReadBytes?: number;
  /** The tools to offer. See `StateToolsOptions.tools`. */
  tools?: readonly string[];
  /** Typed kinds to validate and offer. See `StateToolsOptions.kinds`. */
  kinds?: StateToolsOptions["kinds"];
  /** Open `subscriptions/listen` streams, all users together. Default 1,000. */
  maxListenStreams?: number;
  /** Open `subscriptions/listen` streams of one user. Default 16. */
  maxListenStreamsPerUser?: number;
  /** Distinct handles one user watches at once, over all their streams. Default 256. */
  maxWatchesPerUser?: number;
  /** Reports unexpected tool errors and rejected requests. Default: a line on stderr. */
  onError?: (error: unknown) => void;
  /** Metrics and traces of the tool calls and live updates (see `Telemetry`). Default none. */
  telemetry?: Telemetry | undefined;
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

  const factory = stateServerFactory(store, options, report);
  const entry = (maxSubscriptions: number) =>
    createMcpHandler(factory, {
      legacy: "stateless",
      maxRequestBodySize: maxBody,
      maxSubscriptions,
      onerror: report,
    });
  // Every subscriptions/listen request is routed to an entry of its own
  // user's (ListenRouter), never to this one.
  const mcp = entry(0);
  const listening = new ListenRouter(store, entry, {
    ...(options.maxListenStreams === undefined ? {} : { maxStreams: options.maxListenStreams }),
    maxStreamsPerUser: options.maxListenStreamsPerUser ?? DEFAULT_MAX_LISTEN_STREAMS_PER_USER,
    ...(options.maxWatchesPerUser === undefined
      ? {}
      : { maxWatchesPerUser: options.maxWatchesPerUser }),
  }, options.telemetry);

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
    if (metadataPaths.has(path) && auth) return metadata(request, publicUrl, auth.issuer);
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
      const read = await readBody(request, maxBody, bodyTimeoutMs);
      if (read === TOO_LARGE) return tooLarge();
      if (read instanceof Response) return read;
      // The text is valid UTF-8, re-encoded to the same bytes.
      request = new Request(request, { body: read });
      // The message is parsed here once, and the entry is handed this very
      // value: what is checked is exactly what is served.
      const parsed = parseBody(read);
      if (parsed !== undefined) {
        const message = parsed.value;
        if (Array.isArray(message) && message.some(isListen)) {
          return rpcError(
            400,
            -32600,
            "Invalid request: subscriptions/listen cannot be sent in a JSON-RPC batch; send it on its own.",
          );
        }
        const forward = { ...(authInfo ? { authInfo } : {}), parsedBody: message };
        if (isListen(message)) {
          const who = anonymous ? ANONYMOUS_USER : userOfAuthInfo(authInfo);
          return await listening.listen(request, message, who, forward);
        }
        return finish(await mcp.fetch(request, forward));
      }
    }
    return finish(await mcp.fetch(request, authInfo ? { authInfo } : undefined));
  };
  const finish = async (res: Response): Promise<Response> => {
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
      const rejected = (anyHost ? undefined : hostHeaderValidationResponse(request, hosts)) ??
        (anyOrigin ? undefined : originValidationResponse(request, origins));
      if (rejected) return rejected;
      const origin = request.headers.get("origin");
      if (origin && request.method === "OPTIONS") return preflight(request, origin);
      let res: Response;
      try {
        res = await serve(request, path);
      } catch (e) {
        report(e);
        res = jsonError(500, "Internal server error.");
      }
      return origin ? withCors(res, origin) : res;
    },
    close: async () => {
      await Promise.all([listening.close(), mcp.close()]);
    },
  };
}

/** The server of each exchange: the state server with the HTTP face's options. */
function stateServerFactory(
  store: HandleStore,
  options: HttpHandlerOptions,
  report: (error: unknown) => void,
): McpServerFactory {
  const anonymous = options.anonymous ?? false;
  const { maxReadBytes, tools } = checkReadAndTools(options);
  const user: StateToolsOptions["user"] = anonymous ? () => ANONYMOUS_USER : ({ authInfo }) => {
    const u = userOfAuthInfo(authInfo);
    if (u === undefined) throw new Unauthenticated();
    return u;
  };
  return ({ era }) =>
    createStateServer(store, {
      user,
      anonymous,
      maxReadBytes,
      tools,
      ...(options.kinds ? { kinds: options.kinds } : {}),
      // A 2025-era stateless exchange has no stream to deliver updates on.
      subscriptions: era === "modern",
      ...(options.writer ? { writer: options.writer } : {}),
      ...(options.leaseSeconds === undefined ? {} : { leaseSeconds: options.leaseSeconds }),
      ...(options.telemetry ? { telemetry: options.telemetry } : {}),
      onInternalError: (e, tool) => report(new Error(`${tool} failed: ${describe(e)}`)),
    });
}

/** The RFC 9728 metadata (GET and HEAD only). */
function metadata(request: Request, publicUrl: URL, issuer: string): Response {
  if (request.method !== "GET" && request.method !== "HEAD") {
    return jsonError(405, "Use GET for the protected-resource metadata.", {
      Allow: "GET, HEAD",
    });
  }
  return Response.json(protectedResourceMetadata(publicUrl, issuer), {
    headers: { "Access-Control-Allow-Origin": "*", "Cache-Control": "max-age=3600" },
  });
}

/** The answer to a CORS preflight from an allowed origin. */
function preflight(request: Request, origin: string): Response {
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

/** `res` with the CORS headers of an answer to an allowed origin. */
function withCors(res: Response, origin: string): Response {
  const out = new Response(res.body, res);
  out.headers.set("Access-Control-Allow-Origin", origin);
  out.headers.set("Access-Control-Expose-Headers", CORS_EXPOSE);
  out.headers.append("Vary", "Origin");
  return out;
}

function jsonError(status: number, message: string, headers: HeadersInit = {}): Response {
  return Response.json({ error: message }, { status, headers });
}

function describe(e: unknown): string {
  return redact(e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e));
}
