/**
 * What every subcommand shares: argument parsing with usage errors, the
 * global settings (`--backend`, `--user` and their environment variables),
 * failures with exit codes, and output helpers.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { HandleStore } from "../store.ts";
import type { HandleStoreOptions } from "../types.ts";
import { DEFAULT_URL, filePathOf } from "../url.ts";

/** Exit code: success. */
export const EXIT_OK = 0;
/** Exit code: the command was well formed but failed (not found, unreachable, corrupt input, verification). */
export const EXIT_FAILURE = 1;
/** Exit code: the command line is wrong (unknown command or option, missing argument, malformed value or URL). */
export const EXIT_USAGE = 2;

/** The command line is wrong; exit code 2. */
export class UsageError extends Error {
  /**
   * Creates a usage error.
   *
   * @param message One line saying what is wrong and what to type instead.
   */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** The command failed for a reason the user can act on; exit code 1. */
export class CliFailure extends Error {
  /**
   * Creates a failure.
   *
   * @param message One line saying what failed and what to do next.
   */
  constructor(message: string) {
    super(message);
    this.name = "CliFailure";
  }
}

/** One subcommand of `mcpstate`. */
export interface Command {
  /** The word after `mcpstate`. */
  name: string;
  /** One line for the command list of `mcpstate --help`. */
  summary: string;
  /** The full text of `mcpstate <name> --help`. */
  help: string;
  /**
   * Runs the command.
   *
   * @param args The arguments after the command word.
   * @returns The exit code.
   */
  run(args: string[]): Promise<number>;
}

/** A `parseArgs` option table. */
export type OptionSpec = Record<
  string,
  { type: "string" | "boolean"; short?: string; multiple?: boolean }
>;

/** The values `parse` returns for an option table. */
export type Values<O extends OptionSpec> = {
  [K in keyof O]?: O[K] extends { type: "boolean" } ? boolean
    : O[K] extends { multiple: true } ? string[]
    : string;
};

/** The option every command takes: `-h`, `--help`. */
const HELP_OPTION = { help: { type: "boolean", short: "h" } } as const satisfies OptionSpec;

/** Options every data command takes: `--backend URL`, `--help`. */
export const BACKEND_OPTIONS = {
  backend: { type: "string" },
  ...HELP_OPTION,
} as const satisfies OptionSpec;

/** Options of a data command about one user that can answer in JSON: `--user`, `--json`, and {@link BACKEND_OPTIONS}. */
export const USER_JSON_OPTIONS = {
  ...BACKEND_OPTIONS,
  user: { type: "string" },
  json: { type: "boolean" },
} as const satisfies OptionSpec;

/**
 * The help lines of `--backend` and `--help`, which end the options of every
 * data command.
 *
 * @param width The width of the option column.
 * @returns Two lines, without a final newline.
 */
export function backendHelp(width = 17): string {
  return [
    "--backend URL".padEnd(width) +
    "Backend (default: $MCPSTATE_BACKEND, else sqlite:///~/.mcpstate/state.db)",
    "-h, --help".padEnd(width) + "Show this help",
  ].map((l) => "  " + l).join("\n");
}

/** What a subcommand declares; {@link defineCommand} adds the parsing and `--help`. */
export interface CommandSpec<O extends OptionSpec> {
  /** The word after `mcpstate`. */
  name: string;
  /** One line for the command list of `mcpstate --help`. */
  summary: string;
  /** The full text of `mcpstate <name> --help`. */
  help: string;
  /** Its options (`--help` is added). */
  options: O;
  /** How many positional arguments it takes (min, max); default none. */
  positionals?: [min: number, max: number];
  /**
   * Runs the command on its parsed arguments.
   *
   * @param values The options given.
   * @param positionals The positional arguments.
   * @returns The exit code.
   */
  run(values: Values<O>, positionals: string[]): Promise<number>;
}

/**
 * Makes a subcommand: its arguments are parsed (every mistake a
 * {@link UsageError}), `--help` prints its help, and the rest is `spec.run`.
 *
 * @param spec The command's name, texts, options and body.
 * @returns The command.
 */
export function defineCommand<O extends OptionSpec>(spec: CommandSpec<O>): Command {
  return {
    name: spec.name,
    summary: spec.summary,
    help: spec.help,
    async run(args: string[]): Promise<number> {
      const options = { ...spec.options, ...HELP_OPTION };
      const { values, positionals } = parse(spec.name, args, options, spec.positionals);
      if (values.help) {
        await println(spec.help.trimEnd());
        return EXIT_OK;
      }
      return await spec.run(values as Values<O>, positionals);
    },
  };
}

/**
 * Parses a subcommand's arguments; every mistake becomes a {@link UsageError}
 * with one line naming the option and pointing at `--help`.
 *
 * @param command The subcommand, for messages.
 * @param args Its arguments.
 * @param options Its options.
 * @param positionals How many positional arguments it takes (min, max).
 * @returns The parsed values and positionals.
 */
export function parse<O extends OptionSpec>(
  command: string,
  args: string[],
  options: O,
  positionals: [min: number, max: number] = [0, 0],
): { values: Values<O>; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(`${usageMessage(e)}. Run "mcpstate ${command} --help" for the options.`);
  }
  const values = parsed.values as Values<O>;
  if ((values as { help?: boolean }).help) return { values, positionals: parsed.positionals };
  const [min, max] = positionals;
  const got = parsed.positionals;
  if (got.length > max) {
    throw new UsageError(
      `Unexpected argument ${
        JSON.stringify(got[max])
      }. Run "mcpstate ${command} --help" for the usage.`,
    );
  }
  if (got.length < min) {
    throw new UsageError(
      `Missing argument. Run "mcpstate ${command} --help" for the usage.`,
    );
  }
  return { values, positionals: got };
}

