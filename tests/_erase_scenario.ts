/**
 * The erase scenarios the engine tests share (`redis_erase_test.ts`,
 * `denokv_erase_test.ts`): data of one user set up through `HandleStore`
 * (records saved with history, patched, large (chunked), expired by a fake clock, revoked to
 * the trash, minted under an idempotency key, leased, counted by quotas,
 * shared, re-shared, shared to the user and re-shared by it), then erased
 * through the backend's `erasure` group, with the engine's own storage
 * dumped whole (every key and value) and searched for canary strings before
 * and after; and a writer in another process (`tests/_child.ts writers`)
 * racing the erase. And {@link transferScan}: a transfer under encryption at
 * rest leaves no ciphertext of the old owner in the engine's storage.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Append, HandleStore, SetKey } from "../mod.ts";
import type { Backend } from "../src/backend.ts";
import { DAY, FakeClock, freshUser, rejectsWith } from "./_helpers.ts";
import { spawnChild } from "./_child.ts";
import type { Stored } from "./_storage_scan.ts";

/** An engine under test. */
export interface EraseEngine {
  /** A new backend on the engine. */
  open(): Promise<Backend>;
  /** Every key and value the engine stores now. */
  dump(): Promise<Stored[]>;
  /** The URL a child process opens. */
  url: string;
  /** The forms a name may be stored in (e.g. encoded in a key), beside itself. */
  spellings?(name: string): string[];
}

/** The items of `dump` that hold `needle` in their key or value. */
function holding(dump: Stored[], needle: string): Stored[] {
  return dump.filter((s) => s.where.includes(needle) || s.what.includes(needle));
}

