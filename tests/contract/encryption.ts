/**
 * Encryption at rest (SPEC 9.2), on every backend that keeps data keys: with
 * keys, every API answers exactly as without; a store without keys reads
 * `no_key`; a ring without the key-encryption key reads `unknown_key` with
 * its id; rotation rewraps data keys, after which the old key can go.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  Append,
  EncryptionError,
  type HandleStore,
  type HandleStoreOptions,
  SetKey,
} from "../../mod.ts";
import { isSealed, KeyRing } from "../../src/keyring.ts";
import { freshUser, rejectsWith } from "../_helpers.ts";
import { type ContractContext, group, step } from "./_group.ts";

/** A new random key-encryption key, as base64. */
export function newKek(): string {
  return crypto.getRandomValues(new Uint8Array(32)).toBase64();
}

/** A store on the target's data with these keys (or none). */
function storeWith(c: ContractContext, keys?: Record<string, string>, current?: string) {
  const options: HandleStoreOptions = { clock: c.clock.fn };
  if (keys) options.encryption = { keys, ...(current ? { current } : {}) };
  return c.openStore(options);
}

/**
 * Every API a user sees, run on `store`; its answers, with handles replaced
 * by their order of appearance, so two runs compare.
 */
async function scenario(c: ContractContext, store: HandleStore, user: string, grantee: string) {
  const seen: string[] = [];
  const out: unknown[] = [];
  const norm = (x: unknown) =>
    JSON.parse(
      JSON.stringify(x).replaceAll(user, "USER").replace(/[a-z]+_[a-z2-7]{8,}/g, (h) => {
        if (!seen.includes(h)) seen.push(h);
        return `H${seen.indexOf(h)}`;
      }),
    );
  const log = (x: unknown) => out.push(norm(x));
  // Rows of one time come in handle order, and handles are random: compare them as sets.
  const rows = async (page: Promise<{ handle: string }[]>) =>
    log(
      norm(await page).sort((a: { handle: string }, b: { handle: string }) =>
        a.handle < b.handle ? -1 : 1
      ),
    );
  const h = await store.mint("doc", { title: "secret-title", notes: ["n1"] }, {
    user,
    idempotencyKey: `mint-${user}`,
  });
  log(h);
  log(
    await store.mint("doc", { title: "secret-title", notes: ["n1"] }, {
      user,
      idempotencyKey: `mint-${user}`,
    }),
  );
  const snap = await store.get(h, { user });
  log(snap);
  log(
    await store.save(h, { title: "second", notes: ["n1", "n2"] }, {
      user,
      expectVersion: snap.version,
    }),
  );
  log(await store.patch(h, [Append("notes", "n3"), SetKey("", "title", "third")], { user }));
  const once = { user, idempotencyKey: `patch-${user}` };
  log(await store.patch(h, [Append("notes", "n4")], once));
  log(await store.patch(h, [Append("notes", "n4")], once));
  c.clock.now += 1000;
  log(await store.touch(h, { user, ttlDays: 3 }));
  await rows(store.list(user, { previews: true }));
  log(await store.changesSince(h, 0, { user }));
  log(await store.stateAt(h, 2, { user }));
  const f = await store.fork(h, { user });
  log(await store.get(f, { user }));
  log(await store.changesSince(f, 0, { user }));
  if (c.capabilities.grants) {
    const g = await store.share(h, { user, to: grantee, rights: "read" });
    log(await store.get(g.handle, { user: grantee }));
    log(await store.changesSince(h, 0, { user }));
  }
  await store.revoke(f, { user });
  log(await store.trash(user));
  log(await store.restore(f, { user }));
  await rows(store.list(user, { previews: true }));
  return out;
}

const kek = newKek();

