/**
 * The configuration of `mcpstate serve`: flags, their `MCPSTATE_*`
 * environment twins, defaults and validation.
 *
 * @module
 */

import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { DEFAULT_URL } from "../url.ts";
import {
  DEFAULT_MAX_LISTEN_STREAMS,
  DEFAULT_MAX_LISTEN_STREAMS_PER_USER,
  DEFAULT_MAX_WATCHES_PER_USER,
} from "../server/live.ts";
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT } from "../server/serve.ts";
import { DEFAULT_MAX_READ_BYTES, DEFAULT_TOOLS, resolveToolNames } from "../server/tools.ts";
import { MIN_READ_BYTES } from "../outline.ts";
import type { QuotaOptions } from "../types.ts";

/** Default JWKS refetch cooldown, in ms: at most one fetch per this interval for unknown key ids. */
export const DEFAULT_JWKS_COOLDOWN_MS = 30_000;

/** Bearer-token verification settings. */
export interface AuthConfig {
  /** The authorization server's issuer identifier (the token's `iss`). */
  issuer: string;
  /** The audience a token must carry (`aud`); default the server's resource URL. */
  audience: string;
  /** Where the issuer's signing keys are published; `undefined`: discovered from the issuer's metadata. */
  jwksUrl: string | undefined;
  /** Minimum ms between two JWKS fetches triggered by an unknown key id. */
  jwksCooldownMs: number;
}

/** The resolved configuration of `mcpstate serve`. */
export interface ServeConfig {
  /** Backend URL. */
  backend: string;
  /** Transport. */
  transport: "stdio" | "http";
  /** Interface to listen on (HTTP). */
  host: string;
  /** Port to listen on (HTTP); 0 picks a free one. */
  port: number;
  /** The public URL of the `/mcp` endpoint (the OAuth resource identifier). */
  publicUrl: URL;
  /** Whether anyone may call without a token, sharing one bucket (HTTP). */
  allowAnonymous: boolean;
  /** Bearer-token verification (HTTP), or `undefined` when not configured. */
  auth: AuthConfig | undefined;
  /** Extra hostnames accepted in the `Host` header (`*`: any). */
  allowedHosts: string[];
  /** Extra hostnames accepted in the `Origin` header (`*`: any). */
  allowedOrigins: string[];
  /** Request body limit in bytes (HTTP). */
  maxBodyBytes: number;
  /** HTTP: ms a request body may take to arrive in full before the answer is 408. */
  bodyTimeoutMs: number;
  /** State size cap in bytes; `undefined`: the store's default. */
  maxStateBytes: number | undefined;
  /** The user of every call (stdio). */
  user: string;
  /** A fixed writer label, or `undefined` for `<hostname>[/<client name>]`. */
  writer: string | undefined;
  /** Seconds of the advisory lease a write takes for its writer; 0: none. */
  leaseSeconds: number;
  /** The read budget of a call that passes no `max_bytes`, in bytes; 0: no limit. */
  maxReadBytes: number;
  /** The tools to offer (full names), or `undefined` for the default set. */
  tools: string[] | undefined;
  /** Path of a module whose `kinds` export lists the typed kinds, or `undefined`. */
  kinds: string | undefined;
  /** Open `subscriptions/listen` streams, all users together. */
  maxListenStreams: number;
  /** Open `subscriptions/listen` streams of one user. */
  maxListenStreamsPerUser: number;
  /** Distinct handles one user watches at once, over all their streams. */
  maxWatchesPerUser: number;
  /** Where Prometheus metrics are served (`GET /metrics`), or `undefined`: no metrics. */
  metrics: MetricsConfig | undefined;
  /** Per-user quotas, or `undefined` for none (the default). */
  quotas: QuotaOptions | undefined;
}

/** The metrics listener of `mcpstate serve`: its own, apart from the MCP endpoint. */
export interface MetricsConfig {
  /** Interface to listen on. */
  host: string;
  /** Port to listen on; 0 picks a free one. */
  port: number;
}

