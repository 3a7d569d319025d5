/**
 * The disjoint merge of two states written from one base: what `save` with
 * `onConflict: "merge"` does when someone else wrote since the caller read.
 *
 * Both sides are compared with the base, the same way
 * ({@link changesBetween}); each change sits at a place of the base, named
 * by its JSON Pointer:
 * - in two objects, a key only one of them has is a change at that key (set
 *   or delete), and a key both have is compared further in;
 * - two lists of the same length are compared item by item;
 * - a list that only grew, its first items unchanged, is an **append** of the
 *   new items to that list;
 * - anything else — a list that shrank, or grew with earlier items changed
 *   (an insert, a removal, a reorder), a value of another type, another
 *   number or string — is a change of the whole value at that place.
 *
 * **Disjoint.** The two sides conflict when one changes a place and the
 * other changes the same place, a place inside it, or a place around it (one
 * pointer is a prefix of the other, segment by segment). Three exceptions,
 * none of which loses anything:
 * - both append to the same list: theirs come first, then the caller's;
 * - one appends to a list whose existing items the other edits: appending
 *   moves no item, so each index still names the same item;
 * - both make the very same change at the same place (the same value set,
 *   or both delete the key).
 *
 * Inserting into or removing from the middle of a list is a change of the
 * whole list, so it conflicts with any change inside that list: indexes
 * shift, and an edit of "item 3" could land on another item. That is the
 * safe rule; such a save fails with the list's pointer in `conflicts`.
 *
 * When the sides are disjoint, the merged state is theirs with the caller's
 * changes applied ({@link mergeStates}); otherwise the answer names every
 * conflicting place: of two conflicting pointers the longer one (the place
 * both changed), with an append standing for its list.
 *
 * Everything here is pure: no I/O, and inputs are never changed.
 *
 * @module
 */

import type { JsonObject } from "./json.ts";
import type { JsonPatchOp } from "./ops.ts";
import { applyJsonPatch, pointerOf } from "./history.ts";

/** The most pointers a conflict answer lists. */
export const MAX_CONFLICTS = 100;

/** One change of a state against its base, at a place of the base. */
export type Change =
  | {
    /** The value at `path` becomes `value` (a key added, or a whole value replaced). */
    kind: "set";
    /** Where, as unescaped segments from the root. */
    path: string[];
    /** The new value. */
    value: unknown;
  }
  | {
    /** The key at `path` is removed from its object. */
    kind: "delete";
    /** Where, as unescaped segments from the root. */
    path: string[];
  }
  | {
    /** `items` are appended to the list at `path`. */
    kind: "append";
    /** The list, as unescaped segments from the root. */
    path: string[];
    /** The new items, in order. */
    items: unknown[];
  };

/** Answer of {@link mergeStates}. */
export type MergeOutcome =
  | {
    /** The sides were disjoint. */
    ok: true;
    /** Theirs with the caller's changes applied. */
    state: JsonObject;
    /** The RFC 6902 patch from theirs to the merged state. */
    patch: JsonPatchOp[];
    /** The RFC 6902 patch from the merged state back to theirs. */
    undo: JsonPatchOp[];
  }
  | {
    /** The sides overlap. */
    ok: false;
    /** The JSON Pointers both sides changed, sorted, at most {@link MAX_CONFLICTS}. */
    conflicts: string[];
  };

/**
 * The changes that take `base` to `next`, by the rules of the module doc.
 *
 * @param base The base state.
 * @param next A state written from it.
 * @returns The changes, each at a place of `base`.
 */
export function changesBetween(base: unknown, next: unknown): Change[] {
  const out: Change[] = [];
  walk(base, next, [], out);
  return out;
}

/**
 * Merges the caller's state into theirs, both written from `base`, when
 * their changes are disjoint (see the module doc).
 *
 * @param base The state both sides started from.
 * @param theirs The state everyone else wrote since (the current one).
 * @param mine The caller's state.
 * @returns The merged state with its forward and undo patches, or the conflicts.
 *
 * @example Two edits of different keys merge; edits of one key conflict
 * ```ts ignore
 * const base = { notes: "", sources: ["a"] };
 * mergeStates(base, { notes: "", sources: ["a", "b"] }, { notes: "x", sources: ["a"] });
 * // { ok: true, state: { notes: "x", sources: ["a", "b"] }, patch: [...], undo: [...] }
 * mergeStates(base, { notes: "y", sources: ["a"] }, { notes: "x", sources: ["a"] });
 * // { ok: false, conflicts: ["/notes"] }
 * ```
 */
