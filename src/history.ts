/**
 * The way back through a handle's changelog: what a state was at an earlier
 * version.
 *
 * Every `save` and `patch` entry of the changelog keeps, besides what it
 * changed, `undo`: an RFC 6902 JSON Patch (only `add`, `remove` and
 * `replace`) that takes the state this version wrote back to the state of
 * the version before. It holds the previous values at the places the write
 * changed, and nothing else, so it costs about what the write itself does.
 * A `touch` changes no state and needs none; a `mint` is never undone.
 *
 * The state at version `v` is then the current state with the `undo` of
 * versions `current`, `current − 1`, …, `v + 1` applied in that order
 * ({@link rewind}). {@link applyJsonPatch} applies a patch copy-on-write, so
 * the rewound state shares every part no entry touched with the current one,
 * and, given a list, records the patch that undoes what it applied: that is
 * how a save's `undo` is computed from its forward `patch` and the previous
 * state, without a second diff.
 *
 * Entries written before `undo` existed, and entries kept as `omitted`
 * markers (over `maxEntryBytes`), cannot be undone: a version behind one of
 * them is no longer reachable, and {@link rewind} answers `null`.
 *
 * Everything here is pure: no I/O, and inputs are never changed.
 *
 * @module
 */

import type { JsonObject } from "./json.ts";
import type { JsonPatchOp } from "./ops.ts";

export type { JsonPatchOp };

/** A changelog entry as parsed from its text: the fields {@link rewind} reads. */
export interface EntryInfo {
  /** The version the write produced. */
  version: number;
  /** What kind of write: `mint`, `save`, `patch`, `touch`, … */
  op: string;
  /** The patch from this version's state back to the previous one's, when kept. */
  undo?: unknown;
  /** `true` for an entry kept as a marker only. */
  omitted?: unknown;
}

/** A patch that does not apply to the state it was given (a corrupt or foreign changelog). */
export class JsonPatchMismatch extends Error {
  /**
   * Creates the error.
   *
   * @param message What did not apply.
   */
  constructor(message: string) {
    super(message);
    this.name = "JsonPatchMismatch";
  }
}

/**
 * Applies an RFC 6902 JSON Patch to a state copy-on-write: the input is
 * never changed, and the result shares every container the patch does not
 * write into. Each container on the way to a change is copied once per call.
 * All six ops are understood (`add`, `remove`, `replace`, `move`, `copy`,
 * `test`). Object keys are own data properties (`__proto__` included).
 *
 * @param state The state; its root must be an object.
 * @param ops The patch, applied in order.
 * @param undo When given, receives the patch that takes the result back to
 * `state` (only `add`, `remove`, `replace`), in the order to apply it.
 * @returns The patched state.
 * @throws {JsonPatchMismatch} When an op does not apply (a missing path, an
 * index out of range, a failed `test`, a malformed op).
 */
export function applyJsonPatch(
  state: JsonObject,
  ops: readonly JsonPatchOp[],
  undo?: JsonPatchOp[],
): JsonObject {
  const p = new Patcher(state, undo === undefined ? undefined : []);
  for (const op of ops) p.apply(op);
  if (undo !== undefined) {
    const inverse = p.inverse!;
    for (let i = inverse.length - 1; i >= 0; i--) undo.push(inverse[i]!);
  }
  return p.root as JsonObject;
}

/**
 * Changelog operations that record an event and change neither the state
 * nor the expiry: `share`, `unshare` and `transfer`.
 */
export const EVENT_OPS: ReadonlySet<string> = new Set(["share", "unshare", "transfer"]);

/**
 * The state at version `to`, from the state at version `from` and the
 * changelog entries `to + 1 … from` (in any order; others are ignored).
 *
 * @param state The state at version `from`.
 * @param from Its version.
 * @param to The version wanted, at most `from`.
 * @param entries Parsed changelog entries.
 * @returns The state at `to`, sharing what did not change with `state`; or
 * `null` when an entry in between is missing, is a marker, or has no `undo`.
 */
