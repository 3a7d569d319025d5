/**
 * `state_merge`: apply a fork's changes to its origin.
 *
 * @module
 */

import { z } from "zod";
import { toPayload } from "../../wire.ts";
import { input, jsonObject, metaShape, ok, OUT, text } from "./_schema.ts";
import { defineTool, given } from "./_tool.ts";
import { infoOnly } from "./_wire.ts";

/** `state_merge`. */
export const merge = defineTool({
  name: "state_merge",
  title: "Merge a fork",
  description: [
    "Apply a fork's changes to its origin. stale_write: both changed error.conflicts; nothing merged.",
  ].join("\n"),
  annotations: { destructiveHint: false, openWorldHint: false },
  input: input({ handle: text("The fork") }),
  output: {
    check: z.strictObject({
      ok,
      ...metaShape,
      merged_from: z.strictObject({ handle: z.string(), version: z.number().int() }),
    }),
    json: jsonObject({ ...OUT.meta, merged_from: OUT.object }),
  },
  async run({ store, checkHandle }, args, _raw, { user, writer }) {
    checkHandle(args.handle);
    const snap = await store.mergeBack(args.handle, { user, ...given("writer", writer) });
    const { activeLease: _, ...rest } = infoOnly(snap);
    return { ...toPayload(rest), merged_from: snap.mergedFrom };
  },
});
