/**
 * Encryption in place (SPEC 9.2, `mcpstate encrypt` and `keys rotate`), on
 * every backend with the `content` group: a plaintext user's every stored
 * copy — records live and expired, the trash, changelogs, the results kept
 * for idempotency keys, a state large enough to be chunked — is sealed, and
 * a store with keys then answers every read as the plaintext store did; a
 * rewrite is a compare-and-set that a concurrent write wins; rotation
 * rewraps data keys so the old key can leave the ring.
 *
 * The group runs last: `encrypt` seals the plaintext of every user of the
 * data it runs on, as the command does.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Append, type HandleStore, type HandleStoreOptions, Increment, SetKey } from "../../mod.ts";
import type { StoredContent } from "../../src/backend.ts";
import { isSealed } from "../../src/keyring.ts";
import { DAY, freshUser, rejectsWith } from "../_helpers.ts";
import { type ContractContext, group, step } from "./_group.ts";
import { newKek } from "./encryption.ts";

/** A store on the target's data with these keys (or none), on the suite's clock. */
function storeWith(c: ContractContext, keys?: Record<string, string>, current?: string) {
  const options: HandleStoreOptions = { clock: c.clock.fn };
  if (keys) options.encryption = { keys, ...(current ? { current } : {}) };
  return c.openStore(options);
}

/** Every stored copy of `user`, from the backend's content scan. */
async function copiesOf(c: ContractContext, user: string): Promise<StoredContent[]> {
  const out: StoredContent[] = [];
  let after: string | undefined;
  do {
    const page = await c.backend.content!.scan(after ? { after, limit: 50 } : { limit: 50 });
    out.push(...page.items.filter((i) => i.user === user));
    after = page.next ?? undefined;
  } while (after !== undefined);
  return out;
}

/** Whether a copy is sealed, or an entry that may stay clear. */
function sealedOrClear(item: StoredContent): boolean {
  if (item.texts.every(isSealed)) return true;
  return item.kind === "entry" && /"op":"(share|unshare|transfer)"/.test(item.texts[0]!);
}

/** A plaintext user with every kind of stored copy; what its store answers. */
async function plaintextUser(c: ContractContext, store: HandleStore, user: string) {
  // Expired first: the idempotency keys below stay within their day.
  const h2 = await store.mint("doc", { soon: "expired" }, { user, ttlDays: 1 });
  c.clock.advance(2 * DAY);
  const once = { user, idempotencyKey: `mint-${user}` };
  const h1 = await store.mint("doc", { title: "secret", notes: ["n1"] }, once);
  await store.save(h1, { title: "secret 2", notes: ["n1"] }, { user, expectVersion: 1 });
  await store.patch(h1, [Append("notes", "n2")], { user });
  const patchOnce = { user, idempotencyKey: `patch-${user}` };
  await store.patch(h1, [Increment("", "count")], patchOnce);
  if (c.capabilities.grants) await store.share(h1, { user, to: freshUser("to"), rights: "read" });
  const h3 = await store.mint("doc", { bin: "trashed" }, { user });
  await store.patch(h3, [SetKey("", "more", 1)], { user });
  await store.revoke(h3, { user });
  const h4 = await store.mint("doc", { blob: "x".repeat(150_000) }, { user });
  const reads = async (s: HandleStore) => ({
    h1: await s.get(h1, { user }),
    changes: await s.changesSince(h1, 0, { user }),
    at2: await s.stateAt(h1, 2, { user }),
    h4: (await s.get(h4, { user })).state,
    list: await s.list(user, { includeExpired: true, previews: true }),
    trash: (await s.trash(user)).handles,
    mint: await s.mint("doc", { title: "secret", notes: ["n1"] }, once),
    patch: await s.patch(h1, [Increment("", "count")], patchOnce),
  });
  return { h1, h2, h3, h4, reads };
}

