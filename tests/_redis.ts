/**
 * Test harness for real Redis servers: {@link startRedis} runs one
 * `redis-server` and {@link startRedisCluster} builds a Redis Cluster (by
 * default 3 masters with one replica each), every process on a free loopback
 * port in its own temporary directory. Nothing here mocks Redis: tests that
 * import this file talk to the real engine, and a missing `redis-server` is a
 * loud failure, never a skip.
 *
 * ```ts ignore
 * await using redis = await startRedis({ config: { appendfsync: "always" } });
 * const store = await HandleStore.fromUrl(redis.url);
 * await redis.kill();     // SIGKILL, data dir kept
 * await redis.restart();  // same port, same dir
 * ```
 *
 * @module
 */

import { Redis } from "ioredis";

/** Options of {@link startRedis}. */
export interface StartRedisOptions {
  /** Extra `redis.conf` directives, e.g. `{ appendfsync: "always" }`; they override the defaults. */
  config?: Record<string, string | number>;
  /** Sets `requirepass`; the URL then carries it. */
  password?: string;
  /** Reuse this data directory (it is then not deleted by `stop()`). Default: a fresh temp dir. */
  dir?: string;
  /** Listen on this port. Default: a free port. */
  port?: number;
  /** How long to wait for the server to answer PING, in ms. Default 15,000. */
  readyTimeoutMs?: number;
}

/** A running (or stopped) `redis-server` started by {@link startRedis}. */
export interface RedisServer extends AsyncDisposable {
  /** Always `127.0.0.1`. */
  readonly host: string;
  /** The TCP port. */
  readonly port: number;
  /** The data directory (AOF, `nodes.conf`, `redis.log`). */
  readonly dir: string;
  /** `redis://[:password@]127.0.0.1:<port>`. */
  readonly url: string;
  /** `host:port`. */
  readonly address: string;
  /** Whether the process is running. */
  readonly running: boolean;
  /** Runs `redis-cli` against this server and returns its trimmed output. */
  cli(...args: (string | number)[]): Promise<string>;
  /** Stops gracefully (SIGTERM, then SIGKILL after 5 s) and deletes a temp data dir. */
  stop(): Promise<void>;
  /** SIGKILL now; the data dir is kept for {@link RedisServer.restart}. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and dir (after kill or stop) and waits for PING. */
  restart(): Promise<void>;
  /** The last lines of `redis.log`, for failure messages. */
  logTail(lines?: number): Promise<string>;
}

/** Options of {@link startRedisCluster}. */
export interface StartRedisClusterOptions {
  /** Masters. Default 3. */
  masters?: number;
  /** Replicas per master. Default 1. */
  replicas?: number;
  /** `cluster-node-timeout` in ms: how soon a dead master is failed over. Default 1,000. */
  nodeTimeoutMs?: number;
  /** Extra `redis.conf` directives for every node. */
  config?: Record<string, string | number>;
  /** Sets `requirepass` and `masterauth` on every node. */
  password?: string;
}

/** One line of `CLUSTER NODES`. */
export interface ClusterNodeInfo {
  /** Node id. */
  id: string;
  /** `host:port`. */
  address: string;
  /** Flags (`master`, `slave`, `myself`, `fail`, `fail?`, …). */
  flags: string[];
  /** The master's id for a replica, else `-`. */
  masterId: string;
  /** `connected` or `disconnected`. */
  link: string;
  /** Slot ranges served, `[from, to]` inclusive. */
  slots: [number, number][];
}

/** A Redis Cluster started by {@link startRedisCluster}. */
export interface RedisClusterHandle extends AsyncDisposable {
  /** `redis+cluster://[:password@]127.0.0.1:p1,127.0.0.1:p2,…` listing every node. */
  readonly url: string;
  /** Every node, masters and replicas, in start order. */
  readonly nodes: RedisServer[];
  /** The node that serves `slot` now (asks a live node). */
  masterForSlot(slot: number): Promise<RedisServer>;
  /** The masters that serve slots now and are not failed. */
  masters(): Promise<RedisServer[]>;
  /** The hash slot of `key` (`CLUSTER KEYSLOT`). */
  keySlot(key: string): Promise<number>;
  /** `CLUSTER NODES` as seen by a live node. */
  topology(): Promise<ClusterNodeInfo[]>;
  /**
   * Waits until every slot is served by a master that is not failed, every
   * live node reports `cluster_state:ok`, and every live replica's link to
   * its master is up.
   */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Stops every node and deletes their dirs. */
  stop(): Promise<void>;
  /** SIGKILLs every node (dirs kept). */
  kill(): Promise<void>;
  /** Restarts every node that is not running. */
  restart(): Promise<void>;
}

