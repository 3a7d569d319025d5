/**
 * Idempotency keys: a retry returns the first result and applies nothing
 * twice, per user.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Increment } from "../../mod.ts";
import { freshUser, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

export default group("idempotency", [], [
  step(
    "idempotency keys: a retry returns the first result and applies nothing twice",
    async ({ store }) => {
      const user = freshUser();
      const h1 = await store.mint("i", { n: 0 }, { user, idempotencyKey: "mint-1" });
      const h2 = await store.mint("i", { n: 0 }, { user, idempotencyKey: "mint-1" });
      assert.equal(h1, h2);
      assert.equal((await store.list(user)).length, 1);
      await rejectsWith(
        () => store.mint("i", { n: 1 }, { user, idempotencyKey: "mint-1" }),
        "invalid_argument",
      );
      assert.equal((await store.list(user)).length, 1);

      const p1 = await store.patch(h1, [Increment("", "n")], { user, idempotencyKey: "p-1" });
      await store.patch(h1, [Increment("", "n", 10)], { user, idempotencyKey: "p-2" });
      const p1again = await store.patch(h1, [Increment("", "n")], {
        user,
        idempotencyKey: "p-1",
      });
      assert.deepEqual(p1again, p1);
      await rejectsWith(
        () => store.patch(h1, [Increment("", "n", 5)], { user, idempotencyKey: "p-1" }),
        "invalid_argument",
      );
      const now = await store.get<{ n: number }>(h1, { user });
      assert.equal(now.state.n, 11);
      assert.equal(now.version, 3);

      const s1 = await store.save(h1, { n: 100 }, {
        user,
        expectVersion: 3,
        idempotencyKey: "s-1",
      });
      const s1again = await store.save(h1, { n: 100 }, {
        user,
        expectVersion: 3,
        idempotencyKey: "s-1",
      });
      assert.deepEqual(s1again, s1);
      const t1 = await store.touch(h1, { user, ttlDays: 3, idempotencyKey: "t-1" });
      assert.deepEqual(await store.touch(h1, { user, ttlDays: 3, idempotencyKey: "t-1" }), t1);
      assert.equal((await store.get(h1, { user })).version, 5);
      await store.revoke(h1, { user, idempotencyKey: "r-1" });
      await store.revoke(h1, { user, idempotencyKey: "r-1" });
      await rejectsWith(() => store.get(h1, { user }), "handle_not_found");
      // Keys are per user: another user's identical key is a different call.
      const other = freshUser();
      const h3 = await store.mint("i", { n: 0 }, { user: other, idempotencyKey: "mint-1" });
      assert.notEqual(h3, h1);
    },
  ),
]);
