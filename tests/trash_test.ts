/**
 * The trash listing on every backend: `Backend.listTrash` (metadata only,
 * newest-deleted first, paged after a position) and `HandleStore.trash`
 * over it (the undo window by the store's clock, cursors, bad input). Each
 * engine is opened the way its own test file opens it: memory, SQLite (a
 * file and `:memory:`), Redis (a server and a cluster started for this file),
 * Deno KV (a file) and PostgreSQL (a schema of its own).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { HandleStore } from "../mod.ts";
import type { Backend, TrashedMeta } from "../src/backend.ts";
import { openBackend } from "../src/url.ts";
import { FakeClock, freshUser, rejectsWith } from "./contract.ts";
import {
  type RedisClusterHandle,
  type RedisServer,
  startRedis,
  startRedisCluster,
} from "./_redis.ts";

const DAY = 86_400_000;

/**
 * The trash group, for one engine: what `listTrash` and `trash()` promise.
 *
 * @param name The engine, for the test name.
 * @param open Opens a backend on the engine (a fresh one, or a shared one: users are fresh).
 */
export function trashGroup(name: string, open: () => Promise<Backend>): void {
  Deno.test(`trash: ${name}`, async (t) => {
    const backend = await open();
    const clock = new FakeClock();
    const store = new HandleStore(backend, { clock: clock.fn, reclaimIntervalMs: 0 });
    try {
      const listTrash = backend.trash!.list?.bind(backend);
      assert.ok(listTrash, `${name} has no listTrash`);

      await t.step("an empty trash lists nothing", async () => {
        assert.deepEqual(await listTrash(freshUser(), { limit: 10 }), []);
        assert.deepEqual(await store.trash(freshUser()), { handles: [], nextCursor: null });
      });

      await t.step("newest-deleted first, metadata as revoked, never the state", async () => {
        const user = freshUser();
        const minted: string[] = [];
        for (let i = 0; i < 3; i++) {
          minted.push(
            await store.mint("note", { i, text: "x".repeat(100) }, {
              user,
              ttlDays: 30,
              writer: `w${i}`,
            }),
          );
        }
        await store.patch(minted[1]!, [{ op: "set_key", path: "", key: "j", value: 1 }], {
          user,
          writer: "patcher",
        });
        const kept = await store.mint("note", {}, { user });
        const revokedAt: number[] = [];
        for (const h of minted) {
          clock.advance(1000);
          revokedAt.push(clock.now);
          await store.revoke(h, { user });
        }
        const rows = await listTrash(user, { limit: 10 });
        assert.deepEqual(rows.map((r) => r.handle), [...minted].reverse());
        for (const row of rows) {
          const i = minted.indexOf(row.handle);
          assert.equal(row.trashUntil, revokedAt[i]! + 7 * DAY);
          assert.equal(row.kind, "note");
          assert.equal(row.version, i === 1 ? 2 : 1);
          assert.equal(row.lastWriter, i === 1 ? "patcher" : `w${i}`);
          assert.equal(typeof row.createdAt, "number");
          assert.ok(row.expiresAt !== null && row.expiresAt > row.createdAt);
          assert.ok(!("state" in row), "listTrash returned a state");
        }
        assert.ok(!rows.some((r) => r.handle === kept), "a live handle is listed as trash");
        const page = await store.trash(user);
        assert.deepEqual(page.handles.map((h) => h.handle), [...minted].reverse());
        assert.equal(page.handles[0]!.restorableUntil.getTime(), revokedAt[2]! + 7 * DAY);
        assert.equal(page.handles[0]!.lastWriter, "w2");
        assert.equal(page.nextCursor, null);
      });

      await t.step("pages after a position visit every record once, ties by handle", async () => {
        const user = freshUser();
        const handles: string[] = [];
        for (let i = 0; i < 7; i++) handles.push(await store.mint("page", { i }, { user }));
        // Two revokes at each instant: equal trashUntil, ordered by handle.
        for (let i = 0; i < handles.length; i++) {
          if (i % 2 === 0) clock.advance(10);
          await store.revoke(handles[i]!, { user });
        }
        const all = await listTrash(user, { limit: 100 });
        assert.equal(all.length, 7);
        for (let i = 1; i < all.length; i++) {
          const [a, b] = [all[i - 1]!, all[i]!];
          assert.ok(
            a.trashUntil > b.trashUntil || (a.trashUntil === b.trashUntil && a.handle < b.handle),
            `out of order: ${a.handle}@${a.trashUntil} before ${b.handle}@${b.trashUntil}`,
          );
        }
        const seen: TrashedMeta[] = [];
        let after: { trashUntil: number; handle: string } | undefined;
        for (;;) {
          const got = await listTrash(user, { limit: 2, ...(after ? { after } : {}) });
          seen.push(...got);
          if (got.length < 2) break;
          const last = got[got.length - 1]!;
          after = { trashUntil: last.trashUntil, handle: last.handle };
        }
        assert.deepEqual(seen.map((r) => r.handle), all.map((r) => r.handle));

        const viaStore: string[] = [];
        let cursor: string | null = null;
        do {
          const page: Awaited<ReturnType<typeof store.trash>> = await store.trash(user, {
            limit: 3,
            cursor,
          });
          assert.ok(page.handles.length <= 3);
          viaStore.push(...page.handles.map((h) => h.handle));
          cursor = page.nextCursor;
        } while (cursor !== null);
        assert.deepEqual(viaStore, all.map((r) => r.handle));
      });

      await t.step("another user's trash is not listed", async () => {
        const [alice, bob] = [freshUser("alice"), freshUser("bob")];
        const h = await store.mint("note", {}, { user: alice });
        await store.revoke(h, { user: alice });
        assert.deepEqual(await listTrash(bob, { limit: 10 }), []);
        assert.deepEqual((await listTrash(alice, { limit: 10 })).map((r) => r.handle), [h]);
      });

      await t.step("a restored handle leaves the trash", async () => {
        const user = freshUser();
        const [a, b] = [
          await store.mint("note", {}, { user }),
          await store.mint("note", {}, { user }),
        ];
        await store.revoke(a, { user });
        await store.revoke(b, { user });
        await store.restore(a, { user });
        assert.deepEqual((await listTrash(user, { limit: 10 })).map((r) => r.handle), [b]);
        assert.deepEqual((await store.trash(user)).handles.map((r) => r.handle), [b]);
      });

      await t.step("trash() leaves out what is past its window by the store's clock", async () => {
        const user = freshUser();
        const old = await store.mint("note", {}, { user });
        await store.revoke(old, { user });
        clock.advance(3 * DAY);
        const recent = await store.mint("note", {}, { user });
        await store.revoke(recent, { user });
        clock.advance(5 * DAY); // old: 8 days ago, past 7; recent: 5 days ago
        const page = await store.trash(user, { limit: 1 });
        assert.deepEqual(page.handles.map((h) => h.handle), [recent]);
        assert.equal(page.nextCursor, null, "a past-window record is not a next page");
        clock.advance(3 * DAY);
        assert.deepEqual((await store.trash(user)).handles, []);
      });

      await t.step("bad limits and cursors are invalid_argument", async () => {
        const user = freshUser();
        for (const limit of [0, 501, 1.5, Number.NaN, "5"]) {
          await rejectsWith(
            () => store.trash(user, { limit: limit as number }),
            "invalid_argument",
          );
        }
        for (
          const h of [await store.mint("n", {}, { user }), await store.mint("n", {}, { user })]
        ) {
          await store.revoke(h, { user });
        }
        const { nextCursor } = await store.trash(user, { limit: 1 });
        assert.ok(nextCursor);
        const listCursor = (await store.listPage(user, { limit: 1 })).nextCursor;
        for (const cursor of ["", "t", "tc2.", nextCursor.slice(1), nextCursor + "x", listCursor]) {
          if (cursor === null) continue;
          await rejectsWith(() => store.trash(user, { cursor }), "invalid_argument");
        }
        await rejectsWith(() => store.trash("", {}), "invalid_argument");
      });
    } finally {
      await store.close();
    }
  });
}

// ---------------------------------------------------------------- the engines

trashGroup("memory", () => openBackend("memory://"));

const dir = await Deno.makeTempDir({ prefix: "mcpstate-trash-" });
trashGroup("sqlite file", () => openBackend(`sqlite:///${dir}/trash.db`));
trashGroup("sqlite :memory:", () => openBackend("sqlite:///:memory:"));
trashGroup("denokv file", () => openBackend(`denokv:///${dir}/trash.kv`));

let standalone: Promise<RedisServer> | undefined;
let cluster: Promise<RedisClusterHandle> | undefined;
trashGroup("redis", async () => openBackend((await (standalone ??= startRedis())).url));
trashGroup(
  "redis cluster",
  async () => openBackend((await (cluster ??= startRedisCluster({ nodeTimeoutMs: 1000 }))).url),
);

const PG = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `mcpstate_test_trash_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
trashGroup("postgres", () => {
  const url = new URL(PG);
  url.searchParams.set("schema", schema);
  return openBackend(url.toString());
});

Deno.test("trash: stop the engines and drop what they left", async () => {
  await (await standalone)?.stop();
  await (await cluster)?.stop();
  const sql = postgres(PG, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await sql.end();
  }
  await Deno.remove(dir, { recursive: true });
});
