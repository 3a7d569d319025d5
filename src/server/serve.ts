/**
 * Serving the mcpstate server on a transport: stdio, for the one local
 * client that started the process, or Streamable HTTP on `Deno.serve`. Each
 * takes typed options and returns a handle that says when serving ended and
 * stops it. Reading flags and environment variables, exit codes and signals
 * belong to the caller (`mcpstate serve` is one).
 *
 * @module
 */

import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { serveStdio as sdkServeStdio } from "@modelcontextprotocol/server/stdio";
import { redact } from "../errors.ts";
import type { HandleStore } from "./types.ts";
import { createHttpHandler, type HttpHandlerOptions } from "./http.ts";
import { writerLabel } from "./identity.ts";
import {
  DEFAULT_MAX_LISTEN_STREAMS,
  DEFAULT_MAX_LISTEN_STREAMS_PER_USER,
  DEFAULT_MAX_WATCHES_PER_USER,
} from "./live.ts";
import { createStateServer } from "./server.ts";
import { checkReadAndTools } from "./tools.ts";
import { StdioLive } from "./stdio.ts";
import { once } from "./_once.ts";

/** Default TCP port of {@link serveStateHttp} (and of `mcpstate serve --transport http`). */
export const DEFAULT_PORT = 8787;

/** Default request body limit of the HTTP transport, in bytes (4 MiB). */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** A server at work: when it ends, and how to stop it. */
export interface StateServing {
  /** Resolves when serving has ended (stdin closed, the listener stopped, or {@link StateServing.close}). */
  finished: Promise<void>;
  /** Stops serving and waits until it has stopped; the store stays open. Idempotent. */
  close(): Promise<void>;
}

/**
 * Options of {@link serveStateStdio}: the user, and the writer, lease,
 * live-update limits and telemetry as {@link createHttpHandler} takes them
 * (the writer defaults to {@link writerLabel}`(undefined)`: `<hostname>/<client name>`).
 */
export interface StdioServeOptions extends
  Pick<
    HttpHandlerOptions,
    | "writer"
    | "leaseSeconds"
    | "maxReadBytes"
    | "tools"
    | "kinds"
    | "maxListenStreams"
    | "maxListenStreamsPerUser"
    | "maxWatchesPerUser"
    | "telemetry"
  > {
  /** The user of every call: the one person at the other end of stdin. */
  user: string;
  /** Reports a failure of the connection. Default: a line on stderr, credentials redacted. */
  onError?: (error: Error) => void;
}

/**
 * Serves the mcpstate tools and resources over this process's stdin and
 * stdout, to MCP 2026-07-28 clients and to 2025-era ones (whose
 * subscriptions the connection serves), until stdin closes.
 *
 * @param store The open store; the caller keeps it and closes it after serving.
 * @param options The user, the writer label, the lease, the live-update limits.
 * @returns The serving handle.
 *
 * @example Serve stdio until stdin closes
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { serveStateStdio } from "@mcpstate/core/server";
 *
 * await using store = await HandleStore.fromUrl();
 * const serving = serveStateStdio(store, { user: "local" });
 * await serving.finished;
 * ```
 */
export function serveStateStdio(store: HandleStore, options: StdioServeOptions): StateServing {
  const { maxReadBytes, tools } = checkReadAndTools(options);
  const maxStreams = options.maxListenStreams ?? DEFAULT_MAX_LISTEN_STREAMS;
  const maxStreamsPerUser = options.maxListenStreamsPerUser ?? DEFAULT_MAX_LISTEN_STREAMS_PER_USER;
  const live = new StdioLive(store, options.user, {
    maxStreams,
    maxStreamsPerUser,
    maxWatchesPerUser: options.maxWatchesPerUser ?? DEFAULT_MAX_WATCHES_PER_USER,
  }, options.telemetry);
  const writer = options.writer ?? writerLabel(undefined);
  const report = options.onError ?? ((e: Error) => console.error(`mcpstate: ${redact(e.message)}`));
  const transport = live.wrap(new StdioServerTransport());
  const handle = sdkServeStdio(
    ({ era }) =>
      live.adopt(
        createStateServer(store, {
          user: () => options.user,
          writer,
          maxReadBytes,
          tools,
          ...(options.kinds ? { kinds: options.kinds } : {}),
          ...(options.leaseSeconds === undefined ? {} : { leaseSeconds: options.leaseSeconds }),
          ...(options.telemetry ? { telemetry: options.telemetry } : {}),
        }),
        era,
      ),
    {
      transport,
      // The connection's one user: StdioLive refuses past its limits first, naming them.
      maxSubscriptions: Math.min(maxStreams, maxStreamsPerUser),
      onerror: report,
    },
  );
  // The entry installs its onclose synchronously; chain ours to learn when stdin ends.
  const closed = Promise.withResolvers<void>();
  const entryOnClose = transport.onclose;
  transport.onclose = () => {
    entryOnClose?.();
    closed.resolve();
  };
  return {
    finished: closed.promise,
    close: once(async () => {
      live.close();
      await handle.close().catch(() => {});
    }),
  };
}

/** Options of {@link serveStateHttp}: the handler's, and where to listen. */
export interface HttpServeOptions extends HttpHandlerOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  hostname?: string;
  /** Port to listen on; 0 picks a free one. Default {@link DEFAULT_PORT}. */
  port?: number;
  /** Called once the listener is up, with its address. Default: nothing is printed. */
  onListen?: (addr: Deno.NetAddr) => void;
}

/** An HTTP server at work. */
export interface HttpServing extends StateServing {
  /** The address it listens on. */
  addr: Deno.NetAddr;
}

/**
 * Serves the mcpstate server over Streamable HTTP: {@link createHttpHandler}
 * on `Deno.serve` (`/mcp`, `/healthz`, the RFC 9728 metadata).
 *
 * @param store The open store; the caller keeps it and closes it after serving.
 * @param options Where to listen, and the handler's options (authentication is required: `auth` or `anonymous: true`).
 * @returns The serving handle, with the address.
 * @throws {Deno.errors.AddrInUse} (or another listen error) when the port cannot be had.
 *
 * @example Serve on a free port, then stop
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { serveStateHttp } from "@mcpstate/core/server";
 *
 * await using store = await HandleStore.fromUrl("memory://");
 * const serving = serveStateHttp(store, {
 *   port: 0,
 *   publicUrl: new URL("http://127.0.0.1/mcp"),
 *   anonymous: true,
 * });
 * const health = await fetch(`http://127.0.0.1:${serving.addr.port}/healthz`);
 * await health.body?.cancel();
 * await serving.close();
 * ```
 */
export function serveStateHttp(store: HandleStore, options: HttpServeOptions): HttpServing {
  const { hostname = "127.0.0.1", port = DEFAULT_PORT, onListen, ...handlerOptions } = options;
  const app = createHttpHandler(store, handlerOptions);
  const abort = new AbortController();
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve({
      hostname,
      port,
      signal: abort.signal,
      onListen: (addr) => onListen?.(addr),
    }, app.fetch);
  } catch (e) {
    void app.close().catch(() => {});
    throw e;
  }
  return {
    addr: server.addr,
    finished: server.finished,
    close: once(async () => {
      await app.close().catch(() => {});
      abort.abort();
      await server.finished.catch(() => {});
    }),
  };
}
