/**
 * Runs the real `mcpstate` CLI for tests: `deno run` with exactly the
 * program's permission flags ({@link DENO_FLAGS}, the same ones `deno task
 * compile` bakes into the binaries), as a subprocess with a private HOME.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { DENO_FLAGS } from "../src/cli/permissions.ts";

/** Path of `cli.ts`. */
export const CLI: string = fileURLToPath(new URL("../cli.ts", import.meta.url));
/** The repository root (the subprocess's working directory). */
export const ROOT: string = fileURLToPath(new URL("..", import.meta.url));

/** What a finished run printed and returned. */
export interface RunResult {
  /** Exit code. */
  code: number;
  /** Everything on stdout. */
  stdout: string;
  /** Everything on stderr. */
  stderr: string;
}

/** Options of {@link mcpstate}. */
export interface RunOptions {
  /** Bytes or text for stdin (default: none). */
  stdin?: string | Uint8Array;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Flags for `deno run` instead of {@link DENO_FLAGS}. */
  denoFlags?: readonly string[];
}

let cachedDenoDir: string | undefined;

/**
 * The environment of a CLI run: the parent's without `MCPSTATE_*`, HOME in a
 * private temp directory (so nothing touches the real `~/.mcpstate`), and
 * Deno's cache pinned where it is (a new HOME must not move it).
 *
 * @param home The private home directory.
 * @param extra More variables.
 * @returns The environment.
 */
export async function cliEnv(
  home: string,
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!k.startsWith("MCPSTATE_") && k !== "DENORT_BIN") env[k] = v;
  }
  return {
    ...env,
    DENO_DIR: await denoDir(),
    HOME: home,
    USERPROFILE: home,
    NO_COLOR: "1",
    ...extra,
  };
}

/**
 * Deno's cache directory, as `deno info` reports it.
 *
 * @returns The directory.
 */
export async function denoDir(): Promise<string> {
  if (cachedDenoDir === undefined) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json"],
      stdout: "piped",
      stderr: "null",
    }).output();
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { denoDir: string };
    cachedDenoDir = info.denoDir;
  }
  return cachedDenoDir;
}

/** A private HOME for a test; remove it when done. */
export async function tempHome(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "mcpstate-cli-" });
}

/**
 * Runs `mcpstate ARGS` to completion.
 *
 * @param home The private HOME (from {@link tempHome}).
 * @param args The arguments after `mcpstate`.
 * @param options stdin, environment, flags.
 * @returns Exit code and output.
 */
export async function mcpstate(
  home: string,
  args: string[],
  options: RunOptions = {},
): Promise<RunResult> {
  const child = await spawnMcpstate(home, args, options);
  const stdin = options.stdin;
  const writing = (async () => {
    if (stdin === undefined) return;
    const w = child.stdin.getWriter();
    await w.write(typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin);
    await w.close();
  })();
  const out = await child.output();
  await writing;
  const dec = new TextDecoder();
  // Deno's own notices of packages it fetches (a cache filled from the
  // lockfile alone) are not mcpstate's output.
  const stderr = dec.decode(out.stderr).replace(/^Download https?:\/\/.*\n/gm, "");
  return { code: out.code, stdout: dec.decode(out.stdout), stderr };
}

/**
 * Starts `mcpstate ARGS` without waiting (stdout and stderr piped, stdin
 * piped when `options.stdin` is given).
 *
 * @param home The private HOME.
 * @param args The arguments after `mcpstate`.
 * @param options Environment and flags.
 * @returns The child process.
 */
export async function spawnMcpstate(
  home: string,
  args: string[],
  options: RunOptions = {},
): Promise<Deno.ChildProcess> {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", ...(options.denoFlags ?? DENO_FLAGS), CLI, ...args],
    cwd: ROOT,
    env: await cliEnv(home, options.env),
    clearEnv: true,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/**
 * Asserts the shape of a failure: the exit code, and exactly one line on
 * stderr that starts with `mcpstate`.
 *
 * @param r The run.
 * @param code The expected exit code.
 * @param pattern What the line must say.
 */
export function assertOneLineError(r: RunResult, code: number, pattern: RegExp): void {
  const lines = r.stderr.split("\n").filter((l) => l.length > 0);
  if (
    r.code !== code || lines.length !== 1 || !/^mcpstate/.test(lines[0] ?? "") ||
    !pattern.test(r.stderr)
  ) {
    throw new Error(
      `expected exit ${code} and one stderr line matching ${pattern}, got exit ${r.code}:\n--- stderr\n${r.stderr}--- stdout\n${r.stdout}`,
    );
  }
}
