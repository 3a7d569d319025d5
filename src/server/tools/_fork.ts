/**
 * `state_fork`: copy a handle into a new one; `state_merge` brings its
 * changes back.
 *
 * @module
 */

import { z } from "zod";
import { toPayload } from "../../wire.ts";
import { input, jsonObject, metaShape, ok, OUT, text } from "./_schema.ts";
import { defineTool, given } from "./_tool.ts";
import { infoOnly } from "./_wire.ts";

/** `state_fork`. */
export const fork = defineTool({
  name: "state_fork",
  title: "Fork state",
  description: [
    "Copy a handle into a new one (forked_from names the origin), e.g. for a sub-agent to work on; state_merge brings its changes back.",
  ].join("\n"),
  annotations: { destructiveHint: false, openWorldHint: false },
  input: input({ handle: text() }),
  output: {
    check: z.strictObject({ ok, ...metaShape }),
    json: jsonObject({ ...OUT.meta, forked_from: OUT.object }),
  },
  async run({ store, checkHandle }, args, _raw, { user, writer }) {
    checkHandle(args.handle);
    const fork = await store.fork(args.handle, { user, ...given("writer", writer) });
    const { activeLease: _, ...rest } = infoOnly(await store.get(fork, { user }));
    return toPayload(rest);
  },
});
