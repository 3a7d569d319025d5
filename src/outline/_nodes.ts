/**
 * The outline format: its node shapes, the answers of a budgeted read, the
 * limits of a read, and how a node's keys and pointers are written. Exported
 * by `outline.ts`; not part of the public API on its own.
 *
 * @module
 */

/** The smallest budget a read accepts, in bytes. */
export const MIN_READ_BYTES = 256;

/** The most paths one read accepts. */
export const MAX_READ_PATHS = 32;

/** The most code points a string's `preview` holds while the budget is spent breadth first. */
export const PREVIEW_CHARS = 64;

/** A value shown complete and exact. */
export interface ShownNode {
  /** The value at this place. */
  value: unknown;
}

/** An object that is not shown in full. */
export interface ObjectNode {
  /** Always `"object"`. */
  type: "object";
  /** Its JSON Pointer from the root of the state. */
  path: string;
  /** The UTF-8 size of its compact JSON. */
  bytes: number;
  /** How many keys it has. */
  keys: number;
  /** The keys shown (the first ones, in order) and their nodes. */
  entries?: Record<string, OutlineNode>;
}

/** A list that is not shown in full. */
export interface ListNode {
  /** Always `"list"`. */
  type: "list";
  /** Its JSON Pointer from the root of the state. */
  path: string;
  /** The UTF-8 size of its compact JSON. */
  bytes: number;
  /** How many items it has. */
  length: number;
  /** The items shown, by decimal index, and their nodes. */
  items?: Record<string, OutlineNode>;
}

/** A string that is not shown in full. */
export interface StringNode {
  /** Always `"string"`. */
  type: "string";
  /** Its JSON Pointer from the root of the state. */
  path: string;
  /** The UTF-8 size of its compact JSON (quotes and escapes included). */
  bytes: number;
  /** Its beginning: up to {@link PREVIEW_CHARS} code points (more when budget is left), never all of it. */
  preview?: string;
}

/** One node of an outline: a value shown whole, or a description of one that is not. */
export type OutlineNode = ShownNode | ObjectNode | ListNode | StringNode;

/** Answer of {@link outline}: the value itself, or an outline of it. */
export type Budgeted<T = unknown> =
  | {
    /** Nothing was left out. */
    truncated: false;
    /** The value, unchanged (the same reference). */
    value: T;
    /** The UTF-8 size of its compact JSON. */
    sizeBytes: number;
  }
  | {
    /** Something was left out. */
    truncated: true;
    /** The outline; its compact JSON takes at most the budget. */
    outline: OutlineNode;
    /** The UTF-8 size of the whole value's compact JSON. */
    sizeBytes: number;
  };

/** Options of {@link outline}. */
export interface OutlineOptions {
  /**
   * The JSON Pointer of the value inside its state, so that the paths in the
   * outline read from the state's root. Default `""`: the value is the root.
   */
  pointer?: string;
}

/** Answer of {@link readPaths}. */
export interface PathsRead {
  /** Each path (as passed) whose value is returned whole, to that value. */
  values: Record<string, unknown>;
  /** Each path (as passed) whose value was over its share of the budget, to its outline. */
  outline?: Record<string, OutlineNode>;
  /** The paths (as passed) that do not exist in the state; absent when none. */
  missing?: string[];
  /** Whether anything was left out: `true` exactly when `outline` is present. */
  truncated: boolean;
  /** The sum of the UTF-8 sizes of the compact JSON of every value found. */
  sizeBytes: number;
}

/** Sets an own data property (so `__proto__` is a key like any other). */
export function put(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(obj, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else {
    obj[key] = value;
  }
}

/** Escapes one segment of a JSON Pointer (`~` as `~0`, `/` as `~1`). */
export function escapeSegment(s: string): string {
  return s.includes("~") || s.includes("/") ? s.replaceAll("~", "~0").replaceAll("/", "~1") : s;
}
