/**
 * A real `mcpstate serve --transport http` process for the gauntlet: like the
 * test harness's `startHttpServer`, plus its process id (for memory readings)
 * and whether it is still alive.
 *
 * @module
 */

import { cleanEnv, freePort, SERVE } from "../tests/_server_harness.ts";
import { sleep } from "./_util.ts";

/** A running server process. */
export interface ServerProcess extends AsyncDisposable {
  /** Its process id. */
  pid: number;
  /** Its port. */
  port: number;
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  /** `http://127.0.0.1:<port>/mcp`. */
  url: URL;
  /** Everything it printed on stderr so far. */
  stderr(): string;
  /** The exit status once it exited, else `undefined`. */
  exited(): Deno.CommandStatus | undefined;
  /** Whether `/healthz` answers 200 within `timeoutMs`. */
  healthy(timeoutMs?: number): Promise<boolean>;
  /** SIGTERM (SIGKILL after 10 s), then the exit status. */
  stop(): Promise<Deno.CommandStatus>;
}

/**
 * Starts `mcpstate serve --transport http` on a free loopback port and waits
 * until `/healthz` answers.
 *
 * @param args Extra `serve` arguments (backend, auth).
 * @param env Extra environment.
 * @returns The running server.
 */
export async function startServer(
  args: string[],
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: [...SERVE, "--transport", "http", "--port", String(port), ...args],
    env: cleanEnv(env),
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let err = "";
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) err += dec.decode(chunk, { stream: true });
  })();
  let status: Deno.CommandStatus | undefined;
  child.status.then((s) => status = s);
  const origin = `http://127.0.0.1:${port}`;

  const healthy = async (timeoutMs = 5000): Promise<boolean> => {
    try {
      const res = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
      const body = await res.json();
      return res.status === 200 && body.ok === true;
    } catch {
      return false;
    }
  };

  const deadline = Date.now() + 30_000;
  while (!await healthy(1000)) {
    if (status) {
      await pump;
      throw new Error(`The server exited (${status.code}) before listening:\n${err}`);
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      await child.status;
      throw new Error(`The server did not answer /healthz in 30 s:\n${err}`);
    }
    await sleep(50);
  }

  let stopped: Promise<Deno.CommandStatus> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      const t = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // gone
        }
      }, 10_000);
      const s = await child.status;
      clearTimeout(t);
      await pump;
      return s;
    })();
    return stopped;
  };
  return {
    pid: child.pid,
    port,
    origin,
    url: new URL(`${origin}/mcp`),
    stderr: () => err,
    exited: () => status,
    healthy,
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}
