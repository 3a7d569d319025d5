/**
 * The key ring of encryption at rest (`src/keyring.ts`): key lists as the
 * environment and key files give them, data keys wrapped per user, and
 * content sealed to its `(user, handle)`, through WebCrypto.
 *
 * @module
 */

import assert from "node:assert/strict";
import { EncryptionError, InvalidArgument } from "../mod.ts";
import { isSealed, KeyRing, open, parseKeyList, seal } from "../src/keyring.ts";

const kek = () => crypto.getRandomValues(new Uint8Array(32)).toBase64();

async function rejects(p: Promise<unknown>, reason: string): Promise<EncryptionError> {
  const e = await p.then(() => null, (e) => e);
  assert.ok(e instanceof EncryptionError, `expected encryption_error, got ${e}`);
  assert.equal(e.code, "encryption_error");
  assert.equal(e.details.reason, reason);
  return e;
}

Deno.test("keyring: a key list is id:base64 entries, by comma or line, the first current", () => {
  const a = kek(), b = kek();
  assert.deepEqual(parseKeyList(`k1:${a},k2:${b}`), { keys: { k1: a, k2: b }, current: "k1" });
  assert.deepEqual(parseKeyList(`# keys\nk2:${b}\n\nk1:${a}\n`), {
    keys: { k2: b, k1: a },
    current: "k2",
  });
  for (const bad of ["", "# only a comment", `no-colon${a}`, `:${a}`, `k1:${a},k1:${b}`]) {
    assert.throws(() => parseKeyList(bad), InvalidArgument, bad);
  }
});

Deno.test("keyring: a ring takes only 256-bit keys and a current id it holds", async () => {
  await KeyRing.from({ keys: { k1: kek() } });
  await KeyRing.from({ keys: { k1: crypto.getRandomValues(new Uint8Array(32)) } });
  for (
    const options of [
      { keys: {} },
      { keys: { k1: "c2hvcnQ=" } },
      { keys: { k1: "not base64 at all!" } },
      { keys: { k1: new Uint8Array(16) } },
      { keys: { "bad id": kek() } },
      { keys: { k1: kek() }, current: "k2" },
    ]
  ) {
    await assert.rejects(KeyRing.from(options), InvalidArgument, JSON.stringify(options));
  }
});

Deno.test("keyring: content opens only for its user and handle, and only unchanged", async () => {
  const ring = await KeyRing.from({ keys: { k1: kek() } });
  const { key } = await ring.newDataKey("alice");
  const text = '{"notes":"arm64 wins","\\u0000":"\\ud800"}';
  const sealed = await seal(key, "alice", "research_k3v9x2mq", text);
  assert.ok(isSealed(sealed));
  assert.ok(!sealed.includes("arm64"));
  assert.equal(await open(key, "alice", "research_k3v9x2mq", sealed), text);
  assert.notEqual(
    await seal(key, "alice", "research_k3v9x2mq", text),
    sealed,
    "a fresh IV each time",
  );
  await rejects(open(key, "alice", "research_other00", sealed), "tampered");
  await rejects(open(key, "bob", "research_k3v9x2mq", sealed), "tampered");
  const flipped = sealed.slice(0, -3) + (sealed.at(-3) === "A" ? "B" : "A") + sealed.slice(-2);
  await rejects(open(key, "alice", "research_k3v9x2mq", flipped), "tampered");
  await rejects(open(key, "alice", "research_k3v9x2mq", text), "tampered");
});

Deno.test("keyring: a data key opens under its KEK for its user; rotation rewraps under the current one", async () => {
  const k1 = kek(), k2 = kek();
  const old = await KeyRing.from({ keys: { k1 } });
  const { key, stored } = await old.newDataKey("alice");
  assert.equal(stored.keyId, "k1");
  const sealed = await seal(key, "alice", "h_aaaaaaaa", "{}");
  await rejects(old.openDataKey("bob", stored), "tampered");
  const both = await KeyRing.from({ keys: { k2, k1 } });
  assert.equal(both.current, "k2");
  const rotated = await both.rewrap("alice", stored);
  assert.equal(rotated.keyId, "k2");
  assert.deepEqual(await both.rewrap("alice", rotated), rotated, "already current: unchanged");
  const onlyNew = await KeyRing.from({ keys: { k2 } });
  const e = await rejects(onlyNew.openDataKey("alice", stored), "unknown_key");
  assert.equal(e.details.key_id, "k1");
  const reopened = await onlyNew.openDataKey("alice", rotated);
  assert.equal(await open(reopened, "alice", "h_aaaaaaaa", sealed), "{}");
});
