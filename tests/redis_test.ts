/**
 * The Redis backend against real servers started by `tests/_redis.ts`: the
 * contract suite on a standalone server (whose writers in two processes must
 * make Redis retry compare-and-sets) and on a 3+3 Redis Cluster, then the
 * faults — kill -9 with `appendfsync always`, a master failover with the
 * replica wait on, dropped connections — hostile user names and handles, the
 * key layout with its TTLs, and the change feed (pub/sub) and leases across
 * instances and restarts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { applyPatch, type Operation } from "rfc6902";
import { Redis } from "ioredis";
import {
  Append,
  HandleStore,
  type HandleStoreOptions,
  Increment,
  McpStateError,
  SetKey,
} from "../mod.ts";
import { openBackend } from "../src/url.ts";
import type { AuditStep, Backend, ChangeEntry, GrantRecord, HandleRecord } from "../src/backend.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { RedisBackend } from "../src/backends/redis.ts";
import { S } from "../src/backends/redis/_scripts.ts";
import { openClient, parseRedisUrl } from "../src/backends/redis/_url.ts";
import {
  byUtf8,
  DAY,
  eventually,
  FakeClock,
  freshUser,
  recordOf,
  rejectsWith,
  sleep,
  within,
} from "./_helpers.ts";
import { backendContract } from "./contract/mod.ts";
import {
  freePort,
  type RedisClusterHandle,
  type RedisServer,
  startRedis,
  startRedisCluster,
} from "./_redis.ts";

// One standalone server and one cluster, shared by the tests below, started on
// first use and stopped by the last test of this file.
let standalone: Promise<RedisServer> | undefined;
let cluster: Promise<RedisClusterHandle> | undefined;
const server = () => standalone ??= startRedis();
const redisCluster = () => cluster ??= startRedisCluster({ nodeTimeoutMs: 1000 });

Deno.test("contract: redis", async (t) => {
  const srv = await server();
  await backendContract(t, {
    open: () => openBackend(srv.url),
    url: srv.url,
    inspect: {
      beforeWriters: async () => void await srv.cli("CONFIG", "RESETSTAT"),
      afterWriters: async ({ patches }) => {
        // More scripts ran than patches landed: the processes really did race.
        const stats = await srv.cli("INFO", "commandstats");
        const calls = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
        assert.ok(calls > patches, `only ${calls} scripts for ${patches} patches: none retried`);
      },
    },
  });
});

Deno.test("contract: redis cluster (3 masters + 3 replicas)", async (t) => {
  const c = await redisCluster();
  await backendContract(t, { open: () => openBackend(c.url) });
});

/** The backend of each store {@link openStore} opened, for the engine-level checks. */
const backends = new WeakMap<HandleStore, RedisBackend>();

/** A store on a Redis URL, keeping the backend it runs on (see {@link backendOf}). */
async function openStore(url: string, options: HandleStoreOptions = {}): Promise<HandleStore> {
  const backend = await RedisBackend.fromUrl(url);
  const store = new HandleStore(backend, options);
  backends.set(store, backend);
  return store;
}

function backendOf(store: HandleStore): RedisBackend {
  const backend = backends.get(store);
  assert.ok(backend, "a store opened with openStore");
  return backend;
}

/** Runs `run` as a step on the standalone server, then as one on the cluster, with its primaries. */
async function onBoth(
  t: Deno.TestContext,
  run: (url: string, primaries: () => Promise<RedisServer[]>) => Promise<void>,
): Promise<void> {
  await t.step("standalone", async () => {
    const srv = await server();
    await run(srv.url, () => Promise.resolve([srv]));
  });
  await t.step("cluster", async () => {
    const c = await redisCluster();
    await run(c.url, () => c.masters());
  });
}

/**
 * A consistency checker that knows nothing of the backend's code: for the
 * keys of one user (KEYS), every record hash is whole (state, parseable
 * metadata, index member), sits in the user's
 * index under the member it names, and in the expiry set exactly when it
 * expires; every index entry names its record. A changelog (`l`, `e<v>`,
 * `a<v>` in the record hash) runs without a gap from `lo` to the record's
 * version, each `a<v>` the least `at` of entries `v` and later (`l` holds a
 * floor of the least); a trashed
 * record (`t:`) is a whole record hash plus `u`, expiring, and not indexed;
 * a lease (`l:`) is `expiresAt`, tab, holder, expiring, and a record hash
 * (live) with a lease key holds the same lease in `L`.
 * Returns the violations.
 */
const CHECKER = `
local base, errs = ARGV[1], {}
local function err(s) errs[#errs + 1] = s end
for _, key in ipairs(KEYS) do
  local rest = string.sub(key, #base + 1)
  local kind = string.sub(rest, 1, 2)
  if kind == 'r:' or kind == 't:' then
    local h, f, n = redis.call('HGETALL', key), {}, 0
    for i = 1, #h, 2 do f[h[i]] = h[i + 1]; n = n + 1 end
    local want = 3
    if not f.d or not f.m or not f.x then err(key .. ' lacks one of m, d, x') end
    if f.d and f.m and string.sub(f.d, 1, #f.m + 1) ~= f.m .. '\\n' then
      err(key .. ' has a state that disagrees with its metadata')
    end
    -- The writer, then optionally the schema version and 'P' + the preview.
    local k, v, c, u, e, w, tail = string.match(f.m or '',
      '^([a-z][a-z0-9-]*)\\t(%d+)\\t(-?%d+)\\t(-?%d+)\\t(-?%d*)\\t([^\\t]*)(.*)$')
    if not k then err(key .. ' has malformed metadata ' .. tostring(f.m)) end
    if tail and tail ~= '' and not string.match(tail, '^\\t%d+$')
        and not string.match(tail, '^\\t%d*\\tP[^\\t\\n]*$') then
      err(key .. ' has a malformed schema version or preview ' .. tail)
    end
    if w ~= '' and (not w or string.sub(w, 1, 1) ~= '"') then err(key .. ' writer ' .. tostring(w)) end
    if f.l then
      want = want + 1
      local lo, hi, last, floor = string.match(f.l,
        '^(%d+)\\t(%d+)\\t(-?[%d.]+)\\t(-?[%d.]+)$')
      lo, hi = tonumber(lo), tonumber(hi)
      if not lo or lo > hi or hi ~= tonumber(v) then
        err(key .. ' log ' .. f.l .. ' does not end at version ' .. tostring(v))
      else
        want = want + 2 * (hi - lo + 1)
        local least = nil
        for i = hi, lo, -1 do
          local at = string.match(f['e' .. i] or '', '^(-?[%d.]+)\\t')
          if not at then err(key .. ' lacks entry ' .. i) else
            if not least or tonumber(at) < least then least = tonumber(at) end
            if tonumber(f['a' .. i]) ~= least then err(key .. ' a' .. i .. ' is not the least at') end
            if i == hi and tonumber(last) ~= tonumber(at) then err(key .. ' l names a wrong at') end
            if i == lo and tonumber(floor) > least then err(key .. ' l has a floor above a' .. i) end
          end
        end
      end
    end
    if kind == 't:' then
      want = want + 1
      if not tonumber(f.u or '') then err(key .. ' is trash without u') end
      if redis.call('PTTL', key) <= 0 then err(key .. ' is trash that never expires') end
    elseif f.x and e then
      if redis.call('ZSCORE', base .. 'i', f.x) ~= '0' then err(key .. ' is not indexed') end
      local sc = redis.call('ZSCORE', base .. 'x', f.x)
      if e == '' and sc then err(key .. ' never expires but has an expiry entry') end
      if e ~= '' and (not sc or tonumber(sc) ~= tonumber(e)) then
        err(key .. ' expiry entry ' .. tostring(sc) .. ' ~= ' .. e)
      end
      if string.sub(f.x, 15) ~= string.sub(rest, 3) then err(key .. ' names member ' .. f.x) end
    end
    if f.L then
      want = want + 1
      if not string.match(f.L, '^%d+\\t.') then err(key .. ' has a malformed lease copy') end
    end
    if kind == 'r:' then
      local lease = redis.call('GET', base .. 'l:' .. string.sub(rest, 3))
      if lease and lease ~= f.L then
        err(key .. ' has lease copy ' .. tostring(f.L) .. ', not ' .. lease)
      end
    end
    if n ~= want then err(key .. ' has ' .. n .. ' fields, not ' .. want) end
  elseif kind == 'l:' then
    local v = redis.call('GET', key) -- false: it lapsed since the scan
    if v and not string.match(v, '^%d+\\t.') then err(key .. ' is a malformed lease ' .. v) end
    if v and redis.call('PTTL', key) <= 0 then err(key .. ' is a lease that never expires') end
  elseif rest == 'i' then
    for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      if redis.call('HGET', base .. 'r:' .. string.sub(m, 15), 'x') ~= m then
        err('orphan index entry ' .. m)
      end
    end
  elseif rest ~= 'x' and string.sub(rest, 1, 2) ~= 'd:' then
    err('unexpected key ' .. key)
  end
end
return errs
`;

