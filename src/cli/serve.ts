/**
 * `mcpstate serve`: runs the MCP server from command-line flags and their
 * `MCPSTATE_*` variables until stdin closes (stdio) or SIGINT/SIGTERM
 * arrives. The CLI loads this module only for `serve`, so that the other
 * commands never load the MCP SDK.
 *
 * Exit codes: 0 after a clean stop, 1 when the backend can't be opened or
 * the server can't start, 2 for a configuration mistake (one line on stderr).
 *
 * @module
 */

import { McpStateError, redact } from "../errors.ts";
import {
  createJwtVerifier,
  type MetricsServing,
  serveMetrics,
  serveStateHttp,
  serveStateStdio,
  type StateServing,
  Telemetry,
  writerLabel,
} from "../server/mod.ts";
import type { HandleStore } from "../store.ts";
import { openServedStore } from "../server/_open_store.ts";
import { checkedEncryption } from "./_keys.ts";
import { UsageError } from "./_command.ts";
import { ConfigError, parseServeArgs, type ServeConfig, USAGE } from "./serve_config.ts";
import { type Kind, kindRules } from "../kinds.ts";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * Runs `mcpstate serve` with its arguments until the server stops.
 *
 * @param args The arguments after `serve`.
 * @returns The exit code.
 */
export async function serve(args: string[]): Promise<number> {
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
  let kinds: readonly Kind<unknown, unknown>[] = [];
  if (config.kinds !== undefined) {
    try {
      kinds = await loadKinds(config.kinds);
    } catch (e) {
      console.error(
        `mcpstate serve: --kinds (MCPSTATE_KINDS) ${config.kinds}: ${
          redact(e instanceof Error ? e.message : String(e))
        }`,
      );
      return 2;
    }
  }
  // Metrics when asked for; traces when Deno exports them (OTEL_DENO=true).
  const telemetry = Telemetry.create({ metrics: config.metrics !== undefined });
  let store: HandleStore;
  try {
    store = await openStore(config, telemetry);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`mcpstate serve: ${e.message}`);
      return 2;
    }
    const msg = e instanceof McpStateError || e instanceof Error ? e.message : String(e);
    console.error(`mcpstate serve: could not open the backend: ${redact(msg)}`);
    return e instanceof McpStateError && e.code === "invalid_argument" ? 2 : 1;
  }
  let metrics: MetricsServing | undefined;
  try {
    if (config.metrics && telemetry?.metrics) {
      const { host, port } = config.metrics;
      try {
        metrics = serveMetrics(telemetry.metrics, {
          hostname: host,
          port,
          onListen: (addr) => console.error(`mcpstate: metrics on ${urlOf(addr)}/metrics`),
        });
      } catch (e) {
        console.error(
          `mcpstate serve: could not listen for metrics on ${host}:${port}: ${
            e instanceof Error ? e.message : String(e)
          }`,
        );
        return 1;
      }
    }
    return config.transport === "stdio"
      ? await untilStopped(serveStateStdio(store, {
        user: config.user,
        ...toolOptions(config, kinds, telemetry),
      }))
      : await runHttp(store, config, telemetry, kinds);
  } finally {
    await metrics?.close();
    await store.close().catch(() => {});
  }
}

/**
 * Opens the store of `--backend` with the configured size cap, quotas and
 * encryption keys (`MCPSTATE_ENCRYPTION_KEYS`, `--encryption-keys-file`),
 * its backend instrumented when metrics or traces are on.
 */
async function openStore(
  config: ServeConfig,
  telemetry: Telemetry | undefined,
): Promise<HandleStore> {
  const encryption = await checkedEncryption();
  return await openServedStore(config.backend, {
    ...(encryption === undefined ? {} : { encryption }),
    ...(config.maxStateBytes === undefined ? {} : { maxStateBytes: config.maxStateBytes }),
    ...(config.quotas === undefined ? {} : { quotas: config.quotas }),
  }, telemetry);
}

/** The options both transports take: the tools, their limits, the writer label, telemetry. */
function toolOptions(
  config: ServeConfig,
  kinds: readonly Kind<unknown, unknown>[],
  telemetry: Telemetry | undefined,
) {
  return {
    writer: writerLabel(config.writer),
    leaseSeconds: config.leaseSeconds,
    maxReadBytes: config.maxReadBytes,
    ...(config.tools ? { tools: config.tools } : {}),
    ...(kinds.length > 0 ? { kinds } : {}),
    maxListenStreams: config.maxListenStreams,
    maxListenStreamsPerUser: config.maxListenStreamsPerUser,
    maxWatchesPerUser: config.maxWatchesPerUser,
    telemetry,
  };
}

/** `http://host:port` of a listener, an IPv6 host in brackets. */
function urlOf({ hostname, port }: Deno.NetAddr): string {
  return `http://${hostname.includes(":") ? `[${hostname}]` : hostname}:${port}`;
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

/** Serves until the server ends by itself or a signal arrives, then stops it: exit code 0. */
async function untilStopped(serving: StateServing): Promise<number> {
  const signals = stopSignal();
  try {
    await Promise.race([serving.finished, signals.stopped]);
  } finally {
    signals.dispose();
    await serving.close();
  }
  return 0;
}

/**
 * Loads the typed kinds of `--kinds`: the `kinds` export of the module at
 * `path` (relative to the working directory), checked as a server checks them.
 */
async function loadKinds(path: string): Promise<Kind<unknown, unknown>[]> {
  const url = pathToFileURL(resolve(path));
  const mod = await import(url.href) as { kinds?: unknown };
  if (!Array.isArray(mod.kinds) || mod.kinds.length === 0) {
    throw new Error(
      'the module has no "kinds" export listing at least one kind (export const kinds = [defineKind(...)]).',
    );
  }
  const kinds = mod.kinds as Kind<unknown, unknown>[];
  kindRules(kinds, false); // refuses a malformed or repeated kind here, before serving
  return kinds;
}

async function runHttp(
  store: HandleStore,
  config: ServeConfig,
  telemetry: Telemetry | undefined,
  kinds: readonly Kind<unknown, unknown>[],
): Promise<number> {
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
  let serving: StateServing;
  try {
    serving = serveStateHttp(store, {
      hostname: config.host,
      port: config.port,
      onListen: (addr) => {
        console.error(
          `mcpstate: listening on ${urlOf(addr)}/mcp (public URL ${config.publicUrl.href})`,
        );
      },
      publicUrl: config.publicUrl,
      ...(auth ? { auth } : { anonymous: true }),
      allowedHosts: config.allowedHosts,
      allowedOrigins: config.allowedOrigins,
      maxBodyBytes: config.maxBodyBytes,
      bodyTimeoutMs: config.bodyTimeoutMs,
      ...toolOptions(config, kinds, telemetry),
    });
  } catch (e) {
    console.error(
      `mcpstate serve: could not listen on ${config.host}:${config.port}: ${
        e instanceof Error ? e.message : String(e)
      }`,
    );
    return 1;
  }
  return await untilStopped(serving);
}
