/**
 * The workload of the patch benchmarks: a state of about 1 MiB (an object of
 * notes and a long list of tags) and patches of 1,000 ops in four mixes.
 * Shared by `patch_bench.ts` and `patch_latency.ts`.
 *
 * @module
 */

import { AddToSet, Append, type JsonObject, type PatchOp, SetKey } from "../mod.ts";

/** Keys in the state's `notes` object. */
export const NOTE_KEYS = 6_000;
/** Items in the state's `tags` list. */
export const TAGS = 28_000;

/** A state of about 1 MiB of JSON: 6,000 notes in an object and 28,000 tags in a list. */
export function bigState(): JsonObject {
  const notes: JsonObject = {};
  for (let i = 0; i < NOTE_KEYS; i++) {
    notes[`note-${i}`] = `Finding ${i}: arm64 builds finish first on the shared runners (${
      i * 7919
    }).`;
  }
  const tags = Array.from({ length: TAGS }, (_, i) => `tag-${i}-${(i * 2654435761) % 1e6}`);
  return { title: "Build farm notes", notes, tags, stats: { patches: 0 } };
}

/** The JSON size of {@link bigState}, in bytes. */
export const BIG_STATE_BYTES: number = new TextEncoder().encode(JSON.stringify(bigState())).length;

/** One op of each mix, `i` of 1,000; `round` makes set_key values differ between patches. */
const makers: Record<string, (i: number, round: number) => PatchOp> = {
  set_key: (i, round) => SetKey("notes", `note-${(i * 7) % NOTE_KEYS}`, `revised ${round}.${i}`),
  // Every other value is already in the list.
  add_to_set: (i, round) =>
    AddToSet(
      "tags",
      i % 2 ? `tag-${i * 13}-${((i * 13) * 2654435761) % 1e6}` : `new-${round}-${i}`,
    ),
  append: (i, round) => Append("tags", `new-${round}-${i}`),
};

/** The mixes: set_key, add_to_set and append alone, and the three in turn. */
export const MIXES: readonly string[] = ["set_key", "add_to_set", "append", "mixed"];

/**
 * A patch of `n` ops of one mix.
 *
 * @param mix One of {@link MIXES}.
 * @param n How many ops.
 * @param round Varies the values, so that consecutive patches change something.
 * @returns The ops.
 */
export function patchOf(mix: string, n = 1000, round = 0): PatchOp[] {
  const kinds = mix === "mixed" ? ["set_key", "add_to_set", "append"] : [mix];
  return Array.from({ length: n }, (_, i) => makers[kinds[i % kinds.length]!]!(i, round));
}
