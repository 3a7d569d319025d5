/**
 * `state_lease`: tell other sessions who is at work on a handle, or stop.
 *
 * @module
 */

import { z } from "zod";
import { leasePayload } from "../../wire.ts";
import { flag, input, jsonObject, leaseShape, num, ok, optional, OUT, text } from "./_schema.ts";
import { defineTool } from "./_tool.ts";

/** `state_lease`. */
export const lease = defineTool({
  name: "state_lease",
  title: "Lease state",
  description: [
    "Tell other sessions you are at work on a handle (they see active_lease); blocks nothing. release:true when done. acquired:false: someone else is; tell the user.",
  ].join("\n"),
  annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  input: input({ handle: text(), seconds: optional(num()), release: optional(flag()) }),
  output: {
    check: z.strictObject({
      ok,
      handle: z.string(),
      acquired: z.boolean(),
      released: z.boolean().optional(),
      active_lease: leaseShape.nullable(),
    }),
    json: jsonObject({ acquired: OUT.boolean }),
  },
  async run({ store, checkHandle }, args, _raw, { user, writer }) {
    checkHandle(args.handle);
    const holder = writer || "unknown";
    if (args.release) {
      const released = await store.release(args.handle, { user, writer: holder });
      const snap = await store.get(args.handle, { user });
      return {
        handle: args.handle,
        acquired: false,
        released,
        active_lease: snap.activeLease ? leasePayload(snap.activeLease) : null,
      };
    }
    const l = await store.lease(args.handle, {
      user,
      writer: holder,
      seconds: args.seconds ?? 300,
    });
    return { handle: args.handle, acquired: l.acquired, active_lease: leasePayload(l) };
  },
});
