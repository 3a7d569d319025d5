/**
 * Applying ops: one {@link Patch} per call, which copies each container on
 * the way to a change once, indexes lists for `add_to_set`, and may record
 * the inverse of each change.
 *
 * @module
 */

import { PatchError, type PatchReason } from "../errors.ts";
import type { JsonObject } from "../json.ts";
import { patchCost } from "./_patch_cost.ts";
import { atIndex, MAX_COUNTER, parseOp } from "./_parse.ts";
import { indexOf, type Path, pointerOf, splitPath } from "./_path.ts";
import type { JsonPatchOp, PatchOp } from "./_types.ts";
import { isPlainObject, jsonEqual, kindOf, own, setOwn } from "./_values.ts";

/**
 * Applies `ops` to `state` purely (see `applyOps`), recording the inverse of
 * each change in `inverse` (in the order made) when given.
 */
export function runOps(
  state: JsonObject,
  ops: readonly PatchOp[],
  inverse: JsonPatchOp[] | undefined,
): JsonObject {
  if (!isPlainObject(state)) {
    throw new PatchError("wrong_type", `The state must be a plain object, not ${kindOf(state)}.`, {
      field: "state",
    });
  }
  if (!Array.isArray(ops)) {
    throw new PatchError(
      "wrong_type",
      `The ops must be a list of op objects, not ${kindOf(ops)}.`,
      {
        field: "ops",
      },
    );
  }
  const patch = new Patch(state, inverse);
  for (let i = 0; i < ops.length; i++) {
    const raw: unknown = ops[i];
    atIndex(i, () => patch.apply(parseOp(raw)));
  }
  return patch.root;
}

/**
 * One `applyOps` call. Containers the call created (copies and new ones) are
 * its own: referenced from one place only, never seen by the caller before
 * the call returns, so later ops write into them in place. Everything else
 * (the input, op values) is only read, and copied once before a write.
 */
class Patch {
  root: JsonObject;
  readonly #own = new WeakSet<object>();
  /** Membership indexes of lists that `add_to_set` wrote to or looked into. */
  readonly #sets = new Map<unknown[], SetIndex>();
  /** Canonical encodings of containers that are not the call's own (they never change). */
  readonly #encoded = new WeakMap<object, string | null>();

  /** Receives the inverse of each change, in the order made (see {@link applyOpsWithUndo}). */
  readonly #inverse: JsonPatchOp[] | undefined;

  constructor(state: JsonObject, inverse?: JsonPatchOp[]) {
    this.root = state;
    this.#inverse = inverse;
  }

