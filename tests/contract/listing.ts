/**
 * Listing and paging: newest first, metadata only, every handle exactly once
 * across pages, also when handles share an `updatedAt`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { freshUser, pageThrough, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

export default group("listing and paging", [], [
  step(
    "list() is newest first and metadata only; listPage() pages exactly once",
    async ({ store, clock }) => {
      const user = freshUser();
      const handles: string[] = [];
      for (let i = 0; i < 7; i++) {
        clock.advance(10);
        handles.push(await store.mint(i % 2 ? "odd" : "even", { i }, { user, writer: `w${i}` }));
      }
      const all = await store.list(user);
      assert.deepEqual(all.map((x) => x.handle), [...handles].reverse());
      assert.ok(!("state" in all[0]!));
      assert.equal(all[0]!.lastWriter, "w6");
      assert.ok(all[0]!.createdAt instanceof Date);
      assert.deepEqual(
        (await store.list(user, { kind: "odd" })).map((x) => x.handle),
        [handles[5], handles[3], handles[1]],
      );
      const paged = await pageThrough(store, user, 3);
      assert.equal(paged.cursors.length + 1, 3, "pages");
      assert.deepEqual(paged.handles, [...handles].reverse());
      const first = await store.listPage(user);
      assert.equal(first.handles.length, 7);
      assert.equal(first.nextCursor, null);
      await rejectsWith(() => store.listPage(user, { cursor: "garbage" }), "invalid_argument");
      await rejectsWith(() => store.listPage(user, { cursor: "c1.e30" }), "invalid_argument");
      for (const limit of [0, 501, 1.5, NaN]) {
        await rejectsWith(() => store.listPage(user, { limit }), "invalid_argument");
      }
    },
  ),
  step("listPage() keeps its place when handles share an updatedAt", async ({ store }) => {
    const user = freshUser();
    const made = new Set<string>();
    for (let i = 0; i < 5; i++) made.add(await store.mint("same", { i }, { user }));
    const seen = (await pageThrough(store, user, 2)).handles;
    assert.equal(seen.length, 5);
    assert.deepEqual(new Set(seen), made);
  }),
]);