/** A configuration mistake: printed as one line, exit code 2. */
export class ConfigError extends Error {
  /**
   * Creates a configuration error.
   *
   * @param message What is wrong and what to pass instead.
   */
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** The usage text of `mcpstate serve --help`. */
export const USAGE = `Usage: mcpstate serve [options]

Runs the mcpstate MCP server: durable, user-keyed state for agents.

Options (each has an environment twin; a flag wins over its variable):
  --backend URL            Storage backend                      MCPSTATE_BACKEND
                           (default ${DEFAULT_URL})
  --transport stdio|http   Transport (default stdio)            MCPSTATE_TRANSPORT
  --user NAME              User of every stdio call             MCPSTATE_USER
                           (default "local")
  --writer LABEL           Writer label recorded on writes      MCPSTATE_WRITER
                           (default <hostname>/<client name>)
  --lease-seconds N        Lease a write takes for its writer   MCPSTATE_LEASE_SECONDS
                           (default 60; 0 off)
  --max-state-bytes N      State size cap (default 1048576)     MCPSTATE_MAX_STATE_BYTES
  --max-read-bytes N       Read budget of a call without        MCPSTATE_MAX_READ_BYTES
                           max_bytes: state_load, state_list
                           pages, stale_write's current state
                           (default ${DEFAULT_MAX_READ_BYTES}; 0 no limit)
  --tools LIST             Tools to offer: a comma list, with   MCPSTATE_TOOLS
                           or without state_ (default:
${wrapNames(DEFAULT_TOOLS)})
  --kinds PATH             A module whose "kinds" export lists   MCPSTATE_KINDS
                           typed kinds (defineKind): their
                           states are validated, their JSON
                           Schemas offered to the model

Per-user quotas (default: none; over one, a write is quota_exceeded):
  --quota-handles N        Live handles per user                MCPSTATE_QUOTA_HANDLES
  --quota-bytes N          Bytes of state per user              MCPSTATE_QUOTA_BYTES
  --quota-writes-per-minute N                                   MCPSTATE_QUOTA_WRITES_PER_MINUTE
                           Writes per user per minute

Live updates (subscriptions/listen):
  --max-listen-streams N   Open streams, all users together     MCPSTATE_MAX_LISTEN_STREAMS
                           (default ${DEFAULT_MAX_LISTEN_STREAMS})
  --max-listen-streams-per-user N                               MCPSTATE_MAX_LISTEN_STREAMS_PER_USER
                           Open streams of one user (default ${DEFAULT_MAX_LISTEN_STREAMS_PER_USER})
  --max-watches-per-user N Handles one user watches at once     MCPSTATE_MAX_WATCHES_PER_USER
                           (default ${DEFAULT_MAX_WATCHES_PER_USER})

HTTP transport:
  --host HOST              Interface to listen on               MCPSTATE_HOST
                           (default 127.0.0.1)
  --port PORT              Port (default ${DEFAULT_PORT})                 MCPSTATE_PORT
  --public-url URL         Public URL of the /mcp endpoint      MCPSTATE_PUBLIC_URL
                           (default http://HOST:PORT/mcp)
  --auth-issuer URL        OAuth issuer whose JWTs are accepted MCPSTATE_AUTH_ISSUER
  --auth-audience AUD      Required token audience              MCPSTATE_AUTH_AUDIENCE
                           (default the public URL)
  --auth-jwks-url URL      Issuer's JWKS                        MCPSTATE_AUTH_JWKS_URL
                           (default: from the issuer's metadata)
  --auth-jwks-cooldown-ms N  Min ms between JWKS refetches      MCPSTATE_AUTH_JWKS_COOLDOWN_MS
                           for unknown key ids (default ${DEFAULT_JWKS_COOLDOWN_MS})
  --allow-anonymous        No authentication: one shared bucket MCPSTATE_ALLOW_ANONYMOUS
                           where handles are the only secret
  --allowed-hosts LIST     Extra Host names (comma list, * any) MCPSTATE_ALLOWED_HOSTS
  --allowed-origins LIST   Extra Origin names (comma list)      MCPSTATE_ALLOWED_ORIGINS
  --max-body-bytes N       Request body limit (default 4 MiB)   MCPSTATE_MAX_BODY_BYTES
  --body-timeout-ms N      Time for a request body to arrive    MCPSTATE_BODY_TIMEOUT_MS
                           in full, then 408 (default 30000)

Metrics and traces (any transport):
  --metrics-port PORT      Serve Prometheus metrics at GET      MCPSTATE_METRICS_PORT
                           /metrics on this port (default off)
  --metrics-host HOST      Interface of the metrics listener    MCPSTATE_METRICS_HOST
                           (default 127.0.0.1)
  Traces: set OTEL_DENO=true and the standard OTEL_* variables
  (OTEL_EXPORTER_OTLP_ENDPOINT, ...) to export OpenTelemetry spans.

Encryption at rest (default off; every command takes these):
  --encryption-keys-file PATH                                   MCPSTATE_ENCRYPTION_KEYS
                           Keys, one id:base64 a line, the first
                           current (mode 600); the variable
                           lists them inline: id:base64[,…]
  --key-store URL          Backend that keeps the wrapped data  MCPSTATE_KEY_STORE
                           keys (default: the data backend)

  -h, --help               Show this help

HTTP refuses to start unless --auth-issuer or --allow-anonymous is given.
Endpoints: POST /mcp, GET /healthz, GET /.well-known/oauth-protected-resource[/mcp].
`;

/** Tool names without their prefix, in lines of the usage's second column. */
function wrapNames(names: readonly string[]): string {
  const lines: string[] = [];
  let line = "";
  for (const n of names.map((t) => t.slice("state_".length))) {
    if (line.length + n.length + 1 > 36) {
      lines.push(line + ",");
      line = "";
    }
    line += (line ? "," : "") + n;
  }
  lines.push(line);
  return lines.map((l) => " ".repeat(27) + l).join("\n");
}

/** The flags that take a value; each has an `MCPSTATE_*` twin (see {@link envName}). */
const VALUE_FLAGS = [
  "backend",
  "transport",
  "user",
  "writer",
  "max-state-bytes",
  "lease-seconds",
  "max-read-bytes",
  "tools",
  "quota-handles",
  "quota-bytes",
  "quota-writes-per-minute",
  "kinds",
  "host",
  "port",
  "public-url",
  "auth-issuer",
  "auth-audience",
  "auth-jwks-url",
  "auth-jwks-cooldown-ms",
  "allowed-hosts",
  "allowed-origins",
  "max-body-bytes",
  "body-timeout-ms",
  "max-listen-streams",
  "max-listen-streams-per-user",
  "max-watches-per-user",
  "metrics-port",
  "metrics-host",
] as const;

const OPTIONS: ParseArgsOptionsConfig = {
  ...Object.fromEntries(VALUE_FLAGS.map((flag) => [flag, { type: "string" } as const])),
  "allow-anonymous": { type: "boolean" },
  help: { type: "boolean", short: "h" },
};

/**
 * Parses `serve` arguments and the environment into a configuration.
 *
 * @param args The arguments after `serve`.
 * @param env Reads an environment variable (default `Deno.env.get`, tolerant of a missing permission).
 * @returns `"help"` when help was asked for, else the configuration.
 * @throws {ConfigError} For an unknown flag or a bad value.
 */
export function parseServeArgs(
  args: string[],
  env: (name: string) => string | undefined = readEnv,
): ServeConfig | "help" {
  const values = parseFlags(args);
  if (values.help) return "help";
  const f = new Flags(values, env);
  const transport = readTransport(f);
  const host = f.str("host") ?? "127.0.0.1";
  const port = f.int("port", 0, 65535) ?? DEFAULT_PORT;
  const publicUrl = readPublicUrl(f, host, port);
  const maxStateBytes = f.int("max-state-bytes", 2, 2 ** 31);
  const maxBodyBytes = f.int("max-body-bytes", 1024, 2 ** 31) ??
    Math.max(DEFAULT_MAX_BODY_BYTES, 2 * (maxStateBytes ?? 0) + 65536);
  const bodyTimeoutMs = f.int("body-timeout-ms", 100, 3_600_000) ?? 30_000;
  const { auth, allowAnonymous } = readAuth(f, transport, publicUrl);
  const { user, writer } = readIdentity(f);
  const leaseSeconds = f.int("lease-seconds", 0, 86_400) ?? 60;
  const maxReadBytes = readMaxReadBytes(f);
  const tools = readTools(f);
  const maxListenStreams = f.int("max-listen-streams", 1, 1_000_000) ??
    DEFAULT_MAX_LISTEN_STREAMS;
  const maxListenStreamsPerUser = f.int("max-listen-streams-per-user", 1, 1_000_000) ??
    DEFAULT_MAX_LISTEN_STREAMS_PER_USER;
  const maxWatchesPerUser = f.int("max-watches-per-user", 1, 1_000_000) ??
    DEFAULT_MAX_WATCHES_PER_USER;
  const quotas = readQuotas(f);
  const metrics = readMetrics(f);
  return {
    backend: f.str("backend") ?? DEFAULT_URL,
    transport,
    host,
    port,
    publicUrl,
    allowAnonymous,
    auth,
    allowedHosts: f.list("allowed-hosts"),
    allowedOrigins: f.list("allowed-origins"),
    maxBodyBytes,
    bodyTimeoutMs,
    maxStateBytes,
    user,
    writer,
    leaseSeconds,
    maxReadBytes,
    tools,
    kinds: f.str("kinds") || undefined,
    maxListenStreams,
    maxListenStreamsPerUser,
    maxWatchesPerUser,
    metrics,
    quotas,
  };
}

/** The flags as `parseArgs` reads them; a mistake is a {@link ConfigError}. */
function parseFlags(args: string[]): Record<string, string | boolean | undefined> {
  try {
    const parsed = parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: false });
    // No option is `multiple`: every value is a string or a boolean.
    return parsed.values as Record<string, string | boolean | undefined>;
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, " ").trim();
    throw new ConfigError(
      `${msg.replace(/\.$/, "")}. Run "mcpstate serve --help" for the options.`,
    );
  }
}

