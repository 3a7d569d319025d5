/**
 * The diffs a changelog entry keeps: an RFC 6902 patch from the previous
 * state (bounded in time and stack for long arrays) and the undo back to it.
 *
 * @module
 */

import { createPatch, type Operation } from "rfc6902";
import { undoOf } from "../history.ts";
import type { JsonObject } from "../json.ts";
import { jsonEqual } from "../merge.ts";
import type { JsonPatchOp } from "../ops.ts";

/** rfc6902's diff hook. */
export type Diff = NonNullable<Parameters<typeof createPatch>[2]>;

/**
 * rfc6902 diffs two arrays by edit distance: O(n·m) time and memory, and
 * n + m frames deep (a few thousand elements overflow the stack). Past this
 * many cells {@link arrayDiff} keeps to the common prefix and suffix.
 */
export const ARRAY_DIFF_CELLS = 4_096;

/**
 * What a save's changelog entry keeps: its forward `patch`, and `undo`, the
 * patch back to `before` (left out when the forward patch does not replay on
 * `before`: the entry then ends the way back, never the write).
 */
export function withUndo(before: JsonObject, patch: Operation[]): Record<string, unknown> {
  const undo = undoOf(before, patch as JsonPatchOp[]);
  return undo === undefined ? { patch } : { patch, undo };
}

/**
 * An RFC 6902 patch from `before` to `after`, bounded in time and stack for
 * long arrays: exactly what rfc6902's `createPatch` answers with
 * {@link boundedDiff} as its hook (same ops, same order), with objects
 * walked here, without a pointer object per key, and arrays that differ
 * left to rfc6902's edit distance or to {@link arrayDiff}.
 */
export function diffOf(before: unknown, after: unknown): Operation[] {
  return diffKeyed(before, after).patch;
}

/**
 * {@link diffOf}, and whether the patch applied to `before` gives exactly
 * the JSON `after` parses to from its text, key order included (`ordered`):
 * every object it walks keeps its common keys in the same order and adds
 * keys only after them, and no array that differs went through rfc6902's
 * own walk. The patch's values are `after`'s own (not copies).
 */
export function diffKeyed(
  before: unknown,
  after: unknown,
): { patch: Operation[]; ordered: boolean } {
  const d: Diffing = { out: [], ordered: true };
  diffAt(before, after, "", d);
  return { patch: d.out, ordered: d.ordered };
}

/** A diff in progress: its ops, and whether it is still `ordered` (see {@link diffKeyed}). */
interface Diffing {
  out: Operation[];
  ordered: boolean;
}

/**
 * Whether two JSON values (valid, as a stored or a checked state holds them)
 * have the same JSON text, keys in the same order: what comparing their
 * `JSON.stringify` says, without writing either.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return jsonEqual(a, b, true);
}

/** rfc6902's hook: {@link arrayDiff} for two arrays, rfc6902's own walk otherwise. */
export const boundedDiff: Diff = (input: unknown, output: unknown, ptr): Operation[] | void => {
  if (Array.isArray(input) && Array.isArray(output)) {
    return arrayDiff(input, output, ptr.toString());
  }
};

const hasOwn = Object.prototype.hasOwnProperty;

/** A key as a JSON Pointer token (`~` and `/` escaped, as rfc6902 writes it). */
function token(key: string): string {
  return key.includes("~") || key.includes("/")
    ? key.replaceAll("~", "~0").replaceAll("/", "~1")
    : key;
}

/**
 * Whether `input`'s keys that `output` keeps are in the same order in both,
 * with every key `output` adds after them: then `output`'s key order is
 * what patching `input` leaves (a removed key goes, an added one goes last).
 */
function sameOrder(input: Record<string, unknown>, output: Record<string, unknown>): boolean {
  const from = Object.keys(input);
  let j = 0, added = false;
  for (const key in output) {
    if (!hasOwn.call(input, key)) {
      added = true;
      continue;
    }
    if (added) return false;
    while (j < from.length && from[j] !== key) j++;
    if (j === from.length) return false;
    j++;
  }
  return true;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** rfc6902's `diffAny` with {@link boundedDiff} as hook, at `path`: the ops go to `d.out`. */
function diffAt(input: unknown, output: unknown, path: string, d: Diffing): void {
  const out = d.out;
  if (Array.isArray(input) && Array.isArray(output)) {
    let ops = arrayDiff(input, output, path, d);
    if (ops === undefined) {
      // rfc6902's walk: the key order of what it keeps is not checked.
      d.ordered = false;
      ops = createPatch(input, output, boundedDiff).map((op) => ({ ...op, path: path + op.path }));
    }
    for (let i = 0; i < ops.length; i++) out.push(ops[i]!);
    return;
  }
  if (input === output) return;
  if (isObject(input) && isObject(output)) {
    if (d.ordered && !sameOrder(input, output)) d.ordered = false;
    // rfc6902's diffObjects: removes in the old key order, adds in the new,
    // then the keys of both in the old order, each diffed in turn.
    for (const key in input) {
      if (
        hasOwn.call(input, key) && input[key] !== undefined &&
        !(hasOwn.call(output, key) && output[key] !== undefined)
      ) out.push({ op: "remove", path: `${path}/${token(key)}` });
    }
    for (const key in output) {
      if (
        hasOwn.call(output, key) && output[key] !== undefined &&
        !(hasOwn.call(input, key) && input[key] !== undefined)
      ) out.push({ op: "add", path: `${path}/${token(key)}`, value: output[key] });
    }
    for (const key in input) {
      if (
        hasOwn.call(input, key) && input[key] !== undefined &&
        hasOwn.call(output, key) && output[key] !== undefined
      ) diffAt(input[key], output[key], `${path}/${token(key)}`, d);
    }
    return;
  }
  out.push({ op: "replace", path, value: output });
}

/**
 * Two arrays at `path`. Short ones: equal, no op (rfc6902 finds two equal
 * arrays equal only after diffing every element pair on its way through its
 * edit-distance table); else `undefined`, for rfc6902's edit distance. Long
 * ones: keeps the common prefix and suffix and writes the middle as adds,
 * removes, element-wise diffs (same length, up to 64), or one `replace` of
 * the array.
 */
function arrayDiff(
  input: unknown[],
  output: unknown[],
  path: string,
  d?: Diffing,
): Operation[] | undefined {
  if (input.length * output.length <= ARRAY_DIFF_CELLS) {
    return input.length === output.length && sameJson(input, output) ? [] : undefined;
  }
  const n = Math.min(input.length, output.length);
  let p = 0;
  while (p < n && sameJson(input[p], output[p])) p++;
  let s = 0;
  while (s < n - p && sameJson(input[input.length - 1 - s], output[output.length - 1 - s])) s++;
  const removed = input.length - p - s, added = output.length - p - s;
  const at = (i: number) => `${path}/${i}`;
  if (removed === 0) {
    return output.slice(p, p + added).map((value, i) => ({
      op: "add" as const,
      path: s === 0 ? `${path}/-` : at(p + i),
      value,
    }));
  }
  if (added === 0) {
    return Array.from({ length: removed }, () => ({ op: "remove" as const, path: at(p) }));
  }
  if (removed === added && removed <= 64) {
    const inner: Diffing = { out: [], ordered: true };
    for (let i = 0; i < removed; i++) diffAt(input[p + i], output[p + i], at(p + i), inner);
    if (d && !inner.ordered) d.ordered = false;
    return inner.out;
  }
  return [{ op: "replace", path, value: output }];
}