/** The full scenario of one user erased among others (see the module doc). */
export async function eraseScenario(engine: EraseEngine): Promise<void> {
  const clock = new FakeClock(Date.now());
  const backend = await engine.open();
  await using store = new HandleStore(backend, {
    clock: clock.fn,
    quotas: { maxHandles: 1000 },
  });
  const erasure = backend.erasure;
  assert.ok(erasure, "the backend has the erasure group");
  const tag = `canary${crypto.randomUUID().replaceAll("-", "")}`;
  const canary = {
    state: `${tag}state`,
    idem: `${tag}idem`,
    writer: `${tag}writer`,
    holder: `${tag}holder`,
  };
  const [u, a, b, c] = ["erased", "alice", "bob", "carol"].map((n) => freshUser(n)) as [
    string,
    string,
    string,
    string,
  ];
  const w = { user: u, writer: canary.writer };
  // The user's records: saved with history and patched, expired, trashed, idempotent.
  const h1 = await store.mint("note", { title: `${canary.state} title`, n: 0 }, w);
  await store.save(h1, { title: `${canary.state} v2`, n: 1 }, { ...w, expectVersion: 1 });
  await store.patch(h1, [SetKey("", "extra", `${canary.state} patched`)], w);
  const h2 = await store.mint("note", { body: `${canary.state} expiring` }, { ...w, ttlDays: 1 });
  const h3 = await store.mint("note", { body: `${canary.state} trashed` }, w);
  await store.revoke(h3, { user: u });
  const h4 = await store.mint("note", { body: canary.state }, {
    ...w,
    idempotencyKey: canary.idem,
  });
  // A state large enough to be stored in chunks where the engine chunks.
  const h5 = await store.mint("note", { blob: `${canary.state} ${"x".repeat(150_000)}` }, w);
  await store.lease(h1, { user: u, writer: canary.holder, seconds: 600 });
  await store.usage(u);
  // Others' data.
  const a1 = await store.mint("note", { log: [] }, { user: a, writer: "alice" });
  const b1 = await store.mint("note", { mine: "bob's" }, { user: b, writer: "bob" });
  // Grants: on the user's handle (re-shared by alice), to anyone, to the user
  // (re-shared by the user, and again by carol), to anyone re-shared by the user.
  const g1 = await store.share(h1, { user: u, to: a, rights: "write" });
  const g2 = await store.share(g1.handle, { user: a, to: b, rights: "read" });
  const g3 = await store.share(h1, { user: u, to: "*", rights: "read" });
  const g4 = await store.share(a1, { user: a, to: u, rights: "write" });
  const g5 = await store.share(g4.handle, { user: u, to: c, rights: "write" });
  const g6 = await store.share(g5.handle, { user: c, to: b, rights: "read" });
  const g7 = await store.share(a1, { user: a, to: "*", rights: "append" });
  const g8 = await store.share(g7.handle, { user: u, to: b, rights: "append" });
  // The user writes in alice's handle: its writer label stays in her changelog.
  await store.patch(g4.handle, [Append("log", "from the erased user")], w);
  clock.advance(2 * DAY); // h2 expires (still held for the grace period)

  const before = await engine.dump();
  const idem = [canary.idem, ...engine.spellings?.(canary.idem) ?? []];
  for (const needle of [canary.state, canary.writer, canary.holder, h1, h2, h3, h4, h5]) {
    assert.ok(holding(before, needle).length > 0, `${needle} is stored before the erase`);
  }
  assert.ok(idem.some((n) => holding(before, n).length > 0), "the idempotency key is stored");
  const counted = await erasure.count(u, clock.now);
  assert.deepEqual(counted, { handles: 5, grants: 7 });
  assert.deepEqual(await erasure.erase(u, clock.now), counted);

  const after = await engine.dump();
  for (const needle of [canary.state, ...idem, canary.holder, h1, h2, h3, h4, h5]) {
    assert.deepEqual(holding(after, needle), [], `${needle} is gone`);
  }
  for (const g of [g1, g2, g3, g4, g5, g6, g8]) {
    assert.deepEqual(holding(after, g.handle), [], `alias ${g.handle} is gone`);
    // Grants on alice's handle stay named only by her changelog's entries.
    const left = holding(after, g.grant).filter((l) => !l.where.includes(a1));
    assert.deepEqual(left, [], `grant ${g.grant} is gone`);
  }
  // Writer labels stay only in alice's changelog (not the user's data).
  const labels = holding(after, canary.writer);
  assert.ok(labels.length > 0, "the writer label in alice's changelog stays");
  for (const l of labels) assert.ok(l.where.includes(a1), `a writer label left in ${l.where}`);
  assert.deepEqual(await erasure.count(u, clock.now), { handles: 0, grants: 0 });
  assert.deepEqual(await erasure.erase(u, clock.now), { handles: 0, grants: 0 });

  // Nothing of the user through the API; the others' data untouched.
  assert.deepEqual(await store.list(u), []);
  assert.ok(!(await store.users()).includes(u));
  assert.equal((await store.usage(u)).handles, 0);
  await rejectsWith(() => store.get(h1, { user: u }), "handle_not_found");
  await rejectsWith(() => store.get(g1.handle, { user: a }), "handle_not_found");
  await rejectsWith(() => store.get(g6.handle, { user: b }), "handle_not_found");
  await rejectsWith(() => store.get(g8.handle, { user: b }), "handle_not_found");
  await rejectsWith(() => store.patch(g4.handle, [Append("log", "late")], w), "handle_not_found");
  assert.deepEqual((await store.get(a1, { user: a })).state, { log: ["from the erased user"] });
  assert.deepEqual((await store.get(b1, { user: b })).state, { mine: "bob's" });
  assert.deepEqual((await store.grants(a1, { user: a })).map((g) => g.grant), [g7.grant]);
  assert.deepEqual((await store.get(g7.handle, { user: c })).state.log, ["from the erased user"]);
  // The user begins anew.
  const fresh = await store.mint("note", { again: true }, { user: u });
  assert.deepEqual(await store.list(u).then((l) => l.map((i) => i.handle)), [fresh]);
}

/**
 * A writer in another process patches one handle of the user (half of its
 * patches under idempotency keys) while this process erases the user.
 * Criterion: the erase answers the one handle; every patch the writer had
 * acknowledged (its entry, its idempotency key) is gone from the engine's
 * storage, not one of its patches succeeds once the handle is gone (the
 * writer ends on `handle_not_found`), and the user has nothing left.
 */
