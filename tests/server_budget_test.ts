/**
 * Token-budgeted reads and the disjoint merge through the server: real
 * `mcpstate serve` processes over stdio and HTTP, driven by the v2 client
 * (2026-07-28) and by the SDK 1.x client (2025-11-25), which checks every
 * `structuredContent` against the output schema it cached from `tools/list`.
 * `state_load` with `max_bytes` and `paths`, the server's default budget
 * (`--max-read-bytes`) on `state_load`, `state_list` pages and a
 * `stale_write`'s `current`, and `state_save` with `on_conflict: "merge"`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { getPath } from "../mod.ts";
import { httpClient, startHttpServer, stdioSession } from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { type AnyClient, eachClient, sdk1Http, sdk1Stdio } from "./_sdk1.ts";
import { fails, ok } from "./_tool_calls.ts";

const encoder = new TextEncoder();
const size = (v: unknown) => encoder.encode(JSON.stringify(v)).length;

const META = ["created_at", "expires_at", "handle", "kind", "last_writer", "updated_at", "version"];

function keys(o: Record<string, unknown>): string[] {
  return Object.keys(o).sort();
}

/** Every JSON Pointer an outline names, with the `bytes` it says the value has. */
function pathsOf(node: unknown, out: [string, number][] = []): [string, number][] {
  if (typeof node !== "object" || node === null) return out;
  const n = node as Record<string, unknown>;
  if (typeof n.type === "string" && typeof n.path === "string") {
    out.push([n.path, n.bytes as number]);
  }
  for (const field of ["entries", "items"]) {
    const children = n[field] as Record<string, unknown> | undefined;
    for (const child of Object.values(children ?? {})) pathsOf(child, out);
  }
  return out;
}

/**
 * The scenario, against a server whose default read budget is `budget`.
 *
 * @param client A connected client (tools listed first: SDK 1.x validates against the cached schemas).
 * @param budget The server's `--max-read-bytes`.
 */
