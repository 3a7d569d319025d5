/**
 * `state_save`: mint a handle (no handle given) or replace a handle's whole
 * state at the version the caller read.
 *
 * @module
 */

import { z } from "zod";
import { ExpectVersionRequired, InvalidArgument, StaleWrite } from "../../errors.ts";
import type { JsonObject } from "../../json.ts";
import type { AnyKind } from "../types.ts";
import { sharedBucketMintKey } from "../_shared_bucket.ts";
import {
  input,
  jsonObject,
  leaseShape,
  num,
  object,
  ok,
  oneOf,
  optional,
  OUT,
  text,
  whole,
} from "./_schema.ts";
import { ANONYMOUS_RANDOM_CHARS, defineTool } from "./_tool.ts";
import { withinBudget } from "./_wire.ts";

/** `state_save`. */
export const save = defineTool({
  name: "state_save",
  title: "Save state",
  description: ({ kinds }) =>
    [
      "Save state that outlives this conversation.",
      "Create: omit handle; pass kind and state. Keep the handle, tell the user, pass it back later (also in new conversations).",
      "Update: handle + expect_version (the version you read); state replaces the whole state.",
      'stale_write error: someone else wrote since; nothing saved. With on_conflict:"merge" your edits merge when they touch other paths than theirs; else error.conflicts lists the clashing paths: re-apply your change to error.current.state, save with expect_version=error.current.version.',
      "For small edits prefer state_patch: no version, no conflicts.",
      ...kindsDescription(kinds),
    ].join("\n"),
  annotations: { openWorldHint: false },
  input: input({
    kind: optional(text('Create: a label such as "research"')),
    state: object(),
    handle: optional(text("Update: the handle")),
    expect_version: optional(whole("Update: the version you read")),
    ttl_days: optional(num("Days to live; omit: forever (update: keep)")),
    on_conflict: optional(oneOf(["fail", "merge"])),
    idempotency_key: optional(text()),
  }),
  output: {
    check: z.strictObject({
      ok,
      handle: z.string(),
      version: z.number().int(),
      merged: z.literal(true).optional(),
      base_version: z.number().int().optional(),
      active_lease: leaseShape.optional(),
    }),
    json: jsonObject(OUT.meta),
  },
  async run(ctx, args, raw, { user, writer }) {
    const { store, anonymous, typed, writeLease } = ctx;
    const state = raw.state as JsonObject;
    const idem = args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key };
    const w = writer === undefined ? {} : { writer };
    if (args.handle === undefined) {
      if (args.kind === undefined) {
        throw new InvalidArgument(
          'Creating new state needs a kind, a short lowercase label such as "research". Pass kind, or pass the handle of existing state to update it.',
          { field: "kind" },
        );
      }
      // The shared bucket scopes a mint's key by the whole call (_shared_bucket.ts).
      const key = anonymous && args.idempotency_key !== undefined
        ? await sharedBucketMintKey(args.idempotency_key, [args.kind, state, args.ttl_days, writer])
        : args.idempotency_key;
      const handle = await store.mint(
        args.kind,
        state,
        typed({
          user,
          ...w,
          ...(key === undefined ? {} : { idempotencyKey: key }),
          ...(args.ttl_days === undefined ? {} : { ttlDays: args.ttl_days }),
          ...(anonymous ? { randomChars: ANONYMOUS_RANDOM_CHARS } : {}),
          ...writeLease(writer),
        }),
      );
      // A new handle has no other holder: the writer's lease was taken.
      return { handle, version: 1 };
    }
    ctx.checkHandle(args.handle);
    if (args.expect_version === undefined) throw new ExpectVersionRequired(args.handle);
    const snap = await store.save(
      args.handle,
      state,
      typed({
        user,
        expectVersion: args.expect_version,
        ...w,
        ...idem,
        // null and absent both keep the expiry; state_touch removes it.
        ...(args.ttl_days === undefined ? {} : { ttlDays: args.ttl_days }),
        ...(args.on_conflict === undefined ? {} : { onConflict: args.on_conflict }),
        ...writeLease(writer),
      }),
    ).catch((e) => {
      if (e instanceof StaleWrite && ctx.readBudget !== undefined) withinBudget(e, ctx.readBudget);
      throw e;
    });
    return {
      handle: snap.handle,
      version: snap.version,
      ...(snap.merged ? { merged: true, base_version: snap.baseVersion } : {}),
      ...ctx.otherLease(snap, writer),
    };
  },
});

/**
 * The lines of `state_save`'s description that offer the typed kinds: each
 * one's JSON Schema, compact. None without kinds, so a default server's
 * tool list is unchanged.
 */
function kindsDescription(kinds: readonly AnyKind[]): string[] {
  if (kinds.length === 0) return [];
  const lines = [
    "Kinds with a schema: a state of these kinds must match it (JSON Schema below), else invalid_state lists issues as {path (JSON Pointer), message}; fix those and retry.",
  ];
  for (const k of kinds) {
    const schema = k.jsonSchema;
    if (schema === null) {
      lines.push(`${k.name}: (validated; no JSON Schema available)`);
      continue;
    }
    const { $schema: _, ...rest } = schema;
    lines.push(`${k.name}: ${JSON.stringify(rest)}`);
  }
  return lines;
}
