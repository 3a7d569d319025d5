/**
 * `state_list`: the caller's handles, newest first, a page at a time.
 *
 * @module
 */

import { z } from "zod";
import { Unauthenticated } from "../../errors.ts";
import { flag, input, jsonObject, metaShape, ok, optional, OUT, text, whole } from "./_schema.ts";
import { defineTool } from "./_tool.ts";
import { payloadFor } from "./_wire.ts";

/** `state_list`. */
export const list = defineTool({
  name: "state_list",
  title: "List state",
  description: [
    "List your handles (kind, version, updated_at; no state), newest first. Call it at the start of a conversation to offer resuming earlier work; previews: true adds a line about each state. next_cursor set: pass it as cursor for more.",
  ].join("\n"),
  annotations: { readOnlyHint: true, openWorldHint: false },
  input: input({
    kind: optional(text()),
    limit: optional(whole(undefined, { maximum: 500 })),
    cursor: optional(text()),
    previews: optional(flag()),
  }),
  output: {
    check: z.strictObject({
      ok,
      handles: z.array(z.strictObject(metaShape)),
      next_cursor: z.string().nullable(),
    }),
    json: jsonObject({ handles: { type: "array", items: jsonObject(OUT.meta) } }),
  },
  async run({ store, anonymous, readBudget }, args, _raw, { user, writer }) {
    if (anonymous) {
      throw new Unauthenticated(
        "state_list is disabled on this server: it runs without authentication, so every caller shares one bucket and a list would reveal everyone's handles. Keep the handles you mint and pass them back; to resume earlier work, ask the user for its handle.",
      );
    }
    const page = await store.listPage(user, {
      ...(args.kind === undefined ? {} : { kind: args.kind }),
      ...(args.limit === undefined ? {} : { limit: args.limit }),
      ...(args.cursor === undefined ? {} : { cursor: args.cursor }),
      ...(args.previews ? { previews: true } : {}),
      // The result adds `"ok":true,` to the page's own JSON.
      ...(readBudget === undefined ? {} : { maxBytes: Math.max(1, readBudget - 10) }),
    });
    return {
      handles: page.handles.map((h) => payloadFor(h, writer)),
      next_cursor: page.nextCursor,
    };
  },
});
