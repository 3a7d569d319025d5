/**
 * The users' wrapped data keys (the backend's `keys` group, SPEC 9.2) on
 * PostgreSQL (a random schema of its own, dropped at the end), a real
 * redis-server, a real Redis Cluster (both started by `tests/_redis.ts`) and
 * a Deno KV file: the same steps on each, through backends opened by URL.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { Redis } from "ioredis";
import type { Backend, KeyPrimitives, StoredKey } from "../src/backend.ts";
import { openBackend } from "../src/url.ts";
import { freshUser } from "./_helpers.ts";
import { startRedis, startRedisCluster } from "./_redis.ts";

const PG_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";

/** A key with a recognisable id. */
function key(keyId: string, wrapped = crypto.randomUUID()): StoredKey {
  return { keyId, wrapped };
}

/** The keys group of `b` (every engine here has one). */
function keysOf(b: Backend): KeyPrimitives {
  assert.ok(b.keys, "the backend has a keys group");
  return b.keys;
}

/** Every user `list` visits, paging by `limit`; fails on a user met twice. */
async function listAll(k: KeyPrimitives, limit: number): Promise<Map<string, StoredKey>> {
  const out = new Map<string, StoredKey>();
  let after: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await k.list(after === undefined ? { limit } : { after, limit });
    assert.ok(page.length <= limit);
    for (const { user, key } of page) {
      assert.ok(!out.has(user), `user ${user.slice(0, 40)} listed twice`);
      out.set(user, key);
    }
    if (page.length < limit) return out;
    after = page[page.length - 1]!.user;
  }
  throw new Error("list did not end");
}

/** The steps every engine runs; `open` opens another backend on the same storage. */
async function keySteps(t: Deno.TestContext, open: () => Promise<Backend>): Promise<void> {
  await using a = { b: await open(), [Symbol.asyncDispose]: () => a.b.close() };
  await using b = { b: await open(), [Symbol.asyncDispose]: () => b.b.close() };
  const ka = keysOf(a.b), kb = keysOf(b.b);

  await t.step("get of a user without a key is null", async () => {
    assert.equal(await ka.get(freshUser()), null);
  });

  await t.step("create twice answers the first", async () => {
    const user = freshUser();
    const first = key("kek-1");
    assert.deepEqual(await ka.create(user, first, Date.now()), first);
    assert.deepEqual(await ka.create(user, key("kek-2"), Date.now()), first);
    assert.deepEqual(await kb.get(user), first);
  });

  await t.step("concurrent creates from two backends agree", async () => {
    for (let i = 0; i < 10; i++) {
      const user = freshUser("race");
      const [x, y] = await Promise.all([
        ka.create(user, key("kek-a"), Date.now()),
        kb.create(user, key("kek-b"), Date.now()),
      ]);
      assert.deepEqual(x, y);
      assert.deepEqual(await ka.get(user), x);
    }
  });

  await t.step("rewrap is a compare-and-set", async () => {
    const user = freshUser();
    const k1 = await ka.create(user, key("kek-1"), Date.now());
    const k2 = key("kek-2");
    assert.equal(await ka.rewrap(user, key("kek-1"), k2), false, "a wrong `from` is refused");
    assert.equal(await ka.rewrap(user, { ...k1, keyId: "kek-x" }, k2), false);
    assert.equal(await ka.rewrap(user, k1, k2), true);
    assert.deepEqual(await kb.get(user), k2);
    assert.equal(await kb.rewrap(user, k1, key("kek-3")), false, "a stale `from` is refused");
    assert.deepEqual(await ka.get(user), k2);
    assert.equal(await ka.rewrap(freshUser(), k1, k2), false, "no key: nothing to rewrap");
    const racers = await Promise.all([
      ka.rewrap(user, k2, key("kek-a")),
      kb.rewrap(user, k2, key("kek-b")),
    ]);
    assert.equal(racers.filter(Boolean).length, 1, "one of two racing rewraps wins");
  });

  await t.step("delete", async () => {
    const user = freshUser();
    await ka.create(user, key("kek-1"), Date.now());
    assert.equal(await kb.delete(user), true);
    assert.equal(await ka.get(user), null);
    assert.equal(await ka.delete(user), false);
    const again = key("kek-2");
    assert.deepEqual(await ka.create(user, again, Date.now()), again, "a new key after a delete");
  });

  await t.step("list pages visit every user once", async () => {
    const users = [
      ...Array.from({ length: 23 }, (_, i) => freshUser(`list${i % 5}`)),
      "ü-" + crypto.randomUUID(),
      "x".repeat(500) + crypto.randomUUID(), // a digest on Deno KV
      "\u{1F600}-" + crypto.randomUUID(), // astral (users are well-formed: the store checks)
    ];
    const want = new Map<string, StoredKey>();
    for (const u of users) want.set(u, await ka.create(u, key(`kek-${u.length}`), Date.now()));
    for (const limit of [1, 4, 7, 1000]) {
      const got = await listAll(kb, limit);
      for (const [u, k] of want) {
        assert.deepEqual(got.get(u), k, `limit ${limit}: ${u.slice(0, 30)}`);
      }
      for (const [u, k] of got) assert.deepEqual(await ka.get(u), k);
    }
  });

  await t.step("after erasure.erase(user) the key is gone", async () => {
    const user = freshUser("erased"), other = freshUser("kept");
    await ka.create(user, key("kek-1"), Date.now());
    const kept = await ka.create(other, key("kek-1"), Date.now());
    assert.ok(a.b.erasure);
    await a.b.erasure.erase(user, Date.now());
    assert.equal(await ka.get(user), null);
    assert.equal(await kb.get(user), null);
    assert.deepEqual(await ka.get(other), kept);
    const listed = await listAll(ka, 1000);
    assert.ok(!listed.has(user));
    assert.ok(listed.has(other));
  });
}

Deno.test("keys: postgresql", async (t) => {
  const schema = `mcpstate_test_keys_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const url = new URL(PG_URL);
  url.searchParams.set("schema", schema);
  const admin = postgres(PG_URL, { max: 2, onnotice: () => {}, connect_timeout: 5 });
  try {
    await keySteps(t, () => openBackend(url.toString()));
    await t.step("an existing schema without the table gets it", async () => {
      await admin.unsafe(`DROP TABLE "${schema}".data_keys`);
      const b = await openBackend(url.toString());
      try {
        const user = freshUser(), k = key("kek-1");
        assert.deepEqual(await keysOf(b).create(user, k, Date.now()), k);
      } finally {
        await b.close();
      }
    });
  } finally {
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
});

Deno.test("keys: redis standalone", async (t) => {
  await using srv = await startRedis();
  await keySteps(t, () => openBackend(srv.url));
});

Deno.test("keys: redis cluster (3 masters + 3 replicas)", async (t) => {
  await using c = await startRedisCluster({ nodeTimeoutMs: 1000 });
  await keySteps(t, () => openBackend(c.url));
  await t.step("the keys listed lived on more than one primary", async () => {
    const holding = [];
    for (const m of await c.masters()) {
      const r = new Redis(m.port, m.host, { lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await r.connect();
        const [, found] = await r.scan("0", "MATCH", "*}:k", "COUNT", 100_000);
        if (found.length > 0) holding.push(m.port);
      } finally {
        r.disconnect();
      }
    }
    assert.ok(holding.length > 1, `data keys on ${holding.length} primaries`);
  });
});

Deno.test("keys: deno kv", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    await keySteps(t, () => openBackend(`denokv:///${dir}/keys.kv`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
