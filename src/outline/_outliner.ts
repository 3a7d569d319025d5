/**
 * Building outlines: one {@link Outliner} per outline spends its budget
 * breadth first (see the module doc of `outline.ts`), and {@link split}
 * shares one budget among the values of a read of several paths.
 *
 * @module
 */

import { InvalidArgument } from "../errors.ts";
import { escapeSegment, type OutlineNode, PREVIEW_CHARS, put } from "./_nodes.ts";
import { previewOf, type Sizer, stringSize } from "./_size.ts";

const KIND_OBJECT = 0;
const KIND_LIST = 1;
const KIND_STRING = 2;

/** The compact JSON length of a whole number. */
function digits(n: number): number {
  return String(n).length;
}

// Fixed parts of the nodes' JSON, measured from the text they stand for.
const SHOWN = '{"value":}'.length;
const HEAD = [
  '{"type":"object","path":,"bytes":,"keys":}'.length,
  '{"type":"list","path":,"bytes":,"length":}'.length,
  '{"type":"string","path":,"bytes":}'.length,
];
const HEAD_NO_PATH = HEAD.map((n) => n - ',"path":'.length);
const OPEN = [',"entries":{}'.length, ',"items":{}'.length];

/**
 * The size of the smallest node that can stand for `value` (of `bytes`): its
 * top node without a path and without children; a scalar, which no node
 * describes, costs its own size.
 */
function leastNode(value: unknown, bytes: number, sizer: Sizer): number {
  if (typeof value === "string") return HEAD_NO_PATH[KIND_STRING]! + digits(bytes);
  if (Array.isArray(value)) return HEAD_NO_PATH[KIND_LIST]! + digits(bytes) + digits(value.length);
  if (typeof value === "object" && value !== null) {
    return HEAD_NO_PATH[KIND_OBJECT]! + digits(bytes) + digits(sizer.keysOf(value).length);
  }
  return bytes;
}
const PREVIEW = ',"preview":'.length;
/** A child shown whole at once may cost up to this much more than its description. */
const SLACK = 128;

/** A value that is described, not shown: one node of the outline being built. */
interface Stub {
  kind: number;
  value: unknown;
  pointer: string;
  bytes: number;
  /** The size of its node as first placed. */
  cost: number;
  node: Record<string, unknown>;
  /** The map its node sits in, and under which key (none for the top node). */
  parent: Record<string, unknown> | null;
  label: string;
  /** An object's keys (`null` for a list or a string). */
  keys: string[] | null;
  /** How many keys or items it has. */
  count: number;
  /** How many children were placed so far. */
  next: number;
  /** Its `entries` or `items` map, once it has one. */
  children: Record<string, unknown> | null;
  /** The children placed as stubs, for the next level. */
  kids: Stub[];
}

/** One outline within one budget; see the module doc of `outline.ts` for the order of work. */
export class Outliner {
  readonly #sizer: Sizer;
  readonly #budget: number;
  /** How much more than its description a child may cost and still be shown whole at once. */
  readonly #slack: number;
  #left = 0;
  /** The strings given a preview, in the order they got it. */
  readonly #previews: Stub[] = [];

  constructor(sizer: Sizer, budget: number) {
    this.#sizer = sizer;
    this.#budget = budget;
    this.#slack = Math.min(SLACK, Math.floor(budget / 32));
  }

