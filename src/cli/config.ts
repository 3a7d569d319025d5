/**
 * `mcpstate config`: prints the `mcpServers` entry that starts this
 * program's server, for Claude Desktop, Claude Code, Cursor and other MCP
 * clients.
 *
 * @module
 */

import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { type Command, defineCommand, EXIT_OK, printJson, UsageError } from "./_common.ts";
import { DENO_FLAGS } from "./permissions.ts";

const HELP = `Usage: mcpstate config [options]

Prints the "mcpServers" entry that starts this program's server over stdio,
to paste into an MCP client's configuration (Claude Desktop's
claude_desktop_config.json, Cursor's mcp.json, …). A compiled mcpstate binary
names itself; under "deno run" the entry runs deno with the exact permission
flags the binary has.

The entry's "env" carries MCPSTATE_BACKEND and MCPSTATE_USER when they are set
(by the options below or in the current environment).

Options:
  --name NAME      Key of the entry (default "mcpstate")
  --backend URL    Backend the server should use
  --user USER      User the server writes as
  -h, --help       Show this help
`;

/** An `mcpServers` entry. */
export interface ServerEntry {
  /** The program to start. */
  command: string;
  /** Its arguments. */
  args: string[];
  /** Environment for it, when any. */
  env?: Record<string, string>;
}

/**
 * Whether this process is a compiled `mcpstate` binary rather than `deno run`.
 *
 * @returns `true` when the executable is not `deno` itself.
 */
export function isCompiled(): boolean {
  const name = basename(Deno.execPath()).toLowerCase().replace(/\.exe$/, "");
  return name !== "deno";
}

/**
 * The entry that starts this program's stdio server.
 *
 * @param env Environment for the server.
 * @returns The entry.
 */
export function serverEntry(env: Record<string, string> = {}): ServerEntry {
  const entry: ServerEntry = isCompiled()
    ? { command: Deno.execPath(), args: ["serve"] }
    : { command: Deno.execPath(), args: ["run", ...DENO_FLAGS, mainScript(), "serve"] };
  if (Object.keys(env).length > 0) entry.env = env;
  return entry;
}

function mainScript(): string {
  const main = Deno.mainModule;
  return main.startsWith("file:") ? fileURLToPath(main) : main;
}

/** The `config` subcommand. */
export const config: Command = defineCommand({
  name: "config",
  summary: "Print the mcpServers entry for an MCP client",
  help: HELP,
  options: { name: { type: "string" }, backend: { type: "string" }, user: { type: "string" } },
  async run(values) {
    const name = values.name ?? "mcpstate";
    if (name === "") throw new UsageError("--name needs a non-empty name.");
    const env: Record<string, string> = {};
    const backend = values.backend ?? Deno.env.get("MCPSTATE_BACKEND");
    const user = values.user ?? Deno.env.get("MCPSTATE_USER");
    if (backend) env.MCPSTATE_BACKEND = backend;
    if (user) env.MCPSTATE_USER = user;
    await printJson({ mcpServers: { [name]: serverEntry(env) } });
    return EXIT_OK;
  },
});
