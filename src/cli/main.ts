/**
 * The `mcpstate` command line: dispatches to the subcommands, turns every
 * failure into one line on stderr, and returns exit codes scripts can trust:
 *
 * - `0`: success.
 * - `1`: the command failed: a handle not found or expired, a backend
 *   unreachable or refusing, a corrupt import line, a record that did not
 *   verify, a failed doctor check.
 * - `2`: the command line is wrong: unknown command or option, missing or
 *   extra argument, malformed value, unsupported or malformed backend URL.
 *
 * `serve` (`serve.ts`, over the server's typed serving functions) is loaded
 * only when it runs, so that the other subcommands never load the MCP SDK;
 * so is `inspect` (`inspect.ts`, over the web inspector in `src/inspect/`).
 *
 * @example
 * ```ts ignore
 * import { main } from "./main.ts";
 * Deno.exit(await main(["list", "--json"]));
 * ```
 *
 * @module
 */

import { McpStateError } from "../errors.ts";
import {
  CliFailure,
  type Command,
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  UsageError,
} from "./_command.ts";
import { KEY_HELP, takeKeyFlags } from "./_keys.ts";
import { note, oneLine, println } from "./_output.ts";
import { config } from "./config.ts";
import { doctor } from "./doctor.ts";
import { encrypt } from "./encrypt.ts";
import { erase } from "./erase.ts";
import { exportCommand } from "./export.ts";
import { get } from "./get.ts";
import { del, share, transferHandle, unshare } from "./handles.ts";
import { importCommand } from "./import.ts";
import { keys } from "./keys.ts";
import { list } from "./list.ts";
import { migrate } from "./migrate.ts";
import { sweep } from "./sweep.ts";
import { VERSION } from "../version.ts";

/** A subcommand whose module is loaded only when it runs (its own `--help` prints its help). */
function lazy(
  name: string,
  summary: string,
  load: () => Promise<(args: string[]) => Promise<number>>,
): Command {
  return {
    name,
    summary,
    help: "",
    async run(args: string[]): Promise<number> {
      return await (await load())(args);
    },
  };
}

const serve = lazy(
  "serve",
  "Run the MCP server (stdio, or --transport http); see serve --help",
  async () => (await import("./serve.ts")).serve,
);

const inspect = lazy(
  "inspect",
  "Browse a user's handles, histories and trash in a web page",
  async () => {
    const { inspect } = await import("./inspect.ts");
    return (args) => inspect.run(args);
  },
);

/** Every subcommand, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = Object.freeze([
  serve,
  inspect,
  list,
  get,
  del,
  transferHandle,
  share,
  unshare,
  erase,
  encrypt,
  keys,
  sweep,
  exportCommand,
  importCommand,
  migrate,
  doctor,
  config,
]);

/**
 * The text of `mcpstate --help`.
 *
 * @returns The help.
 */
export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return `mcpstate ${VERSION}: durable, user-keyed state for stateless MCP servers

Usage: mcpstate <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n")}

Options:
  -h, --help       Show this help (or "mcpstate <command> --help")
  -V, --version    Print the version

Settings (flags override them):
  MCPSTATE_BACKEND   Backend URL (default sqlite:///~/.mcpstate/state.db); --backend
  MCPSTATE_USER      User for list, get, delete, transfer, inspect and stdio serve (default "local"); --user
${KEY_HELP}

Backend URLs: sqlite:///~/path.db, sqlite:////abs/path.db, redis://[user:pass@]host:port/db,
rediss://…, denokv:///path.kv, denokv+https://…, postgres://…, memory://

Exit codes: 0 success; 1 the command failed (not found, backend unreachable,
corrupt input, verification); 2 usage error (unknown command or option, bad
argument or URL).`;
}

/**
 * Runs the CLI.
 *
 * @param args Command-line arguments without the program name.
 * @returns The exit code.
 */
export async function main(args: string[]): Promise<number> {
  let name = "mcpstate";
  try {
    const [first, ...rest] = takeKeyFlags(args);
    if (first === undefined || first === "-h" || first === "--help" || first === "help") {
      if (first === "help" && rest[0] !== undefined) return await main([rest[0], "--help"]);
      if (first === undefined) {
        note(mainHelp());
        return EXIT_USAGE;
      }
      await println(mainHelp());
      return EXIT_OK;
    }
    if (first === "-V" || first === "--version" || first === "version") {
      await println(`mcpstate ${VERSION}`);
      return EXIT_OK;
    }
    const command = COMMANDS.find((c) => c.name === first);
    if (!command) {
      throw new UsageError(
        first.startsWith("-")
          ? `Unknown option ${first} before the command. Run "mcpstate --help" for the commands.`
          : `Unknown command ${JSON.stringify(first)}. Run "mcpstate --help" for the commands.`,
      );
    }
    name = `mcpstate ${command.name}`;
    return await command.run(rest);
  } catch (e) {
    const [code, message] = describe(e);
    note(`${name}: ${oneLine(message)}`);
    return code;
  }
}

/** Maps a failure to its exit code and one line for people. */
function describe(e: unknown): [number, string] {
  if (e instanceof UsageError) return [EXIT_USAGE, e.message];
  if (e instanceof CliFailure) return [EXIT_FAILURE, e.message];
  if (e instanceof McpStateError) {
    switch (e.code) {
      case "invalid_argument":
        return [EXIT_USAGE, e.message];
      case "handle_not_found":
        return [
          EXIT_FAILURE,
          `No handle ${
            JSON.stringify(e.details.handle)
          } exists for this user. Check the handle and --user; "mcpstate list" shows the user's handles.`,
        ];
      case "handle_expired":
        return [
          EXIT_FAILURE,
          `Handle ${JSON.stringify(e.details.handle)} expired at ${
            String(e.details.expired_at)
          }; it can no longer be read. "mcpstate list --include-expired" shows it until it is reclaimed.`,
        ];
      case "encryption_error":
        return [EXIT_FAILURE, `${e.message} (encryption_error: ${String(e.details.reason)})`];
      default:
        return [EXIT_FAILURE, e.message];
    }
  }
  if (e instanceof Deno.errors.BrokenPipe) return [EXIT_FAILURE, "The output was closed early."];
  if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
    return [EXIT_FAILURE, `Permission denied: ${e.message}`];
  }
  if (e instanceof Error) return [EXIT_FAILURE, `Unexpected ${e.name}: ${e.message}`];
  return [EXIT_FAILURE, `Unexpected failure: ${String(e)}`];
}
