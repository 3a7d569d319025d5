/**
 * What `mcpstate encrypt` and `mcpstate keys rotate` share: their options,
 * the store they open (with keys, else a usage error), their progress line
 * and their counts in words.
 *
 * @module
 */

import type { MaintenanceOptions } from "../store/_encrypt.ts";
import type { HandleStore } from "../store.ts";
import { positiveInt, UsageError } from "./_command.ts";
import { encryptionOption } from "./_keys.ts";
import { flags, strings } from "./_options.ts";
import { BACKEND_OPTIONS, backendUrl, openStore } from "./_store.ts";
import { Progress } from "./progress.ts";

/** Their options: `--rate N`, `--json`, `--backend URL`, `--help`. */
export const MAINTAIN_OPTIONS = {
  ...BACKEND_OPTIONS,
  ...strings("rate"),
  ...flags("json"),
};

/**
 * The help lines of `--rate` and `--json` (the backend's follow).
 *
 * @param json What `--json` prints.
 * @returns Two lines, without a final newline.
 */
export function maintainHelp(json: string): string {
  return [
    "--rate N".padEnd(17) + "At most N rewrites per second (spare busy servers)",
    "--json".padEnd(17) + json,
  ].map((l) => "  " + l).join("\n");
}

/**
 * Opens the command's store, which must have encryption keys.
 *
 * @param values The command's options.
 * @param command The command, for the message.
 * @returns The open store.
 * @throws {UsageError} when no keys are given.
 */
export async function keyedStore(
  values: { backend?: string },
  command: string,
): Promise<HandleStore> {
  if (encryptionOption() === undefined) {
    throw new UsageError(
      `${command} needs the encryption keys: set MCPSTATE_ENCRYPTION_KEYS=id:base64[,…] or give --encryption-keys-file PATH (the first key is current).`,
    );
  }
  return await openStore(backendUrl(values.backend));
}

/**
 * The run options of a command: its `--rate`, and a progress line on
 * stderr (drawn when it is a terminal) counting `what`.
 *
 * @param values The command's options.
 * @param label The progress line's label.
 * @param unit What it counts.
 * @returns The options, and the function that clears the line.
 */
export function runOptions(
  values: { rate?: string },
  label: string,
  unit: string,
): { options: MaintenanceOptions; finish: () => void } {
  const progress = new Progress(label, { unit });
  let seen = 0;
  const options: MaintenanceOptions = {
    onProgress: (done) => {
      progress.tick(done - seen);
      seen = done;
    },
  };
  if (values.rate !== undefined) options.rate = positiveInt("--rate", values.rate);
  return { options, finish: () => progress.finish() };
}

/**
 * `1 record`, `2 records`, numbers grouped by thousands.
 *
 * @param n The number.
 * @param one The noun for one.
 * @param many The noun for more (default: `one` + `s`).
 * @returns The phrase.
 */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`;
}

/**
 * `k9: 3, tampered: 1`: failures by why.
 *
 * @param failed Counts by why.
 * @returns The list.
 */
export function byWhy(failed: Record<string, number>): string {
  return Object.entries(failed).map(([why, n]) => `${why}: ${n.toLocaleString("en-US")}`)
    .join(", ");
}
