/**
 * The Streamable HTTP face of the mcpstate server: `/mcp` through the SDK's
 * `createMcpHandler` (2026-07-28, and 2025-era clients statelessly), behind
 * Host/Origin checks, bearer authentication, a body size limit, `/healthz`
 * and the RFC 9728 metadata. Each body is parsed once, and the SDK serves
 * that parsed value: a `subscriptions/listen` request is checked against its
 * caller on exactly what is then served, bounded per user and in all
 * (`ListenLimits`), and served by an entry of the caller's own, so an update
 * reaches only the user whose handle changed.
 *
 * @module
 */

import {
  createMcpHandler,
  getOAuthProtectedResourceMetadataUrl,
  hostHeaderValidationResponse,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  type McpHandlerRequestOptions,
  type McpHttpHandler,
  type McpServerFactory,
  originValidationResponse,
  requireBearerAuth,
} from "@modelcontextprotocol/server";
import { redact, Unauthenticated } from "../errors.ts";
import type { HandleStore } from "./types.ts";
import { protectedResourceMetadata, type TokenVerifier, userOfAuthInfo } from "./auth.ts";
import {
  DEFAULT_MAX_LISTEN_STREAMS_PER_USER,
  handleOfUri,
  ListenLimitError,
  LiveUpdates,
} from "./live.ts";
import { checkReadAndTools } from "./tools.ts";
import { createStateServer } from "./server.ts";
import { SERVER_VERSION, type StateToolsOptions } from "./tools.ts";
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
  const { maxReadBytes, tools } = checkReadAndTools(options);
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
  const factory: McpServerFactory = ({ era }) =>
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
  const entry = (maxSubscriptions: number) =>
    createMcpHandler(factory, {
      legacy: "stateless",
      maxRequestBodySize: maxBody,
      maxSubscriptions,
      onerror: report,
    });
  // Every subscriptions/listen request is routed to an entry of its own
  // user's, never to this one: an entry delivers an update to each of its
  // streams that names the URI, and handles (so URIs) are per user.
  const mcp = entry(0);
  const perUserMax = options.maxListenStreamsPerUser ?? DEFAULT_MAX_LISTEN_STREAMS_PER_USER;
  const listeners = new Map<string, { mcp: McpHttpHandler; streams: number }>();
  // Open subscriptions/listen streams hear of changes made on any instance:
  // each subscribed handle is watched on the backend's change feed.
  const live = new LiveUpdates(
    store,
    (uri, who) => listeners.get(who)?.mcp.notify.resourceUpdated(uri),
    {
      ...(options.maxListenStreams === undefined ? {} : { maxStreams: options.maxListenStreams }),
      maxStreamsPerUser: perUserMax,
      ...(options.maxWatchesPerUser === undefined
        ? {}
        : { maxWatchesPerUser: options.maxWatchesPerUser }),
    },
    options.telemetry,
  );

  /** Serves a `subscriptions/listen` request of `who` once it passed every check. */
  const listen = async (
    request: Request,
    message: JsonRpcMessage,
    who: string | undefined,
    forward: McpHandlerRequestOptions,
  ): Promise<Response> => {
    const id = idOf(message);
    if (who === undefined) {
      return rpcAnswer(id, -32001, "Unauthenticated: send a valid bearer token.");
    }
    const handles = await checkListen(store, who, message);
    if (handles instanceof Response) return handles;
    const ended = new AbortController();
    request.signal.addEventListener("abort", () => ended.abort(), { once: true });
    let slot = listeners.get(who);
    if (!slot) listeners.set(who, slot = { mcp: entry(perUserMax), streams: 0 });
    const held = slot;
    held.streams++;
    ended.signal.addEventListener("abort", () => {
      if (--held.streams === 0 && listeners.get(who) === held) listeners.delete(who);
    }, { once: true });
    try {
      // The acknowledgement goes out only once every watch has its starting version.
      await live.follow(who, handles, ended.signal);
    } catch (e) {
      ended.abort();
      if (!(e instanceof ListenLimitError)) throw e;
      return rpcAnswer(id, e.code, e.message, { limit: e.limit, max: e.max });
    }
    const res = await held.mcp.fetch(request, forward);
    return untilClosed(res, ended);
  };

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
          return await listen(request, message, who, forward);
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
      const entries = [mcp, ...[...listeners.values()].map((l) => l.mcp)];
      listeners.clear();
      await Promise.all(entries.map((e) => e.close()));
    },
  };
}