/** The name of a flag's environment twin: `--max-state-bytes` is `MCPSTATE_MAX_STATE_BYTES`. */
function envName(flag: string): string {
  return `MCPSTATE_${flag.toUpperCase().replaceAll("-", "_")}`;
}

/** Reads each flag, or else its environment twin (an empty variable counts as unset). */
class Flags {
  readonly #values: Record<string, string | boolean | undefined>;
  readonly #env: (name: string) => string | undefined;

  constructor(
    values: Record<string, string | boolean | undefined>,
    env: (name: string) => string | undefined,
  ) {
    this.#values = values;
    this.#env = env;
  }

  /** A text flag. */
  str(flag: string): string | undefined {
    const v = this.#values[flag];
    if (typeof v === "string") return v;
    const e = this.#env(envName(flag));
    return e === undefined || e === "" ? undefined : e;
  }

  /** A boolean flag; its variable is 1/true/yes/on or 0/false/no/off. */
  bool(flag: string): boolean {
    if (this.#values[flag] === true) return true;
    const name = envName(flag);
    const e = this.#env(name);
    if (e === undefined || e === "") return false;
    if (/^(1|true|yes|on)$/i.test(e)) return true;
    if (/^(0|false|no|off)$/i.test(e)) return false;
    throw new ConfigError(`${name}=${JSON.stringify(e)} is not a boolean: use 1 or 0.`);
  }

  /** A whole number from `min` to `max`. */
  int(flag: string, min: number, max: number): number | undefined {
    const v = this.str(flag);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ConfigError(
        `--${flag} (${envName(flag)}) must be a whole number from ${min} to ${max}, not ${
          JSON.stringify(v)
        }.`,
      );
    }
    return n;
  }