  apply(op: PatchOp): void {
    const path = splitPath(op.path);
    switch (op.op) {
      case "append":
      case "add_to_set": {
        const nodes = this.#locate(path, true) as unknown[];
        const list = nodes.at(-1);
        if (list !== undefined && !Array.isArray(list)) {
          throw wrongTarget("not_a_list", op.op, path, list, "a list");
        }
        if (op.op === "add_to_set" && list !== undefined && this.#index(list).has(list, op.value)) {
          return;
        }
        const created = this.#created(nodes, path);
        const target = this.#writable(nodes, path, () => []) as unknown[];
        target.push(op.value);
        this.#sets.get(target)?.added(op.value);
        if (!created) this.#undo("remove", path, String(target.length - 1));
        return;
      }
      case "set_key": {
        const nodes = this.#locate(path, true) as unknown[];
        const o = targetObject(op.op, path, nodes.at(-1));
        if (o !== undefined && Object.hasOwn(o, op.key) && jsonEqual(o[op.key], op.value, true)) {
          return;
        }
        this.#undoKey(nodes, path, o, op.key);
        setOwn(this.#writable(nodes, path, () => ({})) as JsonObject, op.key, op.value);
        return;
      }
      case "del_key": {
        const nodes = this.#locate(path, false);
        if (nodes === undefined) return;
        const o = targetObject(op.op, path, nodes.at(-1));
        if (o === undefined || !Object.hasOwn(o, op.key)) return;
        this.#undo("add", path, op.key, o[op.key]);
        Reflect.deleteProperty(this.#writable(nodes, path, () => ({})), op.key);
        return;
      }
      case "increment": {
        const nodes = this.#locate(path, true) as unknown[];
        const o = targetObject(op.op, path, nodes.at(-1));
        const had = o !== undefined && Object.hasOwn(o, op.key);
        const current = had ? o[op.key] : 0;
        if (typeof current !== "number") {
          throw new PatchError(
            "not_a_number",
            `The increment op needs a number at key "${op.key}" of ${where(path)}, but it holds ${
              kindOf(current)
            }; count in another key, or replace it with set_key.`,
            { field: "key", path: path.text, key: op.key },
          );
        }
        const sum = current + op.by;
        if (!(Math.abs(current) <= MAX_COUNTER && Math.abs(sum) <= MAX_COUNTER)) {
          throw new PatchError(
            "out_of_range",
            `Incrementing key "${op.key}" of ${
              where(path)
            } by ${op.by} gives ${sum}, beyond ±${MAX_COUNTER} (2^53 − 1), where JSON numbers stop counting exactly. Store a larger count as a string, or in several counters.`,
            { field: "by", path: path.text, key: op.key },
          );
        }
        if (had && sum === current) return;
        this.#undoKey(nodes, path, o, op.key);
        setOwn(this.#writable(nodes, path, () => ({})) as JsonObject, op.key, sum);
        return;
      }
      case "merge": {
        const nodes = this.#locate(path, true) as unknown[];
        const o = targetObject(op.op, path, nodes.at(-1));
        const changes = Object.entries(op.mapping).filter(([k, v]) =>
          o === undefined || !Object.hasOwn(o, k) || !jsonEqual(o[k], v, true)
        );
        if (o !== undefined && changes.length === 0) return;
        if (this.#inverse && !this.#created(nodes, path)) {
          for (const [k] of changes) this.#undoKey(nodes, path, o, k);
        }
        const target = this.#writable(nodes, path, () => ({})) as JsonObject;
        for (const [k, v] of changes) setOwn(target, k, v);
        return;
      }
    }
  }

  /**
   * Whether the write about to happen creates containers on its way (`nodes`
   * has an absent node). The first one created is recorded as removed, which
   * undoes everything the write puts under it.
   */
  #created(nodes: unknown[], path: Path): boolean {
    const i = nodes.indexOf(undefined);
    if (i < 0) return false;
    if (this.#inverse) {
      this.#inverse.push({ op: "remove", path: pointerOf(path.segments.slice(0, i)) });
    }
    return true;
  }

  /** Records how to undo writing `key` of the object `o` (`undefined`: to be created) at `path`. */
  #undoKey(nodes: unknown[], path: Path, o: JsonObject | undefined, key: string): void {
    if (!this.#inverse || this.#created(nodes, path)) return;
    if (o !== undefined && Object.hasOwn(o, key)) this.#undo("replace", path, key, o[key]);
    else this.#undo("remove", path, key);
  }

  /** Records one inverse op at `path` + `/last`. */
  #undo(op: "add" | "remove" | "replace", path: Path, last: string, value?: unknown): void {
    if (!this.#inverse) return;
    const at = pointerOf([...path.segments, last]);
    this.#inverse.push(op === "remove" ? { op, path: at } : { op, path: at, value });
  }

  /**
   * The nodes from the root to the target of `path`, read only: `nodes[0]` is
   * the root, `nodes[i + 1]` the value at `segments[i]`, `undefined` where
   * absent (and below). Without `create`, an absent node on the way ends the
   * walk with `undefined`: there is nothing to change.
   */
  #locate(path: Path, create: boolean): unknown[] | undefined {
    const { segments, pointer } = path;
    const nodes: unknown[] = [this.root];
    let node: unknown = this.root;
    for (const seg of segments) {
      if (node === undefined) {
        if (!create) return undefined;
      } else if (Array.isArray(node) && pointer) {
        const idx = indexOf(seg);
        if (idx === undefined || idx >= node.length) {
          throw new PatchError(
            idx === undefined && seg !== "-" ? "bad_path" : "out_of_range",
            `The path "${path.text}" uses "${seg}" as an index into a list of length ${node.length}; list items must already exist (append adds one), indexed from 0.`,
            { field: "path", path: path.text },
          );
        }
        node = node[idx];
      } else if (isPlainObject(node)) {
        node = own(node, seg);
      } else {
        throw new PatchError(
          "not_an_object",
          `The path "${path.text}" runs into ${kindOf(node)} before segment "${seg}"; only objects${
            pointer ? " and lists" : " (and, in a JSON Pointer such as /items/0, lists)"
          } can be walked into.`,
          { field: "path", path: path.text },
        );
      }
      nodes.push(node);
    }
    return nodes;
  }

  /**
   * Makes every node that {@link Patch.#locate} found the call's own, top
   * down: copies what is not yet (once per call), creates what is absent
   * (`{}` on the way, `empty()` for the target), and returns the target.
   */
  #writable(nodes: unknown[], path: Path, empty: () => object): object {
    let parent: object | undefined;
    for (let i = 0; i < nodes.length; i++) {
      let node = nodes[i] as object | undefined;
      if (node === undefined || !this.#own.has(node)) {
        node = node === undefined ? (i === nodes.length - 1 ? empty() : {}) : this.#copy(node);
        this.#own.add(node);
        if (parent === undefined) this.root = node as JsonObject;
        else put(parent, path.segments[i - 1] as string, node);
        nodes[i] = node;
      }
      // A list on the way: its item below is about to change.
      if (Array.isArray(parent)) {
        this.#sets.get(parent)?.changed(indexOf(path.segments[i - 1] as string) as number);
      }
      parent = node;
    }
    return parent as object;
  }

