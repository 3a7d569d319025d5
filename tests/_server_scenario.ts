/**
 * The tool scenario every transport and era runs: all six tools, the wire
 * shapes of the contract, and the error codes a model acts on.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import type { Era } from "./_server_harness.ts";
import { call, fails, ok } from "./_tool_calls.ts";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const META_KEYS = [
  "created_at",
  "expires_at",
  "handle",
  "kind",
  "last_writer",
  "updated_at",
  "version",
];

function keys(o: Record<string, unknown>): string[] {
  return Object.keys(o).sort();
}

function assertMeta(p: Record<string, unknown>, handle: string, kind: string): void {
  assert.equal(p.handle, handle);
  assert.equal(p.kind, kind);
  assert.ok(Number.isInteger(p.version));
  assert.match(String(p.created_at), ISO);
  assert.match(String(p.updated_at), ISO);
  assert.ok(p.expires_at === null || ISO.test(String(p.expires_at)));
  assert.ok(p.last_writer === null || typeof p.last_writer === "string");
}

/** Options of {@link toolScenario}. */
/** The tools a server lists by default, sorted by name. */
export const DEFAULT_TOOL_NAMES: readonly string[] = [
  "state_changes",
  "state_delete",
  "state_fork",
  "state_lease",
  "state_list",
  "state_load",
  "state_merge",
  "state_patch",
  "state_restore",
  "state_save",
  "state_touch",
];

export interface ScenarioOptions {
  /** A kind unique to this run, so runs sharing a user don't see each other's handles in lists. */
  kind: string;
  /** The `last_writer` every write of this session must record. */
  writer: string;
  /** The era, for the era-specific checks. */
  era: Era;
}

/**
 * Runs every tool against a connected client as `t.step`s.
 *
 * @param t The test context.
 * @param client A connected client.
 * @param o Kind, expected writer, era.
 */
