/**
 * The crash gauntlet's keys, iteration by iteration, and its kills of the
 * maintenance commands, `mcpstate encrypt` and `mcpstate keys rotate`:
 *
 * - `keys`: one key for the run; the writer and the checker use it;
 * - `encrypt`: the writer writes without keys while `mcpstate encrypt`
 *   (with the key) runs beside it and is SIGKILLed at a random moment; then
 *   it runs again to completion, and the checker reads everything with the
 *   key (its refusals of the writer, `encryption_error`, change nothing);
 * - `rotate`: each iteration adds a new key in front of the ring; the writer
 *   writes with that ring while `mcpstate keys rotate` runs beside it and is
 *   SIGKILLed; then it runs again to completion, and the checker opens
 *   everything with the new key alone (the old one dropped from the ring).
 *
 * @module
 */

import type { EncryptionOptions } from "../mod.ts";
import { mcpstate, type RunResult, spawnMcpstate } from "../tests/_cli_run.ts";
import { timer } from "./_util.ts";

/** How a crash run uses encryption keys. */
export type KeyMode = "plain" | "keys" | "encrypt" | "rotate";

/** A ring of keys: the library's option and the CLI's `MCPSTATE_ENCRYPTION_KEYS`. */
export interface CrashKeys {
  options: EncryptionOptions;
  /** `MCPSTATE_ENCRYPTION_KEYS`. */
  env: string;
}

/** A fresh 256-bit key-encryption key, as base64. */
function newKek(): string {
  return crypto.getRandomValues(new Uint8Array(32)).toBase64();
}

/** A ring of `[id, base64]` keys, the first current. */
function ringOf(keys: [string, string][]): CrashKeys {
  return {
    options: { keys: Object.fromEntries(keys), current: keys[0]![0] },
    env: keys.map(([id, k]) => `${id}:${k}`).join(","),
  };
}

/** The keys of a crash run, iteration by iteration (see the module doc). */
export class KeyPlan {
  #current: [string, string] = ["k0", newKek()];
  #next: [string, string] | undefined;
  #count = 0;

  /** @param mode How the run uses keys. */
  constructor(readonly mode: KeyMode) {}

  /** Rotate: the new key of this iteration (the same until {@link KeyPlan.done}). */
  #fresh(): [string, string] {
    return this.#next ??= [`k${++this.#count}`, newKek()];
  }

  /** The writer's ring (`undefined`: it writes without keys). */
  child(): string | undefined {
    if (this.mode === "keys") return ringOf([this.#current]).env;
    if (this.mode === "rotate") return ringOf([this.#fresh(), this.#current]).env;
    return undefined;
  }

  /** The maintenance command's ring, or `undefined` when the run has none. */
  command(): string | undefined {
    if (this.mode === "encrypt") return ringOf([this.#current]).env;
    if (this.mode === "rotate") return ringOf([this.#fresh(), this.#current]).env;
    return undefined;
  }

  /**
   * The checker's ring once the iteration's maintenance ran: rotate's new
   * key alone (between iterations, the current one).
   */
  checker(): CrashKeys | undefined {
    if (this.mode === "plain") return undefined;
    return ringOf([this.#next ?? this.#current]);
  }

  /** After a verified iteration: rotate's new key is the current one. */
  done(): void {
    if (this.mode !== "rotate") return;
    this.#current = this.#fresh();
    this.#next = undefined;
  }
}

/** What the maintenance kills count (a part of the crash report). */
export interface MaintenanceCounts {
  /** Maintenance commands started beside the writer (each then SIGKILLed unless it ended). */
  maintenanceRuns: number;
  /** Of those, the ones that ended before their kill. */
  maintenanceFinished: number;
  /** Reruns to completion that still found work (copies to seal, data keys to rewrap). */
  maintenanceResumed: number;
}

/** The environment of a CLI run on `url` with `keys`. */
export function cliEnvOf(url: string, keys: string | undefined): Record<string, string> {
  return { MCPSTATE_BACKEND: url, ...(keys ? { MCPSTATE_ENCRYPTION_KEYS: keys } : {}) };
}

/**
 * Starts `mcpstate ARGS` and SIGKILLs it after `ms`, unless it ended first.
 *
 * @returns Whether it ended, with exit code 0, before the kill.
 */
export async function killedCli(
  home: string,
  args: string[],
  env: Record<string, string>,
  ms: number,
): Promise<boolean> {
  const child = await spawnMcpstate(home, args, { env });
  const wait = timer(ms);
  const ended = await Promise.race([child.status.then(() => true), wait.done.then(() => false)]);
  wait.cancel();
  if (!ended) {
    try {
      child.kill("SIGKILL");
    } catch {
      // it ended meanwhile
    }
  }
  return (await child.output()).success;
}

/** The command of a key mode: `encrypt` or `keys rotate`. */
function commandOf(mode: "encrypt" | "rotate"): string[] {
  return mode === "encrypt" ? ["encrypt"] : ["keys", "rotate"];
}

/** What a maintenance command needs. */
export interface MaintenanceTarget {
  mode: "encrypt" | "rotate";
  url: string;
  home: string;
  /** Its ring (`MCPSTATE_ENCRYPTION_KEYS`). */
  keys: string;
}

/**
 * Starts the maintenance command after `startMs` and SIGKILLs it `killMs`
 * later (unless it ended first).
 */
export async function killedMaintenance(
  t: MaintenanceTarget,
  startMs: number,
  killMs: number,
  counts: MaintenanceCounts,
): Promise<void> {
  const wait = timer(startMs);
  await wait.done;
  counts.maintenanceRuns++;
  const ended = await killedCli(t.home, commandOf(t.mode), cliEnvOf(t.url, t.keys), killMs);
  if (ended) counts.maintenanceFinished++;
}

/**
 * Runs the maintenance command again, to completion, with nothing else
 * writing: it must exit 0 and say it left nothing (`left: 0`; every data key
 * under the current key).
 *
 * @returns A violation, or `null`; and how long it took.
 */
export async function completeMaintenance(
  t: MaintenanceTarget,
  counts: MaintenanceCounts,
): Promise<{ problem: string | null; ms: number }> {
  const t0 = performance.now();
  const r: RunResult = await mcpstate(t.home, [...commandOf(t.mode), "--json"], {
    env: cliEnvOf(t.url, t.keys),
  });
  const ms = performance.now() - t0;
  let out: Record<string, unknown>;
  try {
    out = JSON.parse(r.stdout);
  } catch {
    return { problem: `its rerun printed no JSON (exit ${r.code}): ${r.stderr.slice(0, 300)}`, ms };
  }
  const work = t.mode === "encrypt"
    ? (out.encrypted as { total?: number } | undefined)?.total ?? 0
    : Number(out.rewrapped ?? 0);
  if (work > 0) counts.maintenanceResumed++;
  if (r.code !== 0 || out.ok !== true) {
    return {
      problem: `its rerun to completion exited ${r.code}: ${r.stdout.slice(0, 300)} ${
        r.stderr.slice(0, 300)
      }`,
      ms,
    };
  }
  if (t.mode === "rotate") {
    const current = t.keys.split(":")[0];
    const under = Object.keys((out.under ?? {}) as Record<string, number>);
    if (under.some((id) => id !== current)) {
      return { problem: `data keys are still under ${under.join(", ")}, not only ${current}`, ms };
    }
  }
  return { problem: null, ms };
}