export default group("encrypt in place", ["keys", "content"], [
  step(
    "encrypt seals every copy of a plaintext user; a store with keys reads all as before",
    async (c) => {
      const user = freshUser("plain");
      await using plain = await storeWith(c);
      const { h2, h3, reads } = await plaintextUser(c, plain, user);
      const before = await reads(plain);
      const kinds = new Set((await copiesOf(c, user)).map((i) => i.kind));
      assert.deepEqual([...kinds].sort(), ["entry", "record", "result", "trash"]);
      await using sealed = await storeWith(c, { e1: newKek() });
      await rejectsWith(() => sealed.get(before.h1.handle, { user }), "encryption_error");
      const counts = await sealed.maintenance.encrypt();
      assert.equal(counts.left, 0, JSON.stringify(counts));
      assert.ok(counts.sealed.record >= 3 && counts.sealed.trash >= 1, JSON.stringify(counts));
      assert.ok(counts.sealed.entry >= 4 && counts.sealed.result >= 2, JSON.stringify(counts));
      const copies = await copiesOf(c, user);
      assert.deepEqual(copies.filter((i) => !sealedOrClear(i)), []);
      assert.deepEqual(await reads(sealed), before);
      await rejectsWith(() => sealed.get(h2, { user }), "handle_expired");
      assert.deepEqual((await sealed.restore(h3, { user })).state, { bin: "trashed", more: 1 });
      await rejectsWith(() => plain.get(h3, { user }), "encryption_error");
      const again = await sealed.maintenance.encrypt();
      assert.equal(again.left, 0);
      assert.equal(Object.values(again.sealed).reduce((a, b) => a + b, 0), 0);
      assert.ok(again.already >= copies.length - again.clear);
      const census = await sealed.maintenance.census();
      assert.deepEqual(census.plaintext, { record: 0, trash: 0, entry: 0, result: 0 });
      assert.ok((census.keyIds.e1 ?? 0) >= 1);
    },
  ),
  step(
    "a write between a copy's read and its rewrite wins: the rewrite changes nothing",
    async (c) => {
      const user = freshUser("cas");
      await using plain = await storeWith(c);
      const h = await plain.mint("doc", { n: 0 }, { user });
      const content = c.backend.content!;
      const [record] = (await copiesOf(c, user)).filter((i) => i.kind === "record");
      assert.ok(record);
      await plain.patch(h, [Increment("", "n")], { user });
      const out = await content.replace(record, record.texts.map((t) => `${t} `));
      assert.equal(out.replaced, false);
      assert.ok(out.current);
      assert.deepEqual(JSON.parse(out.current.texts[0]!), { n: 1 });
      const [entry] = (await copiesOf(c, user)).filter((i) => i.kind === "entry");
      assert.ok(entry);
      const stale = { ...entry, texts: ["{}"] };
      assert.equal((await content.replace(stale, ["{}"])).replaced, false);
      assert.deepEqual((await plain.get(h, { user })).state, { n: 1 });
      assert.equal((await plain.get(h, { user })).version, 2);
      // The current copy rewrites; nothing but its text moves, and usage follows its size.
      const usage = c.capabilities.quotas ? await plain.usage(user) : null;
      const padded = out.current.texts.map((t, i) => (i === 0 ? `${t}    ` : t));
      assert.equal((await content.replace(out.current, padded)).replaced, true);
      const after = await plain.get(h, { user });
      assert.deepEqual([after.state, after.version], [{ n: 1 }, 2]);
      if (usage) assert.equal((await plain.usage(user)).bytes, usage.bytes + 4);
      const since = await plain.changesSince(h, 0, { user });
      assert.ok(!since.truncated && since.changes.length === 2);
    },
  ),
  step("keys rotate rewraps every data key; then the old key can leave the ring", async (c) => {
    const user = freshUser("rotate");
    const [k1, k2] = [newKek(), newKek()];
    await using old = await storeWith(c, { r1: k1 });
    const h = await old.mint("doc", { a: "rotated" }, { user });
    await using both = await storeWith(c, { r2: k2, r1: k1 });
    const counts = await both.maintenance.rotateKeys();
    assert.equal(counts.current, "r2");
    assert.ok(counts.rewrapped >= 1);
    assert.equal((await c.backend.keys!.get(user))?.keyId, "r2");
    const again = await both.maintenance.rotateKeys();
    assert.equal(again.rewrapped, 0);
    await using fresh = await storeWith(c, { r2: k2 });
    assert.deepEqual((await fresh.get(h, { user })).state, { a: "rotated" });
  }),
  step("encrypt and keys rotate need keys: without them, invalid_argument", async (c) => {
    await using plain = await storeWith(c);
    await rejectsWith(() => plain.maintenance.encrypt(), "invalid_argument");
    await rejectsWith(() => plain.maintenance.rotateKeys(), "invalid_argument");
  }),
]);
