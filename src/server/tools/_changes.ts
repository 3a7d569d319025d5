/**
 * `state_changes`: what happened to a handle after a version.
 *
 * @module
 */

import { z } from "zod";
import { toPayload } from "../../wire.ts";
import { input, jsonObject, ok, OUT, text, whole } from "./_schema.ts";
import { defineTool } from "./_tool.ts";

/** `state_changes`. */
export const changes = defineTool({
  name: "state_changes",
  title: "State changes",
  description: [
    "Changes after since_version, oldest first (version, writer, op, ops or patch): when resuming, or after a stale_write. truncated:true: read current instead.",
  ].join("\n"),
  annotations: { readOnlyHint: true, openWorldHint: false },
  input: input({ handle: text(), since_version: whole() }),
  output: {
    check: z.strictObject({
      ok,
      handle: z.string(),
      since_version: z.number().int(),
      truncated: z.boolean(),
      version: z.number().int(),
      changes: z.array(z.record(z.string(), z.unknown())).optional(),
      current: z.unknown().optional(),
    }),
    json: jsonObject({ version: OUT.integer, changes: { type: "array", items: OUT.object } }),
  },
  async run({ store, checkHandle }, args, _raw, { user }) {
    checkHandle(args.handle);
    const r = await store.changesSince(args.handle, args.since_version, { user });
    const head = { handle: args.handle, since_version: args.since_version };
    return r.truncated
      ? { ...head, truncated: true, version: r.current.version, current: toPayload(r.current) }
      : { ...head, truncated: false, version: r.version, changes: r.changes };
  },
});
