/**
 * A user's usage for people (`mcpstate list`, `mcpstate doctor`): the
 * numbers of `HandleStore.usage`, beside the quotas the server would apply
 * (read from the same `MCPSTATE_QUOTA_*` variables `mcpstate serve` reads).
 *
 * @module
 */

import type { HandleStore } from "../store.ts";
import type { QuotaOptions, UsageInfo } from "../types.ts";

const VARIABLES = [
  ["MCPSTATE_QUOTA_HANDLES", "maxHandles"],
  ["MCPSTATE_QUOTA_BYTES", "maxBytes"],
  ["MCPSTATE_QUOTA_WRITES_PER_MINUTE", "writesPerMinute"],
] as const;

/**
 * The quotas set in the environment, and the names of variables that hold
 * no whole number ≥ 1.
 *
 * @returns The quotas (empty: none) and the malformed variables.
 */
export function quotasFromEnv(): { quotas: QuotaOptions; malformed: string[] } {
  const quotas: QuotaOptions = {};
  const malformed: string[] = [];
  for (const [name, field] of VARIABLES) {
    const v = Deno.env.get(name);
    if (v === undefined) continue;
    const n = Number(v);
    if (/^\d+$/.test(v.trim()) && Number.isSafeInteger(n) && n >= 1) quotas[field] = n;
    else malformed.push(name);
  }
  return { quotas, malformed };
}

/**
 * One line: a user's usage, each number with its quota when one is set.
 *
 * @param usage The usage.
 * @param quotas The quotas to show beside it.
 * @returns E.g. `3 of 100 handles, 1,204 bytes, 1 write this minute`.
 */
export function describeUsage(usage: UsageInfo, quotas: QuotaOptions): string {
  const n = (x: number) => x.toLocaleString("en-US");
  // The noun agrees with the number next to it: "1 handle", "1 of 5 handles".
  const of = (x: number, limit: number | undefined, noun: string) => {
    const last = limit ?? x;
    return `${limit === undefined ? n(x) : `${n(x)} of ${n(limit)}`} ${
      last === 1 ? noun : noun + "s"
    }`;
  };
  return `${of(usage.handles, quotas.maxHandles, "handle")}, ${
    of(usage.bytes, quotas.maxBytes, "byte")
  }, ${of(usage.writesThisMinute, quotas.writesPerMinute, "write")} this minute`;
}

/**
 * Whether a usage has reached one of the quotas.
 *
 * @param usage The usage.
 * @param quotas The quotas.
 * @returns The names of the quotas reached (`handles`, `bytes`, `writes_per_minute`).
 */
export function quotasReached(usage: UsageInfo, quotas: QuotaOptions): string[] {
  const out: string[] = [];
  if (quotas.maxHandles !== undefined && usage.handles >= quotas.maxHandles) out.push("handles");
  if (quotas.maxBytes !== undefined && usage.bytes >= quotas.maxBytes) out.push("bytes");
  if (quotas.writesPerMinute !== undefined && usage.writesThisMinute >= quotas.writesPerMinute) {
    out.push("writes_per_minute");
  }
  return out;
}

/**
 * The usage line of a user, or `undefined` when the store's backend keeps no usage.
 *
 * @param store An open store.
 * @param user The user.
 * @returns The line.
 */
export async function usageLine(store: HandleStore, user: string): Promise<string | undefined> {
  try {
    return describeUsage(await store.usage(user), quotasFromEnv().quotas);
  } catch {
    return undefined;
  }
}
