/**
 * Run settings shared by the property tests: every property runs with a
 * fixed seed, so a run is reproducible; `MCPSTATE_FC_SEED` replaces every
 * seed (to explore) and `MCPSTATE_FC_SCALE` multiplies every run count (for
 * long runs).
 *
 * @module
 */

function envValue(name: string): string | undefined {
  const granted = Deno.permissions.querySync({ name: "env", variable: name }).state === "granted";
  return granted ? Deno.env.get(name) : undefined;
}

const SEED_OVERRIDE = Number(envValue("MCPSTATE_FC_SEED") ?? NaN);
const SCALE = Number(envValue("MCPSTATE_FC_SCALE") ?? 1) || 1;

/**
 * fast-check parameters: a fixed seed and a bounded number of runs.
 *
 * @param seed The seed, unless `MCPSTATE_FC_SEED` replaces it.
 * @param numRuns The run count, times `MCPSTATE_FC_SCALE`.
 * @returns `{ seed, numRuns }` for `fc.assert`.
 */
export function runs(seed: number, numRuns: number): { seed: number; numRuns: number } {
  return {
    seed: Number.isInteger(SEED_OVERRIDE) ? SEED_OVERRIDE : seed,
    numRuns: Math.max(1, Math.round(numRuns * SCALE)),
  };
}
