/**
 * Run settings shared by the property tests: every property runs with a
 * fixed seed, so a run is reproducible; `MCPSTATE_FC_SEED` replaces every
 * seed (to explore) and `MCPSTATE_FC_SCALE` multiplies every run count (for
 * long runs). {@link storeTest} runs a store property on every backend it
 * is meant for.
 *
 * @module
 */

import fc from "fast-check";
import { HandleStore, type HandleStoreOptions } from "../mod.ts";

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

/** Keys that name what every object inherits: they must stay data, never reach a prototype. */
export const PROTO_NAMES = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
] as const;

/**
 * Any UTF-16 code unit, lone surrogates weighted up, or one of `extra`.
 *
 * @param extra Strings to draw as often as the code units.
 * @returns The arbitrary.
 */
export function codeUnitOr(...extra: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
    fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
    fc.constantFrom(...extra),
  );
}

/** The backends the store properties run on. Each must work: a broken one fails its tests. */
const STORE_URLS = ["memory://", "sqlite:///:memory:"];

/**
 * Registers `fn` once per backend of the store properties, each run on a
 * fresh store.
 *
 * @param name The test's name; the backend's URL is appended.
 * @param fn The property, given the store and its URL.
 * @param options The store's options.
 */
export function storeTest(
  name: string,
  fn: (store: HandleStore, url: string) => Promise<void>,
  options: HandleStoreOptions = {},
): void {
  for (const url of STORE_URLS) {
    Deno.test(`${name} [${url}]`, async () => {
      const store = await HandleStore.fromUrl(url, options);
      try {
        await fn(store, url);
      } finally {
        await store.close();
      }
    });
  }
}