/** A parsed JSON-RPC message, as far as this file reads one. */
type JsonRpcMessage = { method?: unknown; id?: unknown; params?: unknown };

/**
 * Parses a request body exactly as the SDK's entry would (its `TextDecoder`
 * drops one leading byte order mark, then `JSON.parse`), or `undefined` when
 * it is not JSON: the entry then finds no message in it either.
 */
function parseBody(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text.startsWith("\uFEFF") ? text.slice(1) : text) };
  } catch {
    return undefined;
  }
}

/** Whether a parsed message is a `subscriptions/listen` message (request or not). */
function isListen(message: unknown): message is JsonRpcMessage {
  return isObject(message) && message.method === "subscriptions/listen";
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The id to echo in an answer to `message`: its own when it is a string or number. */
function idOf(message: JsonRpcMessage): string | number | null {
  return typeof message.id === "string" || typeof message.id === "number" ? message.id : null;
}

/** A JSON-RPC error answer to a request, with HTTP status 200 as the SDK answers in-band refusals. */
function rpcAnswer(
  id: string | number | null,
  code: number,
  message: string,
  data?: Record<string, unknown>,
): Response {
  return Response.json({
    jsonrpc: "2.0",
    id,
    error: { code, message, ...(data === undefined ? {} : { data }) },
  });
}

/** What a non-string JSON value is, in a word, for a message: never the value itself. */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

/**
 * For a `subscriptions/listen` message: the handles it subscribes to, after
 * checking each is the caller's, or the refusal (naming the first entry that
 * is not a URI of one of the caller's handles). Untrusted entries are never
 * formatted whole: only strings, cut short, appear in a message.
 */
async function checkListen(
  store: HandleStore,
  user: string,
  message: JsonRpcMessage,
): Promise<string[] | Response> {
  const id = idOf(message);
  const filter = isObject(message.params) ? message.params.notifications : undefined;
  const uris = isObject(filter) ? filter.resourceSubscriptions : undefined;
  // No resource subscriptions: nothing of anyone's to check (the entry answers a bad filter).
  if (uris === undefined) return [];
  const hint = "Subscribe to mcpstate://state/{handle} URIs of your own handles (resources/list).";
  if (!Array.isArray(uris)) {
    return rpcAnswer(
      id,
      -32602,
      `Invalid params: notifications.resourceSubscriptions is ${
        kindOf(uris)
      }, not a list of URIs. ${hint}`,
    );
  }
  if (uris.length > MAX_LISTEN_URIS) {
    return rpcAnswer(
      id,
      -32602,
      `A subscription may name at most ${MAX_LISTEN_URIS} resources; open another for more.`,
    );
  }
  const handles: string[] = [];
  for (const [index, uri] of uris.entries()) {
    if (typeof uri !== "string") {
      return rpcAnswer(
        id,
        -32602,
        `Invalid params: notifications.resourceSubscriptions[${index}] is ${
          kindOf(uri)
        }, not a URI. ${hint}`,
        { index },
      );
    }
    const handle = handleOfUri(uri);
    let known = handle !== undefined;
    if (handle !== undefined) {
      try {
        await store.get(handle, { user });
      } catch {
        known = false;
      }
    }
    if (!known) {
      const shown = uri.slice(0, 300);
      return rpcAnswer(id, -32002, `Resource not found: ${shown}. ${hint}`, { uri: shown });
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
