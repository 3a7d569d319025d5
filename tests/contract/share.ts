/**
 * Sharing: grants with rights that only narrow (read < append < patch <
 * write), re-shares, `unshare` that ends a grant and everything under it at
 * once, expiry by the store clock, the changelog's attribution of writes
 * through a grant, hostile arguments, and the race of a grantee writing in
 * other processes while the owner unshares.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  AddToSet,
  Append,
  DelKey,
  HandleStore,
  Increment,
  PermissionDenied,
  SetKey,
} from "../../mod.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { spawnChild } from "../_child.ts";
import { group, step } from "./_group.ts";

const RIGHTS = ["read", "append", "patch", "write"] as const;

/** A handle of `alice` shared with `bob` with `rights`. */
async function shared(store: HandleStore, rights: (typeof RIGHTS)[number]) {
  const alice = freshUser("alice"), bob = freshUser("bob");
  const handle = await store.mint("doc", { log: [], tags: [], n: 0, m: {} }, { user: alice });
  const g = await store.share(handle, { user: alice, to: bob, rights });
  return { alice, bob, handle, g };
}

/** Every operation a grantee may try, with the rights it needs (`owner`: none suffices). */
const OPERATIONS: [
  string,
  string,
  (s: HandleStore, alias: string, user: string) => Promise<unknown>,
][] = [
  ["get", "read", (s, h, user) => s.get(h, { user })],
  ["read", "read", (s, h, user) => s.read(h, { user, maxBytes: 256 })],
  ["changesSince", "read", (s, h, user) => s.changesSince(h, 0, { user })],
  ["patch append", "append", (s, h, user) => s.patch(h, [Append("log", 1)], { user })],
  ["patch add_to_set", "append", (s, h, user) => s.patch(h, [AddToSet("tags", "x")], { user })],
  ["patch increment", "append", (s, h, user) => s.patch(h, [Increment("", "n")], { user })],
  ["patch set_key", "patch", (s, h, user) => s.patch(h, [SetKey("m", "k", 1)], { user })],
  ["patch del_key", "patch", (s, h, user) => s.patch(h, [DelKey("", "tags")], { user })],
  [
    "patch append + set_key",
    "patch",
    (s, h, user) => s.patch(h, [Append("log", 1), SetKey("m", "k", 2)], { user }),
  ],
  ["save", "write", async (s, h, user) => {
    const cur = await s.get(h, { user });
    return s.save(h, { ...cur.state, saved: true }, { user, expectVersion: cur.version });
  }],
  ["touch", "write", (s, h, user) => s.touch(h, { user, ttlDays: 3 })],
  ["revoke", "owner", (s, h, user) => s.revoke(h, { user })],
];

const covers = (held: string, needed: string) =>
  needed !== "owner" && RIGHTS.indexOf(held as never) >= RIGHTS.indexOf(needed as never);

