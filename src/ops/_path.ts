/**
 * Paths of the ops: dotted paths and JSON Pointers split into segments,
 * list indexes, and segments encoded back as a pointer.
 *
 * @module
 */

import { PatchError } from "../errors.ts";
import { kindOf } from "./_values.ts";

const MAX_SEGMENTS = 1000;

/** A path split into its segments. */
export interface Path {
  /** The path as written, for messages. */
  text: string;
  segments: string[];
  /** A JSON Pointer (may index lists), not a dotted path. */
  pointer: boolean;
}

/** Splits a path (dotted, or a JSON Pointer when it starts with `/`) into its segments. */
export function splitPath(path: unknown): Path {
  if (typeof path !== "string") {
    throw new PatchError("wrong_type", `A path must be a string, not ${kindOf(path)}.`, {
      field: "path",
    });
  }
  const pointer = path.startsWith("/");
  let segments: string[] = [];
  if (pointer) {
    segments = path.slice(1).split("/").map((s) => {
      if (/~(?![01])/.test(s)) {
        throw new PatchError(
          "bad_path",
          `The JSON Pointer "${path}" has a bad escape: "~" must be followed by 0 (for ~) or 1 (for /).`,
          { field: "path", path },
        );
      }
      return s.replace(/~[01]/g, (m) => m === "~1" ? "/" : "~");
    });
  } else if (path !== "") {
    segments = path.split(".");
    if (segments.includes("")) {
      throw new PatchError(
        "bad_path",
        `The path "${path}" has an empty segment; write keys separated by single dots, such as "profile.tags", or "" for the root.`,
        { field: "path", path },
      );
    }
  }
  if (segments.length > MAX_SEGMENTS) {
    throw new PatchError(
      "bad_path",
      `The path has ${segments.length} segments; at most ${MAX_SEGMENTS}.`,
      { field: "path" },
    );
  }
  return { text: path, segments, pointer };
}

/** The list index a segment names (decimal, no leading zeros), or `undefined`. */
export function indexOf(seg: string): number | undefined {
  return /^(0|[1-9][0-9]*)$/.test(seg) ? Number(seg) : undefined;
}

/** Encodes path segments as a JSON Pointer. */
export function pointerOf(segments: readonly string[]): string {
  let out = "";
  for (const s of segments) out += "/" + s.replaceAll("~", "~0").replaceAll("/", "~1");
  return out;
}