export async function toolScenario(
  t: Deno.TestContext,
  client: Client,
  o: ScenarioOptions,
): Promise<void> {
  const { kind } = o;
  let handle = "";

  await t.step("tools/list: eleven tools, honest annotations, schemas, instructions", async () => {
    const list = await client.listTools();
    const byName = new Map(list.tools.map((tool) => [tool.name, tool]));
    assert.deepEqual([...byName.keys()].sort(), DEFAULT_TOOL_NAMES);
    for (const tool of list.tools) {
      assert.ok((tool.description ?? "").length >= 30, `${tool.name} has a real description`);
      assert.equal(tool.inputSchema.type, "object");
      assert.equal(tool.outputSchema?.type, "object", `${tool.name} has an output schema`);
      assert.equal(tool.annotations?.openWorldHint, false);
    }
    // Hints left out take the protocol's defaults: not read-only, destructive, not idempotent.
    const hint = (name: string, key: "readOnlyHint" | "destructiveHint" | "idempotentHint") =>
      byName.get(name)?.annotations?.[key] ?? (key === "destructiveHint");
    assert.equal(hint("state_load", "readOnlyHint"), true);
    assert.equal(hint("state_list", "readOnlyHint"), true);
    assert.equal(hint("state_changes", "readOnlyHint"), true);
    assert.equal(hint("state_delete", "destructiveHint"), true);
    assert.equal(hint("state_touch", "idempotentHint"), true);
    assert.equal(hint("state_touch", "destructiveHint"), false);
    assert.equal(hint("state_save", "readOnlyHint"), false);
    assert.equal(hint("state_save", "destructiveHint"), true);
    const save = byName.get("state_save")!;
    const props = save.inputSchema.properties as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(props).sort(), [
      "expect_version",
      "handle",
      "idempotency_key",
      "kind",
      "on_conflict",
      "state",
      "ttl_days",
    ]);
    assert.equal(props.state?.type, "object");
    assert.deepEqual(save.inputSchema.required, ["state"]);
    assert.match(save.description ?? "", /stale_write/);
    assert.match(save.description ?? "", /state_patch/);
    assert.match(byName.get("state_list")?.description ?? "", /start of a conversation/);
    const patchProps = byName.get("state_patch")!.inputSchema.properties as Record<
      string,
      Record<string, unknown>
    >;
    assert.equal(patchProps.ops?.type, "array");
    if (o.era === "2026-07-28") {
      const raw = list as unknown as { ttlMs?: number; cacheScope?: string };
      assert.equal(raw.ttlMs, 3_600_000);
      assert.equal(raw.cacheScope, "public");
    }
    const instructions = client.getInstructions() ?? "";
    assert.match(instructions, /state_list/);
    assert.match(instructions, /stale_write/);
    assert.equal(client.getServerVersion()?.name, "mcpstate");
  });

  await t.step("state_save without a handle mints: {ok, handle, version}", async () => {
    const state = JSON.parse(
      '{"sources": ["a"], "notes": {"draft": "x"}, "__proto__": {"polluted": true}, "n": 1}',
    );
    const p = await ok(client, "state_save", { kind, state });
    assert.deepEqual(keys(p), ["handle", "ok", "version"]);
    assert.equal(p.version, 1);
    assert.match(String(p.handle), new RegExp(`^${kind}_[a-z2-7]{8}$`));
    handle = String(p.handle);
    const err = await fails(client, "state_save", { state: {} }, "invalid_argument");
    assert.equal(err.field, "kind");
  });

  await t.step("state_load returns the snapshot; __proto__ keys round-trip as data", async () => {
    const p = await ok(client, "state_load", { handle });
    assert.deepEqual(keys(p), [...META_KEYS, "ok", "state", "truncated"].sort());
    assert.equal(p.truncated, false);
    assertMeta(p, handle, kind);
    assert.equal(p.version, 1);
    assert.equal(p.last_writer, o.writer);
    const state = p.state as Record<string, unknown>;
    assert.ok(Object.hasOwn(state, "__proto__"), "__proto__ is an own key");
    assert.deepEqual(Object.getOwnPropertyDescriptor(state, "__proto__")?.value, {
      polluted: true,
    });
    assert.deepEqual(state.sources, ["a"]);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  await t.step("state_load with path returns the subtree and echoes path", async () => {
    const p = await ok(client, "state_load", { handle, path: "notes" });
    assert.deepEqual(p.state, { draft: "x" });
    assert.equal(p.path, "notes");
    const q = await ok(client, "state_load", { handle, path: "/sources/0" });
    assert.equal(q.state, "a");
    assert.equal(q.path, "/sources/0");
    const whole = await ok(client, "state_load", { handle, path: "" });
    assert.equal(whole.path, undefined);
    await fails(client, "state_load", { handle, path: "nope.deep" }, "patch_error");
    await fails(client, "state_load", { handle, path: "constructor" }, "patch_error");
  });

  await t.step("state_save with a handle needs expect_version", async () => {
    const err = await fails(
      client,
      "state_save",
      { handle, state: { n: 2 } },
      "expect_version_required",
    );
    assert.match(String(err.message), /expect_version/);
  });

  await t.step("state_save updates; a stale save carries the current state", async () => {
    const p = await ok(client, "state_save", {
      handle,
      kind: "ignored-kind",
      state: { sources: ["a", "b"], n: 2 },
      expect_version: 1,
    });
    assert.deepEqual(p, { ok: true, handle, version: 2 });
    const err = await fails(client, "state_save", {
      handle,
      state: { n: 99 },
      expect_version: 1,
    }, "stale_write");
    assert.equal(err.expected_version, 1);
    const current = err.current as Record<string, unknown>;
    assert.equal(current.version, 2);
    assert.deepEqual(current.state, { sources: ["a", "b"], n: 2 });
    assert.equal(current.kind, kind);
    assert.match(String(err.message), /re-apply/i);
    const after = await ok(client, "state_load", { handle });
    assert.equal(after.version, 2, "the losing write changed nothing");
    assert.equal(after.kind, kind, "kind is ignored on update");
  });

  await t.step("state_patch applies ops atomically and returns the snapshot", async () => {
    const p = await ok(client, "state_patch", {
      handle,
      ops: [
        { op: "append", path: "sources", value: "c" },
        { op: "merge", mapping: { topic: "arm64" } },
        { op: "increment", path: "", key: "n", by: 3 },
        { op: "add_to_set", path: "sources", value: "a" },
      ],
    });
    assert.deepEqual(keys(p), [...META_KEYS, "ok", "state"].sort());
    assertMeta(p, handle, kind);
    assert.equal(p.version, 3);
    assert.equal(p.last_writer, o.writer);
    assert.deepEqual(p.state, { sources: ["a", "b", "c"], n: 5, topic: "arm64" });
  });

  await t.step("malformed ops are patch_error and apply nothing", async () => {
    const e1 = await fails(client, "state_patch", {
      handle,
      ops: [{ op: "append", path: "sources", value: "d" }, { op: "explode" }],
    }, "patch_error");
    assert.equal(e1.op_index, 1);
    await fails(client, "state_patch", { handle, ops: { op: "append" } }, "patch_error");
    await fails(
      client,
      "state_patch",
      { handle, ops: [{ op: "set_key", path: "" }] },
      "patch_error",
    );
    await fails(
      client,
      "state_patch",
      { handle, ops: [{ op: "append", path: "topic", value: 1 }] },
      "patch_error",
    );
    const p = await ok(client, "state_load", { handle });
    assert.equal(p.version, 3);
    assert.deepEqual((p.state as { sources: unknown }).sources, ["a", "b", "c"]);
  });

  await t.step("idempotency_key: a retried write applies once", async () => {
    const key = crypto.randomUUID();
    const args = {
      handle,
      ops: [{ op: "append", path: "sources", value: "once" }],
      idempotency_key: key,
    };
    const a = await ok(client, "state_patch", args);
    const b = await ok(client, "state_patch", args);
    assert.equal(a.version, 4);
    assert.deepEqual(b, a);
    const e = await fails(client, "state_patch", {
      ...args,
      ops: [{ op: "append", path: "sources", value: "other" }],
    }, "invalid_argument");
    assert.equal(e.field, "idempotency_key");
    const mintKey = crypto.randomUUID();
    const m1 = await ok(client, "state_save", { kind, state: { x: 1 }, idempotency_key: mintKey });
    const m2 = await ok(client, "state_save", { kind, state: { x: 1 }, idempotency_key: mintKey });
    assert.equal(m1.handle, m2.handle);
    const del = await ok(client, "state_delete", { handle: m1.handle, idempotency_key: mintKey });
    assert.deepEqual(del, { ok: true, handle: m1.handle, deleted: true });
    const del2 = await ok(client, "state_delete", { handle: m1.handle, idempotency_key: mintKey });
    assert.deepEqual(del2, del);
  });

  await t.step("state_touch renews or clears the expiry and returns metadata", async () => {
    const before = Date.now();
    const p = await ok(client, "state_touch", { handle, ttl_days: 7 });
    assert.deepEqual(keys(p), [...META_KEYS, "ok"].sort());
    assertMeta(p, handle, kind);
    const exp = Date.parse(String(p.expires_at));
    assert.ok(Math.abs(exp - (before + 7 * 86_400_000)) < 60_000, String(p.expires_at));
    const q = await ok(client, "state_touch", { handle });
    assert.equal(q.expires_at, null);
    assert.equal(q.version, (p.version as number) + 1);
    await fails(client, "state_touch", { handle, ttl_days: 0 }, "invalid_argument");
    await fails(client, "state_touch", { handle, ttl_days: "7" }, "invalid_argument");
    const s = await ok(client, "state_save", { kind, state: { t: 1 }, ttl_days: 0.5 });
    const l = await ok(client, "state_load", { handle: s.handle });
    assert.ok(Date.parse(String(l.expires_at)) - Date.now() < 43_300_000);
    await ok(client, "state_delete", { handle: s.handle });
  });

  await t.step("state_list pages metadata with limit/cursor → next_cursor", async () => {
    const extra = [];
    for (let i = 0; i < 3; i++) {
      extra.push((await ok(client, "state_save", { kind, state: { i } })).handle);
    }
    const all = await ok(client, "state_list", { kind });
    assert.deepEqual(keys(all), ["handles", "next_cursor", "ok"]);
    assert.equal(all.next_cursor, null);
    const handles = all.handles as Record<string, unknown>[];
    assert.equal(handles.length, 4);
    for (const h of handles) {
      assert.deepEqual(keys(h), META_KEYS);
      assertMeta(h, String(h.handle), kind);
    }
    assert.equal(handles[0]?.handle, extra[2], "newest first");
    const seen: unknown[] = [];
    let cursor: unknown = undefined;
    do {
      const page: Record<string, unknown> = await ok(client, "state_list", {
        kind,
        limit: 3,
        ...(cursor ? { cursor } : {}),
      });
      seen.push(...(page.handles as { handle: string }[]).map((h) => h.handle));
      cursor = page.next_cursor;
    } while (cursor);
    assert.deepEqual(seen, handles.map((h) => h.handle));
    await fails(client, "state_list", { cursor: "bogus" }, "invalid_argument");
    await fails(client, "state_list", { limit: 0 }, "invalid_argument");
    for (const h of extra) await ok(client, "state_delete", { handle: h });
  });

  await t.step("arguments of the wrong type are invalid_argument results", async () => {
    await fails(client, "state_save", { kind, state: [1, 2] }, "invalid_argument");
    await fails(client, "state_save", { kind: "Bad Kind", state: {} }, "invalid_argument");
    const e = await fails(
      client,
      "state_save",
      { kind, state: {}, ttl_days: "7" },
      "invalid_argument",
    );
    assert.equal(e.field, "ttl_days");
    await fails(client, "state_load", {}, "invalid_argument");
    await fails(client, "state_load", { handle: 42 }, "invalid_argument");
  });

  await t.step("null stands for an omitted optional argument", async () => {
    const m = await ok(client, "state_save", {
      kind,
      state: { z: 1 },
      handle: null,
      expect_version: null,
      ttl_days: null,
      idempotency_key: null,
    });
    assert.equal(m.version, 1);
    const l = await ok(client, "state_load", { handle: m.handle, path: null });
    assert.deepEqual(l.state, { z: 1 });
    assert.equal(l.expires_at, null);
    const page = await ok(client, "state_list", { kind, limit: null, cursor: null });
    assert.ok((page.handles as unknown[]).length >= 1);
    await fails(
      client,
      "state_save",
      { handle: m.handle, state: {}, expect_version: null },
      "expect_version_required",
    );
    await ok(client, "state_delete", { handle: m.handle, idempotency_key: null });
  });

  await t.step("state_delete deletes; the handle is then not found", async () => {
    const p = await ok(client, "state_delete", { handle });
    assert.deepEqual(p, { ok: true, handle, deleted: true });
    const e = await fails(client, "state_load", { handle }, "handle_not_found");
    assert.equal(e.handle, handle);
    await fails(client, "state_delete", { handle }, "handle_not_found");
    await fails(client, "state_patch", { handle, ops: [] }, "handle_not_found");
  });

  await t.step("an unknown tool is a protocol error, not a crash", async () => {
    await assert.rejects(() => call(client, "state_nope", {}));
    await ok(client, "state_list", { kind });
  });
}