export function mergeStates(base: JsonObject, theirs: JsonObject, mine: JsonObject): MergeOutcome {
  const theirChanges = changesBetween(base, theirs);
  const myChanges = changesBetween(base, mine);
  const trie = new Node();
  for (const c of theirChanges) trie.at(c.path).add(c);
  const conflicts = new Set<string>();
  const skip = new Set<Change>();
  for (const m of myChanges) {
    const found = clash(trie, m);
    if (found === "same") skip.add(m);
    else for (const p of found) conflicts.add(p);
  }
  if (conflicts.size > 0) {
    return { ok: false, conflicts: [...conflicts].sort().slice(0, MAX_CONFLICTS) };
  }
  const patch: JsonPatchOp[] = [];
  for (const m of myChanges) {
    if (skip.has(m)) continue;
    const at = pointerOf(m.path);
    if (m.kind === "append") {
      for (const value of m.items) patch.push({ op: "add", path: at + "/-", value });
    } else if (m.kind === "delete") {
      patch.push({ op: "remove", path: at });
    } else {
      // A list item is replaced in place; an object key is added or replaced.
      const inList = Array.isArray(valueAt(theirs, m.path.slice(0, -1)));
      patch.push({ op: inList ? "replace" : "add", path: at, value: m.value });
    }
  }
  const undo: JsonPatchOp[] = [];
  const state = applyJsonPatch(theirs, patch, undo);
  return { ok: true, state, patch, undo };
}

// ---------------------------------------------------------------- diff

function walk(b: unknown, n: unknown, path: string[], out: Change[]): void {
  if (b === n) return;
  if (isObject(b) && isObject(n)) {
    for (const k of Object.keys(b)) {
      path.push(k);
      if (!Object.hasOwn(n, k)) out.push({ kind: "delete", path: path.slice() });
      else walk(b[k], n[k], path, out);
      path.pop();
    }
    for (const k of Object.keys(n)) {
      if (!Object.hasOwn(b, k)) out.push({ kind: "set", path: [...path, k], value: n[k] });
    }
    return;
  }
  if (Array.isArray(b) && Array.isArray(n)) {
    if (b.length === n.length) {
      for (let i = 0; i < b.length; i++) {
        path.push(String(i));
        walk(b[i], n[i], path, out);
        path.pop();
      }
      return;
    }
    if (n.length > b.length && b.every((x, i) => same(x, n[i]))) {
      out.push({ kind: "append", path: path.slice(), items: n.slice(b.length) });
      return;
    }
  } else if (same(b, n)) {
    return;
  }
  out.push({ kind: "set", path: path.slice(), value: n });
}

/** JSON equality (object key order ignored). */
function same(a: unknown, b: unknown): boolean {
  return jsonEqual(a, b, false);
}

/**
 * Whether two JSON values are equal; with `ordered`, also their keys in the
 * same order: what comparing their `JSON.stringify` says, without writing either.
 */
export function jsonEqual(a: unknown, b: unknown, ordered: boolean): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i], ordered)) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const k = ka[i]!;
    if (ordered ? k !== kb[i] : !Object.hasOwn(b, k)) return false;
    if (!jsonEqual((a as JsonObject)[k], (b as JsonObject)[k], ordered)) return false;
  }
  return true;
}

// ---------------------------------------------------------------- conflicts

/** Their changes by place: a trie over the segments of their paths. */
class Node {
  readonly children = new Map<string, Node>();
  /** Their set or delete at this place. */
  whole: Change | undefined;
  /** Their append to the list at this place. */
  append: Change | undefined;
  /** Whether any change of theirs lies strictly below this place. */
  below = false;

  /** The node at `path` below this one, created as needed. */
  at(path: readonly string[], from = 0): Node {
    if (from === path.length) return this;
    this.below = true;
    const seg = path[from]!;
    let next = this.children.get(seg);
    if (!next) this.children.set(seg, next = new Node());
    return next.at(path, from + 1);
  }

  add(c: Change): void {
    if (c.kind === "append") this.append = c;
    else this.whole = c;
  }

  /** The pointers of their changes at or below this place, `here` being its path. */
  pointers(here: string[], out: string[]): void {
    if (this.whole || this.append) out.push(pointerOf(here));
    for (const [seg, child] of this.children) {
      here.push(seg);
      child.pointers(here, out);
      here.pop();
    }
  }
}

/**
 * Where my change `m` meets theirs: the conflicting pointers (empty when
 * disjoint), or `"same"` when they made the very same change there.
 */
function clash(trie: Node, m: Change): string[] | "same" {
  let node: Node | undefined = trie;
  for (let i = 0; i < m.path.length && node; i++) {
    // Theirs replaced or removed a place around mine. (Their append there moves no item I edit.)
    if (node.whole) return [pointerOf(m.path)];
    node = node.children.get(m.path[i]!);
  }
  if (!node) return [];
  const here = pointerOf(m.path);
  if (m.kind === "append") {
    // Appends by both sides keep both; edits of existing items below move nothing.
    return node.whole ? [here] : [];
  }
  if (node.whole) return sameChange(node.whole, m) && !node.below ? "same" : [here];
  if (node.append) return [here];
  if (!node.below) return [];
  const out: string[] = [];
  node.pointers(m.path.slice(), out);
  return out;
}

function sameChange(a: Change, b: Change): boolean {
  if (a.kind === "delete" || b.kind === "delete") return a.kind === b.kind;
  return a.kind === "set" && b.kind === "set" && same(a.value, b.value);
}

function valueAt(state: unknown, path: readonly string[]): unknown {
  let node = state;
  for (const seg of path) {
    if (Array.isArray(node)) node = node[Number(seg)];
    else if (isObject(node) && Object.hasOwn(node, seg)) node = node[seg];
    else return undefined;
  }
  return node;
}

function isObject(x: unknown): x is JsonObject {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}