function usageMessage(e: unknown): string {
  const code = (e as { code?: string }).code;
  const text = e instanceof Error ? e.message.split("\n")[0] ?? "" : String(e);
  const option = /'(-[^' ]+)/.exec(text)?.[1];
  switch (code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `Unknown option ${option ?? text}`;
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      if (/does not take an argument/.test(text)) return `Option ${option} takes no value`;
      return `Option ${option ?? ""} needs a value`;
    default:
      if (/ambiguous/.test(text)) {
        return `Option ${option ?? ""} needs a value (write ${
          option ?? "--option"
        }=-value for a value starting with "-")`;
      }
      return text.replace(/\.$/, "");
  }
}

/**
 * The backend URL: `--backend`, else `MCPSTATE_BACKEND`, else the default.
 *
 * @param flag The value of `--backend`, if given.
 * @returns The URL to open.
 */
export function backendUrl(flag: string | undefined): string {
  if (flag !== undefined) {
    if (flag === "") {
      throw new UsageError("--backend needs a URL such as sqlite:///~/.mcpstate/state.db.");
    }
    return flag;
  }
  const env = Deno.env.get("MCPSTATE_BACKEND");
  return env === undefined || env === "" ? DEFAULT_URL : env;
}

/**
 * The user to act as: `--user`, else `MCPSTATE_USER`, else `"local"` (the
 * user the stdio server writes as).
 *
 * @param flag The value of `--user`, if given.
 * @returns The user.
 */
export function userOf(flag: string | undefined): string {
  const env = Deno.env.get("MCPSTATE_USER");
  return onlyUser(flag) ?? (env === undefined || env === "" ? "local" : env);
}

/**
 * The user of a command that acts on every user unless `--user` names one
 * (`MCPSTATE_USER` is not consulted).
 *
 * @param flag The value of `--user`, if given.
 * @returns The user, or `undefined` for every user.
 */
export function onlyUser(flag: string | undefined): string | undefined {
  if (flag === "") throw new UsageError("--user needs a non-empty user name.");
  return flag;
}

/**
 * Opens a store for a one-shot command (no background reclaim).
 *
 * @param url The backend URL.
 * @param options More store options (the size cap).
 * @returns The open store.
 */