  #copy(node: object): object {
    patchCost.copies++;
    if (!Array.isArray(node)) return { ...node };
    const copy = node.slice();
    const index = this.#sets.get(node);
    if (index) {
      this.#sets.delete(node);
      this.#sets.set(copy, index);
    }
    return copy;
  }

  #index(list: unknown[]): SetIndex {
    let index = this.#sets.get(list);
    if (!index) this.#sets.set(list, index = new SetIndex(list, (v) => this.#canonical(v)));
    return index;
  }

  /**
   * A text equal for two values exactly when `jsonEqual(a, b, false)` holds,
   * or `undefined` for values it can't say that of cheaply (cycles, nesting
   * deeper than {@link MAX_ENCODED_DEPTH}, an encoding over
   * {@link MAX_ENCODED_CHARS}, NaN and ±Infinity, functions, symbols):
   * those are compared with `jsonEqual` instead.
   */
  #canonical(value: unknown): string | undefined {
    const walk = (v: unknown, depth: number): string | null => {
      switch (typeof v) {
        case "string":
          return JSON.stringify(v);
        case "number":
          return Number.isFinite(v) ? String(v) : null;
        case "boolean":
          return v ? "true" : "false";
        case "bigint":
          return `${v}n`;
        case "undefined":
          return "u";
        case "object":
          break;
        default:
          return null;
      }
      if (v === null) return "null";
      if (depth > MAX_ENCODED_DEPTH) return null;
      const mine = this.#own.has(v);
      const known = mine ? undefined : this.#encoded.get(v);
      if (known !== undefined) return known;
      // Built with + (ropes in V8), not join(): a level costs its own items, not its subtree.
      let out: string | null = null;
      if (Array.isArray(v)) {
        let text = "[";
        let i = 0;
        for (; i < v.length && text.length <= MAX_ENCODED_CHARS; i++) {
          const part = walk(v[i], depth + 1);
          if (part === null) break;
          text += i === 0 ? part : "," + part;
        }
        if (i === v.length) out = text + "]";
      } else {
        const keys = Object.keys(v).sort();
        let text = "{";
        let i = 0;
        for (; i < keys.length && text.length <= MAX_ENCODED_CHARS; i++) {
          const k = keys[i] as string;
          const part = walk((v as JsonObject)[k], depth + 1);
          if (part === null) break;
          text += (i === 0 ? "" : ",") + JSON.stringify(k) + ":" + part;
        }
        if (i === keys.length) out = text + "}";
      }
      if (out !== null && out.length > MAX_ENCODED_CHARS) out = null;
      // Remembering the long ones is enough to keep shared subtrees from being
      // encoded over and over; short ones are cheaper to encode again.
      if (!mine && (out === null || out.length >= MEMO_CHARS)) this.#encoded.set(v, out);
      return out;
    };
    return walk(value, 0) ?? undefined;
  }
}