export function rewind(
  state: JsonObject,
  from: number,
  to: number,
  entries: readonly EntryInfo[],
): JsonObject | null {
  if (to > from) return null;
  const byVersion = new Map<number, EntryInfo>();
  for (const e of entries) if (e.version > to && e.version <= from) byVersion.set(e.version, e);
  let at = state;
  for (let v = from; v > to; v--) {
    const e = byVersion.get(v);
    if (e === undefined || e.omitted) return null;
    // Entries that changed no state: a touch, and the events of sharing and transfer.
    if (e.op === "touch" || EVENT_OPS.has(e.op)) continue;
    if ((e.op !== "save" && e.op !== "patch" && e.op !== "merge") || !Array.isArray(e.undo)) {
      return null;
    }
    try {
      at = applyJsonPatch(at, e.undo as JsonPatchOp[]);
    } catch (err) {
      if (err instanceof JsonPatchMismatch) return null;
      throw err;
    }
  }
  return at;
}

/**
 * The `undo` of a write: the patch that takes the state `ops` produce from
 * `before` back to `before`.
 *
 * @param before The state before the write.
 * @param ops The write's RFC 6902 patch.
 * @returns The undo patch, or `undefined` when `ops` does not apply to `before`.
 */
export function undoOf(before: JsonObject, ops: readonly JsonPatchOp[]): JsonPatchOp[] | undefined {
  const undo: JsonPatchOp[] = [];
  try {
    applyJsonPatch(before, ops, undo);
  } catch (e) {
    if (e instanceof JsonPatchMismatch) return undefined;
    throw e;
  }
  return undo;
}

/**
 * Splits a JSON Pointer into unescaped segments.
 *
 * @param pointer `""` or a string starting with `/`.
 * @returns The segments.
 * @throws {JsonPatchMismatch} For a malformed pointer.
 */
export function pointerSegments(pointer: string): string[] {
  if (pointer === "") return [];
  if (typeof pointer !== "string" || !pointer.startsWith("/")) {
    throw new JsonPatchMismatch(`Not a JSON Pointer: ${JSON.stringify(pointer)}`);
  }
  return pointer.slice(1).split("/").map((s) =>
    s.includes("~") ? s.replaceAll("~1", "/").replaceAll("~0", "~") : s
  );
}

/**
 * Encodes segments as a JSON Pointer.
 *
 * @param segments Object keys and list indexes, unescaped.
 * @returns The pointer.
 */
export function pointerOf(segments: readonly string[]): string {
  let out = "";
  for (const s of segments) {
    out += "/" +
      (s.includes("~") || s.includes("/") ? s.replaceAll("~", "~0").replaceAll("/", "~1") : s);
  }
  return out;
}

// ---------------------------------------------------------------- the applier

type Container = JsonObject | unknown[];

class Patcher {
  root: unknown;
  readonly inverse: JsonPatchOp[] | undefined;
  /** Containers this call made (copies): written in place. */
  readonly #own = new WeakSet<object>();

  constructor(root: JsonObject, inverse: JsonPatchOp[] | undefined) {
    this.root = root;
    this.inverse = inverse;
  }

  apply(op: JsonPatchOp): void {
    if (typeof op !== "object" || op === null || typeof op.path !== "string") {
      throw new JsonPatchMismatch("A patch op must be an object with a string path.");
    }
    switch (op.op) {
      case "add":
        return this.#add(op.path, op.value);
      case "remove":
        this.#remove(op.path);
        return;
      case "replace":
        return this.#replace(op.path, op.value);
      case "move": {
        const from = String(op.from);
        if (op.path === from) return;
        if (op.path.startsWith(from + "/")) {
          throw new JsonPatchMismatch(`Cannot move ${from} into itself.`);
        }
        return this.#add(op.path, this.#remove(from));
      }
      case "copy":
        // A copy of the value, so that a later write into one place never shows at the other.
        return this.#add(op.path, JSON.parse(JSON.stringify(this.#get(String(op.from)))));
      case "test":
        if (JSON.stringify(this.#get(op.path)) !== JSON.stringify(op.value)) {
          throw new JsonPatchMismatch(`The test at ${op.path} failed.`);
        }
        return;
      default:
        throw new JsonPatchMismatch(`Unknown patch op ${JSON.stringify(op.op)}.`);
    }
  }

  #record(op: JsonPatchOp): void {
    this.inverse?.push(op);
  }

