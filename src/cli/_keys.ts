/**
 * The encryption keys of every command (SPEC 9.2): `MCPSTATE_ENCRYPTION_KEYS`
 * or `--encryption-keys-file PATH`, and `--key-store URL` or
 * `MCPSTATE_KEY_STORE`. The flags are global: `main` takes them out of the
 * arguments, before or after the command's name, and every place that opens
 * a store asks {@link encryptionOption} for the store's `encryption` option.
 *
 * @module
 */

import { type EncryptionOptions, KeyRing, parseKeyList } from "../keyring.ts";
import { UsageError } from "./_command.ts";

/** The key flags of this run, as {@link takeKeyFlags} found them. */
let given: { keysFile?: string; keyStore?: string } = {};

const FLAGS = { "--encryption-keys-file": "keysFile", "--key-store": "keyStore" } as const;

/** The help lines of the key flags and their variables. */
export const KEY_HELP =
  `  MCPSTATE_ENCRYPTION_KEYS  Encryption keys id:base64[,id:base64…], first current; or --encryption-keys-file PATH (one a line, mode 600)
  MCPSTATE_KEY_STORE        Backend URL that keeps the wrapped data keys; --key-store`;

/**
 * Takes the key flags out of a command line (up to a `--`), wherever they
 * stand, and keeps them for {@link encryptionOption}.
 *
 * @param args The command line without the program name.
 * @returns The command line without the key flags.
 * @throws {UsageError} for a key flag without its value.
 */
export function takeKeyFlags(args: readonly string[]): string[] {
  given = {};
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--") {
      rest.push(...args.slice(i));
      break;
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg : arg.slice(0, eq);
    if (!Object.hasOwn(FLAGS, name)) {
      rest.push(arg);
      continue;
    }
    const value = eq < 0 ? args[++i] : arg.slice(eq + 1);
    if (value === undefined || value === "" || (eq < 0 && value.startsWith("-"))) {
      throw new UsageError(
        name === "--key-store"
          ? "--key-store needs a backend URL such as sqlite:////etc/mcpstate/keys.db."
          : "--encryption-keys-file needs the path of a file of id:base64 lines.",
      );
    }
    given[FLAGS[name as keyof typeof FLAGS]] = value;
  }
  return rest;
}

/**
 * The store's `encryption` option from the key flags and their variables:
 * `--encryption-keys-file` over `MCPSTATE_ENCRYPTION_KEYS`, `--key-store`
 * over `MCPSTATE_KEY_STORE`.
 *
 * @returns The option, or `undefined` when no keys are given.
 * @throws {UsageError} for a key file that can't be read or that group or others can read, or a key store without keys.
 * @throws {InvalidArgument} for a malformed key list.
 */
export function encryptionOption(): EncryptionOptions | undefined {
  const text = given.keysFile === undefined
    ? envOf("MCPSTATE_ENCRYPTION_KEYS")
    : readKeyFile(given.keysFile);
  const keyStore = given.keyStore ?? envOf("MCPSTATE_KEY_STORE");
  if (text === undefined) {
    if (keyStore !== undefined) {
      throw new UsageError(
        "--key-store (MCPSTATE_KEY_STORE) needs encryption keys: set MCPSTATE_ENCRYPTION_KEYS or --encryption-keys-file.",
      );
    }
    return undefined;
  }
  const { keys, current } = parseKeyList(text);
  return { keys, current, ...(keyStore === undefined ? {} : { keyStore }) };
}

/**
 * {@link encryptionOption}, its keys checked (each 256 bits) before any
 * store is opened.
 *
 * @returns The option, or `undefined` when no keys are given.
 * @throws {UsageError} as {@link encryptionOption}.
 * @throws {InvalidArgument} for a malformed key list or key.
 */
export async function checkedEncryption(): Promise<EncryptionOptions | undefined> {
  const encryption = encryptionOption();
  if (encryption !== undefined) await KeyRing.from(encryption);
  return encryption;
}

/** A variable's value; unset and empty alike are `undefined`. */
function envOf(name: string): string | undefined {
  const value = Deno.env.get(name);
  return value === undefined || value === "" ? undefined : value;
}

/** The text of a key file that only its owner can read. */
function readKeyFile(path: string): string {
  let mode: number | null;
  try {
    mode = Deno.statSync(path).mode;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new UsageError(`No key file at ${path}. Check --encryption-keys-file.`);
    }
    throw e;
  }
  if (mode !== null && (mode & 0o077) !== 0) {
    throw new UsageError(
      `The key file ${path} is readable by group or others (mode ${
        (mode & 0o777).toString(8)
      }); run: chmod 600 ${path}`,
    );
  }
  return Deno.readTextFileSync(path);
}
