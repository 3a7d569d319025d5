/**
 * Regression test for a bug the gauntlet's MCP fuzzing found in the store:
 * a `ttl_days` so small that it rounds to 0 ms (any positive value below
 * about 6e-9 days) made a write set `expiresAt` to the write's own instant.
 * `touch` and `save` then applied the write — version bumped, expiry set —
 * and reported `handle_expired` for it, so a refused call changed the state
 * and killed the handle; `mint` returned a handle that was already expired.
 *
 * A write with a valid TTL must either succeed and leave a live handle, or
 * be refused and change nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HandleStore, McpStateError } from "../mod.ts";
import { FakeClock, freshUser } from "./_helpers.ts";

const TINY = [1e-300, 5e-324, 1e-9, 5e-9];

async function outcome<T>(fn: () => Promise<T>): Promise<{ ok: T } | { code: string }> {
  try {
    return { ok: await fn() };
  } catch (e) {
    if (e instanceof McpStateError) return { code: e.code };
    throw e;
  }
}

for (const url of ["memory://", "sqlite:///:memory:"]) {
  Deno.test(`store (${url}): a TTL that rounds to 0 ms never lands as a refused write`, async (t) => {
    const clock = new FakeClock();
    await using store = await HandleStore.fromUrl(url, { clock: clock.fn, reclaimIntervalMs: 0 });
    const user = freshUser();

    for (const ttlDays of TINY) {
      await t.step(`touch(ttlDays: ${ttlDays})`, async () => {
        const h = await store.mint("note", { a: 1 }, { user });
        const r = await outcome(() => store.touch(h, { user, ttlDays }));
        const after = await outcome(() => store.get(h, { user }));
        if ("ok" in r) {
          assert.ok("ok" in after, `touch succeeded but the handle is ${JSON.stringify(after)}`);
          assert.equal(after.ok.version, 2);
          assert.ok(after.ok.expiresAt!.getTime() > clock.now, "it expires after the touch");
        } else {
          assert.equal(r.code, "invalid_argument", `touch refused with ${r.code}`);
          assert.ok("ok" in after && after.ok.version === 1, "a refused touch changes nothing");
          assert.equal(after.ok.expiresAt, null);
        }
      });

      await t.step(`save(ttlDays: ${ttlDays})`, async () => {
        const h = await store.mint("note", { a: 1 }, { user });
        const r = await outcome(() => store.save(h, { a: 2 }, { user, expectVersion: 1, ttlDays }));
        const after = await outcome(() => store.get(h, { user }));
        if ("ok" in r) {
          assert.ok("ok" in after, `save succeeded but the handle is ${JSON.stringify(after)}`);
          assert.deepEqual(after.ok.state, { a: 2 });
        } else {
          assert.equal(r.code, "invalid_argument", `save refused with ${r.code}`);
          assert.ok("ok" in after && after.ok.version === 1, "a refused save changes nothing");
          assert.deepEqual(after.ok.state, { a: 1 });
        }
      });

      await t.step(`mint(ttlDays: ${ttlDays})`, async () => {
        const r = await outcome(() => store.mint("note", { a: 1 }, { user, ttlDays }));
        if ("ok" in r) {
          const after = await outcome(() => store.get(r.ok, { user }));
          assert.ok("ok" in after, `mint returned a handle that is ${JSON.stringify(after)}`);
        } else {
          assert.equal(r.code, "invalid_argument", `mint refused with ${r.code}`);
        }
      });
    }

    await t.step("a 1 ms lifetime still ends", async () => {
      const h = await store.mint("note", { a: 1 }, { user });
      const r = await outcome(() => store.touch(h, { user, ttlDays: 1e-300 }));
      if ("ok" in r) {
        clock.advance(1);
        const after = await outcome(() => store.get(h, { user }));
        assert.deepEqual(after, { code: "handle_expired" });
      }
    });
  });
}
