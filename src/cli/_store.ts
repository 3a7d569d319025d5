/**
 * The store a data command works on: the `--backend` and `--user` settings
 * (and their environment variables), and opening the store, without
 * creating a file for a command that only reads.
 *
 * @module
 */

import { HandleStore } from "../store.ts";
import type { HandleStoreOptions } from "../types.ts";
import { DEFAULT_URL, filePathOf } from "../url.ts";
import { HELP_OPTION, type OptionSpec, UsageError } from "./_command.ts";
import { checkedEncryption } from "./_keys.ts";

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
 * Opens a store for a one-shot command (no background reclaim), with the
 * encryption keys of the command line and environment (see `_keys.ts`).
 *
 * @param url The backend URL.
 * @param options More store options (the size cap).
 * @returns The open store.
 */
export async function openStore(
  url: string,
  options: HandleStoreOptions = {},
): Promise<HandleStore> {
  const encryption = await checkedEncryption();
  return await HandleStore.fromUrl(url, {
    ...options,
    ...(encryption === undefined ? {} : { encryption }),
    reclaimIntervalMs: 0,
  });
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
