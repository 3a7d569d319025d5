/**
 * The Redis backend's URL (`redis://`, `rediss://`, `redis+cluster://`,
 * `rediss+cluster://`, with its query options) and the client it opens.
 *
 * @module
 */

import { Cluster, Redis } from "ioredis";
import { BackendError, InvalidArgument, redact } from "../../errors.ts";
import { messageOf } from "../_shared.ts";

/** The key prefix used when none is given. */
export const DEFAULT_PREFIX = "mcpstate:";

/**
 * Opens the client a parsed URL names and waits until Redis answers.
 *
 * @param url The URL, for the message when Redis cannot be reached.
 * @param cfg What it says.
 * @returns The connected client.
 * @throws {BackendError} when Redis cannot be reached.
 */
export async function openClient(url: string, cfg: UrlConfig): Promise<Redis | Cluster> {
  const common = {
    connectTimeout: cfg.connectTimeout,
    maxRetriesPerRequest: 0,
    disconnectTimeout: 0,
    autoResendUnfulfilledCommands: false,
    protocol: 2 as const,
    connectionName: "mcpstate",
    ...(cfg.username === undefined ? {} : { username: cfg.username }),
    ...(cfg.password === undefined ? {} : { password: cfg.password }),
  };
  let client: Redis | Cluster;
  if (cfg.cluster) {
    client = new Cluster(cfg.hosts, {
      lazyConnect: true,
      enableOfflineQueue: false,
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      retryDelayOnTryAgain: 100,
      maxRedirections: 16,
      slotsRefreshTimeout: 2000,
      clusterRetryStrategy: (times: number) => Math.min(100 * times, 1000),
      redisOptions: {
        ...common,
        ...(cfg.tls ? { tls: {} } : {}),
      },
    });
  } else {
    const h = cfg.hosts[0]!;
    client = new Redis({
      ...common,
      host: h.host,
      port: h.port,
      db: cfg.db,
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: (times: number) =>
        Math.min(50 * 2 ** Math.min(times, 5), 1000) + Math.floor(Math.random() * 100),
      ...(cfg.tls ? { tls: { servername: h.host } } : {}),
    });
  }
  const quiet = () => {/* surfaced per call as backend_error */};
  client.on("error", quiet);
  try {
    await client.connect();
  } catch (e) {
    client.disconnect();
    throw new BackendError(
      `Could not connect to Redis at ${redact(url)}: ${
        messageOf(e)
      }. Check that Redis is running and reachable, and the URL's host, port and password.`,
      { cause: e },
    );
  }
  client.off("error", quiet);
  return client;
}

/**
 * Which Redis a URL names: the stores of one process on the same Redis queue
 * their updates of one handle together, so they never race each other's
 * compare-and-set.
 */
export function scopeOf(cfg: UrlConfig): string {
  return `${cfg.cluster ? "cluster" : "redis"} ${cfg.username ?? ""}@${
    cfg.hosts.map((h) => `${h.host}:${h.port}`).join(",")
  }/${cfg.db}`;
}

/** What a Redis URL says. */
export interface UrlConfig {
  cluster: boolean;
  tls: boolean;
  hosts: { host: string; port: number }[];
  username: string | undefined;
  password: string | undefined;
  db: number;
  prefix: string;
  wait: number;
  waitTimeout: number;
  connectTimeout: number;
  timeout: number;
}

const OPTIONS = ["prefix", "wait", "waitTimeout", "connectTimeout", "timeout"];

/** Parses a Redis backend URL; throws `invalid_argument` naming what is wrong, credentials redacted. */
export function parseRedisUrl(url: string): UrlConfig {
  const bad = (why: string) =>
    new InvalidArgument(
      `Malformed Redis URL "${
        redact(url)
      }": ${why}. Write redis://[user:pass@]host:port/db, rediss://…, or redis+cluster://[user:pass@]host1:port1,host2:port2, with options such as ?wait=1&waitTimeout=1000.`,
      { field: "backend" },
    );
  const m = /^(rediss?)(\+cluster)?:\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/i
    .exec(url);
  if (!m) throw bad("it does not have the form scheme://host:port");
  const [, scheme = "", clusterPart, userinfo, hostPart = "", path = "", query = ""] = m;
  const cluster = clusterPart !== undefined;
  let username: string | undefined, password: string | undefined;
  try {
    if (userinfo !== undefined && userinfo !== "") {
      const colon = userinfo.indexOf(":");
      if (colon < 0) username = decodeURIComponent(userinfo);
      else {
        const u = decodeURIComponent(userinfo.slice(0, colon));
        if (u !== "") username = u;
        password = decodeURIComponent(userinfo.slice(colon + 1));
      }
    }
  } catch {
    throw bad("the credentials are not valid percent-encoding");
  }
  const hosts: { host: string; port: number }[] = [];
  for (const part of hostPart.split(",")) {
    const hm = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part);
    if (!hm) throw bad(`"${part}" is not a host[:port]`);
    const port = hm[2] === undefined ? 6379 : Number(hm[2]);
    if (port < 1 || port > 65535) throw bad(`port ${port} is out of range`);
    hosts.push({ host: hm[1]!.replace(/^\[|\]$/g, ""), port });
  }
  if (!cluster && hosts.length !== 1) {
    throw bad("list several nodes only with redis+cluster://");
  }
  let db = 0;
  const dbText = path.replace(/^\//, "");
  if (dbText !== "") {
    if (!/^\d{1,5}$/.test(dbText)) throw bad(`the database "${dbText}" is not a number`);
    db = Number(dbText);
    if (cluster && db !== 0) throw bad("Redis Cluster has only database 0");
  }
  const params = new URLSearchParams(query);
  for (const key of params.keys()) {
    if (!OPTIONS.includes(key)) {
      throw bad(`unknown option "${key}" (known: ${OPTIONS.join(", ")})`);
    }
  }
  const int = (name: string, def: number, min: number): number => {
    const v = params.get(name);
    if (v === null) return def;
    if (!/^\d+$/.test(v) || Number(v) < min || !Number.isSafeInteger(Number(v))) {
      throw bad(`${name} must be a whole number, at least ${min}`);
    }
    return Number(v);
  };
  const wait = int("wait", 0, 0);
  const waitTimeout = int("waitTimeout", 1000, 1);
  const prefix = params.get("prefix") ?? DEFAULT_PREFIX;
  if (/[{}]/.test(prefix)) throw bad("the prefix must not contain { or }");
  return {
    cluster,
    tls: scheme.toLowerCase() === "rediss",
    hosts,
    username,
    password,
    db,
    prefix,
    wait,
    waitTimeout,
    connectTimeout: int("connectTimeout", 5000, 1),
    timeout: Math.max(int("timeout", 5000, 1), wait > 0 ? waitTimeout + 1000 : 0),
  };
}