  /** Outlines `value` (of `bytes`, over the budget); `used` is the size of the result. */
  run(value: unknown, pointer: string, bytes: number): { node: OutlineNode; used: number } {
    let top = this.#stub(value, pointer, bytes, null, "", true);
    // Only a pointer longer than the budget itself can be left out, and only on the top node.
    if (top.cost > this.#budget) top = this.#stub(value, pointer, bytes, null, "", false);
    this.#left = this.#budget - top.cost;
    let level = [top];
    while (level.length > 0) {
      const pending: Stub[] = [];
      for (let i = 0; i < level.length; i++) {
        const s = level[i]!;
        const extra = s.bytes + SHOWN - s.cost;
        if (s.parent !== null && extra <= Math.floor(this.#left / (level.length - i))) {
          put(s.parent, s.label, { value: s.value });
          this.#left -= extra;
        } else {
          pending.push(s);
        }
      }
      let active = pending;
      while (active.length > 0) {
        const still: Stub[] = [];
        for (const s of active) if (this.#step(s)) still.push(s);
        active = still;
      }
      level = [];
      for (const s of pending) {
        if (s.kind === KIND_LIST) s.kids.sort((a, b) => Number(a.label) - Number(b.label));
        for (const k of s.kids) level.push(k);
      }
    }
    this.#lengthen();
    return { node: top.node as unknown as OutlineNode, used: this.#budget - this.#left };
  }

  /** Shares what is left once nothing else fits among the previews, lengthening them. */
  #lengthen(): void {
    for (let i = 0; i < this.#previews.length && this.#left > 0; i++) {
      const s = this.#previews[i]!;
      const before = s.node.preview as string;
      const cost = stringSize(before);
      const share = Math.floor(this.#left / (this.#previews.length - i));
      const after = previewOf(s.value as string, 0, cost + share, cost + this.#left);
      if (after.length > before.length) {
        s.node.preview = after;
        this.#left -= stringSize(after) - cost;
      }
    }
  }

  #stub(
    value: unknown,
    pointer: string,
    bytes: number,
    parent: Record<string, unknown> | null,
    label: string,
    withPath: boolean,
  ): Stub {
    let kind: number;
    let keys: string[] | null = null;
    let count = 0;
    let node: Record<string, unknown>;
    if (typeof value === "string") {
      kind = KIND_STRING;
      node = withPath ? { type: "string", path: pointer, bytes } : { type: "string", bytes };
    } else if (Array.isArray(value)) {
      kind = KIND_LIST;
      count = value.length;
      node = withPath
        ? { type: "list", path: pointer, bytes, length: count }
        : { type: "list", bytes, length: count };
    } else {
      kind = KIND_OBJECT;
      keys = this.#sizer.keysOf(value as object);
      count = keys.length;
      node = withPath
        ? { type: "object", path: pointer, bytes, keys: count }
        : { type: "object", bytes, keys: count };
    }
    let cost = (withPath ? HEAD[kind]! + stringSize(pointer) : HEAD_NO_PATH[kind]!) + digits(bytes);
    if (kind !== KIND_STRING) cost += digits(count);
    return {
      kind,
      value,
      pointer,
      bytes,
      cost,
      node,
      parent,
      label,
      keys,
      count,
      next: 0,
      children: null,
      kids: [],
    };
  }

  /** Shows one more part of `s` if it fits; returns whether `s` has more to show. */
  #step(s: Stub): boolean {
    if (s.kind === KIND_STRING) {
      const room = this.#left - PREVIEW;
      const preview = previewOf(s.value as string, PREVIEW_CHARS, 0, room);
      if (preview.length > 0) {
        s.node.preview = preview;
        this.#left = room - stringSize(preview);
        this.#previews.push(s);
      }
      return false;
    }
    let label: string;
    let child: unknown;
    if (s.kind === KIND_LIST) {
      // From both ends: 0, n-1, 1, n-2, …
      const k = s.next;
      const index = k % 2 === 0 ? k / 2 : s.count - 1 - (k - 1) / 2;
      label = String(index);
      child = (s.value as unknown[])[index];
    } else {
      label = s.keys![s.next]!;
      child = (s.value as Record<string, unknown>)[label];
    }
    const size = this.#sizer.of(child);
    const shown = size + SHOWN;
    let stub: Stub | null = null;
    let cost = shown;
    if (typeof child === "object" && child !== null || typeof child === "string") {
      const candidate = this.#stub(
        child,
        s.pointer + "/" + escapeSegment(label),
        size,
        null,
        label,
        true,
      );
      if (candidate.cost + this.#slack < shown) [stub, cost] = [candidate, candidate.cost];
    }
    cost += (s.next === 0 ? OPEN[s.kind]! : 1) + stringSize(label) + 1;
    if (cost > this.#left) return false;
    this.#left -= cost;
    if (s.children === null) {
      s.children = {};
      s.node[s.kind === KIND_LIST ? "items" : "entries"] = s.children;
    }
    if (stub) {
      stub.parent = s.children;
      put(s.children, label, stub.node);
      s.kids.push(stub);
    } else {
      put(s.children, label, { value: child });
    }
    return ++s.next < s.count;
  }
}

/** Decides which values are outlined, and outlines them (see `readPaths`). */
export function split(
  found: { pointer: string; value: unknown; size: number }[],
  maxBytes: number,
  sizer: Sizer,
): Map<unknown, OutlineNode> {
  const order = found.map((f, i) => ({ f, i })).sort((a, b) => a.f.size - b.f.size || a.i - b.i);
  const least = order.map(({ f }) => Math.min(f.size, leastNode(f.value, f.size, sizer)));
  // What the values not yet placed need at the least, so that each still gets an answer.
  let reserve = 0;
  for (const n of least) reserve += n;
  if (reserve > maxBytes) {
    throw new InvalidArgument(
      `max_bytes ${maxBytes} is too small for these ${order.length} paths: the shortest answer for each takes ${reserve} bytes in all. Pass max_bytes of at least ${reserve}, or fewer paths.`,
      { field: "max_bytes", min: reserve },
    );
  }
  let left = maxBytes;
  let k = 0;
  for (; k < order.length; k++) {
    const { f } = order[k]!;
    const others = reserve - least[k]!;
    if (f.size > Math.floor(left / (order.length - k)) || left - f.size < others) break;
    left -= f.size;
    reserve = others;
  }
  const outlines = new Map<unknown, OutlineNode>();
  for (; k < order.length; k++) {
    const { f } = order[k]!;
    reserve -= least[k]!;
    // Its least cost, and an equal part of what the least costs of all leave.
    const share = least[k]! + Math.floor((left - reserve - least[k]!) / (order.length - k));
    if (f.size <= share) {
      left -= f.size;
      continue;
    }
    const done = new Outliner(sizer, share).run(f.value, f.pointer, f.size);
    outlines.set(f, done.node);
    left -= done.used;
  }
  return outlines;
}