/**
 * Runs {@link CHECKER} on every user's keys under `prefix`, found by
 * `redis-cli --scan` on each primary (with `grants`, leaving the keys of
 * grants out).
 *
 * @returns How many record hashes there are.
 */
async function assertConsistent(
  primaries: RedisServer[],
  prefix: string,
  grants = false,
): Promise<number> {
  const byBase = new Map<string, string[]>();
  const grantKey =
    /^(.*\{[A-Za-z0-9_-]+\}:(g|go|gc):[^{}]+|.*\{[A-Za-z0-9_-]+\}:gt|[^{}]*g[ai]:[^{}]+)$/;
  for (const node of primaries) {
    for (const key of (await node.cli("--scan", "--pattern", `${prefix}*`)).split("\n")) {
      // A user's data key (`P{T}:k`) is no record's.
      if (key === "" || (grants && grantKey.test(key)) || /\}:k$/.test(key)) continue;
      const m = /^(.*\{[A-Za-z0-9_-]+\}:)([rtl]:[^{}]+|i|x|d:[^{}:]+:[A-Za-z0-9_-]+)$/.exec(key);
      assert.ok(m, `unexpected key ${key}`);
      const list = byBase.get(m[1]!) ?? [];
      list.push(key);
      byBase.set(m[1]!, list);
    }
  }
  let records = 0;
  for (const [base, keys] of byBase) {
    records += keys.filter((k) => k.startsWith(`${base}r:`)).length;
    const errs = await primaries[0]!.cli("-c", "EVAL", CHECKER, keys.length, ...keys, base);
    assert.equal(errs, "", `inconsistent keys of ${base}:\n${errs}`);
  }
  return records;
}

Deno.test("redis: listUsers() gives users in the byte order of their UTF-8 names", async (t) => {
  await onBoth(t, async (url) => {
    const backend = await RedisBackend.fromUrl(url);
    try {
      const names = ["zed", "Émile", "adam", "\u{1F600}", "\u{FFFD}", "Zoë", "émile"];
      const tag = crypto.randomUUID();
      const ctx = { now: Date.now(), graceMs: 0 };
      for (const u of names) {
        await backend.insert(`${tag}${u}`, recordOf("n_aaaaaaaa"), ctx);
      }
      const listed = (await backend.records.users({ limit: 100_000 })).filter((u) =>
        u.startsWith(tag)
      );
      assert.deepEqual(listed, names.map((u) => `${tag}${u}`).sort(byUtf8));
    } finally {
      await backend.close();
    }
  });
});

Deno.test("redis: malformed URLs are invalid_argument, an unreachable server backend_error, credentials redacted", async () => {
  for (
    const url of [
      "redis://:s3cret@h1:1,h2:2",
      "redis://:s3cret@host:99999",
      "redis://:s3cret@host:6379/abc",
      "redis+cluster://:s3cret@h1:1,h2:2/3",
      "redis://:s3cret@host:6379?wiat=1",
      "redis://:s3cret@host:6379?wait=-1",
      "redis://:s3cret@host:6379?prefix=a{b}",
      "redis://:s3cret@",
    ]
  ) {
    const e = await rejectsWith(() => RedisBackend.fromUrl(url), "invalid_argument");
    assert.ok(!e.message.includes("s3cret"), e.message);
    assert.match(e.message, /redis\+cluster:\/\//);
  }
  const port = freePort();
  const started = Date.now();
  const e = await rejectsWith(
    () => HandleStore.fromUrl(`redis://app:s3cret@127.0.0.1:${port}/0?connectTimeout=2000`),
    "backend_error",
  );
  assert.ok(Date.now() - started < 5000);
  assert.ok(!e.message.includes("s3cret"), e.message);
  assert.match(e.message, /redis:\/\/\*\*\*@127\.0\.0\.1/);
});

Deno.test("redis: hostile user names and handles cannot read or clobber other users' keys", async (t) => {
  const users = [
    "index",
    "i",
    "r",
    "x",
    "a:b",
    "{x}",
    "}",
    "{",
    "{}",
    "ü",
    "\u{1F600}",
    "\ud800",
    "\ufffd",
    "u",
    "alice",
    "alice}:i",
    "uYWxpY2U",
    "{uYWxpY2U}",
    "*",
    "?",
    "[a]",
    "\\",
    " ",
    "\n",
    "x".repeat(1024),
  ];
  const run = async (url: string, primaries: () => Promise<RedisServer[]>) => {
    const prefix = `hostile-${crypto.randomUUID()}:`;
    const store = await openStore(`${url}?prefix=${prefix}`);
    const backend = backendOf(store);
    try {
      // The store takes well-formed names; the backend below takes any string.
      const named = users.filter((u) => u.isWellFormed());
      const owned = new Map<string, string[]>();
      const keyOf = (user: string) => `key-${users.indexOf(user)}`;
      for (const user of named) {
        owned.set(user, [
          await store.mint("note", { owner: user, i: 0 }, { user }),
          await store.mint("note", { owner: user, i: 1 }, { user, idempotencyKey: keyOf(user) }),
        ]);
      }
      for (const [a, handles] of owned) {
        const listed = (await store.list(a)).map((i) => i.handle).sort();
        assert.deepEqual(listed, [...handles].sort(), `list of ${JSON.stringify(a)}`);
        for (const b of named) {
          if (b === a) continue;
          const h = handles[0]!;
          await rejectsWith(() => store.get(h, { user: b }), "handle_not_found");
          await rejectsWith(
            () => store.patch(h, [SetKey("", "owner", b)], { user: b }),
            "handle_not_found",
          );
        }
      }
      // The clobbering writes of one attacker against every other user.
      for (const [a, handles] of owned) {
        if (a === "alice") continue;
        await rejectsWith(
          () => store.save(handles[1]!, { owner: "alice" }, { user: "alice", expectVersion: 1 }),
          "handle_not_found",
        );
        await rejectsWith(
          () => store.touch(handles[1]!, { user: "alice", ttlDays: 1 }),
          "handle_not_found",
        );
        await rejectsWith(() => store.revoke(handles[1]!, { user: "alice" }), "handle_not_found");
        // The same idempotency key from another user is another call.
        const again = await store.mint("note", { owner: "alice" }, {
          user: "alice",
          idempotencyKey: keyOf(a),
        });
        assert.ok(!handles.includes(again));
        await store.revoke(again, { user: "alice" });
      }
      // Handle strings that spell key syntax, encodings or other users' handles.
      const aliceHandle = owned.get("alice")![0]!;
      const hostileHandles = [
        `${aliceHandle}:x`,
        `${aliceHandle}}`,
        `{${aliceHandle}}`,
        `~${aliceHandle}`,
        `~u${btoa(aliceHandle)}`,
        "i",
        "x",
        "../r",
        "note_AAAAAAAA",
        "ü",
        "\ud800",
        "*",
      ];
      for (const h of hostileHandles.filter((h) => h.isWellFormed())) {
        for (const user of ["alice", "bob"]) {
          await rejectsWith(() => store.get(h, { user }), "handle_not_found");
        }
      }
      // Straight at the backend: any string as user (the empty one too) and handle.
      const now = Date.now();
      const rec = (handle: string, owner: string): HandleRecord => ({
        handle,
        kind: "note",
        state: JSON.stringify({ owner }),
        version: 1,
        createdAt: now,
        updatedAt: now,
        expiresAt: null,
        lastWriter: null,
      });
      const ctx = { now, graceMs: 0 };
      for (const h of [...hostileHandles, aliceHandle]) {
        assert.deepEqual(await backend.insert("", rec(h, "empty"), ctx), { inserted: true });
        assert.deepEqual(await backend.insert("bob", rec(h, "bob"), ctx), { inserted: true });
        assert.equal(JSON.parse((await backend.read("", h))!.state).owner, "empty");
      }
      assert.deepEqual(await backend.insert("", rec(aliceHandle, "again"), ctx), {
        inserted: false,
      });
      assert.equal((await backend.list("", { limit: 100 })).length, hostileHandles.length + 1);
      // A lone surrogate and the replacement character are different users.
      for (const odd of ["\ud800", "\udfff", "a\ud800b"]) {
        const h = owned.get("\ufffd")![0]!;
        assert.equal(await backend.read(odd, h), null);
        assert.deepEqual(await backend.insert(odd, rec(h, odd), ctx), { inserted: true });
        assert.equal(JSON.parse((await backend.read(odd, h))!.state).owner, odd);
        assert.equal(JSON.parse((await backend.read("\ufffd", h))!.state).owner, "\ufffd");
      }
      // Nothing of anyone's changed.
      for (const [user, handles] of owned) {
        for (const [i, h] of handles.entries()) {
          const s = await store.get(h, { user });
          assert.deepEqual(s.state, { owner: user, i });
          assert.equal(s.version, 1);
          // Every key of a user lives in one hash slot.
          const tag = (k: string) => /\{[^}]*\}/.exec(k)?.[0];
          assert.equal(tag(backend.keyOf(user, h)), tag(backend.keyOf(user)));
        }
      }
      await assertConsistent(await primaries(), prefix);
    } finally {
      await store.close();
    }
  };
  await onBoth(t, run);
});

