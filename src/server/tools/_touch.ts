/**
 * `state_touch`: renew a handle's expiry, or remove it.
 *
 * @module
 */

import { z } from "zod";
import { toPayload } from "../../wire.ts";
import { input, jsonObject, metaShape, num, ok, optional, OUT, text } from "./_schema.ts";
import { defineTool, given } from "./_tool.ts";
import { infoOnly } from "./_wire.ts";

/** `state_touch`. */
export const touch = defineTool({
  name: "state_touch",
  title: "Renew state",
  description: [
    "Make a handle expire ttl_days from now, or never (omit ttl_days).",
  ].join("\n"),
  annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  input: input({ handle: text(), ttl_days: optional(num()), idempotency_key: optional(text()) }),
  output: { check: z.strictObject({ ok, ...metaShape }), json: jsonObject(OUT.meta) },
  async run(ctx, args, _raw, { user, writer }) {
    ctx.checkHandle(args.handle);
    const snap = await ctx.store.touch(args.handle, {
      user,
      ttlDays: args.ttl_days ?? null,
      ...given("writer", writer),
      ...given("idempotencyKey", args.idempotency_key),
      ...ctx.writeLease(writer),
    });
    const { activeLease: _, ...rest } = infoOnly(snap);
    return { ...toPayload(rest), ...ctx.otherLease(snap, writer) };
  },
});
