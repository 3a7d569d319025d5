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
 * many cells {@link boundedDiff} takes over.
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

/** An RFC 6902 patch from `before` to `after`, bounded in time and stack for long arrays. */
export function diffOf(before: unknown, after: unknown): Operation[] {
  return createPatch(before, after, objectDiff);
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/**
 * rfc6902's diff of two objects, op for op, without its work on the keys
 * whose values are the same (`===`): it makes a pointer for every key it
 * walks, and a save's state usually changes a few keys of many. Other
 * values go to {@link boundedDiff}.
 */
const objectDiff: Diff = (input: unknown, output: unknown, ptr): Operation[] | void => {
  if (!isObject(input) || !isObject(output)) return boundedDiff(input, output, ptr);
  const has = (o: Record<string, unknown>, k: string) => Object.hasOwn(o, k) && o[k] !== undefined;
  const ops: Operation[] = [];
  // Removed keys, then added keys, then the changed ones, each in its object's order.
  for (const k in input) {
    if (has(input, k) && !has(output, k)) ops.push({ op: "remove", path: ptr.add(k).toString() });
  }
  for (const k in output) {
    if (has(output, k) && !has(input, k)) {
      ops.push({ op: "add", path: ptr.add(k).toString(), value: output[k] });
    }
  }
  for (const k in input) {
    const a = input[k], b = output[k];
    if (a === b || !has(input, k) || !has(output, k)) continue;
    if (isObject(a) && isObject(b)) {
      for (const op of objectDiff(a, b, ptr.add(k)) as Operation[]) ops.push(op);
    } else if (Array.isArray(a) && Array.isArray(b)) {
      const p = ptr.add(k);
      const bounded = boundedDiff(a, b, p);
      if (bounded) { for (const op of bounded) ops.push(op); }
      else {
        // rfc6902's walk of the two lists, its paths under this key.
        const at = p.toString();
        for (const op of createPatch(a, b, objectDiff)) ops.push({ ...op, path: at + op.path });
      }
    } else ops.push({ op: "replace", path: ptr.add(k).toString(), value: b });
  }
  return ops;
};

/**
 * Whether two JSON values (valid, as a stored or a checked state holds them)
 * have the same JSON text, keys in the same order: what comparing their
 * `JSON.stringify` says, without writing either.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return jsonEqual(a, b, true);
}

/**
 * For two long arrays: keeps the common prefix and suffix and writes the
 * middle as adds, removes, element-wise diffs (same length, up to 64), or
 * one `replace` of the array. Anything else goes to rfc6902's own diff.
 */
export const boundedDiff: Diff = (input: unknown, output: unknown, ptr): Operation[] | void => {
  if (!Array.isArray(input) || !Array.isArray(output)) return;
  if (input.length * output.length <= ARRAY_DIFF_CELLS) {
    // rfc6902 finds two equal arrays equal only after diffing every element
    // pair on its way through the edit-distance table; its answer is [].
    return input.length === output.length && sameJson(input, output) ? [] : undefined;
  }
  const n = Math.min(input.length, output.length);
  let p = 0;
  while (p < n && sameJson(input[p], output[p])) p++;
  let s = 0;
  while (s < n - p && sameJson(input[input.length - 1 - s], output[output.length - 1 - s])) s++;
  const removed = input.length - p - s, added = output.length - p - s;
  const at = (i: number) => ptr.add(String(i)).toString();
  if (removed === 0) {
    return output.slice(p, p + added).map((value, i) => ({
      op: "add" as const,
      path: s === 0 ? ptr.add("-").toString() : at(p + i),
      value,
    }));
  }
  if (added === 0) {
    return Array.from({ length: removed }, () => ({ op: "remove" as const, path: at(p) }));
  }
  if (removed === added && removed <= 64) {
    return Array.from(
      { length: removed },
      (_, i) =>
        createPatch(input[p + i], output[p + i], boundedDiff)
          .map((op) => ({ ...op, path: at(p + i) + op.path })),
    ).flat();
  }
  return [{ op: "replace", path: ptr.toString(), value: output }];
};