Deno.test("redis: Redis reclaims expired records after the grace period; indexes are pruned; idempotency records expire in 24 h", async () => {
  const srv = await server();
  // Long enough that the checks below (several redis-cli runs) finish before it lapses, on a busy machine too.
  const SHORT_MS = 2_000;
  const prefix = `ttl-${crypto.randomUUID()}:`;
  const clock = new FakeClock();
  const store = await openStore(`${srv.url}?prefix=${prefix}`, {
    clock: clock.fn,
    expiredGraceDays: 0,
  });
  const graced = await HandleStore.fromUrl(`${srv.url}?prefix=${prefix}`, { clock: clock.fn });
  try {
    const backend = backendOf(store);
    assert.equal(backend.reclaimsExpired, true);
    const user = freshUser(), gone = freshUser();
    const short = await store.mint("t", { a: 1 }, { user, ttlDays: SHORT_MS / DAY });
    const keep = await store.mint("t", { a: 2 }, { user, idempotencyKey: "k1" });
    const lone = await store.mint("t", { a: 3 }, { user: gone, ttlDays: SHORT_MS / DAY });
    const week = await graced.mint("t", { a: 4 }, { user, ttlDays: 1 });
    const pttl = (key: string) => srv.cli("PTTL", key).then(Number);
    assert.ok(await pttl(backend.keyOf(user, short)) > 0);
    assert.ok(await pttl(backend.keyOf(user, short)) <= SHORT_MS);
    // Its changelog is in the same hash, so it goes with the record below.
    assert.equal(await srv.cli("HEXISTS", backend.keyOf(user, short), "e1"), "1");
    const weekTtl = await pttl(backend.keyOf(user, week));
    assert.ok(weekTtl > 8 * DAY - 5000 && weekTtl <= 8 * DAY, `ttl+grace, got ${weekTtl}`);
    assert.equal(await pttl(backend.keyOf(user, keep)), -1);
    assert.equal(await pttl(backend.keyOf(user)), -1, "an index with a lasting record lasts");
    const loneIndexTtl = await pttl(backend.keyOf(gone));
    assert.ok(
      loneIndexTtl > 0 && loneIndexTtl <= SHORT_MS,
      "an index lives as long as its records",
    );
    const idem = (await srv.cli("KEYS", `${prefix}*:d:*`)).split("\n").filter(Boolean);
    assert.equal(idem.length, 1);
    const idemTtl = await pttl(idem[0]!);
    assert.ok(idemTtl > DAY - 5000 && idemTtl <= DAY, `idempotency ttl ${idemTtl}`);

    clock.advance(SHORT_MS + 100);
    await sleep(SHORT_MS + 200);
    assert.equal(await srv.cli("EXISTS", backend.keyOf(user, short)), "0");
    await rejectsWith(() => store.get(short, { user }), "handle_not_found");
    assert.deepEqual(
      (await store.list(user, { includeExpired: true })).map((i) => i.handle).sort(),
      [keep, week].sort(),
    );
    assert.equal(await srv.cli("ZCARD", backend.keyOf(user)), "2", "the reclaimed entry is pruned");
    assert.equal(await srv.cli("EXISTS", backend.keyOf(gone)), "0", "an emptied index is gone");
    await rejectsWith(() => store.get(lone, { user: gone }), "handle_not_found");
    assert.equal(await assertConsistent([srv], prefix), 2);

    // A flushed script cache is reloaded transparently, with and without WAIT.
    await srv.cli("SCRIPT", "FLUSH");
    await store.patch(keep, [SetKey("", "b", 1)], { user });
    await srv.cli("SCRIPT", "FLUSH");
    await using waiting = await HandleStore.fromUrl(
      `${srv.url}?prefix=${prefix}&wait=0&waitTimeout=50`,
      { clock: clock.fn },
    );
    assert.equal((await waiting.patch(keep, [SetKey("", "c", 1)], { user })).version, 3);
  } finally {
    await store.close();
    await graced.close();
  }
});

Deno.test("redis: a record Redis drops by itself stops counting: the usage hash never outlives it", async () => {
  const srv = await server();
  const prefix = `quota-${crypto.randomUUID()}:`;
  const store = await openStore(`${srv.url}?prefix=${prefix}`, {
    expiredGraceDays: 0,
    quotas: { maxHandles: 2 },
  });
  try {
    const backend = backendOf(store);
    const user = freshUser();
    const short = await store.mint("t", { a: 1 }, { user, ttlDays: 600 / DAY });
    await store.mint("t", { b: 2 }, { user });
    await rejectsWith(() => store.mint("t", { c: 3 }, { user }), "quota_exceeded");
    const usageKey = backend.keyOf(user).replace(/i$/, "q");
    const at = Number(await srv.cli("PEXPIRETIME", usageKey));
    const recordAt = Number(await srv.cli("PEXPIRETIME", backend.keyOf(user, short)));
    // No later than the record: at the same moment, every script sees both gone.
    assert.ok(at > 0 && at <= recordAt, `usage expires at ${at}, the record at ${recordAt}`);
    // Redis drops the expired record (no sweep runs): its handle no longer counts.
    await new Promise((r) => setTimeout(r, 800));
    assert.equal(await srv.cli("EXISTS", backend.keyOf(user, short)), "0");
    await store.mint("t", { c: 3 }, { user });
    const u = await store.usage(user);
    assert.equal(u.handles, 2);
    assert.equal(u.bytes, JSON.stringify({ b: 2 }).length + JSON.stringify({ c: 3 }).length);
  } finally {
    await store.close();
  }
});

