/**
 * Helpers of the inspector tests: `mcpstate inspect` as a real process with
 * the program's own permission flags, and the system Chromium found on PATH.
 *
 * @module
 */

import { join } from "node:path";
import { spawnMcpstate } from "./_cli_run.ts";

/** A running `mcpstate inspect`. */
export interface RunningInspect extends AsyncDisposable {
  /** The one line it printed: the URL with its token. */
  url: string;
  /** `http://127.0.0.1:PORT`. */
  origin: string;
  /** Stops it (SIGTERM) and returns its exit code and stderr. */
  stop(): Promise<{ code: number; stderr: string }>;
}

/**
 * Starts `mcpstate inspect ARGS` and waits for its one line.
 *
 * @param home A private HOME.
 * @param args The arguments after `inspect`.
 * @returns The running inspector.
 */
export async function startInspect(home: string, args: string[]): Promise<RunningInspect> {
  const child = await spawnMcpstate(home, ["inspect", ...args]);
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  const deadline = setTimeout(() => child.kill("SIGKILL"), 30_000);
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) {
      clearTimeout(deadline);
      const status = await child.status;
      throw new Error(
        `mcpstate inspect exited ${status.code} before printing its URL:\n${await stderr}`,
      );
    }
    out += value;
  }
  clearTimeout(deadline);
  const url = out.slice(0, out.indexOf("\n"));
  let stopped: Promise<{ code: number; stderr: string }> | undefined;
  const stop = () =>
    stopped ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      const { code } = await child.status;
      await reader.cancel().catch(() => {});
      return { code, stderr: await stderr };
    })();
  return {
    url,
    origin: new URL(url).origin,
    stop,
    [Symbol.asyncDispose]: async () => void await stop(),
  };
}

/**
 * The path of the system Chromium (`chromium` on PATH). Throws when there is
 * none: the browser tests never skip.
 *
 * @returns The executable's path.
 */
export function chromiumPath(): string {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir === "") continue;
    for (const name of ["chromium", "chromium-browser"]) {
      const path = join(dir, name);
      try {
        if (Deno.statSync(path).isFile) return path;
      } catch { /* not here */ }
    }
  }
  throw new Error(
    "No chromium on PATH: the inspector's browser tests need Debian's chromium package (apt-get install chromium; .ci/run installs it).",
  );
}
