/**
 * `mcpstate config`: prints the client entry that starts this program's
 * server, for Claude Desktop, Claude Code, Cursor, VS Code and other MCP
 * clients, in the form of the way it was installed (`npx`, a binary, or
 * Deno), never with a path inside an npm or Deno cache.
 *
 * @module
 */

import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { type Command, defineCommand, EXIT_OK, UsageError } from "./_command.ts";
import { strings } from "./_options.ts";
import { note, println } from "./_output.ts";
import { DENO_FLAGS } from "./permissions.ts";
import { VERSION } from "../version.ts";

const HELP = `Usage: mcpstate config [options]

Prints the entry that starts this program's server over stdio, to paste into
an MCP client's configuration. Without --client: the "mcpServers" entry
(Claude Desktop's claude_desktop_config.json, Cursor's mcp.json, …).

The entry fits the way mcpstate was installed: "npx -y mcpstate serve" for
the npm package, the binary's own path for a compiled binary, and "deno run"
with the exact permission flags of the binary for Deno (a checkout's cli.ts,
else the JSR package). It never names a path inside an npm or Deno cache.

The entry's "env" carries MCPSTATE_BACKEND and MCPSTATE_USER when they are set
(by the options below or in the current environment).

Options:
  --client CLIENT  claude-desktop, cursor (the "mcpServers" form), vscode (the
                   "servers" form of .vscode/mcp.json) or claude-code (the
                   "claude mcp add" command line)
  --via WAY        npx, binary or deno (default: the way this one was installed)
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

/** The ways `mcpstate` is installed, and so the ways an entry can start it. */
export const VIAS = ["npx", "binary", "deno"] as const;
/** A way of starting `mcpstate`. */
export type Via = typeof VIAS[number];

/** The clients `--client` knows. */
export const CLIENTS = ["claude-desktop", "claude-code", "cursor", "vscode"] as const;
/** A client `--client` knows. */
export type Client = typeof CLIENTS[number];

/** Where this program runs from: what decides the entry. */
export interface Install {
  /** URL of this module (`import.meta.url`). */
  moduleUrl: string;
  /** The executable (`Deno.execPath()`). */
  execPath: string;
  /** Whether the executable is a compiled `mcpstate` binary. */
  compiled: boolean;
}

/**
 * Whether this process is a compiled `mcpstate` binary rather than `deno run`.
 *
 * @returns `true` when the executable is not `deno` itself.
 */
export function isCompiled(): boolean {
  let exec: string;
  try {
    exec = Deno.execPath();
  } catch {
    return false; // no --allow-read: deno run without flags, never a binary
  }
  const name = basename(exec).toLowerCase().replace(/\.exe$/, "");
  return name !== "deno";
}

/**
 * Where this program runs from.
 *
 * @returns This process's install.
 */
export function currentInstall(): Install {
  return { moduleUrl: import.meta.url, execPath: Deno.execPath(), compiled: isCompiled() };
}

function slashes(path: string): string {
  return path.replaceAll("\\", "/");
}

/**
 * Whether a path or URL lies in a place a cache clean or a reinstall removes:
 * the npm package directory (`node_modules/mcpstate/`), npx's cache, Deno's
 * cache (`DENO_DIR`, its default places, remote modules).
 *
 * @param where A file path or URL.
 * @returns `true` for a cache path.
 */
export function inCache(where: string): boolean {
  const p = slashes(where);
  if (/^(https?|jsr|npm):/.test(p)) return true;
  if (/\/node_modules\/|\/_npx\/|\/\.npm\/|\/registry\.npmjs\.org\//.test(p)) return true;
  if (/\/(\.cache|Library\/Caches|AppData\/Local)\/deno\//i.test(p)) return true;
  const denoDir = Deno.env.get("DENO_DIR");
  return denoDir !== undefined && denoDir !== "" && p.startsWith(slashes(denoDir) + "/");
}

/**
 * The way an install starts: a module under `node_modules/mcpstate/` is the
 * npm package (`npx`), a compiled executable is a binary, anything else runs
 * under Deno.
 *
 * @param install Where it runs from.
 * @returns The way.
 */
export function detectVia(install: Install): Via {
  if (/\/node_modules\/mcpstate\//.test(slashes(install.moduleUrl))) return "npx";
  return install.compiled ? "binary" : "deno";
}

function denoScript(install: Install): string {
  const url = install.moduleUrl;
  if (url.startsWith("file:") && !inCache(url) && !install.compiled) {
    return fileURLToPath(new URL("../../cli.ts", url));
  }
  return `jsr:@mcpstate/core@${VERSION}/cli`;
}

/**
 * The entry that starts the stdio server the given way.
 *
 * @param env Environment for the server.
 * @param via The way (default: the way this one was installed).
 * @param install Where it runs from (default: this process).
 * @returns The entry.
 */
export function serverEntry(
  env: Record<string, string> = {},
  via?: Via,
  install: Install = currentInstall(),
): ServerEntry {
  const way = via ?? detectVia(install);
  const stable = (path: string, name: string) => inCache(path) ? name : path;
  let entry: ServerEntry;
  if (way === "npx") entry = { command: "npx", args: ["-y", "mcpstate", "serve"] };
  else if (way === "binary") {
    const self = install.compiled ? install.execPath : "mcpstate";
    entry = { command: stable(self, "mcpstate"), args: ["serve"] };
  } else {
    const deno = install.compiled ? "deno" : stable(install.execPath, "deno");
    entry = { command: deno, args: ["run", ...DENO_FLAGS, denoScript(install), "serve"] };
  }
  if (Object.keys(env).length > 0) entry.env = env;
  return entry;
}

/**
 * Quotes one word for a POSIX shell when it needs quoting.
 *
 * @param word The word.
 * @returns It, or it in single quotes.
 */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * What `mcpstate config` prints for a client: a JSON document, or Claude
 * Code's `claude mcp add` line.
 *
 * @param client The client (`undefined`: the `mcpServers` form).
 * @param name The entry's key.
 * @param entry The entry.
 * @returns The text for stdout.
 */
export function clientConfig(client: Client | undefined, name: string, entry: ServerEntry): string {
  if (client === "claude-code") {
    const env = Object.entries(entry.env ?? {}).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    const words = ["claude", "mcp", "add", name, ...env, "--", entry.command, ...entry.args];
    return words.map(shellWord).join(" ");
  }
  if (client === "vscode") {
    return JSON.stringify({ servers: { [name]: { type: "stdio", ...entry } } }, null, 2);
  }
  return JSON.stringify({ mcpServers: { [name]: entry } }, null, 2);
}

const WHERE: Record<Client, string> = {
  "claude-desktop":
    "Add it to claude_desktop_config.json (Settings > Developer > Edit Config), then restart Claude Desktop.",
  "claude-code": "Run this line in a terminal; add --scope user to use it in every project.",
  "cursor": "Add it to ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project).",
  "vscode": 'Add it to .vscode/mcp.json, or run "MCP: Open User Configuration".',
};

function oneOf<T extends string>(option: string, value: string | undefined, allowed: readonly T[]) {
  if (value === undefined || (allowed as readonly string[]).includes(value)) {
    return value as T | undefined;
  }
  throw new UsageError(`${option} must be one of ${allowed.join(", ")} (got ${value}).`);
}

function hints(via: Via | undefined, install: Install): void {
  if (via === undefined || via === detectVia(install)) return;
  if (via === "binary" && !install.compiled) {
    note('This entry runs "mcpstate" from PATH: put the compiled binary there first.');
  } else if (via === "npx") note("This entry needs Node.js and npm (npx) where the client runs.");
  else if (via === "deno") note("This entry needs Deno (deno) where the client runs.");
}

/** The `config` subcommand. */
export const config: Command = defineCommand({
  name: "config",
  summary: "Print the client entry (mcpServers, VS Code, claude mcp add)",
  help: HELP,
  options: strings("name", "backend", "user", "client", "via"),
  async run(values) {
    const name = values.name ?? "mcpstate";
    if (name === "") throw new UsageError("--name needs a non-empty name.");
    const client = oneOf("--client", values.client, CLIENTS);
    const via = oneOf("--via", values.via, VIAS);
    const env: Record<string, string> = {};
    const backend = values.backend ?? Deno.env.get("MCPSTATE_BACKEND");
    const user = values.user ?? Deno.env.get("MCPSTATE_USER");
    if (backend) env.MCPSTATE_BACKEND = backend;
    if (user) env.MCPSTATE_USER = user;
    const install = currentInstall();
    await println(clientConfig(client, name, serverEntry(env, via, install)));
    hints(via, install);
    if (client !== undefined) note(WHERE[client]);
    return EXIT_OK;
  },
});