/** Deepest value {@link Patch.#canonical} encodes; deeper ones are compared directly. */
const MAX_ENCODED_DEPTH = 256;
/** Longest canonical encoding kept; a longer one is compared directly. */
const MAX_ENCODED_CHARS = 1 << 26;
/** Encodings at least this long are remembered per container for the call. */
const MEMO_CHARS = 128;

/**
 * What a list holds, for `add_to_set`: a count of each item's canonical
 * encoding, plus the positions whose item has none or has changed since
 * (compared with `jsonEqual`; at most one per op of the call).
 */
class SetIndex {
  readonly #encode: (v: unknown) => string | undefined;
  readonly #counts = new Map<string, number>();
  readonly #keys: (string | undefined)[] = [];
  readonly #odd = new Set<number>();

  constructor(list: unknown[], encode: (v: unknown) => string | undefined) {
    this.#encode = encode;
    for (let i = 0; i < list.length; i++) this.#push(list[i]);
  }

  /** Whether an item deep-equal to `value` (key order ignored) is in `list`, the indexed list. */
  has(list: readonly unknown[], value: unknown): boolean {
    const key = this.#encode(value);
    if (key === undefined) return list.some((v) => jsonEqual(v, value, false));
    if (this.#counts.has(key)) return true;
    for (const i of this.#odd) if (jsonEqual(list[i], value, false)) return true;
    return false;
  }

  /** `value` was appended to the list. */
  added(value: unknown): void {
    this.#push(value);
  }

  /** The item at `i` is about to change in place. */
  changed(i: number): void {
    const key = this.#keys[i];
    if (key === undefined) return;
    const n = this.#counts.get(key) as number;
    if (n === 1) this.#counts.delete(key);
    else this.#counts.set(key, n - 1);
    this.#keys[i] = undefined;
    this.#odd.add(i);
  }

  #push(value: unknown): void {
    patchCost.indexedItems++;
    const key = this.#encode(value);
    this.#keys.push(key);
    if (key === undefined) this.#odd.add(this.#keys.length - 1);
    else this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
  }
}

function targetObject(op: string, path: Path, target: unknown): JsonObject | undefined {
  if (target !== undefined && !isPlainObject(target)) {
    throw wrongTarget("not_an_object", op, path, target, "an object");
  }
  return target;
}

function wrongTarget(
  reason: PatchReason,
  op: string,
  path: Path,
  found: unknown,
  need: string,
): PatchError {
  return new PatchError(
    reason,
    `The ${op} op needs ${need} at ${where(path)}, but it holds ${
      kindOf(found)
    }; load the state to see its shape, and point the op at ${need} (or replace the value with set_key).`,
    { field: "path", path: path.text },
  );
}

function where(path: Path): string {
  return path.text === "" ? "the root" : `path "${path.text}"`;
}

/** Writes `child` at `seg` of a container the call owns. */
function put(parent: object, seg: string, child: unknown): void {
  if (Array.isArray(parent)) parent[indexOf(seg) as number] = child;
  else setOwn(parent as JsonObject, seg, child);
}
