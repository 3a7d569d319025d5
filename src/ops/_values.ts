/**
 * Small helpers over JSON values that the ops share: own properties only,
 * plain objects, deep equality, and how a value is named in a message.
 *
 * @module
 */

import type { JsonObject } from "../json.ts";

/** The value of an own property of `obj`; `undefined` when `key` is not its own. */
export function own(obj: JsonObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

/** Sets `key` of `obj` as an own, plain data property (even `__proto__`). */
export function setOwn(obj: JsonObject, key: string, value: unknown): JsonObject {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  return obj;
}

/** Whether `x` is a plain object (its prototype `Object.prototype` or `null`). */
export function isPlainObject(x: unknown): x is JsonObject {
  if (typeof x !== "object" || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

/** How a message names the kind of `x`: `null`, `a list`, `an object`, `a string`... */
export function kindOf(x: unknown): string {
  if (x === null || x === undefined) return String(x);
  if (Array.isArray(x)) return "a list";
  return typeof x === "object" ? "an object" : `a ${typeof x}`;
}

/**
 * JSON deep equality; `ordered` also requires object keys in the same order.
 * Iterative, so any depth compares; a pair of objects met again (a shared
 * subtree, a cycle) is not compared twice, so it always terminates.
 */
export function jsonEqual(a: unknown, b: unknown, ordered: boolean): boolean {
  const todo: [unknown, unknown][] = [[a, b]];
  let seen: Map<object, Set<object>> | undefined;
  for (let pair = todo.pop(); pair !== undefined; pair = todo.pop()) {
    const [x, y] = pair;
    if (x === y) continue;
    if (typeof x !== "object" || typeof y !== "object" || x === null || y === null) return false;
    seen ??= new Map();
    let partners = seen.get(x);
    if (partners?.has(y)) continue;
    if (!partners) seen.set(x, partners = new Set());
    partners.add(y);
    if (Array.isArray(x) || Array.isArray(y)) {
      if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length) return false;
      for (let i = 0; i < x.length; i++) todo.push([x[i], y[i]]);
      continue;
    }
    const kx = Object.keys(x);
    const ky = Object.keys(y);
    if (kx.length !== ky.length) return false;
    for (let i = 0; i < kx.length; i++) {
      const k = kx[i] as string;
      if (ordered ? ky[i] !== k : !Object.hasOwn(y, k)) return false;
      todo.push([(x as JsonObject)[k], (y as JsonObject)[k]]);
    }
  }
  return true;
}