export async function eraseRace(engine: EraseEngine): Promise<void> {
  const backend = await engine.open();
  await using store = new HandleStore(backend);
  const user = freshUser("raced");
  const tag = `race${crypto.randomUUID().replaceAll("-", "")}`;
  const handle = await store.mint("note", { n: 0, log: [] }, { user });
  const child = spawnChild(["writers", engine.url, user, handle, tag, "4", "2", "forever"]);
  try {
    assert.equal(await child.line("ready"), "ready");
    await child.send("go");
    const acked: string[] = [];
    while (acked.length < 40) {
      acked.push((await child.line("an acknowledged patch")).split(" ")[0]!);
    }
    const erased = await backend.erasure!.erase(user, Date.now());
    assert.equal(erased.handles, 1);
    const { status, stderr } = await child.ended();
    assert.equal(status.code, 1, "the writer fails once the handle is gone");
    assert.match(stderr, /HandleNotFound/);
    const dump = await engine.dump();
    assert.deepEqual(holding(dump, tag), [], "no acknowledged patch of the writer is left");
    assert.deepEqual(holding(dump, handle), []);
    assert.deepEqual(await backend.erasure!.count(user, Date.now()), { handles: 0, grants: 0 });
    assert.deepEqual(await store.list(user), []);
  } finally {
    child.kill();
    await child.ended();
  }
}

/**
 * Under encryption at rest, two handles of one user (one large enough to be
 * stored in chunks), saved and patched with history, are transferred to
 * another user. Criterion: every ciphertext the old owner's records held
 * (states, previews, changelog entries; searched by a slice of each) is in
 * the engine's storage before and nowhere after; the new owner reads the
 * states and history, sealed anew.
 */
export async function transferScan(engine: EraseEngine): Promise<void> {
  const backend = await engine.open();
  const keys = { k1: crypto.getRandomValues(new Uint8Array(32)).toBase64() };
  await using store = new HandleStore(backend, { encryption: { keys } });
  const from = freshUser("from"), to = freshUser("to");
  const small = await store.mint("note", { body: "small", n: 0 }, { user: from });
  await store.save(small, { body: "saved", n: 1 }, { user: from, expectVersion: 1 });
  await store.patch(small, [SetKey("", "n", 2)], { user: from });
  const large = await store.mint("note", { blob: "x".repeat(150_000), n: 0 }, { user: from });
  await store.patch(large, [SetKey("", "n", 1)], { user: from });
  const handles = [small, large];
  const before = await Promise.all(handles.map((h) => store.get(h, { user: from })));
  const history = await Promise.all(handles.map((h) => store.changesSince(h, 0, { user: from })));
  const needles: string[] = [];
  for (const h of handles) {
    const r = (await backend.read(from, h))!;
    const log = await backend.changes(from, h, 0);
    // A slice past the prefix, from the start: a chunked state's first chunk holds it.
    for (const t of [r.state, r.preview!, ...log.map((e) => e.text)]) needles.push(t.slice(5, 45));
  }
  assert.equal(needles.length, 9);
  const dumped = await engine.dump();
  for (const n of needles) assert.ok(holding(dumped, n).length > 0, `${n} is stored before`);
  for (const h of handles) await store.transfer(h, { user: from, to, keep: "read" });
  const after = await engine.dump();
  for (const n of needles) assert.deepEqual(holding(after, n), [], `${n} is gone`);
  for (const [i, h] of handles.entries()) {
    const got = await store.get(h, { user: to });
    assert.deepEqual([got.state, got.version], [before[i]!.state, before[i]!.version + 1]);
    const log = await store.changesSince(h, 0, { user: to }), was = history[i]!;
    assert.equal(log.truncated, was.truncated);
    if (!log.truncated && !was.truncated) {
      assert.deepEqual(log.changes.slice(0, -1), was.changes);
      assert.equal(log.changes.at(-1)?.op, "transfer");
    }
  }
}
