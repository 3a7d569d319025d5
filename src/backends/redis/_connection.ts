/**
 * How the Redis backend talks to Redis: scripts by `EVALSHA` (with `EVAL`
 * when the server has not cached one), `WAIT` for replicas after a write
 * when asked, a watchdog that drops a connection whose replies stopped, and
 * the `backend_error` every failure becomes, and the commands of one tick
 * sent together.
 *
 * @module
 */

import process from "node:process";
import { Cluster, type Redis } from "ioredis";
import { BackendError, McpStateError } from "../../errors.ts";
import { messageOf } from "../_shared.ts";
import type { Script } from "./_prelude.ts";

/** A client of one Redis or of a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** The error of a call on a closed backend. */
export function closedError(): BackendError {
  return new BackendError("The Redis backend is closed; open a new store.");
}

function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith("NOSCRIPT");
}

/** Runs the calls of one backend on its client. */
export class Connection {
  readonly #client: RedisClient;
  readonly #wait: number;
  readonly #waitTimeout: number;
  #closed = false;
  #lastError: { message: string; at: number } | undefined;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  /** Calls waiting for Redis, and when one last completed (or the first started). */
  #pending = 0;
  #progress = 0;
  /** Whether the sockets are corked until the end of this tick. */
  #corked = false;
  readonly #onError = (e: unknown): void => {
    this.#lastError = { message: messageOf(e), at: Date.now() };
  };

  /**
   * @param client The client.
   * @param wait Replicas that must confirm each write.
   * @param waitTimeout How long a write waits for them, ms.
   * @param timeout Drop the connection when calls have waited this long (ms)
   *   with no reply at all; `undefined`: never.
   */
  constructor(client: RedisClient, wait: number, waitTimeout: number, timeout?: number) {
    this.#client = client;
    this.#wait = wait;
    this.#waitTimeout = waitTimeout;
    client.on("error", this.#onError);
    if (timeout !== undefined) {
      // One cheap timer for the whole client instead of one per command.
      this.#watchdog = setInterval(() => {
        if (this.#pending > 0 && Date.now() - this.#progress > timeout) {
          this.#lastError = { message: `timed out: no reply for ${timeout} ms`, at: Date.now() };
          this.#progress = Date.now();
          this.#client.disconnect(true);
        }
      }, Math.max(25, Math.min(1000, Math.floor(timeout / 4))));
      Deno.unrefTimer(this.#watchdog);
    }
  }

  /** The client. */
  get client(): RedisClient {
    return this.#client;
  }

  /** Whether {@link Connection.shut} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Runs a script. `wrote` tells from its reply whether it wrote; with the
   * replica wait on, such a write is followed by `WAIT`, in the same
   * pipeline to the same node.
   */
  async run(
    s: Script,
    keys: string[],
    args: string[],
    wrote?: (reply: unknown) => boolean,
  ): Promise<unknown> {
    const c = this.#client;
    return await this.cmd(async () => {
      if (!wrote || this.#wait === 0) {
        try {
          return await c.evalsha(s.sha, keys.length, ...keys, ...args);
        } catch (e) {
          if (!isNoScript(e)) throw e;
          return await c.eval(s.lua, keys.length, ...keys, ...args);
        }
      }
      let useSha = true;
      while (true) {
        const p = c.pipeline();
        if (useSha) p.evalsha(s.sha, keys.length, ...keys, ...args);
        else p.eval(s.lua, keys.length, ...keys, ...args);
        p.call("WAIT", String(this.#wait), String(this.#waitTimeout));
        const res = await p.exec();
        if (!res) throw new Error("The pipeline was discarded.");
        const [[err, reply] = [null, null], [werr, acked] = [null, null]] = res;
        if (err) {
          if (useSha && isNoScript(err)) {
            useSha = false;
            continue;
          }
          throw err;
        }
        if (werr) throw werr;
        if (Number(acked) < this.#wait && wrote(reply)) {
          throw new BackendError(
            `The write reached the Redis primary, but only ${
              Number(acked)
            } of ${this.#wait} replicas confirmed it within ${this.#waitTimeout} ms, so a failover now could lose it. Re-read the handle before retrying; check the replicas' health.`,
            { details: { replicas_acked: Number(acked), replicas_required: this.#wait } },
          );
        }
        return reply;
      }
    });
  }

  /** The `backend_error` a failed call becomes (mcpstate errors pass through). */
  fail(e: unknown): McpStateError {
    if (e instanceof McpStateError) return e;
    let msg = messageOf(e);
    if (/^(ERR|WRONGTYPE|OOM|NOPERM|MISCONF|NOAUTH|WRONGPASS|BUSY|NOSCRIPT)/.test(msg)) {
      return new BackendError(
        `Redis refused the operation: ${msg}. Nothing was changed by it; fix the server's state or configuration, then retry.`,
        { cause: e },
      );
    }
    // A dropped connection fails queued calls with a generic error; the
    // connection's own error (timeout, refused, reset) says more.
    const last = this.#lastError;
    if (/max retries per request|Connection is closed/i.test(msg) && last) {
      if (Date.now() - last.at < 10_000) msg = last.message;
    }
    const what = /timed out|timeout/i.test(msg)
      ? "Redis did not answer in time"
      : "Redis is unreachable or failing over";
    return new BackendError(
      `${what} (${msg}). A read can simply be retried; a write may or may not have been applied, so re-read the handle before retrying. The store reconnects by itself once Redis is back.`,
      { cause: e },
    );
  }

  /**
   * Holds back the socket writes of the commands this tick sends until its
   * microtasks have run, then sends them in one write per socket. ioredis
   * writes each command to the socket at once: with many calls in flight,
   * one system call (and one TCP segment for Redis to read) per command
   * cost the client and Redis about as much CPU as the commands themselves.
   * Only commands sent while others are in flight wait: a call on an idle
   * connection goes out at once (the cork and the flush cost a lone call
   * more than the write they save).
   */
  #coalesce(): void {
    if (this.#corked) return;
    const c = this.#client;
    const streams: { uncork(): void }[] = [];
    for (const node of c instanceof Cluster ? c.nodes("master") : [c]) {
      const s = node.stream;
      if (node.status === "ready" && s?.writable) {
        s.cork();
        streams.push(s);
      }
    }
    if (streams.length === 0) return;
    this.#corked = true;
    process.nextTick(() => {
      this.#corked = false;
      for (const s of streams) s.uncork();
    });
  }

  /** Runs calls to Redis: maps failures to `backend_error` and tracks progress for the timeout. */
  cmd<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(closedError());
    if (this.#pending++ === 0) this.#progress = Date.now();
    else this.#coalesce();
    // Handlers on the command's own promise, not an async frame: a read is a
    // hot path, and each frame costs its caller ticks of the event loop.
    const done = () => {
      this.#pending--;
      this.#progress = Date.now();
    };
    let p: Promise<T>;
    try {
      p = fn();
    } catch (e) {
      done();
      return Promise.reject(this.fail(e));
    }
    return p.then((v) => (done(), v), (e) => {
      done();
      throw this.fail(e);
    });
  }

  /** Every key that matches `pattern` on every primary (SCAN; on a cluster, per master). */
  async scanKeys(pattern: string): Promise<string[]> {
    const c = this.#client;
    const nodes = c instanceof Cluster ? c.nodes("master") : [c];
    const keys = new Set<string>();
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, batch] = await this.cmd(() =>
          node.scan(cursor, "MATCH", pattern, "COUNT", 1000)
        );
        for (const key of batch) keys.add(key);
        cursor = next;
      } while (cursor !== "0");
    }
    return [...keys];
  }

  /**
   * Refuses every later call and stops the watchdog.
   *
   * @returns Whether it was open.
   */
  shut(): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    clearInterval(this.#watchdog);
    this.#client.off("error", this.#onError);
    return true;
  }

  /** Quits the client (at most a second), then disconnects it. */
  async quit(): Promise<void> {
    const c = this.#client;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      c.quit().catch(() => {}),
      new Promise<void>((r) => timer = setTimeout(r, 1000)),
    ]);
    clearTimeout(timer);
    c.disconnect();
  }
}