Deno.test("redis: the changelog lives and expires in the record's hash; revoke renames both to a trash key that Redis drops at trashUntil", async () => {
  const srv = await server();
  const prefix = `log-${crypto.randomUUID()}:`;
  const url = `${srv.url}?prefix=${prefix}`;
  const clock = new FakeClock();
  await using store = await openStore(url, {
    clock: clock.fn,
    history: { maxEntries: 3 },
  });
  await using off = await HandleStore.fromUrl(url, { clock: clock.fn, history: false });
  const backend = backendOf(store);
  const pttl = (key: string) => srv.cli("PTTL", key).then(Number);
  const user = freshUser();
  const h = await store.mint("doc", { n: 0 }, { user, ttlDays: 2 });
  for (let i = 0; i < 5; i++) await store.patch(h, [Increment("", "n")], { user });
  const key = backend.keyOf(user, h);
  const trashKey = key.replace(/:r:([^:]+)$/, ":t:$1");
  // m, d, x, l and two fields for each of entries 4..6: one key, one TTL
  // (2 days plus the 7-day grace), nothing else for the user but the index
  // and the expiry set.
  assert.equal(await srv.cli("HLEN", key), "10");
  assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [4, 5, 6]);
  assert.deepEqual((await backend.changes(user, h, 5)).map((e) => e.version), [6]);
  const ttl = await pttl(key);
  assert.ok(ttl > 9 * DAY - 5000 && ttl <= 9 * DAY, `ttl ${ttl}`);
  const keys = (await srv.cli("--scan", "--pattern", `${prefix}*`)).split("\n").sort();
  assert.deepEqual(keys, [backend.keyOf(user), key, key.replace(/:r:[^:]+$/, ":x")].sort());
  // A write without an entry drops the log, none of which could be used again.
  await off.save(h, { n: 9 }, { user, expectVersion: 6 });
  assert.equal(await srv.cli("HLEN", key), "3");
  assert.deepEqual(await backend.changes(user, h, 0), []);
  assert.equal((await store.changesSince(h, 5, { user })).truncated, true);
  await store.patch(h, [Increment("", "n")], { user });
  assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [8]);
  const before = await store.get(h, { user });
  await assertConsistent([srv], prefix);

  // revoke renames the hash, log included; Redis drops it at trashUntil.
  await store.revoke(h, { user });
  assert.equal(await srv.cli("EXISTS", key), "0");
  const trashTtl = await pttl(trashKey);
  assert.ok(trashTtl > 7 * DAY - 5000 && trashTtl <= 7 * DAY, `trash ttl ${trashTtl}`);
  assert.equal(await srv.cli("HGET", trashKey, "u"), String(clock.now + 7 * DAY));
  assert.equal(await srv.cli("ZCARD", backend.keyOf(user)), "0");
  assert.deepEqual(await backend.changes(user, h, 0), []);
  assert.equal(await backend.read(user, h), null);
  const now = clock.now;
  const blocked = await backend.insert(user, recordOf(h, { createdAt: now, updatedAt: now }), {
    now,
    graceMs: 0,
  });
  assert.deepEqual(blocked, { inserted: false }, "a trashed handle blocks an insert of it");
  await assertConsistent([srv], prefix);

  // restore renames it back with the record's own TTL, log and index.
  clock.advance(DAY);
  assert.deepEqual(await store.restore(h, { user }), before);
  assert.equal(await srv.cli("EXISTS", trashKey), "0");
  const back = await pttl(key);
  assert.ok(back > 8 * DAY - 5000 && back <= 8 * DAY, `ttl after restore ${back}`);
  assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [8]);
  assert.deepEqual((await store.list(user)).map((i) => i.handle), [h]);
  await assertConsistent([srv], prefix);

  // A short undo window: Redis itself empties the trash, no sweep needed.
  await using brief = await HandleStore.fromUrl(url, { clock: clock.fn, trashDays: 300 / DAY });
  await brief.revoke(h, { user });
  assert.ok(await pttl(trashKey) <= 300);
  await sleep(400);
  assert.equal(await srv.cli("EXISTS", trashKey), "0");
  await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
  assert.equal(await srv.cli("EXISTS", backend.keyOf(user)), "0", "the user's keys are all gone");
});

Deno.test("redis: share, unshare and transfer entries keep the record's hash, TTL, index and trimmed changelog whole", async (t) => {
  await onBoth(t, async (url, primaries) => {
    const prefix = `audit-${crypto.randomUUID()}:`;
    const clock = new FakeClock();
    await using store = await openStore(`${url}?prefix=${prefix}`, {
      clock: clock.fn,
      history: { maxEntries: 3 },
    });
    const backend = backendOf(store);
    const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
    const dave = freshUser("dave");
    const h = await store.mint("doc", { log: [] }, { user: alice, ttlDays: 2 });
    const key = backend.keyOf(alice, h);
    const ttl = Number(await (await primaries())[0]!.cli("-c", "PTTL", key));
    clock.advance(1000);
    const g = await store.share(h, { user: alice, to: bob, rights: "write" });
    clock.advance(1000);
    const c = await store.share(g.handle, { user: bob, to: carol, rights: "append" });
    clock.advance(1000);
    await store.patch(c.handle, [Append("log", "carol")], { user: carol });
    clock.advance(1000);
    assert.equal(await store.unshare(g.grant, { user: alice }), 2);
    const own = await store.get(h, { user: alice });
    assert.equal(own.version, 5);
    assert.equal(own.updatedAt.getTime(), clock.now, "an entry is the record's update");
    assert.deepEqual(own.state, { log: ["carol"] });
    assert.equal(own.lastWriter, null, "the writer of the state stays");
    assert.deepEqual((await backend.changes(alice, h, 0)).map((e) => e.version), [3, 4, 5]);
    assert.deepEqual((await store.list(alice)).map((i) => [i.handle, i.version]), [[h, 5]]);
    const node = (await primaries())[0]!;
    assert.equal(await node.cli("-c", "HLEN", key), "10", "m, d, x, l and entries 3..5");
    const after = Number(await node.cli("-c", "PTTL", key));
    assert.ok(after <= ttl && after > ttl - 60_000, `ttl ${after}, was ${ttl}`);
    await assertConsistent(await primaries(), prefix, true);
    if (!backend.transfer) return;
    clock.advance(1000);
    await store.transfer(h, { user: alice, to: dave, keep: "read" });
    const moved = await store.get(h, { user: dave });
    assert.equal(moved.version, 6);
    assert.deepEqual((await backend.changes(dave, h, 0)).map((e) => e.version), [4, 5, 6]);
    assert.equal(Number(await node.cli("-c", "PTTL", backend.keyOf(dave, h))) <= ttl, true);
    assert.deepEqual((await store.grants(h, { user: dave })).map((x) => [x.to, x.rights]), [
      [alice, "read"],
    ]);
    await assertConsistent(await primaries(), prefix, true);
  });
});