/**
 * A free TCP port on 127.0.0.1 (bound to port 0, then released).
 *
 * @returns The port.
 */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * `n` distinct free TCP ports on 127.0.0.1, held open together while they
 * are picked (one at a time, the system may hand the same port out twice).
 *
 * @param n How many.
 * @returns The ports.
 */
export function freePorts(n: number): number[] {
  const ls = Array.from({ length: n }, () => Deno.listen({ hostname: "127.0.0.1", port: 0 }));
  const ports = ls.map((l) => (l.addr as Deno.NetAddr).port);
  for (const l of ls) l.close();
  return ports;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Every server process this module started that is still running: killed when the process exits. */
const live = new Set<Deno.ChildProcess>();
/** Temp data dirs this module made and has not removed yet: removed when the process exits. */
const ownDirs = new Set<string>();
globalThis.addEventListener("unload", () => {
  for (const c of live) {
    try {
      c.kill("SIGKILL");
    } catch { /* already gone */ }
  }
  for (const dir of ownDirs) {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch { /* already gone */ }
  }
});

function missing(cmd: string, e: unknown): Error {
  if (e instanceof Deno.errors.NotFound) {
    return new Error(
      `${cmd} was not found on PATH. The Redis tests need a real Redis 7 ` +
        `(${cmd} from the "redis-server" package on Debian/Ubuntu); install it and run again.`,
    );
  }
  return e instanceof Error ? e : new Error(String(e));
}

/**
 * Runs `redis-cli` with the given arguments.
 *
 * @param port Server port.
 * @param password `requirepass`, if any.
 * @param args The command and its arguments.
 * @returns Trimmed stdout.
 */
export async function redisCli(
  port: number,
  password: string | undefined,
  ...args: (string | number)[]
): Promise<string> {
  const base = ["-h", "127.0.0.1", "-p", String(port), "--no-auth-warning"];
  if (password !== undefined) base.push("-a", password);
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command("redis-cli", {
      args: [...base, ...args.map(String)],
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (e) {
    throw missing("redis-cli", e);
  }
  const text = new TextDecoder().decode(out.stdout).trim();
  if (!out.success) {
    throw new Error(`redis-cli ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return text;
}

function confText(entries: Record<string, string | number>): string {
  return Object.entries(entries).map(([k, v]) => {
    const s = String(v);
    return `${k} ${s === "" || /[\s"]/.test(s) ? JSON.stringify(s) : s}`;
  }).join("\n") + "\n";
}

/**
 * Starts a `redis-server` on a free loopback port in its own directory with
 * AOF on (`appendfsync everysec` unless `config` says otherwise) and RDB
 * snapshots off, and waits until it answers PING.
 *
 * @param opts Config overrides, password, data dir, port.
 * @returns The running server.
 * @throws {Error} when `redis-server` is not installed or does not come up.
 */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? await Deno.makeTempDir({ prefix: "mcpstate-redis-" });
  if (ownDir) ownDirs.add(dir);
  const removeDir = async () => {
    if (!ownDir) return;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    ownDirs.delete(dir);
  };
  const port = opts.port ?? freePort();
  const password = opts.password;
  const conf: Record<string, string | number> = {
    port,
    bind: "127.0.0.1",
    "protected-mode": "no",
    daemonize: "no",
    dir,
    logfile: `${dir}/redis.log`,
    save: "",
    appendonly: "yes",
    appendfsync: "everysec",
    "enable-debug-command": "local",
    ...(password === undefined ? {} : { requirepass: password }),
    ...opts.config,
  };
  const confPath = `${dir}/redis.conf`;
  await Deno.writeTextFile(confPath, confText(conf));
  const readyTimeout = opts.readyTimeoutMs ?? 15_000;
  let child: Deno.ChildProcess | undefined;

  const logTail = async (lines = 30): Promise<string> => {
    try {
      return (await Deno.readTextFile(`${dir}/redis.log`)).trimEnd().split("\n").slice(-lines)
        .join("\n");
    } catch {
      return "(no log)";
    }
  };

  const spawn = async (): Promise<void> => {
    try {
      child = new Deno.Command("redis-server", {
        args: [confPath],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
    } catch (e) {
      throw missing("redis-server", e);
    }
    const c = child;
    live.add(c);
    let dead = false;
    c.status.then(() => {
      live.delete(c);
      dead = true;
    });
    const deadline = Date.now() + readyTimeout;
    while (true) {
      if (dead) {
        throw new Error(`redis-server on port ${port} exited during start:\n${await logTail()}`);
      }
      try {
        if (await redisCli(port, password, "PING") === "PONG") return;
      } catch (e) {
        if (e instanceof Error && /not found on PATH/.test(e.message)) throw e;
      }
      if (Date.now() > deadline) {
        c.kill("SIGKILL");
        await c.status;
        throw new Error(`redis-server on port ${port} did not answer PING:\n${await logTail()}`);
      }
      await sleep(25);
    }
  };

  const halt = async (signal: Deno.Signal): Promise<void> => {
    const c = child;
    if (!c) return;
    child = undefined;
    try {
      c.kill(signal);
    } catch { /* already gone */ }
    if (signal === "SIGKILL") {
      await c.status;
      return;
    }
    const timer = setTimeout(() => {
      try {
        c.kill("SIGKILL");
      } catch { /* gone */ }
    }, 5000);
    await c.status;
    clearTimeout(timer);
  };

  try {
    await spawn();
  } catch (e) {
    await removeDir();
    throw e;
  }
  const auth = password === undefined ? "" : `:${encodeURIComponent(password)}@`;
  const server: RedisServer = {
    host: "127.0.0.1",
    port,
    dir,
    url: `redis://${auth}127.0.0.1:${port}`,
    address: `127.0.0.1:${port}`,
    get running() {
      return child !== undefined;
    },
    cli: (...args) => redisCli(port, password, ...args),
    async stop() {
      await halt("SIGTERM");
      await removeDir();
    },
    kill: () => halt("SIGKILL"),
    async restart() {
      if (child) throw new Error(`redis-server on port ${port} is already running`);
      await spawn();
    },
    logTail,
    async [Symbol.asyncDispose]() {
      await server.stop();
    },
  };
  return server;
}

/**
 * Parses `CLUSTER NODES` output.
 *
 * @param text The raw reply.
 * @returns One entry per node.
 */
export function parseClusterNodes(text: string): ClusterNodeInfo[] {
  const out: ClusterNodeInfo[] = [];
  for (const line of text.split("\n")) {
    const f = line.trim().split(" ");
    if (f.length < 8) continue;
    const slots: [number, number][] = [];
    for (const s of f.slice(8)) {
      if (s.startsWith("[")) continue; // a slot being migrated
      const [a, b] = s.split("-");
      slots.push([Number(a), Number(b ?? a)]);
    }
    out.push({
      id: f[0]!,
      address: f[1]!.split("@")[0]!,
      flags: f[2]!.split(","),
      masterId: f[3]!,
      link: f[7]!,
      slots,
    });
  }
  return out;
}

/**
 * Starts `masters × (1 + replicas)` cluster-enabled `redis-server`s on free
 * loopback ports, joins them with `redis-cli --cluster create … --cluster-yes`,
 * and waits until the cluster is healthy and every replica is in sync.
 *
 * @param opts Shape, failure-detection timeout, config overrides, password.
 * @returns The cluster.
 */
export async function startRedisCluster(
  opts: StartRedisClusterOptions = {},
): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicas ?? 1;
  const password = opts.password;
  const nodes: RedisServer[] = [];
  try {
    const count = masters * (1 + replicas);
    const ports = freePorts(2 * count);
    const started = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        startRedis({
          ...(password === undefined ? {} : { password }),
          port: ports[2 * i]!,
          config: {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": opts.nodeTimeoutMs ?? 1000,
            "cluster-port": ports[2 * i + 1]!,
            "cluster-replica-validity-factor": 0,
            ...(password === undefined ? {} : { masterauth: password }),
            ...opts.config,
          },
        })),
    );
    nodes.push(...started);
    const args = ["--cluster", "create", ...nodes.map((n) => n.address)];
    args.push("--cluster-replicas", String(replicas), "--cluster-yes");
    await redisCli(nodes[0]!.port, password, ...args);
  } catch (e) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw e;
  }

  const anyNode = () => {
    const n = nodes.find((x) => x.running);
    if (!n) throw new Error("No cluster node is running");
    return n;
  };
  const byAddress = (address: string) => {
    const n = nodes.find((x) => x.address === address);
    if (!n) throw new Error(`Unknown cluster node ${address}`);
    return n;
  };
  const topology = async () => parseClusterNodes(await anyNode().cli("CLUSTER", "NODES"));

  const cluster: RedisClusterHandle = {
    url: `redis+cluster://${password === undefined ? "" : `:${encodeURIComponent(password)}@`}${
      nodes.map((n) => n.address).join(",")
    }`,
    nodes,
    async masterForSlot(slot) {
      for (const n of await topology()) {
        if (
          n.flags.includes("master") && !n.flags.includes("fail") &&
          n.slots.some(([a, b]) => a <= slot && slot <= b)
        ) {
          return byAddress(n.address);
        }
      }
      throw new Error(`No live master serves slot ${slot}`);
    },
    async masters() {
      return (await topology())
        .filter((n) =>
          n.flags.includes("master") && !n.flags.some((f) => f.startsWith("fail")) &&
          n.slots.length > 0
        )
        .map((n) => byAddress(n.address));
    },
    async keySlot(key) {
      return Number(await anyNode().cli("CLUSTER", "KEYSLOT", key));
    },
    topology,
    async waitHealthy(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      let why = "";
      while (Date.now() < deadline) {
        try {
          why = await unhealthy();
          if (why === "") return;
        } catch (e) {
          why = String(e);
        }
        await sleep(100);
      }
      throw new Error(`The cluster did not become healthy: ${why}`);
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
    async kill() {
      await Promise.all(nodes.map((n) => n.kill()));
    },
    async restart() {
      await Promise.all(nodes.filter((n) => !n.running).map((n) => n.restart()));
    },
    async [Symbol.asyncDispose]() {
      await cluster.stop();
    },
  };

  async function unhealthy(): Promise<string> {
    const running = nodes.filter((n) => n.running);
    for (const n of running) {
      const info = await n.cli("CLUSTER", "INFO");
      if (!/cluster_state:ok/.test(info)) return `${n.address} reports ${info.split("\n")[0]}`;
    }
    const topo = parseClusterNodes(await running[0]!.cli("CLUSTER", "NODES"));
    let covered = 0;
    for (const n of topo) {
      if (!n.flags.includes("master") || n.flags.some((f) => f.startsWith("fail"))) continue;
      for (const [a, b] of n.slots) covered += b - a + 1;
    }
    if (covered !== 16384) return `${covered} of 16384 slots served by live masters`;
    for (const n of running) {
      const repl = await n.cli("INFO", "replication");
      if (/role:slave/.test(repl) && !/master_link_status:up/.test(repl)) {
        return `replica ${n.address} is not in sync`;
      }
    }
    return "";
  }

  try {
    await cluster.waitHealthy();
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}

/**
 * Every key and value on `primaries` (each key of any type, its value as
 * text): what a test searches for canaries.
 *
 * @param primaries The servers to dump.
 * @returns Where (the key) and what (its value), for every key.
 */
export async function dumpRedis(
  primaries: { host: string; port: number }[],
): Promise<{ where: string; what: string }[]> {
  const out: { where: string; what: string }[] = [];
  for (const p of primaries) {
    const r = new Redis(p.port, p.host, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await r.connect();
      let cursor = "0";
      do {
        const [next, keys] = await r.scan(cursor, "COUNT", 1000);
        cursor = next;
        for (const key of keys) out.push({ where: key, what: await valueOf(r, key) });
      } while (cursor !== "0");
    } finally {
      r.disconnect();
    }
  }
  return out;
}

/** The value of `key` as text, whatever its type. */
async function valueOf(r: Redis, key: string): Promise<string> {
  const type = await r.type(key);
  switch (type) {
    case "string":
      return (await r.get(key)) ?? "";
    case "hash":
      return JSON.stringify(await r.hgetall(key));
    case "list":
      return JSON.stringify(await r.lrange(key, 0, -1));
    case "set":
      return JSON.stringify(await r.smembers(key));
    case "zset":
      return JSON.stringify(await r.zrange(key, "0", "-1", "WITHSCORES"));
    case "stream":
      return JSON.stringify(await r.xrange(key, "-", "+"));
    case "none":
      return "";
    default:
      throw new Error(`key ${key} has a type the dump does not know: ${type}`);
  }
}
