/**
 * Fork, merge back and transfer: a fork carries its lineage on every
 * backend, its changes come home through the disjoint merge, overlapping
 * ones are refused with nothing written, and a transfer moves a handle with
 * its version and changelog in one step.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Append, SetKey } from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { parseRecordLine, recordLine } from "../../src/cli/records.ts";
import { spawnChild } from "../_child.ts";
import { group, step } from "./_group.ts";

export default group("fork", [], [
  step(
    "fork() copies the current version with its lineage; the fork is an ordinary handle",
    async ({ store, openStore, clock }) => {
      const user = freshUser();
      const h = await store.mint("plan", { steps: ["a"], n: 1 }, { user, ttlDays: 3 });
      await store.patch(h, [Append("steps", "b")], { user });
      const f = await store.fork(h, { user, writer: "sub/1" });
      assert.match(f, /^plan_[a-z2-7]{8}$/);
      assert.notEqual(f, h);
      const snap = await store.get(f, { user });
      assert.deepEqual(snap.state, { steps: ["a", "b"], n: 1 });
      assert.equal(snap.version, 1);
      assert.equal(snap.lastWriter, "sub/1");
      assert.deepEqual(snap.forkedFrom, { handle: h, version: 2 });
      assert.equal(snap.expiresAt?.getTime(), (await store.get(h, { user })).expiresAt?.getTime());
      // Another connection reads the lineage back, and so does a listing
      // (with previews or without); the origin's entry has none.
      await using other = await openStore({ clock: clock.fn });
      assert.deepEqual((await other.get(f, { user })).forkedFrom, { handle: h, version: 2 });
      for (const previews of [false, true]) {
        const page = (await other.listPage(user, { previews })).handles;
        assert.deepEqual(page.find((i) => i.handle === f)?.forkedFrom, { handle: h, version: 2 });
        const origin = page.find((i) => i.handle === h);
        assert.ok(origin && !("forkedFrom" in origin));
      }
      // The origin is untouched, and the fork moves on by itself.
      assert.equal((await store.get(h, { user })).version, 2);
      await store.patch(f, [SetKey("", "n", 2)], { user });
      assert.equal((await store.get(h, { user })).state.n, 1);
      // The fork's changelog starts with op "fork" and where it came from.
      const log = await store.changesSince(f, 0, { user });
      assert.ok(!log.truncated);
      assert.equal(log.changes[0]?.op, "fork");
      assert.deepEqual(log.changes[0]?.from, { handle: h, version: 2 });
      // Another user's handle is not found, and a fork of a fork works.
      await rejectsWith(() => store.fork(h, { user: freshUser() }), "handle_not_found");
      const ff = await store.fork(f, { user });
      assert.deepEqual((await store.get(ff, { user })).forkedFrom, { handle: f, version: 2 });
      clock.advance(4 * DAY);
      await rejectsWith(() => store.fork(h, { user }), "handle_expired");
    },
  ),
  step(
    "mergeBack() brings disjoint changes home, with op merge and from in the origin's log",
    async ({ store }) => {
      const user = freshUser();
      const h = await store.mint("doc", { title: "t", tags: ["x"], body: { a: 1 } }, { user });
      const f = await store.fork(h, { user });
      await store.patch(f, [SetKey("body", "b", 2), Append("tags", "fork")], { user });
      await store.patch(h, [SetKey("", "title", "T"), Append("tags", "origin")], { user });
      const merged = await store.mergeBack(f, { user, writer: "parent" });
      assert.equal(merged.handle, h);
      assert.equal(merged.version, 3);
      assert.equal(merged.lastWriter, "parent");
      const want = { title: "T", tags: ["x", "origin", "fork"], body: { a: 1, b: 2 } };
      assert.deepEqual(merged.state, want);
      assert.deepEqual((await store.get(h, { user })).state, want);
      const log = await store.changesSince(h, 2, { user });
      assert.ok(!log.truncated);
      const entry = log.changes[0]!;
      assert.equal(entry.op, "merge");
      assert.deepEqual(entry.from, { handle: f, version: 2 });
      assert.equal(entry.base_version, 1);
      assert.equal(entry.writer, "parent");
      // The merge is in history like a save: the state before it is still reachable.
      assert.deepEqual((await store.stateAt(h, 2, { user })).state, {
        title: "T",
        tags: ["x", "origin"],
        body: { a: 1 },
      });
      // Nobody wrote the origin since the fork: the fork's state comes home as it is.
      const g = await store.fork(h, { user });
      await store.patch(g, [SetKey("", "title", "G")], { user });
      assert.equal((await store.mergeBack(g, { user })).state.title, "G");
      // A handle that is no fork is refused.
      await rejectsWith(() => store.mergeBack(h, { user }), "invalid_argument");
    },
  ),
  step(
    "overlapping changes are stale_write with conflicts, and nothing is written",
    async ({ store }) => {
      const user = freshUser();
      const h = await store.mint("doc", { title: "t", n: 0 }, { user });
      const f = await store.fork(h, { user });
      await store.patch(f, [SetKey("", "title", "fork"), SetKey("", "n", 1)], { user });
      await store.patch(h, [SetKey("", "title", "origin")], { user });
      const before = await store.get(h, { user });
      const e = await rejectsWith(() => store.mergeBack(f, { user }), "stale_write");
      assert.deepEqual(e.details.conflicts, ["/title"]);
      assert.equal(e.details.base_version, 1);
      assert.deepEqual(await store.get(h, { user }), before);
      assert.equal((await store.get(f, { user })).state.title, "fork");
    },
  ),
  step(
    "a fork of a fork merges back into its parent, and that into the origin",
    async ({ store }) => {
      const user = freshUser();
      const h = await store.mint("t", { a: 0, b: 0, c: 0 }, { user });
      const f1 = await store.fork(h, { user });
      await store.patch(f1, [SetKey("", "a", 1)], { user });
      const f2 = await store.fork(f1, { user });
      await store.patch(f2, [SetKey("", "b", 2)], { user });
      await store.patch(f1, [SetKey("", "c", 3)], { user });
      assert.deepEqual((await store.mergeBack(f2, { user })).state, { a: 1, b: 2, c: 3 });
      await store.patch(h, [SetKey("", "d", 4)], { user });
      assert.deepEqual((await store.mergeBack(f1, { user })).state, { a: 1, b: 2, c: 3, d: 4 });
    },
  ),
  step(
    "a fork point out of the retained history is stale_write history_unavailable",
    async ({ openStore, clock }) => {
      const user = freshUser();
      await using store = await openStore({ clock: clock.fn, history: { maxEntries: 2 } });
      const h = await store.mint("t", { a: 0 }, { user });
      const f = await store.fork(h, { user });
      await store.patch(f, [SetKey("", "z", 1)], { user });
      for (let i = 1; i <= 3; i++) await store.patch(h, [SetKey("", "a", i)], { user });
      const e = await rejectsWith(() => store.mergeBack(f, { user }), "stale_write");
      assert.equal(e.details.reason, "history_unavailable");
      assert.equal((await store.get(h, { user })).version, 4);
      // Without a changelog at all, only an origin nobody wrote since the fork can take it.
      await using bare = await openStore({ clock: clock.fn, history: false });
      const g = await bare.fork(h, { user });
      await bare.patch(g, [SetKey("", "y", 1)], { user });
      assert.equal((await bare.mergeBack(g, { user })).state.y, 1);
      const k = await bare.fork(h, { user });
      await bare.patch(h, [SetKey("", "a", 9)], { user });
      const e2 = await rejectsWith(() => bare.mergeBack(k, { user }), "stale_write");
      assert.equal(e2.details.reason, "history_unavailable");
    },
  ),
  step(
    "export and import carry a fork's lineage; a malformed one is refused",
    async ({ store }) => {
      const user = freshUser();
      const h = await store.mint("t", { a: 1 }, { user });
      const f = await store.fork(h, { user });
      let exported, origin;
      for await (const r of store.exportRecords(user)) {
        if (r.handle === f) exported = r;
        if (r.handle === h) origin = r;
      }
      assert.deepEqual(exported?.forkedFrom, { handle: h, version: 1 });
      const line = recordLine(user, exported!);
      assert.ok(line.includes(`"forked_from":{"handle":"${h}","version":1}`), line);
      const parsed = parseRecordLine(line, 1, store);
      const other = freshUser();
      assert.equal((await store.importRecord(other, parsed.record)).outcome, "inserted");
      assert.deepEqual((await store.get(f, { user: other })).forkedFrom, { handle: h, version: 1 });
      // A line without lineage reads back without it.
      const plain = recordLine(user, origin!);
      assert.equal(parseRecordLine(plain, 2, store).record.forkedFrom ?? null, null);
      for (
        const bad of [{ handle: h }, { handle: 1, version: 1 }, { handle: h, version: 0 }, [h, 1]]
      ) {
        const text = line.replace(
          /"forked_from":\{[^}]*\}/,
          `"forked_from":${JSON.stringify(bad)}`,
        );
        assert.throws(() => parseRecordLine(text, 3, store), /forked_from/, text);
      }
    },
    ["importRecord"],
  ),
  step(
    "transfer() moves state, version and changelog; the old owner loses access",
    async ({ store, openStore, clock }) => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      const h = await store.mint("task", { todo: ["ship"] }, { user: alice, writer: "a" });
      await store.patch(h, [Append("todo", "test")], { user: alice });
      const f = await store.fork(h, { user: alice });
      await store.lease(h, { user: alice, writer: "a/agent", seconds: 60 });
      const before = await store.get(h, { user: alice });
      const moved = await store.transfer(h, { user: alice, to: bob });
      assert.equal(moved, h);
      await rejectsWith(() => store.get(h, { user: alice }), "handle_not_found");
      await rejectsWith(
        () => store.patch(h, [Append("todo", "x")], { user: alice }),
        "handle_not_found",
      );
      assert.ok(!(await store.list(alice)).some((i) => i.handle === h));
      await using other = await openStore({ clock: clock.fn });
      const theirs = await other.get(h, { user: bob });
      assert.deepEqual(theirs.state, before.state);
      assert.equal(theirs.version, before.version + 1, "the move is the handle's next version");
      assert.equal(theirs.createdAt.getTime(), before.createdAt.getTime());
      assert.equal(theirs.activeLease, undefined, "the old owner's lease does not travel");
      const log = await other.changesSince(h, 0, { user: bob });
      assert.ok(!log.truncated);
      assert.deepEqual(log.changes.map((c) => c.op), ["mint", "patch", "transfer"]);
      const entry = log.changes[2]!;
      assert.deepEqual([entry.writer, entry.from, entry.to, entry.keep], [
        alice,
        alice,
        bob,
        undefined,
      ]);
      assert.equal(entry.patch, undefined, "a transfer changes no state");
      assert.ok((await other.list(bob)).some((i) => i.handle === h));
      // Bob works on it as an owner; Alice's fork of it no longer finds its origin.
      await other.patch(h, [Append("todo", "bob")], { user: bob });
      await rejectsWith(() => store.mergeBack(f, { user: alice }), "handle_not_found");
      // Transferring back works: the same handle string again.
      assert.equal(await store.transfer(h, { user: bob, to: alice }), h);
      assert.equal((await store.get(h, { user: alice })).version, 5);
    },
    ["transfer"],
  ),
  step(
    "transfer() refuses bad input and a taken name, changing nothing",
    async ({ store, backend, clock }) => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      const h = await store.mint("task", { a: 1 }, { user: alice });
      const before = await store.get(h, { user: alice });
      for (const to of ["", 42, null, alice, "x\u0000y", "a".repeat(1025)]) {
        await rejectsWith(
          () => store.transfer(h, { user: alice, to: to as string }),
          "invalid_argument",
        );
      }
      for (const keep of ["", "owner", "READ", 1, null]) {
        const e = await rejectsWith(
          () => store.transfer(h, { user: alice, to: bob, keep: keep as string }),
          "invalid_argument",
        );
        assert.equal(e.details.field, "keep");
      }
      await rejectsWith(() => store.transfer(h, { user: bob, to: alice }), "handle_not_found");
      await rejectsWith(
        () => store.transfer("task_zzzzzzzz", { user: alice, to: bob }),
        "handle_not_found",
      );
      // Bob already has a record of that name (here written below the store): refused.
      await backend.insert(bob, { ...(await backend.read(alice, h))!, state: '{"bob":true}' }, {
        now: clock.now,
        graceMs: 0,
      });
      const e = await rejectsWith(
        () => store.transfer(h, { user: alice, to: bob }),
        "invalid_argument",
      );
      assert.equal(e.details.field, "to");
      assert.deepEqual(await store.get(h, { user: alice }), before);
      assert.deepEqual((await store.get(h, { user: bob })).state, { bob: true });
      // A name in the new owner's trash is taken too.
      await store.revoke(h, { user: bob });
      await rejectsWith(() => store.transfer(h, { user: alice, to: bob }), "invalid_argument");
      assert.deepEqual(await store.get(h, { user: alice }), before);
    },
    ["transfer"],
  ),
  step(
    "a transfer counts for the new owner's quotas, and a refused one moves nothing",
    async ({ openStore, clock }) => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      await using store = await openStore({ clock: clock.fn, quotas: { maxHandles: 1 } });
      const h = await store.mint("q", { a: 1 }, { user: alice });
      await store.mint("q", { b: 1 }, { user: bob });
      await rejectsWith(() => store.transfer(h, { user: alice, to: bob }), "quota_exceeded");
      assert.equal((await store.get(h, { user: alice })).version, 1);
      assert.equal((await store.usage(bob)).handles, 1);
      const carol = freshUser("carol");
      await store.transfer(h, { user: alice, to: carol });
      assert.equal((await store.usage(alice)).handles, 0);
      assert.equal((await store.usage(carol)).handles, 1);
    },
    ["quotas", "transfer"],
  ),
  step(
    "a fork counts for the user who forked, like a mint",
    async ({ openStore, clock }) => {
      const user = freshUser();
      await using store = await openStore({ clock: clock.fn, quotas: { maxHandles: 2 } });
      const h = await store.mint("q", { a: 1 }, { user });
      const f = await store.fork(h, { user });
      assert.equal((await store.usage(user)).handles, 2);
      await rejectsWith(() => store.fork(f, { user }), "quota_exceeded");
      assert.equal((await store.list(user)).length, 2);
    },
    ["quotas"],
  ),
  step(
    "two forks merged back at once from two processes: disjoint both land, overlapping one does",
    async ({ target, openStore }) => {
      const user = freshUser();
      // The real clock: the children write with it, and trim the changelog by it.
      await using store = await openStore();
      for (const overlap of [false, true]) {
        const h = await store.mint("race", { a: 0, b: 0, log: [] }, { user });
        const forks = [await store.fork(h, { user }), await store.fork(h, { user })];
        await store.patch(forks[0]!, [SetKey("", "a", 1), Append("log", "one")], { user });
        const key = overlap ? "a" : "b";
        await store.patch(forks[1]!, [SetKey("", key, 2), Append("log", "two")], { user });
        const children = forks.map((f) => spawnChild(["merge-back", target.url!, user, f]));
        try {
          for (const c of children) assert.equal(await c.line("ready"), "ready");
          for (const c of children) await c.send("go");
          const results = [];
          for (const c of children) results.push(JSON.parse(await c.line("result")));
          for (const c of children) await c.succeeded();
          const snap = await store.get(h, { user });
          if (!overlap) {
            assert.deepEqual(results.map((r) => r.ok), [true, true]);
            assert.equal(snap.version, 3);
            assert.deepEqual({ a: snap.state.a, b: snap.state.b }, { a: 1, b: 2 });
            assert.deepEqual([...(snap.state.log as string[])].sort(), ["one", "two"]);
          } else {
            const won = results.filter((r) => r.ok);
            assert.equal(won.length, 1, JSON.stringify(results));
            const lost = results.find((r) => !r.ok);
            assert.equal(lost.code, "stale_write");
            assert.ok(lost.conflicts.includes("/a"), JSON.stringify(lost));
            assert.equal(snap.version, 2);
          }
        } finally {
          for (const c of children) c.kill();
        }
      }
    },
    ["crossProcess"],
  ),
]);