/** A small seeded PRNG (mulberry32): the same seed gives the same run. */
function prng(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/**
 * What the store makes of a changelog: the entries `after < v <= upTo` when
 * every one of them is there, else `null` (truncated).
 */
function logView(entries: ChangeEntry[], after: number, upTo: number): ChangeEntry[] | null {
  if (after === upTo) return [];
  const out: ChangeEntry[] = [];
  for (const e of entries) {
    if (e.version <= after) continue;
    if (e.version > upTo || e.version !== after + 1 + out.length) break;
    out.push(e);
  }
  return out.length === upTo - after ? out : null;
}

Deno.test("redis: the changelog answers as the memory reference does, through retention, skewed clocks, writes without entries, trash and raw restores", async () => {
  const srv = await server();
  const prefix = `diff-${crypto.randomUUID()}:`;
  const redis = await RedisBackend.fromUrl(`${srv.url}?prefix=${prefix}`);
  const memory = new MemoryBackend();
  const seed = Date.now() % 1_000_000;
  const rnd = prng(seed);
  const users = [freshUser(), freshUser()], handles = ["d_aaaaaaaa", "d_bbbbbbbb", "d_cccccccc"];
  let now = Date.UTC(2026, 6, 28, 12), text = 0;
  try {
    for (let step = 0; step < 600; step++) {
      now += rnd(4) * 1000 - 500;
      const user = users[rnd(users.length)]!, handle = handles[rnd(handles.length)]!;
      // Entries stamped by writers whose clocks disagree by up to 3 s.
      const at = now + rnd(6001) - 3000;
      const ctx = {
        now,
        graceMs: 0,
        retention: { maxEntries: 1 + rnd(6), maxAgeMs: 1000 + rnd(8000) },
      };
      const t = text++;
      const entry = (version: number): ChangeEntry => ({ version, at, text: `{"t":${t}}` });
      const where = `seed ${seed}, step ${step}`;
      const op = rnd(100);
      const both = async <T>(f: (b: Backend) => Promise<T>): Promise<T> => {
        const [m, r] = await Promise.allSettled([f(memory), f(redis)]);
        assert.equal(r.status, m.status, `${where}: ${m.status} vs ${r.status}`);
        if (m.status === "rejected") throw m.reason;
        assert.deepEqual((r as PromiseFulfilledResult<T>).value, m.value, where);
        return m.value;
      };
      if (op < 12) {
        await both((b) =>
          b.insert(user, {
            handle,
            kind: "d",
            state: `{"v":1}`,
            version: 1,
            createdAt: now,
            updatedAt: now,
            expiresAt: null,
            lastWriter: null,
          }, { ...ctx, entry: entry(1) })
        );
      } else if (op < 70) {
        // A write with its entry, without one (a store with history off), or a throw.
        const kind = op < 60 ? "entry" : op < 66 ? "bare" : "throw";
        await both((b) =>
          b.update(user, handle, (cur) => {
            if (!cur) return null;
            if (kind === "throw") throw new Error("aborted");
            const version = cur.version + 1;
            const record = { ...cur, version, state: `{"v":${version}}`, updatedAt: now };
            return kind === "entry" ? { record, entry: entry(version) } : { record };
          }, ctx)
        ).catch((e) => {
          if (!(e instanceof Error && e.message === "aborted")) throw e;
        });
      } else if (op < 80) {
        const trash = rnd(3) > 0 ? { trashUntil: now + 60_000 + rnd(5000) } : {};
        await both((b) => b.remove(user, handle, { ...ctx, ...trash }));
      } else if (op < 92) {
        await both((b) => b.untrash(user, handle, ctx));
      } else {
        const cur = await memory.read(user, handle);
        const version = Math.max(1, (cur?.version ?? 1) + rnd(3) - 1);
        await both((b) =>
          b.records!.import(user, {
            handle,
            kind: "d",
            state: `{"r":${version}}`,
            version,
            createdAt: now,
            updatedAt: now,
            expiresAt: null,
            lastWriter: null,
          }, ctx)
        );
      }
      const record = await both((b) => b.read(user, handle));
      const [m, r] = [await memory.changes(user, handle, 0), await redis.changes(user, handle, 0)];
      if (record === null) {
        assert.deepEqual([m, r], [[], []], where);
        continue;
      }
      for (let after = 0; after <= record.version; after++) {
        assert.deepEqual(
          logView(r, after, record.version),
          logView(m, after, record.version),
          `${where}: changes after ${after} of version ${record.version}`,
        );
      }
    }
    await assertConsistent([srv], prefix);
  } finally {
    await redis.close();
  }
});

Deno.test("redis: kill -9 mid write-loop with appendfsync always loses no acknowledged write, and no write lost its changelog entry", async () => {
  await using srv = await startRedis({ config: { appendfsync: "always" } });
  // A log long enough for every write of the test: nothing is trimmed, so a
  // gap could only be a write that lost its entry.
  const store = await HandleStore.fromUrl(srv.url, { history: { maxEntries: 1_000_000 } });
  try {
    const user = freshUser();
    const counter = await store.mint("counter", { n: 0, log: [] }, { user });
    const minted = new Map<string, number>();
    let acked = 0, tried = 0, failures = 0, afterRestart = 0, restarted = false, stop = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        try {
          tried++;
          await store.patch(counter, [Increment("", "n"), Append("log", `${w}:${i}`)], { user });
          acked++;
          const h = await store.mint("item", { w, i }, { user });
          minted.set(h, w * 1e6 + i);
          if (restarted) afterRestart++;
        } catch (e) {
          if (!(e instanceof McpStateError) || e.code !== "backend_error") throw e;
          failures++;
          await sleep(10);
        }
      }
    };
    const workers = Promise.all([0, 1, 2, 3].map(worker));
    await sleep(300);
    const before = acked;
    await srv.kill();
    await sleep(300);
    await srv.restart();
    restarted = true;
    await eventually(10_000, () => afterRestart >= 20 ? Promise.resolve() : Promise.reject());
    stop = true;
    await workers;
    assert.ok(before > 20, `only ${before} writes before the kill`);
    assert.ok(failures > 0, "the outage was not observed");
    const s = await store.get<{ n: number; log: string[] }>(counter, { user });
    const n = s.state.n;
    assert.ok(n >= acked && n <= tried, `counter ${n}, acknowledged ${acked}, tried ${tried}`);
    // The changelog holds one entry per write that survived, no more, no
    // fewer: replaying its ops from version 1 gives the state.
    const since = await store.changesSince(counter, 1, { user });
    assert.ok(!since.truncated, "the changelog has a gap: a write without its entry");
    assert.equal(since.version, s.version);
    assert.deepEqual(
      since.changes.map((c) => c.version),
      Array.from({ length: s.version - 1 }, (_, i) => i + 2),
    );
    const replayed = since.changes.map((c) => {
      assert.equal(c.op, "patch");
      return (c.ops as { value: string }[])[1]!.value;
    });
    assert.deepEqual(replayed, s.state.log);
    assert.equal(n, s.state.log.length);
    for (const [h, v] of minted) {
      const m = await store.get<{ w: number; i: number }>(h, { user });
      assert.equal(m.state.w * 1e6 + m.state.i, v);
      const log = await store.changesSince(h, 0, { user });
      assert.ok(!log.truncated && log.changes.length === 1 && log.changes[0]!.op === "mint");
      const rebuilt = {};
      assert.ok(applyPatch(rebuilt, log.changes[0]!.patch as Operation[]).every((r) => !r));
      assert.deepEqual(rebuilt, m.state);
    }
    await assertConsistent([srv], "mcpstate:");
  } finally {
    await store.close();
  }
});