export default group("share", ["grants"], [
  step(
    "share(): the grantee reads through a 130-bit alias handle that its list shows with sharedBy and rights",
    async ({ store }) => {
      const { alice, bob, handle, g } = await shared(store, "read");
      assert.equal(g.rights, "read");
      assert.equal(g.to, bob);
      assert.equal(g.expiresAt, null);
      assert.match(g.handle, /^doc_[a-z2-7]{26}$/);
      assert.notEqual(g.handle, handle);
      const snap = await store.get(g.handle, { user: bob });
      assert.equal(snap.handle, g.handle);
      assert.equal(snap.sharedBy, alice);
      assert.equal(snap.rights, "read");
      assert.deepEqual(snap.state, { log: [], tags: [], n: 0, m: {} });
      const listed = await store.list(bob);
      assert.deepEqual(listed.map((i) => [i.handle, i.sharedBy, i.rights]), [
        [g.handle, alice, "read"],
      ]);
      assert.deepEqual((await store.list(alice)).map((i) => i.handle), [handle]);
      assert.deepEqual((await store.grants(handle, { user: alice })).map((x) => x.grant), [
        g.grant,
      ]);
      // Anyone else: the alias does not exist for them.
      const e = await rejectsWith(
        () => store.get(g.handle, { user: freshUser() }),
        "handle_not_found",
      );
      assert.equal(e.details.reason, undefined);
      const star = await store.share(handle, { user: alice, to: "*", rights: "read" });
      assert.match(star.handle, /^doc_[a-z2-7]{26}$/);
      // Each share is an entry of the owner's handle: mint, share with bob, share with anyone.
      assert.equal((await store.get(star.handle, { user: freshUser() })).version, 3);
    },
  ),
  step(
    "each right against each operation: allowed, or permission_denied { rights, needed } with nothing changed",
    async ({ store }) => {
      for (const rights of RIGHTS) {
        for (const [name, needed, run] of OPERATIONS) {
          const { alice, bob, handle, g } = await shared(store, rights);
          const before = await store.get(handle, { user: alice });
          if (covers(rights, needed)) {
            await run(store, g.handle, bob);
          } else {
            const e = await rejectsWith(() => run(store, g.handle, bob), "permission_denied");
            assert.ok(e instanceof PermissionDenied, `${rights} × ${name}`);
            assert.equal(e.details.rights, rights, `${rights} × ${name}`);
            assert.equal(e.details.needed, needed, `${rights} × ${name}`);
            const after = await store.get(handle, { user: alice });
            assert.deepEqual(after, before, `${rights} × ${name} changed something`);
          }
        }
      }
    },
  ),
  step(
    "writes through a grant land on the owner's handle, attributed in the changelog with writer and via",
    async ({ store }) => {
      const { alice, bob, handle, g } = await shared(store, "append");
      const snap = await store.patch(g.handle, [Append("log", "from bob")], {
        user: bob,
        writer: "bob/agent",
      });
      assert.equal(snap.handle, g.handle);
      assert.equal(snap.version, 3, "mint, share, bob's patch");
      const own = await store.get(handle, { user: alice });
      assert.deepEqual(own.state.log, ["from bob"]);
      assert.equal(own.lastWriter, "bob/agent");
      const log = await store.changesSince(handle, 2, { user: alice });
      assert.ok(!log.truncated);
      assert.equal(log.changes.length, 1);
      assert.equal(log.changes[0]!.writer, "bob/agent");
      assert.equal(log.changes[0]!.via, g.grant);
      // The owner's own writes carry no via.
      await store.patch(handle, [Append("log", "mine")], { user: alice });
      const mine = await store.changesSince(handle, 3, { user: alice });
      assert.ok(!mine.truncated && mine.changes[0]!.via === undefined);
    },
  ),
  step(
    "re-sharing only narrows: rights and expiry no wider than the grant held",
    async ({ store, clock }) => {
      const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
      const handle = await store.mint("doc", { log: [] }, { user: alice });
      const g = await store.share(handle, { user: alice, to: bob, rights: "patch", ttlDays: 2 });
      assert.equal(g.expiresAt?.getTime(), clock.now + 2 * DAY);
      const e = await rejectsWith(
        () => store.share(g.handle, { user: bob, to: carol, rights: "write" }),
        "permission_denied",
      );
      assert.deepEqual([e.details.rights, e.details.needed], ["patch", "write"]);
      const longer = await rejectsWith(
        () => store.share(g.handle, { user: bob, to: carol, rights: "read", ttlDays: 3 }),
        "permission_denied",
      );
      assert.equal(longer.details.needed, "expires_at");
      const c = await store.share(g.handle, { user: bob, to: carol, rights: "append" });
      assert.equal(
        c.expiresAt?.getTime(),
        g.expiresAt?.getTime(),
        "a re-share inherits the expiry",
      );
      await store.patch(c.handle, [Append("log", "carol")], { user: carol });
      await rejectsWith(
        () => store.patch(c.handle, [SetKey("", "x", 1)], { user: carol }),
        "permission_denied",
      );
      assert.deepEqual((await store.grants(g.handle, { user: bob })).map((x) => x.grant), [
        c.grant,
      ]);
      assert.equal((await store.grants(handle, { user: alice })).length, 2);
      // A grantee never shares back to the owner, never deletes.
      await rejectsWith(
        () => store.share(g.handle, { user: bob, to: alice, rights: "read" }),
        "invalid_argument",
      );
      await rejectsWith(() => store.revoke(c.handle, { user: carol }), "permission_denied");
      // mint, bob's grant, carol's re-share, carol's patch: the refusals wrote nothing.
      assert.equal((await store.get(handle, { user: alice })).version, 4);
    },
  ),
  step(
    "unshare() ends a grant and every re-share under it at once; aliases read grant_revoked",
    async ({ store }) => {
      const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
      const dave = freshUser("dave");
      const handle = await store.mint("doc", { log: [] }, { user: alice });
      const g = await store.share(handle, { user: alice, to: bob, rights: "write" });
      const c = await store.share(g.handle, { user: bob, to: carol, rights: "patch" });
      const d = await store.share(c.handle, { user: carol, to: dave, rights: "read" });
      // Only the owner or who made a re-share (or one above it) may end it.
      await rejectsWith(() => store.unshare(c.grant, { user: carol }), "permission_denied");
      await rejectsWith(() => store.unshare(g.grant, { user: freshUser() }), "handle_not_found");
      assert.equal(
        await store.unshare(d.handle, { user: bob }),
        1,
        "bob is above carol's re-share",
      );
      assert.equal(await store.unshare(g.grant, { user: alice }), 2);
      assert.equal(await store.unshare(g.grant, { user: alice }), 0, "ending it again is a no-op");
      for (const [alias, user] of [[g.handle, bob], [c.handle, carol], [d.handle, dave]]) {
        const e = await rejectsWith(() => store.get(alias!, { user: user! }), "handle_not_found");
        assert.equal(e.details.reason, "grant_revoked");
        assert.equal(e.details.handle, alias);
        const w = await rejectsWith(
          () => store.patch(alias!, [Append("log", 1)], { user: user! }),
          "handle_not_found",
        );
        assert.equal(w.details.reason, "grant_revoked");
      }
      assert.deepEqual(await store.list(bob), []);
      assert.deepEqual(await store.grants(handle, { user: alice }), []);
      // A re-share of an ended grant is refused as well.
      await rejectsWith(
        () => store.share(g.handle, { user: bob, to: carol, rights: "read" }),
        "handle_not_found",
      );
      // mint, three shares, two unshares; the no-op unshare and the refusals wrote nothing.
      assert.equal((await store.get(handle, { user: alice })).version, 6);
    },
  ),
  step(
    "the backend itself refuses a write whose grant ended after the store looked it up",
    async ({ backend, clock }) => {
      // A view whose grant look-ups are stale: every grant reads as in force.
      const grants = backend.grants!;
      const staleGrants = {
        ...grants,
        read: async (x: string) => {
          const g = await grants.read(x);
          return g && { ...g, endedAt: null, expiresAt: null };
        },
      };
      const stale = new Proxy(backend, {
        get(target, name) {
          if (name === "close") return () => Promise.resolve();
          const v = Reflect.get(target, name, target);
          if (name !== "grants") return typeof v === "function" ? v.bind(target) : v;
          return staleGrants;
        },
      });
      await using store = new HandleStore(stale, { clock: clock.fn });
      for (const end of ["unshare", "expiry"] as const) {
        const alice = freshUser("alice"), bob = freshUser("bob");
        const handle = await store.mint("doc", { log: [] }, { user: alice });
        const g = await store.share(handle, { user: alice, to: bob, rights: "write", ttlDays: 1 });
        if (end === "unshare") await store.unshare(g.grant, { user: alice });
        else clock.advance(DAY);
        const version = (await store.get(handle, { user: alice })).version;
        const reason = end === "unshare" ? "grant_revoked" : "grant_expired";
        for (
          const run of [
            () => store.patch(g.handle, [Append("log", 1)], { user: bob }),
            () => store.touch(g.handle, { user: bob, ttlDays: 2 }),
            () => store.save(g.handle, { log: [2] }, { user: bob, expectVersion: 1 }),
          ]
        ) {
          const e = await rejectsWith(run, "handle_not_found");
          assert.equal(e.details.reason, reason);
          assert.equal(e.details.handle, g.handle);
        }
        const own = await store.get(handle, { user: alice });
        assert.equal(own.version, version);
      }
    },
  ),
  step(
    "sweep() removes grants ended or expired longer than the trash grace ago; its count is the records' only",
    async ({ store, backend, clock, openStore }) => {
      const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
      const handle = await store.mint("doc", { log: [] }, { user: alice });
      const ended = await store.share(handle, { user: alice, to: bob, rights: "read" });
      const expired = await store.share(handle, {
        user: alice,
        to: carol,
        rights: "read",
        ttlDays: 1,
      });
      const kept = await store.share(handle, { user: alice, to: "*", rights: "read" });
      const recent = await store.share(handle, { user: alice, to: carol, rights: "write" });
      await store.unshare(ended.grant, { user: alice });
      // The store's trash grace is 7 days: the first two are past it, the unshare below is not.
      clock.advance(8 * DAY);
      await store.unshare(recent.grant, { user: alice });
      // A sweep of records only (its trash grace outlives every grant): then nothing expired is left.
      {
        await using wide = await openStore({ clock: clock.fn, trashDays: 100 });
        await wide.sweep();
        assert.ok(await backend.grants!.read(ended.grant));
      }
      assert.equal(await store.sweep(), 0);
      for (const g of [ended, expired]) {
        assert.equal(await backend.grants!.read(g.grant), null);
        assert.equal(await backend.grants!.read(g.handle), null);
        const e = await rejectsWith(() => store.get(g.handle, { user: g.to }), "handle_not_found");
        assert.equal(e.details.reason, undefined);
      }
      const e = await rejectsWith(
        () => store.get(recent.handle, { user: carol }),
        "handle_not_found",
      );
      assert.equal(e.details.reason, "grant_revoked");
      assert.equal((await store.get(kept.handle, { user: bob })).handle, kept.handle);
      assert.deepEqual((await store.grants(handle, { user: alice })).map((g) => g.grant), [
        kept.grant,
      ]);
      const of = await backend.grants!.of(alice, handle);
      assert.deepEqual(of.map((g) => g.grant).sort(), [kept.grant, recent.grant].sort());
    },
  ),
  step(
    "a grant lapses by the store clock: grant_expired on reads and writes, gone from lists",
    async ({ store, clock }) => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      const handle = await store.mint("doc", { log: [] }, { user: alice });
      const g = await store.share(handle, { user: alice, to: bob, rights: "write", ttlDays: 1 });
      await store.patch(g.handle, [Append("log", 1)], { user: bob });
      clock.advance(DAY);
      for (
        const run of [
          () => store.get(g.handle, { user: bob }),
          () => store.patch(g.handle, [Append("log", 2)], { user: bob }),
          () => store.touch(g.handle, { user: bob, ttlDays: 5 }),
          () => store.share(g.handle, { user: bob, to: "*", rights: "read" }),
        ]
      ) {
        const e = await rejectsWith(run, "handle_not_found");
        assert.equal(e.details.reason, "grant_expired");
      }
      assert.deepEqual(await store.list(bob), []);
      assert.deepEqual((await store.get(handle, { user: alice })).state, { log: [1] });
    },
  ),
  step(
    "hostile arguments: rights, to, other users' aliases, a trashed handle — clear errors, nothing changed",
    async ({ store }) => {
      const alice = freshUser("alice"), bob = freshUser("bob"), eve = freshUser("eve");
      const handle = await store.mint("doc", { log: [] }, { user: alice });
      for (const rights of ["admin", "READ", "", null, 3, ["read"], "read "]) {
        const e = await rejectsWith(
          () => store.share(handle, { user: alice, to: bob, rights: rights as never }),
          "invalid_argument",
        );
        assert.equal(e.details.field, "rights");
      }
      for (const to of ["", "a\0b", 5, null, undefined, alice, "x".repeat(1025)]) {
        const e = await rejectsWith(
          () => store.share(handle, { user: alice, to: to as never, rights: "read" }),
          "invalid_argument",
        );
        assert.equal(e.details.field, "to");
      }
      for (const ttlDays of [0, -1, NaN, Infinity, "7", null]) {
        await rejectsWith(
          () =>
            store.share(handle, {
              user: alice,
              to: bob,
              rights: "read",
              ttlDays: ttlDays as never,
            }),
          "invalid_argument",
        );
      }
      // Someone else's handle, or someone else's alias: not found, nothing revealed.
      await rejectsWith(
        () => store.share(handle, { user: eve, to: eve + "x", rights: "read" }),
        "handle_not_found",
      );
      const g = await store.share(handle, { user: alice, to: bob, rights: "append" });
      for (
        const run of [
          () => store.get(g.handle, { user: eve }),
          () => store.patch(g.handle, [Append("log", "eve")], { user: eve }),
          () => store.share(g.handle, { user: eve, to: "*", rights: "read" }),
          () => store.grants(g.handle, { user: eve }),
        ]
      ) {
        const e = await rejectsWith(run, "handle_not_found");
        assert.equal(e.details.reason, undefined);
      }
      // A grantee cannot widen by re-sharing to itself or to "*".
      await rejectsWith(
        () => store.share(g.handle, { user: bob, to: "*", rights: "write" }),
        "permission_denied",
      );
      // A handle in the trash cannot be shared, and its grants reach nothing.
      await store.revoke(handle, { user: alice });
      await rejectsWith(
        () => store.share(handle, { user: alice, to: bob, rights: "read" }),
        "handle_not_found",
      );
      const gone = await rejectsWith(() => store.get(g.handle, { user: bob }), "handle_not_found");
      assert.equal(
        gone.details.handle,
        g.handle,
        "the error names the alias, not the owner's handle",
      );
      await store.restore(handle, { user: alice });
      assert.deepEqual((await store.get(handle, { user: alice })).state, { log: [] });
      assert.equal(
        (await store.get(g.handle, { user: bob })).version,
        (await store.get(handle, { user: alice })).version,
      );
    },
  ),
  step(
    "share and unshare leave changelog entries that change no state; a save behind only those is not stale",
    async ({ store }) => {
      const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
      const h = await store.mint("doc", { n: 0 }, { user: alice });
      const g = await store.share(h, { user: alice, to: bob, rights: "append", ttlDays: 2 });
      const c = await store.share(g.handle, { user: bob, to: carol, rights: "read" });
      await store.unshare(g.grant, { user: alice });
      const log = await store.changesSince(h, 1, { user: alice });
      assert.ok(!log.truncated);
      assert.deepEqual(log.changes.map((x) => [x.op, x.writer, x.grant]), [
        ["share", alice, g.grant],
        ["share", bob, c.grant],
        ["unshare", alice, g.grant],
      ]);
      const [first, second] = log.changes;
      assert.deepEqual([first!.to, first!.rights, first!.via], [bob, "append", undefined]);
      assert.equal(first!.expires_at, g.expiresAt!.toISOString());
      assert.deepEqual([second!.to, second!.rights, second!.via], [carol, "read", g.grant]);
      assert.ok(log.changes.every((x) => x.patch === undefined && x.ops === undefined));
      assert.deepEqual((await store.get(h, { user: alice })).state, { n: 0 });
      // Alice read version 1; what happened since changed no state: her save lands.
      const saved = await store.save(h, { n: 1 }, { user: alice, expectVersion: 1 });
      assert.equal(saved.version, 5);
      assert.deepEqual(saved.state, { n: 1 });
      // A change of state in between is still a conflict, a share after it or not.
      await store.patch(h, [Increment("", "n")], { user: alice });
      await store.share(h, { user: alice, to: carol, rights: "read" });
      await rejectsWith(
        () => store.save(h, { n: 9 }, { user: alice, expectVersion: 5 }),
        "stale_write",
      );
      // A merging save rewinds across the share entry.
      const merged = await store.save(h, { n: 1, note: "x" }, {
        user: alice,
        expectVersion: 5,
        onConflict: "merge",
      });
      assert.deepEqual(merged.state, { n: 2, note: "x" });
    },
  ),
  step(
    "transfer with keep: the old owner keeps a grant of those rights; grants made before end in the same step",
    async ({ store }) => {
      const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
      const h = await store.mint("doc", { log: [] }, { user: alice });
      const g = await store.share(h, { user: alice, to: carol, rights: "write" });
      assert.equal(await store.transfer(h, { user: alice, to: bob, keep: "append" }), h);
      const e = await rejectsWith(() => store.get(g.handle, { user: carol }), "handle_not_found");
      assert.equal(e.details.reason, "grant_revoked");
      await rejectsWith(() => store.get(h, { user: alice }), "handle_not_found");
      const kept = (await store.list(alice)).filter((i) => i.sharedBy === bob);
      assert.deepEqual(kept.map((i) => i.rights), ["append"]);
      const alias = kept[0]!.handle;
      await store.patch(alias, [Append("log", "alice")], { user: alice });
      await rejectsWith(
        () => store.patch(alias, [SetKey("", "x", 1)], { user: alice }),
        "permission_denied",
      );
      await rejectsWith(() => store.revoke(alias, { user: alice }), "permission_denied");
      // A grantee never transfers: permission_denied with its rights, nothing changed.
      const before = (await store.get(h, { user: bob })).version;
      const denied = await rejectsWith(
        () => store.transfer(alias, { user: alice, to: carol }),
        "permission_denied",
      );
      assert.equal(denied.details.rights, "append");
      assert.equal(denied.details.needed, "owner");
      assert.equal((await store.get(h, { user: bob })).version, before);
      await rejectsWith(() => store.get(h, { user: carol }), "handle_not_found");
      const grants = await store.grants(h, { user: bob });
      assert.deepEqual(grants.map((x) => [x.to, x.rights, x.handle]), [[alice, "append", alias]]);
      const log = await store.changesSince(h, 2, { user: bob });
      assert.ok(!log.truncated);
      assert.deepEqual(log.changes.map((x) => [x.op, x.writer]), [
        ["transfer", alice],
        ["patch", null],
      ]);
      assert.equal(log.changes[0]!.keep, "append");
      assert.equal(log.changes[1]!.via, grants[0]!.grant);
      // Nor does a grantee with every right, by its alias or the owner's handle.
      const w = await store.share(h, { user: bob, to: carol, rights: "write" });
      const full = await rejectsWith(
        () => store.transfer(w.handle, { user: carol, to: `${carol}-2`, keep: "read" }),
        "permission_denied",
      );
      assert.deepEqual([full.details.rights, full.details.needed], ["write", "owner"]);
      await rejectsWith(() => store.transfer(h, { user: carol, to: alice }), "handle_not_found");
      assert.equal((await store.get(w.handle, { user: carol })).handle, w.handle);
      assert.equal(await store.unshare(w.grant, { user: bob }), 1);
      assert.equal(await store.unshare(grants[0]!.grant, { user: bob }), 1);
      const ended = await rejectsWith(() => store.get(alias, { user: alice }), "handle_not_found");
      assert.equal(ended.details.reason, "grant_revoked");
    },
    ["transfer"],
  ),
  step(
    "quotas: a write through a grant counts for the owner, never for the grantee",
    async ({ store }) => {
      const { alice, bob, g } = await shared(store, "append");
      await store.patch(g.handle, [Append("log", "x".repeat(100))], { user: bob });
      assert.equal((await store.usage(bob)).handles, 0);
      assert.equal((await store.usage(alice)).handles, 1);
    },
    ["quotas"],
  ),
  step(
    "two processes write through a grant in loops while the owner unshares: no write lands after unshare returned",
    async ({ target, openStore }) => {
      await using store = await openStore();
      const alice = freshUser("alice"), bob = freshUser("bob");
      const handle = await store.mint("doc", { log: [] }, { user: alice });
      const g = await store.share(handle, { user: alice, to: bob, rights: "append" });
      const children = [0, 1].map(() => spawnChild(["grantee", target.url!, bob, g.handle, "4"]));
      try {
        for (const c of children) assert.equal(await c.line("ready"), "ready");
        for (const c of children) await c.send("go");
        // Let writes land, then end the grant while they are in flight.
        for (const c of children) await c.line("a first write");
        await store.unshare(g.grant, { user: alice });
        const atUnshare = await store.get(handle, { user: alice });
        const acked: string[] = [];
        for (const c of children) {
          for (;;) {
            const line = await c.line("acks, then the end");
            if (line.startsWith("{")) {
              const end = JSON.parse(line);
              assert.deepEqual(
                new Set(end.ended),
                new Set(["handle_not_found"]),
                `a loop ended otherwise: ${line}`,
              );
              assert.deepEqual(new Set(end.reasons), new Set(["grant_revoked"]));
              break;
            }
            acked.push(line.split(" ")[0]!);
          }
          await c.succeeded();
        }
        const after = await store.get(handle, { user: alice });
        assert.equal(after.version, atUnshare.version, "a write landed after unshare returned");
        assert.deepEqual(after.state, atUnshare.state);
        // Every acknowledged write is there (the first line of each child was read above).
        const log = new Set(after.state.log as string[]);
        for (const a of acked) assert.ok(log.has(a), `acknowledged ${a} is missing`);
        assert.ok(log.size >= 2);
      } finally {
        for (const c of children) c.kill();
      }
    },
    ["crossProcess"],
  ),
]);
