/**
 * Erasing a user (SPEC 9.1): every record of the user — live, expired and
 * trashed — with its changelog, preview, idempotency records, leases and
 * usage, and every grant on, to and by the user, gone; counted; nothing of
 * the user readable through any API afterwards; other users' data and their
 * changelog entries naming the user untouched; idempotent; a write racing
 * the erase lands before it (and is erased) or fails.
 *
 * {@link eraseScenario} builds the user the steps erase, with canary strings
 * in everything it writes, for the engine tests that scan their storage.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Append, type Backend, HandleStore, type HandleStoreOptions, SetKey } from "../../mod.ts";
import { DAY, type FakeClock, freshUser, rejectsWith } from "../_helpers.ts";
import { type ContractContext, group, step } from "./_group.ts";

/** A random lowercase word, for canaries that must be identifiers or kinds. */
function word(n = 12): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(n)),
    (b) => "abcdefghijklmnopqrstuvwxyz"[b % 26],
  ).join("");
}

/** The user an erase removes, the users around it, and what each holds. */
export interface EraseScenario {
  /** The user erased: its id is a canary too. */
  user: string;
  /** Another user who shares with the user and is shared with. */
  other: string;
  /** A third user, re-shared to. */
  third: string;
  /** Strings of the user's data: none may remain anywhere after the erase. */
  canaries: string[];
  /** The writer label the user wrote the other's handle with: it stays in the other's changelog. */
  visitor: string;
  /** The user's handles: live, expired, trashed. */
  live: string;
  expired: string;
  trashed: string;
  /** The idempotency key of the user's mint of `live`. */
  idempotencyKey: string;
  /** The other user's handle shared to the user, its grant's alias, and the user's re-share. */
  othersHandle: string;
  aliasToUser: string;
  reshareAlias: string;
  /** The alias the other holds of the user's handle, and the third's re-share of it. */
  aliasOfUsers: string;
  aliasOfReshare: string;
  /** A grant between the other and the third, which the erase keeps. */
  keptGrant: string;
  /** What an erase of the user counts. */
  counts: { handles: number; grants: number };
}

/**
 * Builds the scenario on `store` (its clock is `clock`; quotas are switched
 * on through a second store of `openStore`, so the user has a usage row).
 *
 * @returns The scenario.
 */
export async function eraseScenario(
  store: HandleStore,
  clock: FakeClock,
  openStore: (options?: HandleStoreOptions) => Promise<HandleStore>,
): Promise<EraseScenario> {
  const user = freshUser("erased"), other = freshUser("other"), third = freshUser("third");
  const secret = `canary-state-${word()}`, kind = `k${word()}`;
  const writer = `canary-writer-${word()}`, idempotencyKey = `canary-key-${word()}`;
  const visitor = `visitor-${word()}`;
  await using quota = await openStore({ clock: clock.fn, quotas: { maxHandles: 1000 } });
  const live = await quota.mint(kind, { secret, notes: [secret] }, {
    user,
    writer,
    idempotencyKey,
  });
  await quota.patch(live, [Append("notes", `${secret}-2`)], { user, writer });
  await quota.usage(user);
  const expired = await store.mint(kind, { secret }, { user, writer, ttlDays: 1 });
  const trashed = await store.mint(kind, { secret, gone: true }, { user, writer });
  await store.patch(trashed, [SetKey("", "more", secret)], { user, writer });
  await store.revoke(trashed, { user });
  // Grants on the user's handle (with a re-share under it), to the user, by the user.
  const ofUsers = await store.share(live, { user, to: other, rights: "patch" });
  const reshare = await store.share(ofUsers.handle, { user: other, to: third, rights: "read" });
  const othersHandle = await store.mint("doc", { log: [] }, { user: other, writer: "o" });
  const toUser = await store.share(othersHandle, { user: other, to: user, rights: "append" });
  const byUser = await store.share(toUser.handle, { user, to: third, rights: "read" });
  const kept = await store.share(othersHandle, { user: other, to: third, rights: "read" });
  // The user writes the other's handle: the entry it leaves there is the other's.
  await store.patch(toUser.handle, [Append("log", "from a visitor")], { user, writer: visitor });
  await store.patch(othersHandle, [Append("log", "own")], { user: other, writer: "o" });
  // The user expires last, so that the steps above saw it live.
  clock.advance(DAY + 1);
  await store.lease(live, { user, writer, seconds: 3600 });
  return {
    user,
    other,
    third,
    canaries: [user, secret, kind, writer, idempotencyKey],
    visitor,
    live,
    expired,
    trashed,
    idempotencyKey,
    othersHandle,
    aliasToUser: toUser.handle,
    reshareAlias: byUser.handle,
    aliasOfUsers: ofUsers.handle,
    aliasOfReshare: reshare.handle,
    keptGrant: kept.grant,
    counts: { handles: 3, grants: 4 },
  };
}