  #get(pointer: string): unknown {
    let node = this.root;
    for (const seg of pointerSegments(pointer)) {
      if (Array.isArray(node)) {
        const i = indexOf(seg, node.length - 1);
        node = node[i];
      } else if (isObject(node) && Object.hasOwn(node, seg)) {
        node = node[seg];
      } else {
        throw new JsonPatchMismatch(`No value at ${pointer}.`);
      }
    }
    return node;
  }

  /** The parent container of `pointer`, made this call's own (copied once), and the last segment. */
  #parent(pointer: string): [Container, string] {
    const segs = pointerSegments(pointer);
    if (segs.length === 0) throw new JsonPatchMismatch("The root has no parent.");
    let node = this.#writable(this.root, null, "");
    this.root = node;
    for (let i = 0; i < segs.length - 1; i++) {
      const seg = segs[i]!;
      let child: unknown;
      if (Array.isArray(node)) child = node[indexOf(seg, node.length - 1)];
      else if (Object.hasOwn(node, seg)) child = node[seg];
      else throw new JsonPatchMismatch(`No value at ${pointerOf(segs.slice(0, i + 1))}.`);
      node = this.#writable(child, node, seg);
    }
    return [node, segs[segs.length - 1]!];
  }

  /** `node` as a container this call owns, put back into `parent` at `seg` when copied. */
  #writable(node: unknown, parent: Container | null, seg: string): Container {
    if (!Array.isArray(node) && !isObject(node)) {
      throw new JsonPatchMismatch(`Cannot walk into ${node === null ? "null" : typeof node}.`);
    }
    if (this.#own.has(node)) return node;
    // Spread defines own data properties: a `__proto__` key is copied as data.
    const copy: Container = Array.isArray(node) ? node.slice() : { ...node };
    this.#own.add(copy);
    if (parent !== null) {
      if (Array.isArray(parent)) parent[Number(seg)] = copy;
      else setOwn(parent, seg, copy);
    }
    return copy;
  }

  #add(pointer: string, value: unknown): void {
    if (pointer === "") return this.#replaceRoot(value);
    const [parent, seg] = this.#parent(pointer);
    if (Array.isArray(parent)) {
      const i = seg === "-" ? parent.length : indexOf(seg, parent.length);
      parent.splice(i, 0, value);
      this.#record({ op: "remove", path: parentPointer(pointer) + "/" + i });
    } else {
      const had = Object.hasOwn(parent, seg);
      this.#record(
        had
          ? { op: "replace", path: pointer, value: parent[seg] }
          : { op: "remove", path: pointer },
      );
      setOwn(parent, seg, value);
    }
  }

  #remove(pointer: string): unknown {
    const [parent, at, old] = this.#existing(pointer);
    if (Array.isArray(parent)) parent.splice(at as number, 1);
    else Reflect.deleteProperty(parent, at);
    this.#record({ op: "add", path: pointer, value: old });
    return old;
  }

  #replace(pointer: string, value: unknown): void {
    if (pointer === "") return this.#replaceRoot(value);
    const [parent, at, old] = this.#existing(pointer);
    this.#record({ op: "replace", path: pointer, value: old });
    if (Array.isArray(parent)) parent[at as number] = value;
    else setOwn(parent, at as string, value);
  }

  #replaceRoot(value: unknown): void {
    this.#record({ op: "replace", path: "", value: this.root });
    this.root = value;
  }

  /** The writable parent of an existing value at `pointer`, its index or key there, and the value. */
  #existing(pointer: string): [Container, number | string, unknown] {
    const [parent, seg] = this.#parent(pointer);
    if (Array.isArray(parent)) {
      const i = indexOf(seg, parent.length - 1);
      return [parent, i, parent[i]];
    }
    if (!Object.hasOwn(parent, seg)) throw new JsonPatchMismatch(`No value at ${pointer}.`);
    return [parent, seg, parent[seg]];
  }
}

function parentPointer(pointer: string): string {
  return pointer.slice(0, pointer.lastIndexOf("/"));
}

/** A list index of at most `max`, written without leading zeros. */
function indexOf(seg: string, max: number): number {
  if (!/^(0|[1-9][0-9]*)$/.test(seg) || Number(seg) > max) {
    throw new JsonPatchMismatch(`${JSON.stringify(seg)} is not an index of this list.`);
  }
  return Number(seg);
}

function isObject(x: unknown): x is JsonObject {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function setOwn(obj: JsonObject, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}
