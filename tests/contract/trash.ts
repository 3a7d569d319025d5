/**
 * The trash: revoke deletes, or moves a handle to the trash, and restore
 * brings it back within the undo window.
 *
 * @module
 */

import assert from "node:assert/strict";
import { SetKey } from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

export default group("trash", [], [
  step("revoke() deletes; the handle is then handle_not_found", async ({ store }) => {
    const user = freshUser();
    const h = await store.mint("r", { a: 1 }, { user });
    await store.revoke(h, { user });
    await rejectsWith(() => store.get(h, { user }), "handle_not_found");
    await rejectsWith(() => store.revoke(h, { user }), "handle_not_found");
    assert.deepEqual(await store.list(user), []);
  }),
  step(
    "revoke() moves a handle to the trash; restore() brings back its last version",
    async ({ store, clock, openStore }) => {
      const user = freshUser();
      const h = await store.mint("tr", { a: 1 }, { user, writer: "w1" });
      await store.patch(h, [SetKey("", "b", 2)], { user, writer: "w2" });
      const before = await store.get(h, { user });
      await store.revoke(h, { user });
      await rejectsWith(() => store.get(h, { user }), "handle_not_found");
      await rejectsWith(() => store.patch(h, [SetKey("", "c", 3)], { user }), "handle_not_found");
      await rejectsWith(() => store.changesSince(h, 0, { user }), "handle_not_found");
      assert.deepEqual(await store.list(user), []);
      await rejectsWith(() => store.restore(h, { user: freshUser() }), "handle_not_found");
      const back = await store.restore(h, { user });
      assert.deepEqual(back, before);
      assert.deepEqual(await store.get(h, { user }), before);
      const log = await store.changesSince(h, 0, { user });
      assert.ok(!log.truncated && log.changes.length === 2);
      await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
      // Past the undo window there is nothing to restore, and sweep empties the trash.
      await store.revoke(h, { user });
      clock.advance(7 * DAY + 1);
      await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
      await store.sweep(user);
      await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
      // trashDays: 0 deletes at once.
      await using now = await openStore({ clock: clock.fn, trashDays: 0 });
      const g = await now.mint("tr", {}, { user });
      await now.revoke(g, { user });
      await rejectsWith(() => now.restore(g, { user }), "handle_not_found");
    },
  ),
]);
