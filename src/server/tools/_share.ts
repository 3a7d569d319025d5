/**
 * `state_share`: grant another user (or anyone holding the new handle)
 * rights on a handle. Offered only when named, and never in the shared
 * bucket, where every caller is one user.
 *
 * @module
 */

import { z } from "zod";
import { grantPayload, type Rights } from "../../grants.ts";
import { input, jsonObject, named, num, ok, optional, OUT, text } from "./_schema.ts";
import { defineTool } from "./_tool.ts";

/** `state_share`. */
export const share = defineTool({
  name: "state_share",
  title: "Share state",
  description: [
    'Share a handle with another user (to: their id) or anyone holding the returned handle (to: "*"), only when the user asks.',
    "rights: read < append (add only) < patch < write. Give the returned handle to the grantee.",
  ].join("\n"),
  annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
  optIn: true,
  notAnonymous: true,
  input: input({
    handle: text(),
    to: text('A user id, or "*" for anyone holding the new handle'),
    rights: named(["read", "append", "patch", "write"]),
    ttl_days: optional(num()),
  }),
  output: {
    check: z.strictObject({
      ok,
      grant: z.string(),
      handle: z.string(),
      rights: z.string(),
      to: z.string(),
      expires_at: z.string().nullable(),
    }),
    json: jsonObject({ grant: OUT.string, handle: OUT.string }),
  },
  async run({ store }, args, _raw, { user }) {
    const g = await store.share(args.handle, {
      user,
      to: args.to,
      rights: args.rights as Rights,
      ...(args.ttl_days == null ? {} : { ttlDays: args.ttl_days }),
    });
    return grantPayload(g);
  },
});
