/**
 * Quotas: per-user limits of handles, bytes and writes per minute, checked
 * in the same atomic step as each write, and the usage behind them, kept
 * right by every write — with or without quotas, imports, the trash,
 * expiry and sweep — across stores, connections and processes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type HandleStore, QuotaExceeded, SetKey } from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { spawnChild } from "../_child.ts";
import { group, step } from "./_group.ts";

const bytesOf = (state: unknown) => new TextEncoder().encode(JSON.stringify(state)).length;

export default group("quotas", ["quotas"], [
  step(
    "usage() counts live handles and their bytes; without quotas writes are not counted",
    async ({ store }) => {
      const user = freshUser();
      assert.deepEqual(await store.usage(user), { handles: 0, bytes: 0, writesThisMinute: 0 });
      const a = await store.mint("q", { text: "héllo" }, { user });
      await store.mint("q", { n: 1 }, { user });
      await store.mint("q", { other: true }, { user: freshUser() });
      const bytes = bytesOf({ text: "héllo" }) + bytesOf({ n: 1 });
      assert.deepEqual(await store.usage(user), { handles: 2, bytes, writesThisMinute: 0 });
      await store.patch(a, [SetKey("", "more", "abc")], { user });
      const grown = bytes + bytesOf({ text: "héllo", more: "abc" }) - bytesOf({ text: "héllo" });
      assert.deepEqual(await store.usage(user), { handles: 2, bytes: grown, writesThisMinute: 0 });
    },
  ),
  step(
    "maxHandles: a mint over it is quota_exceeded with details, writes nothing; delete frees a slot, restore over it is refused",
    async ({ openStore, clock }) => {
      await using store = await openStore({ clock: clock.fn, quotas: { maxHandles: 2 } });
      const user = freshUser();
      const a = await store.mint("q", { i: 1 }, { user });
      await store.mint("q", { i: 2 }, { user });
      const e = await rejectsWith(() => store.mint("q", { i: 3 }, { user }), "quota_exceeded");
      assert.ok(e instanceof QuotaExceeded);
      assert.deepEqual(e.details, { quota: "handles", limit: 2, usage: 2 });
      assert.match(e.message, /[Dd]elete/);
      assert.equal((await store.list(user)).length, 2);
      assert.equal((await store.usage(user)).handles, 2);
      // Writes to existing handles still work; a delete (to the trash) frees a slot.
      await store.patch(a, [SetKey("", "x", 1)], { user });
      await store.revoke(a, { user });
      assert.equal((await store.usage(user)).handles, 1);
      const c = await store.mint("q", { i: 3 }, { user });
      await rejectsWith(() => store.restore(a, { user }), "quota_exceeded");
      await store.revoke(c, { user });
      await store.restore(a, { user });
      assert.equal((await store.usage(user)).handles, 2);
      // Another user has a quota of their own.
      await store.mint("q", {}, { user: freshUser() });
    },
  ),
  step(
    "maxBytes: growing past it is refused on mint, save and patch; shrinking always works",
    async ({ openStore, clock }) => {
      await using store = await openStore({ clock: clock.fn, quotas: { maxBytes: 100 } });
      const user = freshUser();
      const h = await store.mint("q", { s: "x".repeat(40) }, { user }); // 48 bytes
      await rejectsWith(() => store.mint("q", { s: "y".repeat(50) }, { user }), "quota_exceeded");
      const snap = await store.get(h, { user });
      const e = await rejectsWith(
        () => store.save(h, { s: "x".repeat(120) }, { user, expectVersion: snap.version }),
        "quota_exceeded",
      );
      assert.deepEqual(e.details, { quota: "bytes", limit: 100, usage: 48 });
      await rejectsWith(
        () => store.patch(h, [SetKey("", "t", "z".repeat(60))], { user }),
        "quota_exceeded",
      );
      assert.deepEqual((await store.get(h, { user })).version, snap.version);
      await store.patch(h, [SetKey("", "t", "z".repeat(40))], { user });
      assert.equal(
        (await store.usage(user)).bytes,
        bytesOf({ s: "x".repeat(40), t: "z".repeat(40) }),
      );
      // A limit lowered below the usage still lets a state shrink.
      await using tight = await openStore({ clock: clock.fn, quotas: { maxBytes: 10 } });
      const cur = await tight.get(h, { user });
      await tight.save(h, { s: "short" }, { user, expectVersion: cur.version });
      assert.equal((await tight.usage(user)).bytes, bytesOf({ s: "short" }));
    },
  ),
  step(
    "writesPerMinute: over it is quota_exceeded with retry_after_seconds; the next minute writes again",
    async ({ openStore, clock }) => {
      await using store = await openStore({ clock: clock.fn, quotas: { writesPerMinute: 3 } });
      const user = freshUser();
      clock.now = Math.ceil(clock.now / 60_000) * 60_000 + 15_000;
      const h = await store.mint("q", { n: 0 }, { user, idempotencyKey: "k1" });
      await store.patch(h, [SetKey("", "n", 1)], { user });
      // A patch that changes nothing writes nothing and is not counted.
      await store.patch(h, [SetKey("", "n", 1)], { user });
      await store.touch(h, { user, ttlDays: 3 });
      assert.equal((await store.usage(user)).writesThisMinute, 3);
      const e = await rejectsWith(
        () => store.patch(h, [SetKey("", "n", 2)], { user }),
        "quota_exceeded",
      );
      assert.deepEqual(e.details, {
        quota: "writes_per_minute",
        limit: 3,
        usage: 3,
        retry_after_seconds: 45,
      });
      assert.match(e.message, /[Ww]ait 45 seconds/);
      assert.equal((await store.get(h, { user })).version, 3);
      // A retried call replays its first result: nothing new is written, nothing refused.
      assert.equal(await store.mint("q", { n: 0 }, { user, idempotencyKey: "k1" }), h);
      // Deleting is never refused.
      const other = freshUser();
      for (let i = 0; i < 3; i++) await store.mint("q", {}, { user: other });
      const [first] = await store.list(other);
      await store.revoke(first!.handle, { user: other });
      clock.advance(45_000);
      assert.equal((await store.usage(user)).writesThisMinute, 0);
      await store.patch(h, [SetKey("", "n", 2)], { user });
      assert.equal((await store.usage(user)).writesThisMinute, 1);
    },
  ),
  step(
    "16 writers racing at the handle limit, each on its own store, never end above it",
    async ({ openStore, clock }) => {
      const user = freshUser();
      const stores: HandleStore[] = [];
      for (let i = 0; i < 16; i++) {
        stores.push(
          await openStore({ clock: clock.fn, quotas: { maxHandles: 10, maxBytes: 1000 } }),
        );
      }
      try {
        const outcomes = await Promise.all(stores.map(async (s) => {
          let minted = 0;
          for (let i = 0; i < 3; i++) {
            try {
              await s.mint("race", { i }, { user });
              minted++;
            } catch (e) {
              if (!(e instanceof QuotaExceeded)) throw e;
            }
          }
          return minted;
        }));
        assert.equal(outcomes.reduce((a, b) => a + b, 0), 10);
        assert.equal((await stores[0]!.list(user)).length, 10);
        assert.equal((await stores[0]!.usage(user)).handles, 10);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    },
  ),
  step(
    "usage stays right through writes without quotas, import, expiry and sweep",
    async ({ store, openStore, clock, capabilities }) => {
      const user = freshUser();
      await using q = await openStore({ clock: clock.fn, quotas: { maxHandles: 5 } });
      await q.mint("q", { a: 1 }, { user });
      const b = await store.mint("q", { b: 22 }, { user, ttlDays: 1 });
      await store.patch(b, [SetKey("", "c", 3)], { user });
      const bytes = bytesOf({ a: 1 }) + bytesOf({ b: 22, c: 3 });
      assert.deepEqual(await q.usage(user), { handles: 2, bytes, writesThisMinute: 1 });
      if (capabilities.importRecord) {
        const t = clock.now;
        await q.importRecord(user, {
          handle: "imp_aaaaaaaa",
          kind: "imp",
          state: '{"i":"ü"}',
          version: 4,
          createdAt: t,
          updatedAt: t,
          expiresAt: null,
          lastWriter: null,
        });
        assert.deepEqual(await q.usage(user), {
          handles: 3,
          bytes: bytes + bytesOf({ i: "ü" }),
          writesThisMinute: 1,
        });
        await q.revoke("imp_aaaaaaaa", { user });
      }
      // An expired handle counts until it is reclaimed.
      clock.advance(DAY + 1);
      assert.equal((await q.usage(user)).handles, 2);
      clock.advance(7 * DAY);
      await q.sweep(user);
      assert.deepEqual(await q.usage(user), {
        handles: 1,
        bytes: bytesOf({ a: 1 }),
        writesThisMinute: 0,
      });
    },
  ),
  step(
    "two processes with 16 writers each, racing at the handle limit, never end above it",
    async ({ target, openStore, clock }) => {
      const user = freshUser();
      const children = [0, 1].map(() => spawnChild(["mint-quota", target.url!, user, "12", "16"]));
      try {
        for (const c of children) assert.equal(await c.line("ready"), "ready");
        for (const c of children) await c.send("go");
        const minted = [];
        for (const c of children) minted.push(JSON.parse(await c.line("result")).minted as number);
        for (const c of children) await c.succeeded();
        assert.equal(minted[0]! + minted[1]!, 12);
        await using s = await openStore({ clock: clock.fn });
        assert.equal((await s.list(user)).length, 12);
        assert.equal((await s.usage(user)).handles, 12);
      } finally {
        for (const c of children) c.kill();
      }
    },
    ["crossProcess"],
  ),
]);
