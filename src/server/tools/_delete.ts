/**
 * `state_delete`: move a handle to the trash (`state_restore` undoes it).
 *
 * @module
 */

import { z } from "zod";
import { input, jsonObject, ok, optional, OUT, text } from "./_schema.ts";
import { defineTool, given } from "./_tool.ts";

/** `state_delete`. */
export const del = defineTool({
  name: "state_delete",
  title: "Delete state",
  description: [
    "Delete a handle, only when the user agrees. state_restore undoes it for 7 days.",
  ].join("\n"),
  annotations: { idempotentHint: true, openWorldHint: false },
  input: input({ handle: text(), idempotency_key: optional(text()) }),
  output: {
    check: z.strictObject({ ok, handle: z.string(), deleted: z.literal(true) }),
    json: jsonObject({ handle: OUT.string }),
  },
  async run({ store, checkHandle }, args, _raw, { user }) {
    checkHandle(args.handle);
    await store.revoke(args.handle, { user, ...given("idempotencyKey", args.idempotency_key) });
    return { handle: args.handle, deleted: true };
  },
});
