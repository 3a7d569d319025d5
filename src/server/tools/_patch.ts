/**
 * `state_patch`: apply ops in place, all or nothing; no version, no conflict.
 *
 * @module
 */

import { z } from "zod";
import type { PatchOp } from "../../ops.ts";
import { toPayload } from "../../wire.ts";
import { input, jsonObject, metaShape, ok, opsList, optional, OUT, text } from "./_schema.ts";
import { defineTool, given } from "./_tool.ts";

/** `state_patch`. */
export const patch = defineTool({
  name: "state_patch",
  title: "Patch state",
  description: [
    "Edit state in place; no version, never conflicts: prefer it for additive edits. ops apply in order, all or nothing:",
    '{"op":"append"|"add_to_set","path":P,"value":V} {"op":"set_key","path":P,"key":K,"value":V} {"op":"increment","path":P,"key":K,"by":N} {"op":"del_key","path":P,"key":K} {"op":"merge","path":P,"mapping":{}}',
    'P: "" (top), "a.b" or "/items/0". Returns the new state.',
  ].join("\n"),
  annotations: { openWorldHint: false },
  input: input({ handle: text(), ops: opsList(), idempotency_key: optional(text()) }),
  output: {
    check: z.strictObject({ ok, ...metaShape, state: z.unknown() }),
    json: jsonObject({ ...OUT.meta, state: OUT.object }),
  },
  async run(ctx, args, raw, { user, writer }) {
    ctx.checkHandle(args.handle);
    const snap = await ctx.store.patch(
      args.handle,
      raw.ops as PatchOp[],
      ctx.typed({
        user,
        ...given("writer", writer),
        ...given("idempotencyKey", args.idempotency_key),
        ...ctx.writeLease(writer),
      }),
    );
    const { activeLease: _, ...rest } = snap;
    return { ...toPayload(rest), ...ctx.otherLease(snap, writer) };
  },
});