/** The texts the engine holds of `(user, handle)`: state, preview and changelog entries. */
async function rawTexts(c: ContractContext, user: string, handle: string): Promise<string[]> {
  const r = await c.backend.read(user, handle);
  const log = await c.backend.changes(user, handle, 0);
  return [r?.state, r?.preview, ...log.map((e) => e.text)].filter((t) => t !== undefined);
}

export default group("encryption", ["keys"], [
  step(
    "with keys every API answers as without them, and a store without keys reads no_key",
    async (c) => {
      const plainUser = freshUser("plain"), sealedUser = freshUser("sealed");
      const other = freshUser("grantee");
      await using plain = await storeWith(c);
      await using sealed = await storeWith(c, { k1: kek });
      const a = await scenario(c, plain, plainUser, other);
      c.clock.now -= 1000;
      const b = await scenario(c, sealed, sealedUser, other);
      assert.deepEqual(b, a);
      const [h] = await sealed.list(sealedUser);
      const e = await rejectsWith(
        () => plain.get(h!.handle, { user: sealedUser }),
        "encryption_error",
      );
      assert.equal(e.details.reason, "no_key");
      // Nor does a store opened without keys write for a user who has a data
      // key: plaintext would sit beside their sealed content. Users without
      // one it serves.
      await using plain2 = await storeWith(c);
      const before = await sealed.get(h!.handle, { user: sealedUser });
      for (
        const write of [
          () =>
            plain2.save(h!.handle, { x: 1 }, { user: sealedUser, expectVersion: before.version }),
          () => plain2.patch(h!.handle, [SetKey("", "x", 1)], { user: sealedUser }),
          () => plain2.mint("doc", { x: 1 }, { user: sealedUser }),
          () => plain2.revoke(h!.handle, { user: sealedUser }),
        ]
      ) assert.equal((await rejectsWith(write, "encryption_error")).details.reason, "no_key");
      assert.deepEqual(await sealed.get(h!.handle, { user: sealedUser }), before);
      await plain2.mint("doc", { x: 1 }, { user: plainUser });
      const k = await c.backend.keys!.get(sealedUser);
      assert.equal(k?.keyId, "k1");
      assert.equal(await c.backend.keys!.get(plainUser), null);
    },
  ),
  step(
    "a ring without the data key's KEK reads unknown_key with its id; nothing changes",
    async (c) => {
      const user = freshUser("enc");
      await using sealed = await storeWith(c, { k1: kek });
      const h = await sealed.mint("doc", { a: 1 }, { user });
      await using other = await storeWith(c, { k9: newKek() });
      const e = await rejectsWith(() => other.get(h, { user }), "encryption_error");
      assert.ok(e instanceof EncryptionError);
      assert.deepEqual([e.details.reason, e.details.key_id], ["unknown_key", "k1"]);
      await rejectsWith(() => other.patch(h, [SetKey("", "a", 2)], { user }), "encryption_error");
      assert.deepEqual((await sealed.get(h, { user })).state, { a: 1 });
      assert.equal((await sealed.get(h, { user })).version, 1);
    },
  ),
  step("rotation: keys.rewrap under a new current KEK, then only the new KEK opens", async (c) => {
    const user = freshUser("rot");
    await using old = await storeWith(c, { k1: kek });
    const h = await old.mint("doc", { a: "rotated" }, { user });
    const k2 = newKek();
    const ring = await KeyRing.from({ keys: { k1: kek, k2 }, current: "k2" });
    const keys = c.backend.keys!;
    const stored = (await keys.get(user))!;
    const next = await ring.rewrap(user, stored);
    assert.equal(next.keyId, "k2");
    assert.equal(await keys.rewrap(user, stored, next), true);
    assert.equal(await keys.rewrap(user, stored, next), false, "a stale rewrap changes nothing");
    await using fresh = await storeWith(c, { k2 });
    assert.deepEqual((await fresh.get(h, { user })).state, { a: "rotated" });
    assert.ok((await keys.list({ limit: 100_000 })).some((k) => k.user === user));
  }),
  step(
    "transfer with keys: the new owner reads state, history and versions, a kept grant reads, and no ciphertext of the old owner is left",
    async (c) => {
      const user = freshUser("from"), to = freshUser("to");
      await using sealed = await storeWith(c, { k1: kek });
      const h = await sealed.mint("doc", { title: "moved-secret", notes: ["n1"] }, { user });
      await sealed.patch(h, [Append("notes", "n2")], { user });
      await sealed.patch(h, [SetKey("", "title", "moved-again")], { user });
      const before = await sealed.get(h, { user });
      const history = await sealed.changesSince(h, 0, { user });
      assert.ok(!history.truncated);
      const v2 = await sealed.stateAt(h, 2, { user });
      const raw = await rawTexts(c, user, h);
      assert.ok(raw.length >= 4 && raw.every(isSealed), "the old owner's content is sealed");
      assert.equal(await sealed.transfer(h, { user, to, keep: "read" }), h);
      // The new owner reads everything; the transfer's entry comes last.
      const after = await sealed.get(h, { user: to });
      assert.deepEqual([after.state, after.version], [before.state, before.version + 1]);
      const moved = await sealed.changesSince(h, 0, { user: to });
      assert.ok(!moved.truncated);
      assert.deepEqual(moved.changes.slice(0, -1), history.changes);
      assert.deepEqual(moved.changes.at(-1)?.op, "transfer");
      assert.deepEqual(await sealed.stateAt(h, 2, { user: to }), v2);
      const [listed] = await sealed.list(to, { previews: true });
      assert.match(listed!.preview ?? "", /moved-again/);
      // The old owner reads through the kept grant, with the new owner's key.
      const kept = (await sealed.list(user)).filter((i) => i.sharedBy === to);
      assert.equal(kept.length, 1);
      assert.deepEqual((await sealed.get(kept[0]!.handle, { user })).state, before.state);
      await rejectsWith(() => sealed.get(h, { user }), "handle_not_found");
      // Below the store: nothing under the old owner, and none of its ciphertexts anywhere.
      assert.equal(await c.backend.read(user, h), null);
      assert.deepEqual(await c.backend.changes(user, h, 0), []);
      const now = await rawTexts(c, to, h);
      assert.ok(now.filter(isSealed).length >= raw.length, "the new owner's content is sealed");
      for (const text of raw) assert.ok(!now.includes(text), "an old ciphertext moved as it was");
      // A store without keys still reads no_key for the new owner.
      await using plain = await storeWith(c);
      const e = await rejectsWith(() => plain.get(h, { user: to }), "encryption_error");
      assert.equal(e.details.reason, "no_key");
    },
    ["transfer", "grants"],
  ),
  step(
    "transfer with keys: a write racing it lands before it (and is moved) or fails",
    async (c) => {
      const user = freshUser("from"), to = freshUser("to");
      await using a = await storeWith(c, { k1: kek });
      await using b = await storeWith(c, { k1: kek });
      const h = await a.mint("doc", { log: [] }, { user });
      const write = (s: HandleStore, i: number) =>
        s.patch(h, [Append("log", `w${i}`)], { user }).then(() => `w${i}`);
      const results = await Promise.allSettled([
        ...[0, 1, 2, 3].map((i) => write(i % 2 ? a : b, i)),
        b.transfer(h, { user, to }),
        ...[4, 5, 6, 7].map((i) => write(i % 2 ? a : b, i)),
      ]);
      const landed: string[] = [];
      for (const r of results) {
        if (r.status === "rejected") {
          assert.equal((r.reason as { code?: string }).code, "handle_not_found", String(r.reason));
        } else if (r.value !== h) landed.push(r.value);
      }
      assert.equal(results[4]!.status, "fulfilled", "the transfer went through");
      const got = await a.get<{ log: string[] }>(h, { user: to });
      assert.deepEqual([...got.state.log].sort(), landed.sort());
      const log = await a.changesSince(h, 0, { user: to });
      assert.ok(!log.truncated);
      assert.equal(log.changes.at(-1)?.op, "transfer");
      assert.equal(log.changes.length, landed.length + 2);
    },
    ["transfer"],
  ),
  step(
    "transfer of a sealed record by a store without keys is no_key, and changes nothing",
    async (c) => {
      const user = freshUser("from"), to = freshUser("to");
      await using sealed = await storeWith(c, { k1: kek });
      await using plain = await storeWith(c);
      const h = await sealed.mint("doc", { a: 1 }, { user });
      const raw = await rawTexts(c, user, h);
      const e = await rejectsWith(() => plain.transfer(h, { user, to }), "encryption_error");
      assert.equal(e.details.reason, "no_key");
      assert.deepEqual(await rawTexts(c, user, h), raw);
      assert.equal(await c.backend.read(to, h), null);
      const got = await sealed.get(h, { user });
      assert.deepEqual([got.state, got.version], [{ a: 1 }, 1]);
    },
    ["transfer"],
  ),
  step("erase with keys destroys the user's data key", async (c) => {
    const user = freshUser("erase");
    await using sealed = await storeWith(c, { k1: kek });
    await sealed.mint("doc", { a: 1 }, { user });
    assert.notEqual(await c.backend.keys!.get(user), null);
    await sealed.erase(user);
    assert.equal(await c.backend.keys!.get(user), null);
    assert.deepEqual(await sealed.list(user), []);
  }, ["erasure"]),
  step(
    "a store whose cached data key another store's erase destroyed writes and reads with the new key",
    async (c) => {
      const user = freshUser("stale");
      const keys = { k1: kek };
      await using a = await storeWith(c, keys);
      await using b = await storeWith(c, keys);
      await using blind = await c.openStore({
        clock: c.clock.fn,
        encryption: { keys },
        history: false,
      });
      const first = await a.mint("doc", { a: 1 }, { user });
      await blind.get(first, { user });
      await b.erase(user);
      // Each store still holds the erased key: writes that read nothing first
      // must not seal with it, reads of content sealed since must not fail.
      const h = await a.mint("doc", { a: 2 }, { user });
      assert.deepEqual((await b.get(h, { user })).state, { a: 2 });
      const v = (await blind.get(h, { user })).version;
      await blind.save(h, { a: 3 }, { user, expectVersion: v });
      await using fresh = await storeWith(c, keys);
      assert.deepEqual((await fresh.get(h, { user })).state, { a: 3 });
      assert.deepEqual((await a.get(h, { user })).state, { a: 3 });
    },
    ["erasure"],
  ),
  step("keys.create keeps the first key of a user and answers it", async (c) => {
    const user = freshUser("create");
    const keys = c.backend.keys!;
    const first = await keys.create(user, { keyId: "a", wrapped: "AAAA" }, c.clock.now);
    const second = await keys.create(user, { keyId: "b", wrapped: "BBBB" }, c.clock.now);
    assert.deepEqual([first, second], [{ keyId: "a", wrapped: "AAAA" }, first]);
    assert.equal(await keys.delete(user), true);
    assert.equal(await keys.delete(user), false);
    assert.equal(await keys.get(user), null);
  }),
  step("concurrent patches of one handle from one store all land, each sealed", async (c) => {
    // Each sealed update reads the record first, and starts over when another
    // landed meanwhile: every engine must hand that back, not fail the call.
    const user = freshUser("race");
    await using store = await storeWith(c, { k1: kek });
    const h = await store.mint("doc", { n: [] }, { user });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.patch(h, [Append("n", i)], { user })),
    );
    const snap = await store.get(h, { user });
    assert.equal(snap.version, 21);
    assert.deepEqual((snap.state.n as number[]).toSorted((x, y) => x - y), [...Array(20).keys()]);
  }),
]);
