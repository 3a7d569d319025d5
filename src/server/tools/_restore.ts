/**
 * `state_restore`: take a deleted handle back out of the trash.
 *
 * @module
 */

import { z } from "zod";
import { toPayload } from "../../wire.ts";
import { input, jsonObject, metaShape, ok, OUT, text } from "./_schema.ts";
import { defineTool } from "./_tool.ts";

/** `state_restore`. */
export const restore = defineTool({
  name: "state_restore",
  title: "Restore state",
  description: [
    "Undo a state_delete (within 7 days).",
  ].join("\n"),
  annotations: { destructiveHint: false, openWorldHint: false },
  input: input({ handle: text() }),
  output: {
    check: z.strictObject({ ok, ...metaShape, state: z.unknown(), restored: z.literal(true) }),
    json: jsonObject({ ...OUT.meta, state: OUT.object }),
  },
  async run({ store, checkHandle }, args, _raw, { user }) {
    checkHandle(args.handle);
    const snap = await store.restore(args.handle, { user });
    return { ...toPayload(snap), restored: true };
  },
});
