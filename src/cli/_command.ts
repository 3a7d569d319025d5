/**
 * What every subcommand shares: its definition, argument parsing with usage
 * errors, and failures with exit codes.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { println } from "./_output.ts";

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
export const HELP_OPTION = { help: { type: "boolean", short: "h" } } as const satisfies OptionSpec;

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