/** Asserts that nothing of `s.user` is readable, and that the others' data is. */
async function assertErased(c: ContractContext, s: EraseScenario): Promise<void> {
  const { store, clock } = c;
  const user = s.user;
  for (const h of [s.live, s.expired, s.trashed]) {
    await rejectsWith(() => store.get(h, { user }), "handle_not_found");
    await rejectsWith(() => store.changesSince(h, 0, { user }), "handle_not_found");
    await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
  }
  assert.deepEqual(await store.list(user, { includeExpired: true }), []);
  assert.deepEqual((await store.listPage(user, { includeExpired: true })).handles, []);
  assert.deepEqual((await store.trash(user)).handles, []);
  if (c.capabilities.users) {
    assert.ok(!(await allUsers(store)).includes(user), "users() lists the erased user");
    const exported = [];
    for await (const r of store.exportRecords(user)) exported.push(r);
    assert.deepEqual(exported, []);
  }
  assert.equal(await store.countRecords(user), 0);
  assert.deepEqual(await store.usage(user), { handles: 0, bytes: 0, writesThisMinute: 0 });
  const leases = await c.backend.leases?.of(user, [s.live], clock.now);
  assert.equal(leases?.size ?? 0, 0, "the lease outlived the erase");
  // Every alias of an erased grant answers as absent, for everyone.
  await rejectsWith(() => store.get(s.aliasOfUsers, { user: s.other }), "handle_not_found");
  await rejectsWith(() => store.get(s.aliasOfReshare, { user: s.third }), "handle_not_found");
  await rejectsWith(() => store.get(s.aliasToUser, { user }), "handle_not_found");
  await rejectsWith(() => store.get(s.reshareAlias, { user: s.third }), "handle_not_found");
  // The others keep theirs: the handle, the grant between them, and the entry the user left.
  const grants = await store.grants(s.othersHandle, { user: s.other });
  assert.deepEqual(grants.map((g) => g.grant), [s.keptGrant]);
  const log = await store.changesSince(s.othersHandle, 0, { user: s.other });
  assert.ok(!log.truncated);
  assert.ok(log.changes.some((e) => e.writer === s.visitor), "the visitor's entry is gone");
  assert.deepEqual((await store.get(s.othersHandle, { user: s.other })).state, {
    log: ["from a visitor", "own"],
  });
  // The idempotency key is forgotten: the same mint now makes a new handle.
  const again = await store.mint("again", { a: 1 }, { user, idempotencyKey: s.idempotencyKey });
  assert.notEqual(again, s.live);
  await store.erase(user);
}

/** Every user of a store. */
async function allUsers(store: HandleStore): Promise<string[]> {
  const out: string[] = [];
  for (let page = await store.users(); page.length > 0;) {
    out.push(...page);
    page = await store.users({ after: page.at(-1)! });
  }
  return out;
}

export default group("erase", ["erasure", "grants", "leases", "quotas"], [
  step(
    "erase() counts and removes a user's records live, expired and trashed, changelogs, keys, leases, usage and grants",
    async (c) => {
      const s = await eraseScenario(c.store, c.clock, c.openStore);
      assert.deepEqual(await c.store.erase(s.user, { dryRun: true }), s.counts);
      // Live, expired, and the alias of the other's handle shared to the user.
      assert.equal((await c.store.list(s.user, { includeExpired: true })).length, 3);
      assert.deepEqual(await c.store.erase(s.user), s.counts);
      await assertErased(c, s);
    },
  ),
  step("a second erase() answers zeros; a user with nothing answers zeros", async ({ store }) => {
    const user = freshUser();
    await store.mint("n", { a: 1 }, { user });
    assert.deepEqual(await store.erase(user), { handles: 1, grants: 0 });
    assert.deepEqual(await store.erase(user), { handles: 0, grants: 0 });
    assert.deepEqual(await store.erase(user, { dryRun: true }), { handles: 0, grants: 0 });
    assert.deepEqual(await store.erase(freshUser()), { handles: 0, grants: 0 });
  }),
  step("erase() leaves every other user alone", async ({ store }) => {
    const user = freshUser(), neighbour = `${user}x`, prefix = user.slice(0, -1);
    for (const u of [user, neighbour, prefix]) await store.mint("n", { u }, { user: u });
    await store.erase(user);
    for (const u of [neighbour, prefix]) {
      const [info] = await store.list(u);
      assert.deepEqual((await store.get(info!.handle, { user: u })).state, { u });
    }
  }),
  step("a write racing erase() lands before it and is erased, or fails", async (c) => {
    const user = freshUser();
    await using other = await c.openStore({ clock: c.clock.fn });
    const handles = await Promise.all(
      [0, 1, 2].map((i) => c.store.mint("race", { n: 0, i }, { user, writer: "w" })),
    );
    const writes = (s: HandleStore) =>
      handles.flatMap((h) =>
        [1, 2, 3].map((n) => s.patch(h, [SetKey("", "n", n)], { user, writer: "w" }))
      );
    const results = await Promise.allSettled([
      ...writes(c.store),
      ...writes(other),
      other.erase(user),
      ...writes(c.store),
      ...writes(other),
    ]);
    for (const r of results) {
      if (r.status === "rejected") {
        assert.equal((r.reason as { code?: string }).code, "handle_not_found", String(r.reason));
      }
    }
    for (const h of handles) await rejectsWith(() => c.store.get(h, { user }), "handle_not_found");
    assert.deepEqual(await c.store.list(user, { includeExpired: true }), []);
    assert.deepEqual(await c.store.erase(user), { handles: 0, grants: 0 });
  }),
  step("erase() refuses a malformed user, and a backend without erasure", async (c) => {
    for (const bad of ["", "a\u0000b", 7]) {
      await rejectsWith(() => c.store.erase(bad as string), "invalid_argument");
    }
    // The same backend without its erasure group (and a close that leaves it open).
    const view = new Proxy(c.backend, {
      get: (t, name) =>
        name === "erasure"
          ? undefined
          : name === "close"
          ? () => Promise.resolve()
          : ((v) => typeof v === "function" ? v.bind(t) : v)(Reflect.get(t, name, t)),
    }) as Backend;
    await using bare = new HandleStore(view);
    await rejectsWith(() => bare.erase(freshUser()), "invalid_argument");
  }),
]);
