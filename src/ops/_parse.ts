/**
 * The strict parser of the ops' wire form, and how its errors name the op
 * and field at fault.
 *
 * @module
 */

import { PatchError } from "../errors.ts";
import type { JsonObject } from "../json.ts";
import { splitPath } from "./_path.ts";
import type { PatchOp } from "./_types.ts";
import { isPlainObject, kindOf, own } from "./_values.ts";

const OP_NAMES = "append, set_key, del_key, merge, increment, add_to_set";
/** The most ops a list may hold unless told otherwise. */
export const MAX_OPS = 1000;
/** The largest magnitude `increment` accepts or produces: 2^53 − 1, exact in a JSON number. */
export const MAX_COUNTER = Number.MAX_SAFE_INTEGER;

/** Parses one op from its wire form, strictly (see `opFromJson`). */
export function parseOp(x: unknown): PatchOp {
  if (!isPlainObject(x)) {
    throw new PatchError(
      "wrong_type",
      `An op must be an object such as {"op": "append", "path": "notes", "value": "..."}, not ${
        kindOf(x)
      }.`,
      { field: "op" },
    );
  }
  const op = own(x, "op");
  switch (op) {
    case "append":
    case "add_to_set":
      return { op, path: pathField(x, op), value: valueField(x, op) };
    case "set_key":
      return { op, path: pathField(x, op), key: keyField(x, op), value: valueField(x, op) };
    case "del_key":
      return { op, path: pathField(x, op), key: keyField(x, op) };
    case "merge": {
      const mapping = own(x, "mapping");
      if (!isPlainObject(mapping)) {
        throw fieldError(op, "mapping", mapping, "an object of keys to copy");
      }
      return { op, mapping, path: own(x, "path") === undefined ? "" : pathField(x, op) };
    }
    case "increment": {
      const raw = own(x, "by");
      const by = raw === undefined ? 1 : raw;
      if (typeof by !== "number" || !Number.isFinite(by)) {
        throw fieldError(op, "by", by, "a finite number");
      }
      if (Math.abs(by) > MAX_COUNTER) {
        throw new PatchError(
          "out_of_range",
          `The "by" of an increment op must lie within ±${MAX_COUNTER} (2^53 − 1), which JSON numbers carry exactly; ${by} does not. Store a larger count as a string, or in several counters.`,
          { field: "by", op },
        );
      }
      return { op, path: pathField(x, op), key: keyField(x, op), by };
    }
    default:
      throw typeof op === "string"
        ? new PatchError("unknown_op", `Unknown op "${op}"; use one of ${OP_NAMES}.`, {
          field: "op",
        })
        : new PatchError(
          op === undefined ? "missing_field" : "wrong_type",
          `Every op needs an "op" field naming one of ${OP_NAMES}.`,
          { field: "op" },
        );
  }
}

function pathField(x: JsonObject, op: string): string {
  const path = own(x, "path");
  if (typeof path !== "string") throw fieldError(op, "path", path, "a string");
  splitPath(path);
  return path;
}

function keyField(x: JsonObject, op: string): string {
  const key = own(x, "key");
  if (typeof key !== "string") throw fieldError(op, "key", key, "a string");
  return key;
}

function valueField(x: JsonObject, op: string): unknown {
  const value = own(x, "value");
  if (value === undefined) throw fieldError(op, "value", value, "a JSON value");
  return value;
}

function fieldError(op: string, field: string, got: unknown, need: string): PatchError {
  return got === undefined
    ? new PatchError("missing_field", `The ${op} op needs a "${field}" field (${need}).`, {
      field,
      op,
    })
    : new PatchError(
      "wrong_type",
      `The "${field}" of a ${op} op must be ${need}, not ${kindOf(got)}.`,
      { field, op },
    );
}

/** Runs `f` for op `i`: a PatchError keeps its reason and gains `op_index`. */
export function atIndex<T>(i: number, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof PatchError)) throw e;
    throw new PatchError(e.reason, `Op ${i}: ${e.message}`, { ...e.details, op_index: i });
  }
}