  /** A comma list, its items trimmed, empty ones dropped. */
  list(flag: string): string[] {
    return (this.str(flag) ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0);
  }
}

function readTransport(f: Flags): "stdio" | "http" {
  const transport = f.str("transport") ?? "stdio";
  if (transport !== "stdio" && transport !== "http") {
    throw new ConfigError(
      `--transport (MCPSTATE_TRANSPORT) must be stdio or http, not ${JSON.stringify(transport)}.`,
    );
  }
  return transport;
}

/** `--public-url`, or `http://HOST:PORT/mcp` (a wildcard host as `localhost`). */
function readPublicUrl(f: Flags, host: string, port: number): URL {
  const text = f.str("public-url");
  if (text !== undefined) {
    const publicUrl = httpUrl(text, "--public-url (MCPSTATE_PUBLIC_URL)");
    publicUrl.hash = "";
    return publicUrl;
  }
  const h = host === "0.0.0.0" || host === "::" ? "localhost" : host;
  return new URL(`http://${h.includes(":") ? `[${h}]` : h}:${port}/mcp`);
}

/** Bearer-token verification, or anonymous access; HTTP needs exactly one of them. */
function readAuth(
  f: Flags,
  transport: "stdio" | "http",
  publicUrl: URL,
): { auth: AuthConfig | undefined; allowAnonymous: boolean } {
  const issuer = f.str("auth-issuer");
  const audience = f.str("auth-audience");
  const jwksUrl = f.str("auth-jwks-url");
  const cooldown = f.int("auth-jwks-cooldown-ms", 0, 86_400_000);
  const allowAnonymous = f.bool("allow-anonymous");
  let auth: AuthConfig | undefined;
  if (issuer !== undefined) {
    const iss = httpUrl(issuer, "--auth-issuer (MCPSTATE_AUTH_ISSUER)");
    requireHttps(iss, "--auth-issuer (MCPSTATE_AUTH_ISSUER)");
    if (jwksUrl !== undefined) {
      requireHttps(
        httpUrl(jwksUrl, "--auth-jwks-url (MCPSTATE_AUTH_JWKS_URL)"),
        "--auth-jwks-url (MCPSTATE_AUTH_JWKS_URL)",
      );
    }
    auth = {
      issuer,
      audience: audience ?? publicUrl.href,
      jwksUrl,
      jwksCooldownMs: cooldown ?? DEFAULT_JWKS_COOLDOWN_MS,
    };
  } else if (audience !== undefined || jwksUrl !== undefined) {
    throw new ConfigError(
      "--auth-audience and --auth-jwks-url need --auth-issuer (MCPSTATE_AUTH_ISSUER): the URL of the authorization server whose tokens this server accepts.",
    );
  }
  if (transport === "http") {
    if (auth && allowAnonymous) {
      throw new ConfigError(
        "Pass either --auth-issuer (every request needs a valid token) or --allow-anonymous (no authentication), not both.",
      );
    }
    if (!auth && !allowAnonymous) {
      throw new ConfigError(
        "Refusing to serve HTTP without authentication: anyone who can reach the port could read and write state. Pass --auth-issuer URL (with --auth-jwks-url / --auth-audience as needed) to accept OAuth bearer tokens, or --allow-anonymous to knowingly run one shared, unauthenticated bucket.",
      );
    }
  }
  return { auth, allowAnonymous };
}