async function budgetScenario(t: Deno.TestContext, client: AnyClient, budget: number) {
  await client.listTools();
  const kind = `big${crypto.randomUUID().slice(0, 8)}`;
  const log = Array.from({ length: 3000 }, (_, i) => `run ${i}: ok on arm64`);
  const state = { title: "Nightly", log, notes: "é".repeat(budget) };
  const handle = String((await ok(client, "state_save", { kind, state })).handle);

  await t.step("within the default budget: the keys of mcpstate 0.2, and truncated", async () => {
    const small = String((await ok(client, "state_save", { kind, state: { a: 1 } })).handle);
    const p = await ok(client, "state_load", { handle: small });
    assert.deepEqual(keys(p), [...META, "ok", "state", "truncated"].sort());
    assert.equal(p.truncated, false);
    const q = await ok(client, "state_load", { handle: small, max_bytes: 256 });
    assert.deepEqual(keys(q), [...META, "ok", "size_bytes", "state", "truncated"].sort());
    assert.equal(q.truncated, false);
    assert.equal(q.size_bytes, 7);
    await ok(client, "state_delete", { handle: small });
  });

  await t.step("over the default budget: an outline within it, every path readable", async () => {
    const p = await ok(client, "state_load", { handle });
    assert.deepEqual(keys(p), [...META, "ok", "outline", "size_bytes", "truncated"].sort());
    assert.equal(p.truncated, true);
    assert.equal(p.size_bytes, size(state));
    assert.ok(size(p.outline) <= budget, `${size(p.outline)} within ${budget}`);
    const named = pathsOf(p.outline);
    assert.ok(named.length >= 2);
    for (const [path, bytes] of named.slice(0, 12)) {
      const r = await ok(client, "state_load", { handle, paths: [path], max_bytes: 1 << 20 });
      assert.deepEqual((r.values as Record<string, unknown>)[path], getPath(state, path));
      assert.equal(size((r.values as Record<string, unknown>)[path]), bytes);
    }
  });

  await t.step("max_bytes: the state when it fits, else an outline within it", async () => {
    const whole = await ok(client, "state_load", { handle, max_bytes: 1 << 20 });
    assert.deepEqual(whole.state, state);
    assert.equal(whole.truncated, false);
    for (const max of [256, 1000, 4096]) {
      const p = await ok(client, "state_load", { handle, max_bytes: max });
      assert.equal(p.truncated, true);
      assert.ok(size(p.outline) <= max, `${size(p.outline)} within ${max}`);
      assert.equal(p.state, undefined);
    }
    const part = await ok(client, "state_load", { handle, path: "log", max_bytes: 512 });
    assert.equal(part.path, "log");
    assert.equal(part.truncated, true);
    assert.equal((part.outline as { path: string }).path, "/log");
    assert.equal(part.size_bytes, size(log));
    const one = await ok(client, "state_load", { handle, path: "/log/7", max_bytes: 512 });
    assert.equal(one.state, log[7]);
  });

  await t.step("paths: values, outlines of the large ones, missing paths", async () => {
    const p = await ok(client, "state_load", {
      handle,
      paths: ["title", "/log/2999", "/log", "/nope"],
      max_bytes: 1024,
    });
    assert.deepEqual(p.values, { title: "Nightly", "/log/2999": log[2999] });
    const outlined = p.outline as Record<string, unknown>;
    assert.deepEqual(Object.keys(outlined), ["/log"]);
    assert.deepEqual(p.missing, ["/nope"]);
    assert.equal(p.truncated, true);
    // The budget counts the values and outlines, not the paths that key them.
    assert.ok(size("Nightly") + size(log[2999]) + size(outlined["/log"]) <= 1024);
    assert.equal(p.state, undefined);
  });

  await t.step("bad budgets and paths are invalid_argument", async () => {
    for (const args of [{ max_bytes: 255 }, { max_bytes: 300.5 }, { max_bytes: "1000" }]) {
      const e = await fails(client, "state_load", { handle, ...args }, "invalid_argument");
      assert.equal(e.field, "max_bytes");
    }
    const tooMany = Array.from({ length: 33 }, (_, i) => `/log/${i}`);
    await fails(client, "state_load", { handle, paths: tooMany }, "invalid_argument");
    await fails(client, "state_load", { handle, paths: ["a..b"] }, "invalid_argument");
    await fails(
      client,
      "state_load",
      { handle, path: "log", paths: ["title"] },
      "invalid_argument",
    );
    // Ten large values cannot each be described in 256 bytes: the least budget is named.
    const wide: Record<string, string> = {};
    for (let i = 0; i < 10; i++) wide[`k${i}`] = "x".repeat(1000);
    const w = String((await ok(client, "state_save", { kind, state: wide })).handle);
    const paths = Object.keys(wide);
    const least = await fails(
      client,
      "state_load",
      { handle: w, paths, max_bytes: 256 },
      "invalid_argument",
    );
    assert.equal(least.field, "max_bytes");
    assert.equal(least.min, 10 * size({ type: "string", bytes: 1002 }));
    const fits = await ok(client, "state_load", {
      handle: w,
      paths,
      max_bytes: least.min as number,
    });
    const outlines = Object.values(fits.outline as object);
    assert.equal(outlines.length, 10);
    assert.ok(outlines.reduce((n, o) => n + size(o), 0) <= (least.min as number));
    await ok(client, "state_delete", { handle: w });
  });

  await t.step("state_list: a page within the budget, shorter, with next_cursor", async () => {
    const minted: string[] = [];
    for (let i = 0; i < 40; i++) {
      minted.push(String((await ok(client, "state_save", { kind, state: { i } })).handle));
    }
    const page = await ok(client, "state_list", { kind, limit: 500 });
    assert.ok(size(page) <= budget, `${size(page)} within ${budget}`);
    const perPage = (page.handles as unknown[]).length;
    assert.ok(perPage < 41, `${perPage} handles: a shorter page`);
    assert.equal(typeof page.next_cursor, "string");
    const seen = new Set<string>();
    let cursor: unknown = null;
    do {
      const p = await ok(client, "state_list", { kind, limit: 500, ...(cursor ? { cursor } : {}) });
      assert.ok(size(p) <= budget);
      for (const h of p.handles as { handle: string }[]) {
        assert.ok(!seen.has(h.handle), "each handle once");
        seen.add(h.handle);
      }
      cursor = p.next_cursor;
    } while (cursor);
    assert.equal(seen.size, 41);
    for (const h of minted) await ok(client, "state_delete", { handle: h });
  });

  await t.step("stale_write: current is an outline within the budget", async () => {
    const e = await fails(
      client,
      "state_save",
      { handle, state: { title: "mine" }, expect_version: 0 },
      "stale_write",
    );
    const current = e.current as Record<string, unknown>;
    assert.equal(current.truncated, true);
    assert.equal(current.state, undefined);
    assert.equal(current.size_bytes, size(state));
    assert.ok(size(current.outline) <= budget);
    assert.equal(current.version, 1);
    // Changes since the caller's version larger than the budget are left out, as over the cap.
    const h = String((await ok(client, "state_save", { kind, state: { log: [] } })).handle);
    for (let i = 0; i < 12; i++) {
      const value = `${i} `.repeat(200);
      await ok(client, "state_patch", { handle: h, ops: [{ op: "append", path: "log", value }] });
    }
    const f = await fails(client, "state_save", {
      handle: h,
      state: { log: ["mine"] },
      expect_version: 1,
    }, "stale_write");
    assert.equal(f.changes, null);
    assert.equal(f.changes_truncated, true);
    assert.equal((f.current as Record<string, unknown>).version, 13);
    assert.ok(size(f) <= 2 * budget, `${size(f)} bytes`);
    const g = await fails(client, "state_save", {
      handle: h,
      state: { log: ["mine"] },
      expect_version: 12,
    }, "stale_write");
    assert.equal((g.changes as unknown[]).length, 1, "a small log still comes whole");
    await ok(client, "state_delete", { handle: h });
  });

  await t.step(
    "on_conflict merge: disjoint edits land, overlapping ones name the pointers",
    async () => {
      const h = String(
        (await ok(client, "state_save", { kind, state: { notes: "", sources: ["a"] } })).handle,
      );
      await ok(client, "state_patch", {
        handle: h,
        ops: [{ op: "append", path: "sources", value: "b" }],
      });
      const merged = await ok(client, "state_save", {
        handle: h,
        state: { notes: "mine", sources: ["a"] },
        expect_version: 1,
        on_conflict: "merge",
      });
      assert.deepEqual(keys(merged), ["base_version", "handle", "merged", "ok", "version"]);
      assert.deepEqual([merged.merged, merged.base_version, merged.version], [true, 1, 3]);
      assert.deepEqual((await ok(client, "state_load", { handle: h })).state, {
        notes: "mine",
        sources: ["a", "b"],
      });
      const conflict = await fails(client, "state_save", {
        handle: h,
        state: { notes: "other", sources: ["a"] },
        expect_version: 1,
        on_conflict: "merge",
      }, "stale_write");
      assert.deepEqual(conflict.conflicts, ["/notes"]);
      assert.equal(conflict.base_version, 1);
      const plain = await fails(client, "state_save", {
        handle: h,
        state: { notes: "x" },
        expect_version: 1,
      }, "stale_write");
      assert.equal(plain.conflicts, undefined);
      await fails(client, "state_save", {
        handle: h,
        state: {},
        expect_version: 3,
        on_conflict: "always",
      }, "invalid_argument");
      await ok(client, "state_delete", { handle: h });
    },
  );
  await ok(client, "state_delete", { handle });
}