Deno.test("redis: a dropped connection is a clear backend_error, leaves no partial record, and the store recovers", async (t) => {
  const password = "p@ss:w/rd";
  await using srv = await startRedis({ password });
  const url = `redis://:${encodeURIComponent(password)}@127.0.0.1:${srv.port}`;
  const wrong = await rejectsWith(
    () => HandleStore.fromUrl(`redis://:not-the-password@127.0.0.1:${srv.port}`),
    "backend_error",
  );
  assert.ok(!wrong.message.includes("not-the-password"), wrong.message);
  const store = await HandleStore.fromUrl(url);
  const user = freshUser();
  const h = await store.mint("log", { n: 0, log: [] }, { user });
  const check = async () => {
    const s = await store.get<{ n: number; log: number[] }>(h, { user });
    assert.equal(s.state.n, s.version - 1);
    assert.equal(s.state.log.length, s.state.n);
    const listed = (await store.list(user)).find((i) => i.handle === h);
    assert.equal(listed?.version, s.version);
    await assertConsistent([srv], "mcpstate:");
    return s;
  };
  try {
    await t.step("CLIENT KILL while a write is in flight", async () => {
      const v0 = (await check()).version;
      await srv.cli("CLIENT", "PAUSE", 5000, "WRITE");
      const pending = store.patch(h, [Increment("", "n"), Append("log", 0)], { user })
        .then(() => assert.fail("the write survived a killed connection"), (e) => e);
      await sleep(200);
      await srv.cli("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
      const e = await rejectsWith(() => pending.then((e) => Promise.reject(e)), "backend_error");
      assert.match(e.message, /Redis is unreachable/);
      assert.match(e.message, /re-read/);
      await srv.cli("CLIENT", "UNPAUSE");
      const s = await eventually(
        5000,
        () => store.patch(h, [Increment("", "n"), Append("log", 1)], { user }),
      );
      assert.equal(s.version, v0 + 1, "the killed write was not applied");
      await check();
    });

    await t.step(
      "an unresponsive server: calls fail after `timeout` ms, then work again",
      async () => {
        const quick = await HandleStore.fromUrl(`${url}?timeout=300`);
        try {
          await quick.get(h, { user });
          const asleep = srv.cli("DEBUG", "SLEEP", "1.5");
          await sleep(100);
          const started = Date.now();
          const e = await rejectsWith(() => quick.get(h, { user }), "backend_error");
          assert.ok(Date.now() - started < 1000, `failed after ${Date.now() - started} ms`);
          assert.match(e.message, /^Redis did not answer in time/);
          await asleep;
          await eventually(5000, () => quick.get(h, { user }));
        } finally {
          await quick.close();
        }
      },
    );

    await t.step(
      "the server dies mid-operations: calls fail fast; after a restart the same store works",
      async () => {
        let stop = false, failures = 0, slowest = 0;
        const messages = new Set<string>();
        const worker = async () => {
          while (!stop) {
            const started = Date.now();
            try {
              await store.patch(h, [Increment("", "n"), Append("log", 2)], { user });
            } catch (e) {
              if (!(e instanceof McpStateError) || e.code !== "backend_error") throw e;
              failures++;
              slowest = Math.max(slowest, Date.now() - started);
              messages.add(e.message);
              await sleep(20);
            }
          }
        };
        const workers = Promise.all(Array.from({ length: 8 }, worker));
        await sleep(150);
        await srv.kill();
        await sleep(400);
        const failed = failures;
        await srv.restart();
        await eventually(10_000, () => store.get(h, { user }));
        stop = true;
        await workers;
        assert.ok(failed > 0);
        assert.ok(slowest < 1500, `a call took ${slowest} ms to fail`);
        for (const m of messages) {
          assert.ok(!m.includes(password) && !m.includes(encodeURIComponent(password)), m);
          assert.match(m, /^Redis is unreachable/);
        }
        await store.patch(h, [Increment("", "n"), Append("log", 3)], { user });
        await check();
      },
    );
  } finally {
    await store.close();
  }
});

Deno.test("redis cluster: a transfer that dies after any of its steps is finished by a later miss on the handle, and is never live in two places", async (t) => {
  const c = await redisCluster();
  await c.waitHealthy();
  const history = { history: { maxEntries: 50 } };
  await moveDeaths(t, c, history);
  // With keys, the content sealed anew for the new owner arrives however the move is finished.
  const keys = { k1: crypto.getRandomValues(new Uint8Array(32)).toBase64() };
  await t.step(
    "with encryption at rest",
    (t) => moveDeaths(t, c, { ...history, encryption: { keys } }),
  );
});

/** The steps of the test above, on a store with `options`. */
async function moveDeaths(t: Deno.TestContext, c: RedisClusterHandle, options: HandleStoreOptions) {
  const prefix = `move-${crypto.randomUUID()}:`;
  const url = `${c.url}?prefix=${prefix}`;
  await using store = await openStore(url, options);
  const backend = backendOf(store);
  const steps = [S.moveReserve, S.moveOut, S.moveIn, S.moveDone, S.moveBack, S.moveClear];
  const scripts = new Set(steps.flatMap((s) => [s.sha, s.lua]));
  /** A store whose process dies once `k` scripts of a move ran: nothing after them runs. */
  const dying = async (k: number) => {
    const client = await openClient(url, parseRedisUrl(url));
    let ran = 0;
    const proxy = new Proxy(client, {
      get(target, p) {
        const v = Reflect.get(target, p, target);
        if (typeof v !== "function") return v;
        if (p !== "evalsha" && p !== "eval") return v.bind(target);
        return async (...args: unknown[]) => {
          if (!scripts.has(args[0] as string)) return await v.apply(target, args);
          if (ran >= k) throw new Error("killed");
          const reply = await v.apply(target, args);
          ran++; // a NOSCRIPT refusal ran nothing
          return reply;
        };
      },
    });
    return new HandleStore(new RedisBackend(proxy, { prefix, closeClient: true }), options);
  };
  const run = async (k: number, via: "old owner" | "new owner") => {
    const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
    const h = await store.mint("doc", { k }, { user: alice });
    const g = await store.share(h, { user: alice, to: carol, rights: "read" });
    const before = await store.get(h, { user: alice });
    {
      await using died = await dying(k);
      await rejectsWith(
        () => died.transfer(h, { user: alice, to: bob, keep: "read" }),
        "backend_error",
      );
    }
    const [a, b] = [await backend.read(alice, h), await backend.read(bob, h)];
    assert.ok(!(a && b), "live under both owners");
    assert.equal(a !== null, k < 2, "the old owner's until the record left");
    assert.equal(b !== null, k >= 3, "the new owner's once it arrived");
    if (k < 2) {
      // Nothing moved; the reservation holds the name at the new owner for a while.
      assert.equal((await store.get(h, { user: alice })).version, before.version);
      await rejectsWith(
        () => store.transfer(h, { user: alice, to: bob, keep: "read" }),
        "backend_error",
      );
      // Once it is STALE_RESERVATION_MS old, the new owner's next miss drops it.
      const node = (await c.masters())[0]!;
      const key = backend.keyOf(bob, h).replace(/:r:([^:]+)$/, ":n:$1");
      const [kind, id, , ...from] = (await node.cli("-c", "GET", key)).split("\t");
      assert.equal(kind, "R");
      await node.cli("-c", "SET", key, [kind, id, "0", ...from].join("\t"));
      await rejectsWith(() => store.get(h, { user: bob }), "handle_not_found");
      assert.equal(await store.transfer(h, { user: alice, to: bob, keep: "read" }), h);
    } else if (via === "old owner") {
      await rejectsWith(() => store.get(h, { user: alice }), "handle_not_found");
    } else if (k === 2) {
      await rejectsWith(() => store.get(h, { user: bob }), "handle_not_found");
    } else {
      // Live at the new owner: handing it back finishes the move out first.
      assert.equal(await store.transfer(h, { user: bob, to: alice }), h);
      assert.equal(await store.transfer(h, { user: alice, to: bob }), h);
    }
    // The miss finished the move: as the one-step transfer leaves it.
    const moved = await store.get(h, { user: bob });
    assert.deepEqual(moved.state, before.state);
    const back = via === "new owner" && k > 2 ? 2 : 0;
    assert.equal(moved.version, before.version + 1 + back);
    const log = await store.changesSince(h, before.version, { user: bob });
    assert.ok(!log.truncated);
    assert.ok(log.changes.every((x) => x.op === "transfer"));
    assert.equal(log.changes[0]!.keep, "read");
    await rejectsWith(() => store.get(h, { user: alice }), "handle_not_found");
    const e = await rejectsWith(() => store.get(g.handle, { user: carol }), "handle_not_found");
    assert.equal(e.details.reason, "grant_revoked");
    // The kept grant (which a transfer back and forth ends).
    assert.deepEqual(
      (await store.list(alice)).map((i) => [i.sharedBy, i.rights]),
      back ? [] : [[bob, "read"]],
    );
    assert.deepEqual((await store.list(bob)).map((i) => i.handle), [h]);
    // A mark left by the last step goes with the new owner's next miss on the handle.
    await backend.trash.until(bob, h);
    await backend.trash.until(alice, h);
  };
  for (let k = 1; k <= 4; k++) {
    for (const via of ["old owner", "new owner"] as const) {
      if (k < 2 && via === "new owner") continue;
      const how = via === "new owner" && k > 2
        ? "the new owner handing it back finishes it"
        : `a miss of the ${via} finishes it`;
      await t.step(`dies after step ${k}; ${how}`, () => run(k, via));
    }
  }
  await assertConsistent(await c.masters(), prefix, true);
}

Deno.test("redis: wait=N with too few replicas is a backend_error that names the count", async () => {
  const srv = await server();
  await using store = await HandleStore.fromUrl(`${srv.url}?wait=1&waitTimeout=50`);
  const user = freshUser();
  const e = await rejectsWith(() => store.mint("w", {}, { user }), "backend_error");
  assert.equal(e.details.replicas_acked, 0);
  assert.equal(e.details.replicas_required, 1);
  assert.match(e.message, /only 0 of 1 replicas/);
});

Deno.test("redis cluster: with wait=1, killing the master right after acknowledged writes loses none; writes resume", async () => {
  const c = await redisCluster();
  await c.waitHealthy();
  const store = await openStore(`${c.url}?wait=1&waitTimeout=2000`);
  try {
    const user = freshUser();
    const backend = backendOf(store);
    const h = await store.mint("log", { n: 0 }, { user });
    const master = await c.masterForSlot(await c.keySlot(backend.keyOf(user)));
    const minted: string[] = [];
    for (let i = 0; i < 30; i++) {
      await store.patch(h, [Increment("", "n")], { user });
      minted.push(await store.mint("item", { i }, { user }));
    }
    await master.kill();
    const s = await eventually(
      20_000,
      () => store.get<{ n: number }>(h, { user }),
    );
    assert.equal(s.state.n, 30);
    for (const [i, m] of minted.entries()) {
      assert.deepEqual((await store.get(m, { user })).state, { i });
    }
    // Gossip reaches the node we ask a moment after the client already
    // writes to the promoted replica: wait for its view to agree.
    const slot = await c.keySlot(backend.keyOf(user));
    await eventually(20_000, async () => {
      const promoted = await c.masterForSlot(slot);
      assert.notEqual(promoted.address, master.address);
    });
    // The old master comes back as the new master's replica; waited writes resume.
    await master.restart();
    const after = await eventually(
      20_000,
      () => store.patch<{ n: number }>(h, [Increment("", "n")], { user }),
    );
    assert.ok(after.state.n >= 31);
    await c.waitHealthy();
  } finally {
    await store.close();
  }
});

/** The user's change channel (`P{T}:c`), from its index key (`P{T}:i`). */
function channelOf(backend: RedisBackend, user: string): string {
  return backend.keyOf(user).replace(/i$/, "c");
}

/** `PUBSUB NUMSUB` of one channel on one server. */
async function subscribers(srv: RedisServer, channel: string): Promise<number> {
  return Number((await srv.cli("PUBSUB", "NUMSUB", channel)).split("\n")[1]);
}

Deno.test("redis: a watcher on one instance sees writes made through another within seconds, through pub/sub; one SUBSCRIBE per user while watched", async (t) => {
  for (const [name, urlOf] of [["standalone", server], ["cluster", redisCluster]] as const) {
    await t.step(name, async () => {
      const url = (await urlOf()).url;
      await using a = await openStore(url);
      await using b = await HandleStore.fromUrl(url);
      const user = freshUser();
      const h = await b.mint("live", { n: 0 }, { user });
      const g = await b.mint("live", { n: 0 }, { user });
      const stop = new AbortController();
      // A long safety-net poll: only the change feed can deliver in time.
      const opts = { user, signal: stop.signal, pollMs: 600_000 };
      const it = a.watch<{ n: number }>(h, opts), jt = a.watch<{ n: number }>(g, opts);
      try {
        assert.equal((await it.next()).value?.version, 1);
        assert.equal((await jt.next()).value?.version, 1);
        const channel = channelOf(backendOf(a), user);
        if (urlOf === server) assert.equal(await subscribers(await server(), channel), 1);
        for (let v = 2; v <= 4; v++) {
          await b.patch(h, [Increment("", "n")], { user });
          const next = await within(3000, `version ${v} of the watched handle`, it.next());
          assert.equal(next.value?.version, v);
          assert.equal(next.value?.state.n, v - 1);
        }
        await b.save(g, { n: 7 }, { user, expectVersion: 1 });
        assert.equal((await within(3000, "the other watch", jt.next())).value?.state.n, 7);
        await b.revoke(h, { user });
        await within(3000, "the revoke", rejectsWith(() => it.next(), "handle_not_found"));
        if (urlOf === server) assert.equal(await subscribers(await server(), channel), 1);
        stop.abort();
        assert.equal((await jt.next()).done, true);
        // The last listener of the user gone, its channel is unsubscribed.
        if (urlOf === server) {
          await eventually(
            3000,
            async () => assert.equal(await subscribers(await server(), channel), 0),
          );
        }
      } finally {
        stop.abort();
      }
    });
  }
});

Deno.test("redis: every write script announces its handle on the user's channel, and nothing else does", async () => {
  const srv = await server();
  const a = await RedisBackend.fromUrl(srv.url), b = await RedisBackend.fromUrl(srv.url);
  try {
    const user = freshUser(), handle = "n_aaaaaaaa";
    let calls = 0, strays = 0;
    const offs = [
      await a.feed.subscribe(user, handle, () => calls++),
      await a.feed.subscribe(user, "n_bbbbbbbb", () => strays++),
      await a.feed.subscribe(freshUser(), handle, () => strays++),
    ];
    // Messages of one server arrive in order: once a write's has, any earlier
    // one has too, so exactly one call means the calls before it wrote nothing.
    const announced = async (what: string, ...ops: (() => Promise<unknown>)[]) => {
      const before = calls;
      for (const op of ops) await op();
      await eventually(3000, () => {
        assert.equal(calls, before + 1, what);
        return Promise.resolve();
      });
    };
    const now = Date.now();
    const ctx = { now, graceMs: DAY };
    const rec = (version: number, expiresAt: number | null = null): HandleRecord => ({
      handle,
      kind: "n",
      state: `{"v":${version}}`,
      version,
      createdAt: now,
      updatedAt: now,
      expiresAt,
      lastWriter: null,
    });
    const bump = (cur: HandleRecord | null) =>
      cur && { record: { ...cur, version: cur.version + 1, state: "{}" } };
    const write = { state: "{}", updatedAt: now, expiresAt: "keep" as const, lastWriter: null };
    await announced("insert", () => b.insert(user, rec(1), ctx));
    await announced(
      "save",
      () => b.insert(user, rec(1), ctx),
      () => b.save(user, handle, { ...write, expectVersion: 7 }, ctx),
      () => b.leases.acquire(user, handle, { holder: "w", expiresAt: now + 60_000 }, now),
      () => b.leases.release(user, handle, "w", now),
      () => b.read(user, handle),
      () => b.save(user, handle, { ...write, expectVersion: 1 }, ctx),
    );
    await announced(
      "update",
      () => b.update(user, handle, () => null, ctx),
      () => b.update(user, handle, bump, ctx),
    );
    await announced("remove", () => b.remove(user, handle, { ...ctx, trashUntil: now + DAY }));
    await announced("untrash", () => b.untrash(user, handle, ctx));
    await announced(
      "restore",
      () => b.untrash(user, handle, ctx),
      () => b.records.import(user, rec(1), ctx),
      () => b.records.import(user, rec(9, now - 1), ctx),
    );
    await announced(
      "sweep",
      () => b.sweep(user, now - 2, now),
      () => b.sweep(user, now, now),
    );
    await announced(
      "insert after the sweep",
      () => b.remove(user, handle, ctx),
      () => b.insert(user, rec(1), ctx),
    );
    const grant = (id: string): GrantRecord => ({
      grant: id,
      alias: `n_${id}`,
      owner: user,
      handle,
      to: freshUser(),
      rights: "read",
      by: user,
      parent: null,
      createdAt: now,
      expiresAt: null,
      endedAt: null,
    });
    const audit = (): AuditStep => ({
      at: now,
      tail: '"at":"x"}',
      retention: { maxEntries: 10, maxAgeMs: DAY },
    });
    const g1 = `grant_${crypto.randomUUID()}`, g2 = `grant_${crypto.randomUUID()}`;
    // Without an entry a grant change announces nothing; with one, once.
    await announced(
      "share with an entry",
      () => b.grants.put(grant(g1), now),
      () => b.grants.put(grant(g2), now, audit()),
    );
    await announced(
      "unshare with an entry",
      () => b.grants.end(g1, now),
      () => b.grants.end(g2, now, audit()),
      () => b.grants.end(g2, now, audit()), // ends nothing: no entry
    );
    await announced(
      "transfer",
      () => b.transfer!.move(user, handle, freshUser(), ctx, { audit: audit() }),
    );
    await announced("insert after the transfer", () => b.insert(user, rec(1), ctx));
    await announced("remove", () => b.remove(user, handle, ctx));
    assert.equal(strays, 0, "another handle's or user's listener was called");
    for (const off of offs) off();
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("redis: when the subscriber connection drops, a write made meanwhile still reaches the watcher once it is back", async () => {
  const srv = await server();
  // Reconnects after 1 s, so the write below surely falls into the gap.
  const client = new Redis({ host: srv.host, port: srv.port, retryStrategy: () => 1000 });
  const backendA = new RedisBackend(client, { closeClient: true });
  await using a = new HandleStore(backendA);
  await using b = await HandleStore.fromUrl(srv.url);
  const user = freshUser();
  const h = await b.mint("live", { n: 0 }, { user });
  const stop = new AbortController();
  try {
    const it = a.watch(h, { user, signal: stop.signal, pollMs: 600_000 });
    assert.equal((await it.next()).value?.version, 1);
    const channel = channelOf(backendA, user);
    assert.equal(await subscribers(srv, channel), 1);
    await srv.cli("CLIENT", "KILL", "TYPE", "pubsub");
    await b.patch(h, [Increment("", "n")], { user });
    assert.equal(await subscribers(srv, channel), 0, "the write's message reached nobody");
    assert.equal((await within(5000, "the missed write", it.next())).value?.version, 2);
    assert.equal(await subscribers(srv, channel), 1);
    await b.patch(h, [Increment("", "n")], { user });
    assert.equal((await within(3000, "the next write", it.next())).value?.version, 3);
  } finally {
    stop.abort();
  }
});

Deno.test("redis: kill -9 and restart the server under a watcher: it survives, and a new write is seen", async () => {
  await using srv = await startRedis({ config: { appendfsync: "always" } });
  await using a = await openStore(srv.url);
  await using b = await HandleStore.fromUrl(srv.url);
  const user = freshUser(), left = freshUser();
  const h = await b.mint("live", { n: 0 }, { user });
  const g = await b.mint("live", { n: 0 }, { user: left });
  const stop = new AbortController(), leave = new AbortController();
  try {
    const it = a.watch<{ n: number }>(h, { user, signal: stop.signal, pollMs: 600_000 });
    assert.equal((await it.next()).value?.version, 1);
    const jt = a.watch(g, { user: left, signal: leave.signal, pollMs: 600_000 });
    assert.equal((await jt.next()).value?.version, 1);
    const pending = it.next();
    await srv.kill();
    // A watcher that ends while Redis is down: its channel goes once Redis is back.
    leave.abort();
    assert.equal((await jt.next()).done, true);
    await sleep(300);
    await srv.restart();
    const written = await eventually(10_000, () => b.patch(h, [Increment("", "n")], { user }));
    assert.equal(written.version, 2);
    const seen = await within(5000, "the write after the restart", pending);
    assert.equal(seen.value?.version, 2);
    await b.patch(h, [Increment("", "n")], { user });
    assert.equal((await within(3000, "the next write", it.next())).value?.state.n, 2);
    const backend = backendOf(a);
    assert.equal(await subscribers(srv, channelOf(backend, user)), 1);
    await eventually(3000, async () => {
      assert.equal(await subscribers(srv, channelOf(backend, left)), 0);
    });
  } finally {
    stop.abort();
    leave.abort();
  }
});

Deno.test("redis: a lease is one key in the user's slot with a native TTL that Redis drops, copied into the record hash for reads", async (t) => {
  const run = async (url: string, primaries: () => Promise<RedisServer[]>) => {
    const prefix = `lease-${crypto.randomUUID()}:`;
    await using store = await openStore(`${url}?prefix=${prefix}`);
    const backend = backendOf(store);
    const user = freshUser();
    const h = await store.mint("task", { a: 1 }, { user });
    const key = backend.keyOf(user, h);
    const leaseKey = key.replace(/:r:([^:]+)$/, ":l:$1");
    const tag = (k: string) => /\{[^}]*\}/.exec(k)?.[0];
    assert.equal(tag(leaseKey), tag(backend.keyOf(user)));
    // redis-cli -c follows a cluster's redirections to the user's node.
    const node = (await primaries())[0]!;
    const cli = (...args: (string | number)[]) => node.cli("-c", ...args);
    const hash = () => cli("HMGET", key, "m", "d", "x", "l");
    const fields = await hash();
    const r = await store.lease(h, { user, writer: "w\tx", seconds: 0.5 });
    const text = `${r.expiresAt.getTime()}\tw\tx`;
    assert.equal(await cli("GET", leaseKey), text);
    const ttl = Number(await cli("PTTL", leaseKey));
    assert.ok(ttl > 0 && ttl <= 500, `lease ttl ${ttl}`);
    assert.deepEqual(await hash(), fields, "the record is unchanged");
    assert.equal(await cli("HGET", key, "L"), text, "the record hash holds a copy");
    const got = await store.get(h, { user });
    assert.equal(got.version, 1);
    assert.deepEqual(got.activeLease, { holder: "w\tx", expiresAt: r.expiresAt });
    await assertConsistent(await primaries(), prefix);
    await sleep(700);
    assert.equal(await cli("EXISTS", leaseKey), "0", "Redis dropped the lapsed lease");
    assert.equal(
      (await store.get(h, { user })).activeLease,
      undefined,
      "the lapsed copy is no lease",
    );
    const again = await store.lease(h, { user, writer: "v", seconds: 60 });
    assert.equal(await cli("HGET", key, "L"), `${again.expiresAt.getTime()}\tv`);
    assert.equal(await store.release(h, { user, writer: "v" }), true);
    assert.equal(await cli("HEXISTS", key, "L"), "0", "a release drops the copy");
    assert.equal((await store.get(h, { user })).activeLease, undefined);
    // Any handle string is encoded as record keys are; one MGET answers for many.
    const now = Date.now();
    const odd = ["\ud800", "a:b}", "~x", h];
    for (const [i, o] of odd.entries()) {
      const lease = { holder: `h${i}`, expiresAt: now + 60_000 };
      assert.deepEqual(await backend.leases.acquire(user, o, lease, now), {
        acquired: true,
        lease,
      });
    }
    const leases = await backend.leases.of(user, [...odd, "task_missing"], now);
    assert.deepEqual([...leases.keys()], odd);
    assert.deepEqual(odd.map((o) => leases.get(o)!.holder), ["h0", "h1", "h2", "h3"]);
    assert.equal((await backend.leases.of(user, odd, now + 60_000)).size, 0);
    assert.equal(await backend.leases.release(user, "\ud800", "h0", now), true);
    await assertConsistent(await primaries(), prefix);
  };
  await onBoth(t, run);
});

Deno.test("redis: the lease copy in a record hash follows the lease key through insert, save, update, untrash, import and transfer", async (t) => {
  await onBoth(t, async (url, primaries) => {
    const prefix = `copy-${crypto.randomUUID()}:`;
    const b = await RedisBackend.fromUrl(`${url}?prefix=${prefix}`);
    try {
      const user = freshUser(), other = freshUser();
      const now = Date.now();
      const ctx = { now, graceMs: 0 };
      const held = (holder: string) => ({ holder, expiresAt: now + 60_000 });
      const leaseOf = async (u: string, h: string) => (await b.leases.readLeased!(u, h, now)).lease;
      // A lease taken before the record exists is copied in by the insert.
      assert.equal((await b.leases.acquire(user, "a_aaaaaaaa", held("w1"), now)).acquired, true);
      assert.equal(
        await b.insert(user, recordOf("a_aaaaaaaa"), ctx).then((r) =>
          "inserted" in r && r.inserted
        ),
        true,
      );
      assert.deepEqual(await leaseOf(user, "a_aaaaaaaa"), held("w1"));
      // A write that asks for the lease another holds keeps theirs; its own replaces it.
      const write = { state: "{}", updatedAt: now, expiresAt: "keep" as const, lastWriter: "w2" };
      const saved = await b.save(user, "a_aaaaaaaa", { ...write, expectVersion: 1 }, {
        ...ctx,
        lease: held("w2"),
      });
      assert.ok("ok" in saved && saved.ok && saved.lease?.acquired === false);
      assert.deepEqual(await leaseOf(user, "a_aaaaaaaa"), held("w1"));
      assert.equal(await b.leases.release(user, "a_aaaaaaaa", "w1", now), true);
      assert.equal(await leaseOf(user, "a_aaaaaaaa"), null);
      const updated = await b.update(
        user,
        "a_aaaaaaaa",
        (cur) => ({ record: { ...cur!, version: cur!.version + 1 } }),
        { ...ctx, lease: held("w3") },
      );
      assert.ok("written" in updated && updated.written);
      assert.deepEqual(await leaseOf(user, "a_aaaaaaaa"), held("w3"));
      // Trashed and back: the lease key decides, not the copy that went to the trash.
      assert.deepEqual(await b.remove(user, "a_aaaaaaaa", { ...ctx, trashUntil: now + DAY }), {
        removed: true,
      });
      assert.equal(await b.leases.release(user, "a_aaaaaaaa", "w3", now), true);
      assert.equal(
        await b.leases.acquire(user, "a_aaaaaaaa", held("w4"), now).then((r) => r.acquired),
        true,
      );
      assert.ok(await b.untrash(user, "a_aaaaaaaa", ctx));
      assert.deepEqual(await leaseOf(user, "a_aaaaaaaa"), held("w4"));
      // A raw restore rewrites the hash and keeps the lease.
      assert.equal(
        await b.records.import(user, recordOf("a_aaaaaaaa", { version: 9 }), ctx),
        "replaced",
      );
      assert.deepEqual(await leaseOf(user, "a_aaaaaaaa"), held("w4"));
      // A transfer leaves the old owner's lease behind (on a standalone server).
      if (b.transfer) {
        assert.equal(await b.transfer.move(user, "a_aaaaaaaa", other, ctx), "moved");
        assert.equal(await leaseOf(other, "a_aaaaaaaa"), null);
      }
      await assertConsistent(await primaries(), prefix);
    } finally {
      await b.close();
    }
  });
});

Deno.test("redis: stop the servers", async () => {
  await Promise.all([
    standalone?.then((s) => s.stop()),
    cluster?.then((c) => c.stop()),
  ]);
});