/** The user of stdio calls and the fixed writer label, within their lengths. */
function readIdentity(f: Flags): { user: string; writer: string | undefined } {
  const user = f.str("user") ?? "local";
  if (user.length > 1024) {
    throw new ConfigError("--user (MCPSTATE_USER) is longer than 1024 characters.");
  }
  const writer = f.str("writer");
  if (writer !== undefined && writer.length > 256) {
    throw new ConfigError("--writer (MCPSTATE_WRITER) is longer than 256 characters.");
  }
  return { user, writer };
}

function readMaxReadBytes(f: Flags): number {
  const maxReadBytes = f.int("max-read-bytes", 0, 2 ** 31) ?? DEFAULT_MAX_READ_BYTES;
  if (maxReadBytes > 0 && maxReadBytes < MIN_READ_BYTES) {
    throw new ConfigError(
      `--max-read-bytes (MCPSTATE_MAX_READ_BYTES) must be 0 (no limit) or at least ${MIN_READ_BYTES}, not ${maxReadBytes}.`,
    );
  }
  return maxReadBytes;
}

function readTools(f: Flags): string[] | undefined {
  if (f.str("tools") === undefined) return undefined;
  try {
    return resolveToolNames(f.list("tools"));
  } catch (e) {
    throw new ConfigError(`--tools (MCPSTATE_TOOLS): ${(e as Error).message}`);
  }
}

/** The quota of each flag given; `undefined` when none is. */
function readQuotas(f: Flags): QuotaOptions | undefined {
  const quotas: QuotaOptions = {};
  for (
    const [flag, field] of [
      ["quota-handles", "maxHandles"],
      ["quota-bytes", "maxBytes"],
      ["quota-writes-per-minute", "writesPerMinute"],
    ] as const
  ) {
    const n = f.int(flag, 1, Number.MAX_SAFE_INTEGER);
    if (n !== undefined) quotas[field] = n;
  }
  return Object.keys(quotas).length > 0 ? quotas : undefined;
}

function readMetrics(f: Flags): MetricsConfig | undefined {
  const port = f.int("metrics-port", 0, 65535);
  const host = f.str("metrics-host");
  if (host !== undefined && port === undefined) {
    throw new ConfigError(
      "--metrics-host (MCPSTATE_METRICS_HOST) needs --metrics-port (MCPSTATE_METRICS_PORT): the port to serve /metrics on.",
    );
  }
  return port === undefined ? undefined : { host: host ?? "127.0.0.1", port };
}

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function httpUrl(text: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`${what} must be an absolute http(s) URL, not ${JSON.stringify(text)}.`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigError(`${what} must be an http(s) URL, not ${JSON.stringify(text)}.`);
  }
  return url;
}

/** Whether a hostname is a loopback name. */
export function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || hostname === "::1" ||
    /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

function requireHttps(url: URL, what: string): void {
  if (url.protocol !== "https:" && !isLoopback(url.hostname)) {
    throw new ConfigError(
      `${what} must use https (plain http is accepted only on loopback): ${url.href}`,
    );
  }
}
