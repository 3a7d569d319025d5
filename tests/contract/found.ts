/**
 * Handles a model can find again: a handle in the caller's own trash says
 * so (and until when it can be restored), and listings can carry a preview
 * of each state, kept beside the metadata on every write.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HandleNotFound, Increment, PREVIEW_MAX_CHARS, previewOf, SetKey } from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

/** The preview of `handle` in a listing with previews. */
async function previewIn(
  store: import("../../mod.ts").HandleStore,
  user: string,
  handle: string,
): Promise<string | undefined> {
  const page = await store.listPage(user, { previews: true });
  const info = page.handles.find((i) => i.handle === handle);
  assert.ok(info, `${handle} is listed`);
  return info.preview;
}

export default group("found", ["found"], [
  step(
    "a handle in the caller's own trash is handle_not_found with in_trash and restorable_until",
    async ({ store, clock }) => {
      const user = freshUser();
      const h = await store.mint("found", { a: 1 }, { user });
      await store.revoke(h, { user });
      const until = new Date(clock.now + 7 * DAY).toISOString();
      const calls: [string, () => Promise<unknown>][] = [
        ["get", () => store.get(h, { user })],
        ["read", () => store.read(h, { user, maxBytes: 256 })],
        ["save", () => store.save(h, { a: 2 }, { user, expectVersion: 1 })],
        ["patch", () => store.patch(h, [SetKey("", "b", 2)], { user })],
        ["touch", () => store.touch(h, { user, ttlDays: 1 })],
        ["changesSince", () => store.changesSince(h, 0, { user })],
        ["revoke", () => store.revoke(h, { user })],
      ];
      for (const [name, call] of calls) {
        const e = await rejectsWith(call, "handle_not_found");
        assert.ok(e instanceof HandleNotFound);
        assert.equal(e.details.in_trash, true, name);
        assert.equal(e.details.restorable_until, until, name);
        assert.equal(e.restorableUntil?.toISOString(), until, name);
        assert.match(e.message, /state_restore/, name);
      }
      // Restored, it reads again; revoked once more, it says so again.
      await store.restore(h, { user });
      assert.equal((await store.get(h, { user })).version, 1);
    },
  ),
  step(
    "another user's trashed handle, a purged one and one past its window are plain handle_not_found",
    async ({ store, clock }) => {
      const user = freshUser();
      const h = await store.mint("found", { a: 1 }, { user });
      await store.revoke(h, { user });
      const plain = (e: HandleNotFound) => {
        assert.deepEqual(e.details, { handle: h });
        assert.equal(e.restorableUntil, undefined);
        assert.doesNotMatch(e.message, /state_restore/);
      };
      const other = freshUser();
      plain(await rejectsWith(() => store.get(h, { user: other }), "handle_not_found") as never);
      plain(
        await rejectsWith(
          () => store.patch(h, [SetKey("", "b", 2)], { user: other }),
          "handle_not_found",
        ) as never,
      );
      // Past the undo window (not yet swept), then swept.
      clock.advance(7 * DAY + 1);
      plain(await rejectsWith(() => store.get(h, { user }), "handle_not_found") as never);
      await store.sweep(user);
      plain(await rejectsWith(() => store.get(h, { user }), "handle_not_found") as never);
      // A handle that never existed.
      const never = `found_${"x".repeat(12)}`;
      const e = await rejectsWith(() => store.get(never, { user }), "handle_not_found");
      assert.deepEqual(e.details, { handle: never });
    },
  ),
  step(
    "with trashDays: 0 a revoked handle is gone: plain handle_not_found",
    async ({ clock, openStore }) => {
      await using now = await openStore({ clock: clock.fn, trashDays: 0 });
      const user = freshUser();
      const h = await now.mint("found", { a: 1 }, { user });
      await now.revoke(h, { user });
      const e = await rejectsWith(() => now.get(h, { user }), "handle_not_found");
      assert.deepEqual(e.details, { handle: h });
    },
  ),
  step(
    "listings carry a preview only when asked, at most 120 characters, updated on each write kind",
    async ({ store, backend }) => {
      const user = freshUser();
      const h = await store.mint("found", { topic: "Rust async runtimes", notes: [] }, { user });
      // Not asked: no preview, in the library and the wire form.
      const [plain] = await store.list(user);
      assert.equal(plain?.preview, undefined);
      assert.ok(!("preview" in plain!));
      assert.equal(await previewIn(store, user, h), 'topic: "Rust async runtimes", notes: [0]');
      const [listed] = await store.list(user, { previews: true });
      assert.equal(listed?.preview, 'topic: "Rust async runtimes", notes: [0]');
      // save
      await store.save(h, { topic: "Tokio", notes: ["a", "b"] }, { user, expectVersion: 1 });
      assert.equal(await previewIn(store, user, h), 'topic: "Tokio", notes: [2]');
      // patch
      await store.patch(h, [SetKey("", "done", false)], { user });
      assert.equal(await previewIn(store, user, h), 'topic: "Tokio", notes: [2], done: false');
      // touch keeps it
      await store.touch(h, { user, ttlDays: 3 });
      assert.equal(await previewIn(store, user, h), 'topic: "Tokio", notes: [2], done: false');
      // revoke and restore keep it
      await store.revoke(h, { user });
      await store.restore(h, { user });
      assert.equal(await previewIn(store, user, h), 'topic: "Tokio", notes: [2], done: false');
      // A long state: the preview is cut at 120 characters.
      const big: Record<string, unknown> = {};
      for (let i = 0; i < 200; i++) big[`key${i}`] = "é".repeat(100) + "😀".repeat(30);
      const g = await store.mint("found", big, { user });
      const p = await previewIn(store, user, g);
      assert.ok(p !== undefined && p.length <= PREVIEW_MAX_CHARS && p.length > 60, p);
      assert.equal(p, previewOf(big));
      assert.ok(p.endsWith("…"));
      assert.ok(p.isWellFormed());
      await store.patch(g, [Increment("", "n", 1)], { user });
      assert.equal(await previewIn(store, user, g), previewOf({ ...big, n: 1 }));
      // The backend lists none unless asked.
      const rows = await backend.list(user, { limit: 10 });
      assert.ok(rows.every((r) => r.preview === undefined));
      const asked = await backend.list(user, { limit: 10, previews: true });
      assert.ok(asked.every((r) => typeof r.preview === "string"));
    },
  ),
  step(
    "import computes the preview; a record stored without one lists without one",
    async ({ store, backend }) => {
      const user = freshUser();
      const now = Date.now();
      const record = {
        handle: "found_importedpreview1",
        kind: "found",
        state: '{"title":"imported"}',
        version: 3,
        createdAt: now,
        updatedAt: now,
        expiresAt: null,
        lastWriter: null,
      };
      assert.equal((await store.importRecord(user, record)).outcome, "inserted");
      assert.equal(await previewIn(store, user, record.handle), 'title: "imported"');
      // Below the store, a record written without a preview (as before previews existed).
      const old = { ...record, handle: "found_oldrecord00001" };
      assert.equal(
        await backend.records!.import(user, old, { now, graceMs: 0 }),
        "inserted",
      );
      assert.equal(await previewIn(store, user, old.handle), undefined);
      // The next write fills it in.
      await store.patch(old.handle, [SetKey("", "more", 1)], { user });
      assert.equal(await previewIn(store, user, old.handle), 'title: "imported", more: 1');
    },
    ["importRecord"],
  ),
]);
