/**
 * The shapes of the patch ops and of RFC 6902 JSON Patch ops, exported by
 * `ops.ts`. Not part of the public API on its own.
 *
 * @module
 */

import type { JsonObject } from "../json.ts";

/** Appends `value` to the list at `path`. */
export interface AppendOp {
  /** The op name. */
  op: "append";
  /** Where the list is. */
  path: string;
  /** The JSON value to append. */
  value: unknown;
}

/** Sets `key` to `value` in the object at `path`. */
export interface SetKeyOp {
  /** The op name. */
  op: "set_key";
  /** Where the object is. */
  path: string;
  /** The key to set. */
  key: string;
  /** The JSON value to store. */
  value: unknown;
}

/** Removes `key` from the object at `path`; an absent key is a no-op. */
export interface DelKeyOp {
  /** The op name. */
  op: "del_key";
  /** Where the object is. */
  path: string;
  /** The key to remove. */
  key: string;
}

/** Copies every key of `mapping` into the object at `path` (shallow). */
export interface MergeOp {
  /** The op name. */
  op: "merge";
  /** The keys and values to copy. */
  mapping: JsonObject;
  /** Where the object is; `""` is the root. */
  path: string;
}

/** Adds `by` to the number at `key` of the object at `path` (absent: 0). */
export interface IncrementOp {
  /** The op name. */
  op: "increment";
  /** Where the object is. */
  path: string;
  /** The counter's key. */
  key: string;
  /** A number to add, within ±(2^53 − 1). */
  by: number;
}

/** Appends `value` to the list at `path` unless a deep-equal value is there. */
export interface AddToSetOp {
  /** The op name. */
  op: "add_to_set";
  /** Where the list is. */
  path: string;
  /** The JSON value to add. */
  value: unknown;
}

/** Any patch op. */
export type PatchOp = AppendOp | SetKeyOp | DelKeyOp | MergeOp | IncrementOp | AddToSetOp;

/**
 * One op of an RFC 6902 JSON Patch, as the changelog keeps them (`patch` of
 * a save, `undo` of a save or patch). `path` and `from` are JSON Pointers.
 *
 * @since 0.5.0
 */
export interface JsonPatchOp {
  /** The op name. */
  op: "add" | "remove" | "replace" | "move" | "copy" | "test";
  /** Where it applies. */
  path: string;
  /** The value of `add`, `replace` and `test`. */
  value?: unknown;
  /** The source of `move` and `copy`. */
  from?: string;
}
