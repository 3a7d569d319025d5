/**
 * The mcpstate MCP server: tools that give any agent durable memory
 * across conversations, clients and devices, over stdio or Streamable HTTP,
 * speaking MCP 2026-07-28 and, statelessly, the 2025 revisions.
 *
 * `mcpstate serve` runs it ({@link serveFromArgs}); server authors add the
 * same tools to their own `McpServer` with {@link registerStateTools}.
 *
 * @example Adding mcpstate's tools to your own MCP server
 * ```ts
 * import { McpServer } from "@modelcontextprotocol/server";
 * import { HandleStore } from "@mcpstate/core";
 * import { registerStateTools, writerLabel } from "@mcpstate/core/server";
 *
 * const store = await HandleStore.fromUrl("memory://");
 * const server = new McpServer({ name: "my-server", version: "1.0.0" });
 * registerStateTools(server, store, {
 *   user: () => "local",
 *   writer: writerLabel(undefined),
 * });
 * await store.close();
 * ```
 *
 * @module
 */

import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { serveStdio as sdkServeStdio } from "@modelcontextprotocol/server/stdio";
import { McpStateError, redact } from "../errors.ts";
import { HandleStore } from "../store.ts";
import { createJwtVerifier } from "./auth.ts";
import { ConfigError, parseServeArgs, type ServeConfig, USAGE } from "./config.ts";
import { createHttpHandler } from "./http.ts";
import { writerLabel } from "./identity.ts";
import { StdioLive } from "./stdio.ts";
import { createStateServer } from "./server.ts";

export {
  ANONYMOUS_RANDOM_CHARS,
  DEFAULT_LEASE_SECONDS,
  failurePayload,
  registerStateTools,
  SERVER_VERSION,
  stateInstructions,
  type StateToolsOptions,
  type ToolRequest,
  type VerifiedToken,
} from "./tools.ts";
export { createStateServer, type StateServerOptions } from "./server.ts";
export { registerStateResources, RESOURCE_LIST_LIMIT } from "./resources.ts";
export {
  DEFAULT_MAX_LISTEN_STREAMS,
  DEFAULT_MAX_LISTEN_STREAMS_PER_USER,
  DEFAULT_MAX_WATCHES_PER_USER,
  handleOfUri,
  ListenLimitError,
  type ListenLimitName,
  type ListenLimits,
  LiveUpdates,
  READY_BOUND_MS,
  RESOURCE_PREFIX,
  resourceUri,
} from "./live.ts";
export {
  ANONYMOUS_USER,
  createHttpHandler,
  type HttpHandler,
  type HttpHandlerOptions,
} from "./http.ts";
export {
  ALLOWED_ALGORITHMS,
  createJwtVerifier,
  discoverJwksUrl,
  type JwtVerifierOptions,
  MAX_SUBJECT_LENGTH,
  protectedResourceMetadata,
  type TokenVerifier,
  userOfAuthInfo,
} from "./auth.ts";
export { machineName, writerLabel } from "./identity.ts";
export {
  type AuthConfig,
  ConfigError,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_PORT,
  parseServeArgs,
  type ServeConfig,
  USAGE,
} from "./config.ts";

/**
 * Runs `mcpstate serve` with command-line arguments (and `MCPSTATE_*`
 * variables) until the server stops: stdin closes (stdio), or SIGINT/SIGTERM.
 * A configuration mistake prints one line on stderr and returns 2.
 *
 * @param args The arguments after `serve`.
 * @returns The exit code: 0 after a clean stop, 1 when the backend can't be opened, 2 for bad flags.
 *
 * @example
 * ```ts ignore
 * import { serveFromArgs } from "@mcpstate/core/server";
 * Deno.exit(await serveFromArgs(["--transport", "http", "--allow-anonymous"]));
 * ```
 */
export async function serveFromArgs(args: string[]): Promise<number> {
  let config: ServeConfig | "help";
  try {
    config = parseServeArgs(args);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`mcpstate serve: ${e.message}`);
      return 2;
    }
    throw e;
  }
  if (config === "help") {
    console.log(USAGE);
    return 0;
  }
  let store: HandleStore;
  try {
    store = await HandleStore.fromUrl(
      config.backend,
      config.maxStateBytes === undefined ? {} : { maxStateBytes: config.maxStateBytes },
    );
  } catch (e) {
    const msg = e instanceof McpStateError || e instanceof Error ? e.message : String(e);
    console.error(`mcpstate serve: could not open the backend: ${redact(msg)}`);
    return e instanceof McpStateError && e.code === "invalid_argument" ? 2 : 1;
  }
  try {
    return config.transport === "stdio"
      ? await runStdio(store, config)
      : await runHttp(store, config);
  } finally {
    await store.close().catch(() => {});
  }
}