Deno.test("budgets and merges over stdio, v2 and SDK 1.x clients", async (t) => {
  const budget = 4096;
  const env = { MCPSTATE_BACKEND: "memory://" };
  const args = ["--max-read-bytes", String(budget)];
  await eachClient(t, [
    ["v2 (2026-07-28)", async () => (await stdioSession("2026-07-28", env, args)).client, budget],
    ["SDK 1.x (2025-11-25)", () => sdk1Stdio(env, args), budget],
  ], budgetScenario);
});

Deno.test("budgets and merges over HTTP, v2 and SDK 1.x clients; MCPSTATE_MAX_READ_BYTES", async (t) => {
  const budget = 3000;
  await using issuer = await startIssuer();
  await using server = await startHttpServer(
    ["--backend", "memory://", ...issuer.serveArgs],
    { MCPSTATE_MAX_READ_BYTES: String(budget) },
  );
  const token = await issuer.token({ sub: "alice", aud: server.url.href });
  await eachClient(t, [
    ["v2 (2026-07-28)", () => httpClient(server.url, "2026-07-28", token), budget],
    [
      "SDK 1.x (2025-11-25)",
      () => sdk1Http(server.url, { Authorization: `Bearer ${token}` }),
      budget,
    ],
  ], budgetScenario);
  assert.equal((await server.stop()).code, 0, server.stderr());
});

Deno.test("the default budget is 131,072 bytes; --max-read-bytes 0 reads without a limit", async () => {
  const big = { blob: "x".repeat(140_000) };
  await using a = await stdioSession("2026-07-28", { MCPSTATE_BACKEND: "memory://" });
  const h = String((await ok(a.client, "state_save", { kind: "big", state: big })).handle);
  const p = await ok(a.client, "state_load", { handle: h });
  assert.equal(p.truncated, true);
  assert.ok(size(p.outline) <= 131_072);
  assert.ok(size(p.outline) > 100_000, "the budget is spent on previews");
  await a.close();
  await using b = await stdioSession("2026-07-28", { MCPSTATE_BACKEND: "memory://" }, [
    "--max-read-bytes",
    "0",
  ]);
  const g = String((await ok(b.client, "state_save", { kind: "big", state: big })).handle);
  const q = await ok(b.client, "state_load", { handle: g });
  assert.deepEqual(keys(q), [...META, "ok", "state", "truncated"].sort());
  assert.equal(q.truncated, false);
  // One part of it, too.
  const part = await ok(b.client, "state_load", { handle: g, path: "blob" });
  assert.deepEqual(keys(part), [...META, "ok", "path", "state", "truncated"].sort());
  assert.equal(part.truncated, false);
  assert.deepEqual(q.state, big);
});
