/**
 * `state_load`: read a handle's state, one part of it (`path`), or several
 * parts (`paths`); over the read budget, an outline instead.
 *
 * @module
 */

import { z } from "zod";
import { InvalidArgument } from "../../errors.ts";
import { getPath, parsePath } from "../../ops.ts";
import { checkReadArgs, jsonSize, outline, toPointer } from "../../outline.ts";
import { toReadPayload } from "../../wire.ts";
import { input, jsonObject, list, metaShape, ok, optional, OUT, text, whole } from "./_schema.ts";
import { defineTool } from "./_tool.ts";
import { payloadFor, withoutOwnLease } from "./_wire.ts";

/** `state_load`. */
export const load = defineTool({
  name: "state_load",
  title: "Load state",
  description: ({ readBudget }) =>
    [
      "Read state and its version (for state_save).",
      `Over max_bytes${
        readBudget === undefined ? "" : ` (default ${readBudget})`
      } you get outline, not state (truncated:true): keys, sizes, previews, and the JSON Pointer path of each part left out; pass those in paths to read them (values).`,
    ].join("\n"),
  annotations: { readOnlyHint: true, openWorldHint: false },
  input: input({
    handle: text(),
    path: optional(text('One part: "/sources/0" or "notes.draft"')),
    max_bytes: optional(whole(undefined, { minimum: 256 })),
    paths: optional(list(text(), { maxItems: 32 })),
  }),
  output: {
    check: z.strictObject({
      ok,
      ...metaShape,
      state: z.unknown().optional(),
      outline: z.unknown().optional(),
      values: z.record(z.string(), z.unknown()).optional(),
      missing: z.array(z.string()).optional(),
      path: z.string().optional(),
      truncated: z.boolean().optional(),
      size_bytes: z.number().int().optional(),
    }),
    json: jsonObject({ ...OUT.meta, state: OUT.any, outline: OUT.object, values: OUT.object }),
  },
  async run({ store, typed, readBudget, checkHandle }, args, _raw, { user, writer }) {
    checkHandle(args.handle);
    checkReadArgs(args.max_bytes, args.paths);
    const budget = args.max_bytes ?? readBudget;
    if (args.paths !== undefined) {
      if (args.path) {
        throw new InvalidArgument(
          "Pass path (one part) or paths (several parts), not both.",
          { field: "paths" },
        );
      }
      const r = await store.read(
        args.handle,
        typed({
          user,
          paths: args.paths,
          ...(budget === undefined ? {} : { maxBytes: budget }),
        }),
      );
      return withoutOwnLease(toReadPayload(r), r, writer);
    }
    const snap = await store.get(args.handle, typed({ user }));
    const { state: _, ...payload } = payloadFor(snap, writer);
    const path = args.path || undefined;
    const value = path === undefined ? snap.state : getPath(snap.state, path);
    const read = budget === undefined
      ? { truncated: false as const, value, sizeBytes: -1 }
      : outline(value, budget, { pointer: path === undefined ? "" : toPointer(parsePath(path)) });
    if (read.truncated) payload.outline = read.outline;
    else payload.state = value;
    if (path !== undefined) payload.path = path;
    // Every result says whether anything was left out (SPEC 7.5), with or without a budget;
    // the full size comes with a cut result and with a call that asks for a budget.
    payload.truncated = read.truncated;
    if (read.truncated || args.max_bytes !== undefined) {
      payload.size_bytes = read.sizeBytes < 0 ? jsonSize(value) : read.sizeBytes;
    }
    return payload;
  },
});
