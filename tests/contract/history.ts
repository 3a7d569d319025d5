/**
 * History: the changelog of every effective write, what a stale save
 * carries, retention, and a store with history off.
 *
 * @module
 */

import assert from "node:assert/strict";
import { AddToSet, Append, Increment, SetKey } from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

export default group("history", [], [
  step(
    "every effective write appends a changelog entry; changesSince() returns them",
    async ({ store, clock }) => {
      const user = freshUser();
      const h = await store.mint("log", { a: 1, list: [] }, { user, writer: "m" });
      clock.advance(10);
      await store.save(h, { a: 2, list: [] }, { user, expectVersion: 1, writer: "s" });
      clock.advance(10);
      await store.patch(h, [Append("list", "x")], { user, writer: "p" });
      await store.patch(h, [AddToSet("list", "x")], { user, writer: "noop" });
      clock.advance(10);
      const touched = await store.touch(h, { user, ttlDays: 2, writer: "t" });
      const r = await store.changesSince(h, 0, { user });
      assert.equal(r.truncated, false);
      if (r.truncated) return;
      assert.equal(r.version, 4);
      assert.deepEqual(r.changes.map((c) => [c.version, c.op, c.writer]), [
        [1, "mint", "m"],
        [2, "save", "s"],
        [3, "patch", "p"],
        [4, "touch", "t"],
      ]);
      assert.deepEqual(r.changes[0]!.patch, [
        { op: "add", path: "/a", value: 1 },
        { op: "add", path: "/list", value: [] },
      ]);
      assert.deepEqual(r.changes[1]!.patch, [{ op: "replace", path: "/a", value: 2 }]);
      assert.deepEqual(r.changes[2]!.ops, [{ op: "append", path: "list", value: "x" }]);
      assert.equal(r.changes[3]!.expires_at, touched.expiresAt?.toISOString());
      assert.equal(r.changes[3]!.at, touched.updatedAt.toISOString());
      const tail = await store.changesSince(h, 3, { user });
      assert.ok(!tail.truncated && tail.changes.length === 1 && tail.changes[0]!.version === 4);
      const none = await store.changesSince(h, 4, { user });
      assert.ok(!none.truncated && none.changes.length === 0);
      await rejectsWith(() => store.changesSince(h, 5, { user }), "invalid_argument");
      await rejectsWith(() => store.changesSince(h, -1, { user }), "invalid_argument");
      await rejectsWith(
        () => store.changesSince(h, 0, { user: freshUser() }),
        "handle_not_found",
      );
    },
  ),
  step("a stale save carries base_version and the changes since it", async ({ store }) => {
    const user = freshUser();
    const h = await store.mint("log", { n: 0, tags: [] }, { user });
    await store.patch(h, [Increment("", "n")], { user, writer: "a" });
    await store.save(h, { n: 5, tags: ["x"] }, { user, expectVersion: 2, writer: "b" });
    const e = await rejectsWith(
      () => store.save(h, { n: 9, tags: [] }, { user, expectVersion: 1 }),
      "stale_write",
    );
    assert.equal(e.details.base_version, 1);
    const changes = e.details.changes as Record<string, unknown>[];
    assert.deepEqual(changes.map((c) => c.version), [2, 3]);
    assert.deepEqual(changes[0]!.ops, [{ op: "increment", path: "", key: "n", by: 1 }]);
    assert.deepEqual(changes[1]!.patch, [
      { op: "replace", path: "/n", value: 5 },
      { op: "add", path: "/tags/-", value: "x" },
    ]);
    assert.equal((e.details.current as Record<string, unknown>).version, 3);
  }),
  step("saving long arrays stays fast and its diff applies back", async ({ store }) => {
    const user = freshUser();
    const items = Array.from({ length: 5000 }, (_, i) => ({ i }));
    const h = await store.mint("long", { items }, { user });
    const shifted = { items: [...items.slice(1), { i: 5000 }] };
    const started = performance.now();
    await store.save(h, shifted, { user, expectVersion: 1 });
    const edited = { items: shifted.items.map((x, i) => i === 10 ? { i: -1 } : x) };
    await store.save(h, edited, { user, expectVersion: 2 });
    assert.ok(performance.now() - started < 10_000);
    const r = await store.changesSince(h, 2, { user });
    assert.ok(!r.truncated);
    if (!r.truncated) {
      assert.deepEqual(r.changes[0]!.patch, [{
        op: "replace",
        path: "/items/10/i",
        value: -1,
      }]);
    }
    assert.deepEqual((await store.get(h, { user })).state, edited);
  }),
  step(
    "the changelog keeps at most maxEntries and maxAgeDays, then truncates",
    async ({ clock, openStore }) => {
      const user = freshUser();
      const small = await openStore({
        clock: clock.fn,
        history: { maxEntries: 3, maxAgeDays: 1, maxEntryBytes: 200 },
      });
      try {
        const h = await small.mint("ret", { n: 0 }, { user });
        for (let i = 0; i < 5; i++) await small.patch(h, [Increment("", "n")], { user });
        const all = await small.changesSince(h, 0, { user });
        assert.equal(all.truncated, true);
        if (all.truncated) assert.equal(all.current.version, 6);
        const last3 = await small.changesSince(h, 3, { user });
        assert.ok(!last3.truncated);
        if (!last3.truncated) assert.deepEqual(last3.changes.map((c) => c.version), [4, 5, 6]);
        clock.advance(2 * DAY);
        await small.patch(h, [Increment("", "n")], { user });
        const aged = await small.changesSince(h, 5, { user });
        assert.equal(aged.truncated, true);
        const fresh = await small.changesSince(h, 6, { user });
        assert.ok(!fresh.truncated && fresh.changes.length === 1);
        // An entry over maxEntryBytes is kept as a marker: the log answers truncated.
        await small.patch(h, [SetKey("", "big", "x".repeat(500))], { user });
        assert.equal((await small.changesSince(h, 7, { user })).truncated, true);
      } finally {
        await small.close();
      }
    },
  ),
  step(
    "with history off, saves still conflict and changesSince() truncates",
    async ({ clock, openStore }) => {
      const user = freshUser();
      await using off = await openStore({ clock: clock.fn, history: false });
      const h = await off.mint("off", { a: 1 }, { user });
      await off.save(h, { a: 2 }, { user, expectVersion: 1 });
      const e = await rejectsWith(
        () => off.save(h, { a: 3 }, { user, expectVersion: 1 }),
        "stale_write",
      );
      assert.equal(e.details.base_version, 1);
      const r = await off.changesSince(h, 1, { user });
      assert.equal(r.truncated, true);
    },
  ),
]);