/** Resolves when SIGINT or SIGTERM arrives (where the platform has them). */
function stopSignal(): { stopped: Promise<string>; dispose: () => void } {
  const { promise, resolve } = Promise.withResolvers<string>();
  const added: [Deno.Signal, () => void][] = [];
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    const fn = () => resolve(sig);
    try {
      Deno.addSignalListener(sig, fn);
      added.push([sig, fn]);
    } catch {
      // not supported on this platform
    }
  }
  return {
    stopped: promise,
    dispose: () => {
      for (const [sig, fn] of added) Deno.removeSignalListener(sig, fn);
    },
  };
}

async function runStdio(store: HandleStore, config: ServeConfig): Promise<number> {
  const writer = writerLabel(config.writer);
  const live = new StdioLive(store, config.user, {
    maxStreams: config.maxListenStreams,
    maxStreamsPerUser: config.maxListenStreamsPerUser,
    maxWatchesPerUser: config.maxWatchesPerUser,
  });
  const transport = live.wrap(new StdioServerTransport());
  const handle = sdkServeStdio(
    ({ era }) =>
      live.adopt(
        createStateServer(store, {
          user: () => config.user,
          writer,
          leaseSeconds: config.leaseSeconds,
        }),
        era,
      ),
    {
      transport,
      // The connection's one user: StdioLive refuses past its limits first, naming them.
      maxSubscriptions: Math.min(config.maxListenStreams, config.maxListenStreamsPerUser),
      onerror: (e) => console.error(`mcpstate: ${redact(e.message)}`),
    },
  );
  // The entry installs its onclose synchronously; chain ours to learn when stdin ends.
  const closed = Promise.withResolvers<void>();
  const entryOnClose = transport.onclose;
  transport.onclose = () => {
    entryOnClose?.();
    closed.resolve();
  };
  const signals = stopSignal();
  try {
    await Promise.race([closed.promise, signals.stopped]);
  } finally {
    signals.dispose();
    live.close();
    await handle.close().catch(() => {});
  }
  return 0;
}

async function runHttp(store: HandleStore, config: ServeConfig): Promise<number> {
  let auth;
  if (config.auth) {
    try {
      const verifier = await createJwtVerifier({
        issuer: config.auth.issuer,
        audience: config.auth.audience,
        jwksUrl: config.auth.jwksUrl,
        jwksCooldownMs: config.auth.jwksCooldownMs,
      });
      auth = { verifier, issuer: config.auth.issuer };
    } catch (e) {
      console.error(`mcpstate serve: ${e instanceof Error ? e.message : String(e)}`);
      return 1;
    }
  } else {
    console.error(
      [
        "mcpstate: WARNING: --allow-anonymous: this server does NOT authenticate anyone.",
        "mcpstate: WARNING: every caller shares one bucket; a handle is the only secret that guards its state",
        "mcpstate: WARNING: (handles carry 130 random bits, state_list is disabled). Do not expose it to untrusted networks.",
      ].join("\n"),
    );
  }
  const app = createHttpHandler(store, {
    publicUrl: config.publicUrl,
    ...(auth ? { auth } : { anonymous: true }),
    allowedHosts: config.allowedHosts,
    allowedOrigins: config.allowedOrigins,
    maxBodyBytes: config.maxBodyBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    writer: writerLabel(config.writer),
    leaseSeconds: config.leaseSeconds,
    maxListenStreams: config.maxListenStreams,
    maxListenStreamsPerUser: config.maxListenStreamsPerUser,
    maxWatchesPerUser: config.maxWatchesPerUser,
  });
  const abort = new AbortController();
  const signals = stopSignal();
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({
      hostname: config.host,
      port: config.port,
      signal: abort.signal,
      onListen: ({ hostname, port }) => {
        const h = hostname.includes(":") ? `[${hostname}]` : hostname;
        console.error(
          `mcpstate: listening on http://${h}:${port}/mcp (public URL ${config.publicUrl.href})`,
        );
      },
    }, app.fetch);
  } catch (e) {
    signals.dispose();
    console.error(
      `mcpstate serve: could not listen on ${config.host}:${config.port}: ${
        e instanceof Error ? e.message : String(e)
      }`,
    );
    return 1;
  }
  try {
    await Promise.race([signals.stopped, server.finished]);
  } finally {
    signals.dispose();
    await app.close().catch(() => {});
    abort.abort();
    await server.finished.catch(() => {});
  }
  return 0;
}