export async function openStore(
  url: string,
  options: HandleStoreOptions = {},
): Promise<HandleStore> {
  return await HandleStore.fromUrl(url, { ...options, reclaimIntervalMs: 0 });
}

/**
 * Opens the store of a data command's `--backend` (see {@link backendUrl}
 * and {@link openStore}).
 *
 * @param values The command's options.
 * @returns The open store.
 */
export async function storeOf(values: { backend?: string }): Promise<HandleStore> {
  return await openStore(backendUrl(values.backend));
}

/**
 * The file a `sqlite:///…` or `denokv:///…` URL names when that file does
 * not exist yet (opening it would create it and its folders).
 *
 * @param url A backend URL.
 * @returns The missing file's path; `undefined` for any other URL or a file that exists.
 */
export function missingFile(url: string): string | undefined {
  const scheme = /^(sqlite|denokv):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined) return undefined;
  const { path } = filePathOf(url, scheme);
  if (path === ":memory:") return undefined;
  try {
    Deno.statSync(path);
    return undefined;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return path;
    throw e;
  }
}

/**
 * Opens the store of a command that only reads (list, get, export): a file
 * that does not exist yet is not created; the command reads an empty store
 * instead, which answers what the file would answer before its first write.
 *
 * @param url The backend URL.
 * @returns The open store.
 */
export async function openReadStore(url: string): Promise<HandleStore> {
  return await openStore(missingFile(url) === undefined ? url : "memory://");
}

const encoder = new TextEncoder();

/**
 * Writes all of `bytes` to a writer (`Deno.stdout`, a file).
 *
 * @param w The writer.
 * @param bytes The bytes.
 */
export async function writeAll(
  w: { write(p: Uint8Array): Promise<number> },
  bytes: Uint8Array,
): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await w.write(bytes.subarray(off));
}

/**
 * Prints text to stdout.
 *
 * @param text The text; a newline is added.
 */
export async function println(text: string): Promise<void> {
  await writeAll(Deno.stdout, encoder.encode(text + "\n"));
}

/**
 * Prints a value as indented JSON to stdout.
 *
 * @param value A JSON value.
 */
export async function printJson(value: unknown): Promise<void> {
  await println(JSON.stringify(value, null, 2));
}

/**
 * Prints a command's result: as JSON with `--json`, else as a line for people.
 *
 * @param json Whether `--json` was given.
 * @param value The JSON form.
 * @param text The line for people.
 */
export async function printResult(
  json: boolean | undefined,
  value: unknown,
  text: string,
): Promise<void> {
  if (json) await printJson(value);
  else await println(text);
}

/**
 * Prints one line to stderr (messages for people: notes and summaries).
 *
 * @param text The text.
 */
export function note(text: string): void {
  Deno.stderr.writeSync(encoder.encode(text + "\n"));
}

/**
 * Collapses an error message into one line with credentials redacted.
 *
 * @param text Any message.
 * @returns One line.
 */
export function oneLine(text: string): string {
  // Like redact(), but leaves placeholders such as "redis://[user:pass@]host" alone.
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)(?!\[)[^\s/@]*@/gi, "$1***@")
    .replace(/\s*\r?\n\s*/g, " ").trim();
}

/**
 * Renders rows as a left-aligned table with a header.
 *
 * @param header Column titles.
 * @param rows Cells.
 * @returns The lines, without a trailing newline.
 */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)).join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/**
 * Formats epoch ms as `2026-07-28 12:00:05Z` for tables.
 *
 * @param ms Epoch ms.
 * @returns The short UTC form.
 */
export function shortTime(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d{3}Z$/, "Z");
}

/**
 * Parses a whole positive number option.
 *
 * @param name The option, for the message.
 * @param text Its value.
 * @returns The number.
 */
export function positiveInt(name: string, text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(
      `${name} must be a whole number greater than 0 (got ${JSON.stringify(text)}).`,
    );
  }
  return n;
}
