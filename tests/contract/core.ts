/**
 * The core rules: mint, get, save, patch and touch, versions and stale
 * writes, expiry, the size cap, hostile input, sweep, a second store on the
 * same data, and a closed store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { AddToSet, Append, DelKey, Increment, Merge, SetKey, StaleWrite } from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

export default group("core rules", [], [
  step(
    "mint() returns a kind-prefixed handle and get() reads version 1",
    async ({ store, clock }) => {
      const user = freshUser();
      const h = await store.mint("research", { sources: [], notes: "" }, {
        user,
        writer: "laptop/claude-code",
        ttlDays: 7,
      });
      assert.match(h, /^research_[a-z2-7]{8}$/);
      const s = await store.get(h, { user });
      assert.deepEqual(s.state, { sources: [], notes: "" });
      assert.equal(s.version, 1);
      assert.equal(s.kind, "research");
      assert.equal(s.lastWriter, "laptop/claude-code");
      assert.equal(s.createdAt.getTime(), clock.now);
      assert.equal(s.updatedAt.getTime(), clock.now);
      assert.equal(s.expiresAt?.getTime(), clock.now + 7 * DAY);
      const long = await store.mint("secret", {}, { user, randomChars: 26 });
      assert.match(long, /^secret_[a-z2-7]{26}$/);
    },
  ),
  step(
    "another user's handle is handle_not_found, like one that never existed",
    async ({ store }) => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      const h = await store.mint("note", { secret: 1 }, { user: alice });
      const e1 = await rejectsWith(() => store.get(h, { user: bob }), "handle_not_found");
      const e2 = await rejectsWith(
        () => store.get("note_aaaaaaaa", { user: bob }),
        "handle_not_found",
      );
      assert.deepEqual(Object.keys(e1.details), Object.keys(e2.details));
      await rejectsWith(
        () => store.save(h, { x: 1 }, { user: bob, expectVersion: 1 }),
        "handle_not_found",
      );
      await rejectsWith(
        () => store.patch(h, [SetKey("", "x", 1)], { user: bob }),
        "handle_not_found",
      );
      await rejectsWith(() => store.touch(h, { user: bob, ttlDays: 1 }), "handle_not_found");
      await rejectsWith(() => store.revoke(h, { user: bob }), "handle_not_found");
      assert.deepEqual(await store.list(bob), []);
      assert.deepEqual((await store.get(h, { user: alice })).state, { secret: 1 });
    },
  ),
  step("save() with the current version writes version+1", async ({ store, clock }) => {
    const user = freshUser();
    const h = await store.mint("doc", { a: 1 }, { user });
    clock.advance(1000);
    const s = await store.save(h, { a: 2 }, { user, expectVersion: 1, writer: "w2" });
    assert.equal(s.version, 2);
    assert.deepEqual(s.state, { a: 2 });
    assert.equal(s.lastWriter, "w2");
    assert.equal(s.updatedAt.getTime(), clock.now);
    assert.equal(s.createdAt.getTime(), clock.now - 1000);
    assert.deepEqual(await store.get(h, { user }), s);
  }),
  step("save() rejects a stale version and keeps the winner's state", async ({ store }) => {
    const user = freshUser();
    const h = await store.mint("doc", { a: 1 }, { user });
    await store.save(h, { a: 2 }, { user, expectVersion: 1, writer: "winner" });
    const e = await rejectsWith(
      () => store.save(h, { a: 3 }, { user, expectVersion: 1, writer: "loser" }),
      "stale_write",
    );
    assert.ok(e instanceof StaleWrite);
    assert.equal(e.details.expected_version, 1);
    const current = e.details.current as Record<string, unknown>;
    assert.equal(current.version, 2);
    assert.deepEqual(current.state, { a: 2 });
    assert.equal(current.last_writer, "winner");
    assert.equal(typeof current.updated_at, "string");
    assert.match(e.message, /re-read|Re-read/);
    const p = e.toPayload();
    assert.equal(p.code, "stale_write");
    assert.deepEqual((await store.get(h, { user })).state, { a: 2 });
  }),
  step("of 8 concurrent saves from one version exactly one wins", async ({ store }) => {
    const user = freshUser();
    const h = await store.mint("race", { n: 0 }, { user });
    const results = await Promise.allSettled(
      Array.from(
        { length: 8 },
        (_, i) => store.save(h, { n: i + 1 }, { user, expectVersion: 1, writer: `w${i}` }),
      ),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r) => r.status === "rejected");
    assert.equal(won.length, 1);
    assert.equal(lost.length, 7);
    for (const r of lost) assert.ok((r as PromiseRejectedResult).reason instanceof StaleWrite);
    const s = await store.get(h, { user });
    assert.equal(s.version, 2);
    assert.deepEqual(
      s.state,
      (won[0] as PromiseFulfilledResult<{ state: unknown }>).value.state,
    );
  }),
  step("8 writers x 50 patches on one handle all land", async ({ store, clock, openStore }) => {
    const user = freshUser();
    const h = await store.mint("counter", { n: 0, log: [] }, { user });
    await using second = await openStore({ clock: clock.fn });
    await Promise.all(Array.from({ length: 8 }, async (_, w) => {
      const s = w % 2 === 0 ? store : second;
      for (let i = 0; i < 50; i++) {
        await s.patch(h, [Increment("", "n"), Append("log", `${w}:${i}`)], {
          user,
          writer: `w${w}`,
        });
      }
    }));
    const s = await store.get<{ n: number; log: string[] }>(h, { user });
    assert.equal(s.state.n, 400);
    assert.equal(s.state.log.length, 400);
    assert.equal(new Set(s.state.log).size, 400);
    assert.equal(s.version, 401);
    // Every write appended its entry atomically: the last 100 are all there, in order.
    const tail = await store.changesSince(h, 301, { user });
    assert.ok(!tail.truncated);
    if (!tail.truncated) {
      assert.deepEqual(
        tail.changes.map((c) => c.version),
        Array.from({ length: 100 }, (_, i) => 302 + i),
      );
      const appended = tail.changes.map((c) => (c.ops as { value: string }[])[1]!.value);
      assert.deepEqual(appended, s.state.log.slice(300));
    }
  }),
  step("patch() applies every op kind atomically", async ({ store }) => {
    const user = freshUser();
    const h = await store.mint("p", { tags: ["a"], profile: { name: "x", n: 1 } }, { user });
    const s = await store.patch(h, [
      Append("tags", "b"),
      AddToSet("tags", "a"),
      AddToSet("tags", { k: 1, j: 2 }),
      AddToSet("tags", { j: 2, k: 1 }),
      SetKey("profile", "city", "Oslo"),
      DelKey("profile", "name"),
      Increment("profile", "n", 2.5),
      Merge({ z: null }, "profile"),
      SetKey("/profile", "a~b/c", true),
    ], { user, writer: "p1" });
    assert.deepEqual(s.state, {
      tags: ["a", "b", { k: 1, j: 2 }],
      profile: { n: 3.5, city: "Oslo", z: null, "a~b/c": true },
    });
    assert.equal(s.version, 2);
    await rejectsWith(
      () => store.patch(h, [Append("tags", "c"), Increment("tags", "x")], { user }),
      "patch_error",
    );
    await rejectsWith(
      () => store.patch(h, [{ op: "nope" } as never], { user }),
      "patch_error",
    );
    assert.deepEqual(await store.get(h, { user }), s);
  }),
  step("a patch that changes nothing writes nothing", async ({ store, clock }) => {
    const user = freshUser();
    const h = await store.mint("p", { tags: ["a"], m: { k: 1 } }, { user, writer: "first" });
    clock.advance(5);
    const s = await store.patch(h, [
      AddToSet("tags", "a"),
      DelKey("m", "absent"),
      Merge({ k: 1 }, "m"),
    ], {
      user,
      writer: "second",
    });
    assert.equal(s.version, 1);
    assert.equal(s.lastWriter, "first");
    assert.equal(s.updatedAt.getTime(), clock.now - 5);
    const empty = await store.patch(h, [], { user, writer: "third" });
    assert.equal(empty.version, 1);
  }),
  step("touch() renews or clears the expiry and bumps the version", async ({ store, clock }) => {
    const user = freshUser();
    const h = await store.mint("t", { a: 1 }, { user, ttlDays: 1 });
    clock.advance(1000);
    const s = await store.touch(h, { user, ttlDays: 2, writer: "toucher" });
    assert.equal(s.version, 2);
    assert.equal(s.expiresAt?.getTime(), clock.now + 2 * DAY);
    assert.equal(s.lastWriter, "toucher");
    const n = await store.touch(h, { user, ttlDays: null });
    assert.equal(n.expiresAt, null);
    assert.equal(n.version, 3);
  }),
  step(
    "save() ttlDays: undefined keeps, null clears, a number renews from now",
    async ({ store, clock }) => {
      const user = freshUser();
      const h = await store.mint("t", { a: 1 }, { user, ttlDays: 3 });
      const created = clock.now;
      clock.advance(DAY);
      let s = await store.save(h, { a: 2 }, { user, expectVersion: 1 });
      assert.equal(s.expiresAt?.getTime(), created + 3 * DAY);
      s = await store.save(h, { a: 3 }, { user, expectVersion: 2, ttlDays: 0.5 });
      assert.equal(s.expiresAt?.getTime(), clock.now + DAY / 2);
      s = await store.save(h, { a: 4 }, { user, expectVersion: 3, ttlDays: null });
      assert.equal(s.expiresAt, null);
    },
  ),
  step("an expired handle is handle_expired and cannot be revived", async ({ store, clock }) => {
    const user = freshUser();
    const h = await store.mint("e", { a: 1 }, { user, ttlDays: 1.5 });
    const live = await store.mint("e", { b: 1 }, { user });
    const created = clock.now;
    clock.advance(1.5 * DAY);
    const e = await rejectsWith(() => store.get(h, { user }), "handle_expired");
    assert.equal(e.details.expired_at, new Date(created + 1.5 * DAY).toISOString());
    assert.equal(e.details.ttl_days, 1.5);
    await rejectsWith(() => store.touch(h, { user, ttlDays: 5 }), "handle_expired");
    await rejectsWith(
      () => store.save(h, { a: 2 }, { user, expectVersion: 1 }),
      "handle_expired",
    );
    await rejectsWith(() => store.patch(h, [SetKey("", "a", 3)], { user }), "handle_expired");
    assert.deepEqual((await store.list(user)).map((i) => i.handle), [live]);
    assert.deepEqual(
      (await store.list(user, { includeExpired: true })).map((i) => i.handle).sort(),
      [h, live].sort(),
    );
    assert.equal(await store.sweep(user), 1);
    await rejectsWith(() => store.get(h, { user }), "handle_not_found");
    assert.equal((await store.get(live, { user })).version, 1);
  }),
  step("ttl_days in handle_expired is rounded to 3 decimals", async ({ store, clock }) => {
    const user = freshUser();
    const h = await store.mint("e", {}, { user, ttlDays: 1 / 3 });
    clock.advance(DAY);
    const e = await rejectsWith(() => store.get(h, { user }), "handle_expired");
    assert.equal(e.details.ttl_days, 0.333);
  }),
  step("every JSON string and prototype-named key round-trips exactly", async ({ store }) => {
    const user = freshUser();
    const state = JSON.parse(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": 1}, "prototype": [], ' +
        '"nul": "a\\u0000b", "lone": "\\ud800x\\udfff", "emoji": "\u{1F600}", "empty": {}, ' +
        '"list": [], "nested": [[], {}, [{}]], "big": 9007199254740991, "tenth": 0.1, ' +
        '"huge": 1e308, "tiny": 5e-324, "neg": -12.5, "t": true, "f": false, "n": null, ' +
        '"": "empty key", "a.b": "dotted", "/x~y": "pointer-ish"}',
    );
    const h = await store.mint("rt", state, { user });
    const s = await store.get(h, { user });
    assert.equal(JSON.stringify(s.state), JSON.stringify(state));
    assert.ok(Object.hasOwn(s.state, "__proto__"));
    assert.equal(Object.getPrototypeOf(s.state), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const p = await store.patch(h, [
      SetKey("", "__proto__", { x: 1 }),
      SetKey("constructor", "k", 2),
    ], {
      user,
    });
    assert.deepEqual((p.state as Record<string, unknown>)["__proto__"], { x: 1 });
    assert.equal(({} as Record<string, unknown>).x, undefined);
    const back = await store.get(h, { user });
    assert.equal(JSON.stringify(back.state), JSON.stringify(p.state));
  }),
  step(
    "a state at the size cap round-trips; one byte over is state_too_large",
    async ({ store }) => {
      const user = freshUser();
      const cap = store.maxStateBytes;
      const fill = (n: number) => ({ s: "x".repeat(n - '{"s":""}'.length) });
      const h = await store.mint("big", fill(cap), { user });
      const s = await store.get<{ s: string }>(h, { user });
      assert.equal(JSON.stringify(s.state).length, cap);
      const e = await rejectsWith(
        () => store.mint("big", fill(cap + 1), { user }),
        "state_too_large",
      );
      assert.equal(e.details.size_bytes, cap + 1);
      assert.equal(e.details.limit_bytes, cap);
      await rejectsWith(
        () => store.save(h, fill(cap + 1), { user, expectVersion: 1 }),
        "state_too_large",
      );
      await rejectsWith(
        () => store.patch(h, [SetKey("", "more", "y")], { user }),
        "state_too_large",
      );
      const multi = { s: "é".repeat(cap / 2) };
      await rejectsWith(() => store.mint("big", multi, { user }), "state_too_large");
      assert.equal((await store.get(h, { user })).version, 1);
    },
  ),
  step("every hostile input is refused with its code and changes nothing", async ({ store }) => {
    const user = freshUser();
    const h = await store.mint("safe", { keep: true }, { user, ttlDays: 1 });
    const before = await store.get(h, { user });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const deep = (n: number): Record<string, unknown> => n === 1 ? {} : { d: deep(n - 1) };
    class Thing {
      a = 1;
    }
    const badStates: [string, unknown][] = [
      ["undefined", { a: undefined }],
      ["function", { a: () => 1 }],
      ["symbol", { a: Symbol("s") }],
      ["bigint", { a: 1n }],
      ["NaN", { a: NaN }],
      ["Infinity", { a: Infinity }],
      ["-Infinity", { a: [-Infinity] }],
      ["Date", { a: new Date() }],
      ["Map", { a: new Map() }],
      ["class instance", { a: new Thing() }],
      ["cycle", cyclic],
      ["depth 65", deep(65)],
      ["array root", [1, 2]],
      ["string root", "text"],
      ["null root", null],
      ["Date root", new Date()],
    ];
    for (const [what, bad] of badStates) {
      await rejectsWith(() => store.mint("safe", bad as never, { user }), "invalid_argument")
        .catch((e) => assert.fail(`${what}: ${e}`));
      await rejectsWith(
        () => store.save(h, bad as never, { user, expectVersion: 1 }),
        "invalid_argument",
      ).catch((e) => assert.fail(`${what}: ${e}`));
    }
    await store.save(h, deep(64), { user, expectVersion: 1 }).then(() =>
      store.save(h, before.state, { user, expectVersion: 2 })
    );
    const after = await store.get(h, { user });
    for (const ttlDays of [NaN, Infinity, -Infinity, "7", true, 0, -1, 36526, {}]) {
      await rejectsWith(
        () => store.mint("safe", {}, { user, ttlDays: ttlDays as never }),
        "invalid_argument",
      );
      await rejectsWith(
        () => store.touch(h, { user, ttlDays: ttlDays as never }),
        "invalid_argument",
      );
      await rejectsWith(
        () => store.save(h, {}, { user, expectVersion: 3, ttlDays: ttlDays as never }),
        "invalid_argument",
      );
    }
    for (const kind of ["", "Research", "1abc", "a_b", "a".repeat(33), "ü", 7]) {
      await rejectsWith(() => store.mint(kind as never, {}, { user }), "invalid_argument");
    }
    for (const expectVersion of [-1, 1.5, "3", NaN, null]) {
      await rejectsWith(
        () => store.save(h, {}, { user, expectVersion: expectVersion as never }),
        "invalid_argument",
      );
    }
    for (const badUser of ["", 7, null, undefined, "x".repeat(1025)]) {
      await rejectsWith(() => store.get(h, { user: badUser as never }), "invalid_argument");
      await rejectsWith(
        () => store.mint("k", {}, { user: badUser as never }),
        "invalid_argument",
      );
    }
    for (const handle of ["", 7, null, "x".repeat(257)]) {
      await rejectsWith(() => store.get(handle as never, { user }), "invalid_argument");
    }
    await rejectsWith(() => store.patch(h, "nope" as never, { user }), "patch_error");
    await rejectsWith(
      () => store.patch(h, [SetKey("", "a", NaN)], { user }),
      "invalid_argument",
    );
    await rejectsWith(
      () => store.patch(h, [Append("", { d: undefined })], { user }),
      "invalid_argument",
    );
    await rejectsWith(
      () => store.mint("k", {}, { user, idempotencyKey: "" }),
      "invalid_argument",
    );
    await rejectsWith(
      () => store.mint("k", {}, { user, writer: 5 as never }),
      "invalid_argument",
    );
    assert.deepEqual(await store.get(h, { user }), after);
    assert.equal((await store.list(user)).length, 1);
  }),
  step("sweep() without a user removes every user's expired records", async ({ store, clock }) => {
    const a = freshUser(), b = freshUser();
    const ha = await store.mint("s", {}, { user: a, ttlDays: 1 });
    const hb = await store.mint("s", {}, { user: b, ttlDays: 1 });
    const keep = await store.mint("s", {}, { user: b });
    clock.advance(DAY + 1);
    assert.ok(await store.sweep() >= 2);
    await rejectsWith(() => store.get(ha, { user: a }), "handle_not_found");
    await rejectsWith(() => store.get(hb, { user: b }), "handle_not_found");
    assert.equal((await store.get(keep, { user: b })).version, 1);
  }),
  step(
    "a second store on the same backend sees every write",
    async ({ store, clock, openStore }) => {
      const user = freshUser();
      const h = await store.mint("shared", { a: 1 }, { user });
      await using other = await openStore({ clock: clock.fn });
      assert.deepEqual((await other.get(h, { user })).state, { a: 1 });
      await other.patch(h, [SetKey("", "b", 2)], { user });
      assert.deepEqual((await store.get(h, { user })).state, { a: 1, b: 2 });
    },
  ),
  step("a closed store refuses calls with backend_error", async ({ clock, openStore }) => {
    const s = await openStore({ clock: clock.fn });
    await s.close();
    await s.close();
    await rejectsWith(() => s.get("x_aaaaaaaa", { user: "u" }), "backend_error");
  }),
]);
