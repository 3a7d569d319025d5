import assert from "node:assert/strict";
import { Append, HandleStore, Increment, SetKey } from "../mod.ts";
import { openBackend } from "../src/url.ts";
import type { GrantRecord, HandleRecord, WriteContext } from "../src/backend.ts";
import { DenoKvBackend, parseDenoKvUrl } from "../src/backends/denokv.ts";
import { DAY, FakeClock, freshUser, rejectsWith, sleep } from "./_helpers.ts";
import { backendContract } from "./contract/mod.ts";
import { type Child, spawnChild } from "./_child.ts";
import { createAtOnce, writersInTwoProcesses } from "./contract/cross_process.ts";

const MIB = 1_048_576;
const dir = Deno.makeTempDirSync({ prefix: "mcpstate-denokv-" });

// One Deno.Kv per opened store: like separate processes on one file.
const contractUrl = `denokv:///${dir}/contract.kv`;
Deno.test("contract: denokv file", (t) =>
  backendContract(t, { open: () => openBackend(contractUrl), url: contractUrl }));

// Every store the suite opens shares one in-memory Deno.Kv.
const sharedKv = await Deno.openKv(":memory:");
Deno.test("contract: denokv :memory:", (t) =>
  backendContract(t, { open: () => Promise.resolve(new DenoKvBackend(sharedKv)) }));

/** `backend`, closed when the scope that holds it ends (`await using`). */
function closing<T extends { close(): Promise<void> }>(backend: T): T & AsyncDisposable {
  return Object.assign(backend, { [Symbol.asyncDispose]: () => backend.close() });
}

/** All keys under a prefix. */
async function keysOf(kv: Deno.Kv, prefix: Deno.KvKey): Promise<Deno.KvKey[]> {
  const out: Deno.KvKey[] = [];
  for await (const e of kv.list({ prefix })) out.push(e.key);
  return out;
}

/**
 * The keys of a user, but for the usage marker a write without quotas leaves
 * (it expires by itself, see `denokv/_usage.ts`).
 */
async function recordKeysOf(kv: Deno.Kv, user: string): Promise<Deno.KvKey[]> {
  const keys = await keysOf(kv, ["mcpstate", "u", user]);
  for (const k of keys) {
    if (k[3] === "q") assert.equal((await kv.get(k)).value, 0, "only an unknown-usage marker");
  }
  return keys.filter((k) => k[3] !== "q");
}

/** The distinct chunk-set ids stored for a user. */
async function chunkSets(kv: Deno.Kv, user: string): Promise<Set<unknown>> {
  return new Set((await keysOf(kv, ["mcpstate", "u", user, "c"])).map((k) => k[5]));
}

/** A state whose compact JSON is exactly `bytes` bytes of UTF-8, made of `pattern` then ASCII. */
function stateOfBytes(bytes: number, pattern = ""): { s: string } {
  const enc = new TextEncoder();
  let body = "";
  let size = enc.encode(JSON.stringify({ s: "" })).length;
  if (pattern) {
    const unit = enc.encode(pattern).length;
    const reps = Math.floor((bytes - size) / unit) - 1;
    body = pattern.repeat(Math.max(0, reps));
    size += unit * Math.max(0, reps);
  }
  body += "a".repeat(bytes - size);
  const state = { s: body };
  assert.equal(enc.encode(JSON.stringify(state)).length, bytes);
  return state;
}

async function openFileKv(name: string): Promise<Deno.Kv> {
  return await Deno.openKv(`${dir}/${name}`);
}

Deno.test("a 1 MiB and a 1 MiB - 1 byte state round-trip, ASCII and multi-byte UTF-8", async () => {
  using kv = await openFileKv("big.kv");
  await using store = new HandleStore(new DenoKvBackend(kv));
  const user = freshUser();
  for (const pattern of ["", "é€😀x", "😀"]) {
    for (const size of [MIB, MIB - 1]) {
      const state = stateOfBytes(size, pattern);
      const h = await store.mint("big", state, { user });
      assert.deepEqual((await store.get(h, { user })).state, state);
      // A second, fresh connection to the file reads the same bytes.
      await using other = await HandleStore.fromUrl(`denokv:///${dir}/big.kv`);
      assert.equal(JSON.stringify((await other.get(h, { user })).state), JSON.stringify(state));
      // A new version of the same size replaces it; a reader sees one version only.
      const next = stateOfBytes(size, pattern ? "ü" : "b");
      const s = await store.save(h, next, { user, expectVersion: 1 });
      assert.equal(s.version, 2);
      assert.deepEqual((await other.get(h, { user })).state, next);
    }
  }
  // Every superseded chunk set was deleted by the head swap that replaced it.
  assert.equal((await chunkSets(kv, user)).size, 6);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
});

Deno.test("listing, with and without previews, reads index entries only, never a head or a chunk", async () => {
  using kv = await openFileKv("list-large.kv");
  const read: Deno.KvKey[] = [];
  // The real KV, with every key and prefix it is asked to read recorded.
  const spy = new Proxy(kv, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "get") return (key: Deno.KvKey) => (read.push(key), target.get(key));
      if (prop === "getMany") {
        return (keys: Deno.KvKey[]) => (read.push(...keys), target.getMany(keys));
      }
      if (prop === "list") {
        return (sel: Deno.KvListSelector, o?: Deno.KvListOptions) => {
          read.push("prefix" in sel ? sel.prefix : "start" in sel ? sel.start : []);
          return target.list(sel, o);
        };
      }
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  await using store = new HandleStore(new DenoKvBackend(spy), { reclaimIntervalMs: 0 });
  const user = freshUser();
  // Chunked states (over one KV value each), and inline ones.
  for (let i = 0; i < 6; i++) {
    await store.mint("note", stateOfBytes(i % 2 ? 300_000 : 100), { user });
  }
  for (const previews of [false, true]) {
    read.length = 0;
    const page = await store.listPage(user, { limit: 50, previews });
    assert.equal(page.handles.length, 6);
    assert.equal(page.handles.every((h) => h.preview !== undefined), previews);
    // The user's listing index ("i"), and beside it only leases and grants.
    const parts = read.map((k) => String(k[3] ?? k[1]));
    assert.ok(parts.includes("i"), JSON.stringify(read));
    for (const k of read) {
      assert.ok(!["h", "c", "q"].includes(String(k[3])), `a state was read: ${JSON.stringify(k)}`);
    }
  }
});

Deno.test("states at the inline limit and one byte over round-trip with the longest metadata", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  await using store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  const writer = "é".repeat(256);
  const kind = "k" + "-".repeat(31);
  // The longest user and idempotency key kept as key parts, and longer ones (hashed).
  const cases = [["ü".repeat(200), "k".repeat(190)], ["ü".repeat(1024), "é".repeat(244)]];
  for (const [user, key] of cases as [string, string][]) {
    for (const size of [63_487, 63_488, 63_489, 65_536, 65_537]) {
      for (const pattern of ["", "é"]) {
        const state = stateOfBytes(size, pattern);
        const mint = { user, writer, ttlDays: 1, idempotencyKey: key + size + pattern };
        const h = await store.mint(kind, state, { ...mint, randomChars: 64 });
        // The retry, with the same key, gives the first handle.
        assert.equal(await store.mint(kind, state, { ...mint, randomChars: 64 }), h);
        const s = await store.get(h, { user });
        assert.deepEqual(s.state, state);
        assert.equal(s.lastWriter, writer);
        const patch = { user, writer, idempotencyKey: key + "p" + size + pattern };
        const p = await store.patch(h, [SetKey("", "t", 1)], patch);
        assert.deepEqual(await store.patch(h, [SetKey("", "t", 1)], patch), p);
      }
    }
  }
});

Deno.test("large states: chunk sets are released on replace, kept on touch, deleted on revoke and sweep", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  // No undo window: revoke deletes at once (the trash has a test of its own).
  await using store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn, trashDays: 0 });
  const user = freshUser();
  const h = await store.mint("big", stateOfBytes(300_000, "é"), { user, ttlDays: 1 });
  const [first] = await chunkSets(kv, user);
  await store.touch(h, { user, ttlDays: 2 });
  assert.deepEqual([...await chunkSets(kv, user)], [first]);
  const patched = await store.patch(h, [SetKey("", "n", 1)], { user });
  assert.equal(patched.version, 3);
  const sets = await chunkSets(kv, user);
  assert.equal(sets.size, 1);
  assert.ok(!sets.has(first));
  assert.equal((await keysOf(kv, ["mcpstate", "u", user, "log"])).length, 3);
  await store.revoke(h, { user });
  // Head, chunks and changelog went in one commit.
  assert.deepEqual(await recordKeysOf(kv, user), []);

  const e = await store.mint("big", stateOfBytes(200_000), { user, ttlDays: 1 });
  await store.patch(e, [SetKey("", "n", 1)], { user });
  clock.advance(DAY + 1);
  await rejectsWith(() => store.get(e, { user }), "handle_expired");
  assert.equal(await store.sweep(), 1);
  await rejectsWith(() => store.get(e, { user }), "handle_not_found");
  // Nothing of the user is left (changelog included) but the registry of user names.
  assert.deepEqual(await recordKeysOf(kv, user), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xh"]), []);
});

Deno.test("a state of more than 48 chunks is written, replaced, revoked, purged from the trash and collected", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  await using store = new HandleStore(new DenoKvBackend(kv), {
    maxStateBytes: 4 * MIB,
    clock: clock.fn,
  });
  const user = freshUser();
  const a = stateOfBytes(3.5 * MIB, "€");
  const h = await store.mint("huge", a, { user });
  assert.equal((await keysOf(kv, ["mcpstate", "u", user, "c"])).length, 56);
  assert.deepEqual((await store.get(h, { user })).state, a);
  const b = stateOfBytes(3.5 * MIB - 7, "ß");
  await store.save(h, b, { user, expectVersion: 1 });
  assert.deepEqual((await store.get(h, { user })).state, b);
  assert.equal((await chunkSets(kv, user)).size, 1);
  await store.revoke(h, { user });
  // In the trash the chunks stay; past the undo window sweep collects them.
  assert.equal((await keysOf(kv, ["mcpstate", "u", user, "c"])).length, 56);
  clock.advance(7 * DAY + 1);
  await store.sweep();
  assert.deepEqual(await recordKeysOf(kv, user), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xt"]), []);
});

Deno.test("idempotent writes of large states replay exactly; their copies are reclaimed", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  await using store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  const user = freshUser();
  const h = await store.mint("big", stateOfBytes(500_000, "é"), { user, idempotencyKey: "m" });
  const p1 = await store.patch(h, [Increment("", "n")], { user, idempotencyKey: "p1" });
  await store.patch(h, [Increment("", "n", 10)], { user });
  assert.deepEqual(
    await store.patch(h, [Increment("", "n")], { user, idempotencyKey: "p1" }),
    p1,
  );
  const cur = await store.get<{ n: number }>(h, { user });
  assert.equal(cur.state.n, 11);
  const s1 = await store.save(h, stateOfBytes(400_000), {
    user,
    expectVersion: 3,
    idempotencyKey: "s1",
  });
  await store.patch(h, [SetKey("", "z", 1)], { user });
  assert.deepEqual(
    await store.save(h, stateOfBytes(400_000), { user, expectVersion: 3, idempotencyKey: "s1" }),
    s1,
  );
  assert.ok((await keysOf(kv, ["mcpstate", "u", user, "q"])).length > 0);
  clock.advance(DAY + 1);
  await store.sweep(user);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "k"]), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "q"]), []);
  assert.equal((await store.get(h, { user })).version, 5);
});

Deno.test("users and handles that cannot be key parts as they are stay apart", async () => {
  using kv = await Deno.openKv(":memory:");
  const backend = new DenoKvBackend(kv);
  await using store = new HandleStore(backend);
  // Names too long for a key part are hashed; they must stay apart.
  const users = [
    "a\ufffd",
    "é".repeat(1024),
    "é".repeat(1023) + "e",
    "x".repeat(1024),
  ];
  const handles = new Map<string, string>();
  for (const user of users) {
    handles.set(user, await store.mint("own", { user }, { user, idempotencyKey: "same" }));
  }
  for (const user of users) {
    const mine = handles.get(user)!;
    assert.deepEqual((await store.get(mine, { user })).state, { user });
    assert.deepEqual((await store.list(user)).map((i) => i.handle), [mine]);
    for (const other of users) {
      if (other === user) continue;
      await rejectsWith(() => store.get(mine, { user: other }), "handle_not_found");
    }
  }
  const listed: string[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await backend.records!.users({
      limit: 2,
      ...(after === undefined ? {} : { after }),
    });
    listed.push(...page);
    if (page.length < 2) break;
    after = page[page.length - 1];
  }
  assert.deepEqual([...listed].sort(), [...users].sort());
  assert.equal(new Set(listed).size, users.length);
  // A lone-surrogate handle is refused before it could alias a real one.
  await rejectsWith(() => store.get("own_\ud800", { user: users[0]! }), "invalid_argument");
});

Deno.test("importRecord(): a chunked record replaced by an inline one leaves no chunk behind", async () => {
  using kv = await Deno.openKv(":memory:");
  await using backend = closing(new DenoKvBackend(kv));
  const user = freshUser();
  const ctx: WriteContext = { now: 1_000, graceMs: 0 };
  const rec = (version: number, state: string): HandleRecord => ({
    handle: "note_abcdefgh",
    kind: "note",
    state,
    version,
    createdAt: 10,
    updatedAt: 100 + version,
    expiresAt: null,
    lastWriter: "import",
  });
  assert.equal(
    await backend.records.import(user, rec(3, JSON.stringify(stateOfBytes(90_000))), ctx),
    "inserted",
  );
  assert.equal(await backend.records.import(user, rec(2, '{"old":1}'), ctx), "kept");
  assert.equal(await backend.records.import(user, rec(5, '{"new":1}'), ctx), "replaced");
  assert.deepEqual(await backend.read(user, "note_abcdefgh"), rec(5, '{"new":1}'));
  assert.equal((await backend.list(user, { limit: 10 }))[0]!.version, 5);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "c"]), []);
  assert.deepEqual(await backend.records.users({ limit: 10 }), [user]);
});

/** The changelog keys of a handle: `[logId, version]` pairs, in key order. */
async function logKeys(kv: Deno.Kv, user: string, handle: string): Promise<[string, number][]> {
  return (await keysOf(kv, ["mcpstate", "u", user, "log", handle])).map(
    (k) => [k[5] as string, k[6] as number],
  );
}

/** Versions `from`…`to`. */
function versions(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** A `Deno.Kv` whose reads of collector intents fail, so a commit's hand-off is left to `sweep`. */
function withoutAfterCommit(kv: Deno.Kv): Deno.Kv {
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "get") {
        return (key: Deno.KvKey) =>
          key[1] === "xw" ? Promise.reject(new Error("injected")) : target.get(key);
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

Deno.test("changelog: one key per entry in its write's commit; retention trims the oldest end there", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const backends = new Map<HandleStore, DenoKvBackend>();
  const open = (history: { maxEntries?: number; maxAgeDays?: number }, raw = kv) => {
    const backend = new DenoKvBackend(raw);
    const store = new HandleStore(backend, { clock: clock.fn, history });
    backends.set(store, backend);
    return store;
  };
  const store = open({ maxEntries: 5 });
  const wide = open({ maxEntries: 500 });
  // Its commits hand long runs to the collector, and never collect them itself.
  const lazy = open({ maxEntries: 3 }, withoutAfterCommit(kv));
  try {
    const user = freshUser();
    const h = await store.mint("log", { n: 0 }, { user });
    for (let i = 0; i < 9; i++) await store.patch(h, [Increment("", "n")], { user });
    const keys = await logKeys(kv, user, h);
    assert.deepEqual(keys.map(([, v]) => v), versions(6, 10));
    assert.equal(new Set(keys.map(([l]) => l)).size, 1);
    // A wider retention keeps more from here on; a narrower one trims in one write.
    for (let i = 0; i < 150; i++) await wide.patch(h, [Increment("", "n")], { user });
    assert.deepEqual((await logKeys(kv, user, h)).map(([, v]) => v), versions(6, 160));
    await lazy.patch(h, [Increment("", "n")], { user });
    // 153 trimmed entries are more than one commit deletes: handed over, invisible already.
    const backend = backends.get(lazy)!;
    assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [159, 160, 161]);
    const r = await store.changesSince(h, 158, { user });
    assert.ok(!r.truncated && r.changes.length === 3);
    assert.equal((await store.changesSince(h, 157, { user })).truncated, true);
    assert.equal((await keysOf(kv, ["mcpstate", "xw"])).length, 1);
    assert.equal((await logKeys(kv, user, h)).length, 156);
    await lazy.sweep();
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
    assert.deepEqual((await logKeys(kv, user, h)).map(([, v]) => v), [159, 160, 161]);
    // The next write with the narrow retention trims exactly one, in its commit.
    await lazy.patch(h, [Increment("", "n")], { user });
    assert.deepEqual((await logKeys(kv, user, h)).map(([, v]) => v), [160, 161, 162]);

    // By age: after a quiet day and more, one write drops every older entry.
    const aged = open({ maxEntries: 100, maxAgeDays: 1 });
    const g = await aged.mint("log", { n: 0 }, { user });
    for (let i = 0; i < 3; i++) {
      clock.advance(3_600_000);
      await aged.patch(g, [Increment("", "n")], { user });
    }
    clock.advance(DAY - 3_600_000);
    await aged.patch(g, [Increment("", "n")], { user });
    // Entries 1 and 2 are more than a day old; 3 is exactly a day old and stays.
    assert.deepEqual((await logKeys(kv, user, g)).map(([, v]) => v), [3, 4, 5]);
    clock.advance(2 * DAY);
    await aged.patch(g, [Increment("", "n")], { user });
    assert.deepEqual((await logKeys(kv, user, g)).map(([, v]) => v), [6]);
    await aged.close();
  } finally {
    for (const s of [store, wide, lazy]) await s.close();
    kv.close();
  }
});

Deno.test("changelog: an entry over one KV value is an omitted marker; a write without an entry drops the log", async () => {
  using kv = await Deno.openKv(":memory:");
  const backend = new DenoKvBackend(kv);
  await using store = new HandleStore(backend, {
    history: { maxEntryBytes: 4 * MIB },
  });
  await using off = new HandleStore(new DenoKvBackend(kv), { history: false });
  const user = freshUser();
  const h = await store.mint("big", { s: "" }, { user, writer: "w" });
  // About 60 KB of diff: one KV value holds it, kept whole.
  const mid = stateOfBytes(60_000, "é");
  await store.save(h, mid, { user, expectVersion: 1, writer: "w" });
  const r = await store.changesSince(h, 1, { user });
  assert.ok(!r.truncated);
  if (!r.truncated) {
    assert.deepEqual(r.changes[0]!.patch, [{ op: "replace", path: "/s", value: mid.s }]);
  }
  // About 200 KB of diff: stored as its marker, so the log answers truncated.
  await store.save(h, stateOfBytes(200_000, "é"), { user, expectVersion: 2, writer: "w2" });
  const [, , third] = await backend.changes(user, h, 0);
  assert.deepEqual(JSON.parse(third!.text), {
    version: 3,
    at: new Date(third!.at).toISOString(),
    writer: "w2",
    op: "save",
    omitted: true,
  });
  assert.equal((await store.changesSince(h, 2, { user })).truncated, true);
  await store.patch(h, [SetKey("", "n", 1)], { user });
  const tail = await store.changesSince(h, 3, { user });
  assert.ok(!tail.truncated && tail.changes.length === 1);

  // A store without history writes no entry: the log, which would have a gap, goes.
  await off.patch(h, [SetKey("", "n", 2)], { user });
  assert.deepEqual(await logKeys(kv, user, h), []);
  await off.save(h, { s: "x" }, { user, expectVersion: 5 });
  assert.equal((await store.changesSince(h, 5, { user })).truncated, true);
  // The next entry starts a new log.
  await store.patch(h, [SetKey("", "n", 3)], { user });
  const fresh = await store.changesSince(h, 6, { user });
  assert.ok(!fresh.truncated && fresh.changes.length === 1 && fresh.changes[0]!.version === 7);
  assert.deepEqual((await logKeys(kv, user, h)).map(([, v]) => v), [7]);
});

Deno.test("changelog: the backend never reads an entry's text; one over maxEntryBytes is refused whole", async () => {
  using kv = await Deno.openKv(":memory:");
  await using backend = closing(new DenoKvBackend(kv));
  assert.equal(backend.maxEntryBytes, 65_280);
  const user = freshUser(), now = Date.now();
  const times = { createdAt: now, updatedAt: now, expiresAt: null, lastWriter: null };
  const record: HandleRecord = {
    handle: "big_a",
    kind: "big",
    state: "{}",
    version: 1,
    ...times,
  };
  const ctx = (text: string): WriteContext => ({
    now,
    graceMs: 0,
    entry: { version: 1, at: now, text },
    retention: { maxEntries: 10, maxAgeMs: DAY },
  });
  // Not JSON, and as long as one value holds: kept byte for byte.
  const text = "not json \u{1F600}".padEnd(65_278, "x");
  assert.equal(new TextEncoder().encode(text).length, 65_280);
  assert.deepEqual(await backend.insert(user, record, ctx(text)), { inserted: true });
  assert.deepEqual(await backend.changes(user, record.handle, 0), [
    { version: 1, at: now, text },
  ]);
  // One byte more: refused, and nothing of the write is left behind.
  const other = { ...record, handle: "big_b" };
  await rejectsWith(() => backend.insert(user, other, ctx(text + "x")), "backend_error");
  assert.equal(await backend.read(user, other.handle), null);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
});

/** A grant of `owner`'s `handle` to `to`, made at `now`, as the store makes one. */
function grantOf(owner: string, handle: string, to: string, now: number, i: number): GrantRecord {
  const id = `${i}`.padStart(6, "0");
  return {
    grant: `grant_t${id}${crypto.randomUUID().slice(0, 8)}`,
    alias: `doc_t${id}${crypto.randomUUID().slice(0, 8)}`,
    owner,
    handle,
    to,
    rights: "read",
    by: owner,
    parent: null,
    createdAt: now,
    expiresAt: null,
    endedAt: null,
  };
}

Deno.test("transfer: a 1 MiB state and 1.1 MB of changelog, more than one commit holds, move in one commit; nothing is left behind", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const history = { maxEntries: 100, maxEntryBytes: 60_000 };
  const backend = new DenoKvBackend(kv);
  await using store = new HandleStore(backend, {
    clock: clock.fn,
    history,
    maxStateBytes: 4 * MIB,
  });
  const alice = freshUser("alice"), bob = freshUser("bob"), carol = freshUser("carol");
  const h = await store.mint("big", { ...stateOfBytes(MIB, "é"), log: [] }, { user: alice });
  const line = "x".repeat(28_000);
  for (let i = 0; i < 40; i++) {
    await store.patch(h, [Append("log", `${i}${line}`)], { user: alice });
  }
  await store.lease(h, { user: alice, writer: "a", seconds: 60 });
  const g = await store.share(h, { user: alice, to: carol, rights: "read" });
  const before = await store.get(h, { user: alice });
  const log = await backend.changes(alice, h, 0);
  assert.deepEqual(log.map((e) => e.version), versions(1, 42));
  assert.ok(log.reduce((n, e) => n + e.text.length, 0) > 1_100_000);

  assert.equal(await store.transfer(h, { user: alice, to: bob, keep: "read" }), h);
  const theirs = await store.get(h, { user: bob });
  assert.deepEqual(theirs.state, before.state);
  assert.equal(theirs.version, before.version + 1);
  const moved = await backend.changes(bob, h, 0);
  assert.deepEqual(moved.slice(0, 42), log);
  const last = await store.changesSince(h, 42, { user: bob });
  assert.ok(!last.truncated);
  assert.deepEqual(last.changes.map((c) => [c.op, c.keep]), [["transfer", "read"]]);
  const e = await rejectsWith(() => store.get(g.handle, { user: carol }), "handle_not_found");
  assert.equal(e.details.reason, "grant_revoked");
  // Nothing of the record stays under alice: head, index, chunks, changelog and lease are gone.
  assert.deepEqual(await recordKeysOf(kv, alice), []);
  assert.equal((await chunkSets(kv, bob)).size, 1);
  assert.equal((await logKeys(kv, bob, h)).length, 43);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
});

Deno.test("transfer: a handle with more grants in force than its commit can end is refused, nothing moved", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const backend = new DenoKvBackend(kv);
  await using store = new HandleStore(backend, { clock: clock.fn });
  const alice = freshUser("alice"), bob = freshUser("bob");
  // A chunked state and a changelog: the copies staged below bob must be released.
  const h = await store.mint("doc", stateOfBytes(200_000), { user: alice });
  await store.patch(h, [SetKey("", "n", 1)], { user: alice });
  const before = await store.get(h, { user: alice });
  const refused = async (grants: number) => {
    const e = await rejectsWith(
      () => store.transfer(h, { user: alice, to: bob }),
      "invalid_argument",
    );
    assert.equal(e.details.field, "handle");
    assert.equal(e.details.grants_in_force, grants);
    assert.deepEqual(await store.get(h, { user: alice }), before);
    assert.deepEqual(await recordKeysOf(kv, bob), []);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
    assert.equal(
      (await backend.grants.of(alice, h)).filter((g) => g.endedAt === null).length,
      grants,
    );
  };
  // 961 small grants: more ends than the 1,000 mutations of one commit leave room for.
  const small: GrantRecord[] = [];
  for (let i = 0; i < 961; i++) {
    small.push(grantOf(alice, h, `reader${i}`, clock.now, i));
    await backend.grants.put(small[i]!, clock.now);
  }
  await refused(961);
  for (const g of small.slice(0, 661)) await backend.grants.end(g.grant, clock.now);
  // 300 small ones fit, but with 400 more whose grantees have long names (2 KB each) the commit is over 819,200 bytes.
  const large: GrantRecord[] = [];
  for (let i = 0; i < 400; i++) {
    large.push(grantOf(alice, h, `${i}`.padEnd(1000, "€"), clock.now, 1000 + i));
    await backend.grants.put(large[i]!, clock.now);
  }
  await refused(700);
  // Fewer: it moves, and every grant in force on alice's handle ends in that commit.
  for (const g of large) await backend.grants.end(g.grant, clock.now);
  clock.advance(1000);
  assert.equal(await store.transfer(h, { user: alice, to: bob }), h);
  assert.deepEqual((await store.get(h, { user: bob })).state, before.state);
  const grants = await backend.grants.of(alice, h);
  assert.equal(grants.length, 1361);
  assert.equal(grants.filter((g) => g.endedAt === clock.now).length, 300);
  assert.ok(grants.every((g) => g.endedAt !== null));
  assert.deepEqual(await recordKeysOf(kv, alice), []);
});

Deno.test("transfer: shares racing it from another backend either end with it or are refused", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  await using mover = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  const sharer = new DenoKvBackend(kv);
  await using other = new HandleStore(sharer, { clock: clock.fn });
  for (let round = 0; round < 5; round++) {
    const alice = freshUser("alice"), bob = freshUser("bob");
    const h = await mover.mint("doc", { n: round }, { user: alice });
    const shares = Array.from(
      { length: 12 },
      (_, i) =>
        other.share(h, { user: alice, to: `reader${i}`, rights: "read" }).then(
          () => "shared",
          (e) => e.code,
        ),
    );
    assert.equal(await mover.transfer(h, { user: alice, to: bob }), h);
    const outcomes = await Promise.all(shares);
    assert.ok(outcomes.every((o) => o === "shared" || o === "handle_not_found"), outcomes.join());
    const grants = await sharer.grants.of(alice, h);
    assert.equal(grants.length, outcomes.filter((o) => o === "shared").length);
    assert.ok(
      grants.every((g) => g.endedAt !== null),
      "no grant made beside the move stays in force",
    );
    // Each share that landed is an entry before the move; the move is the last version.
    const log = await other.changesSince(h, 0, { user: bob });
    assert.ok(!log.truncated);
    assert.equal(log.changes.at(-1)!.op, "transfer");
    assert.equal(log.changes.filter((c) => c.op === "share").length, grants.length);
  }
});

Deno.test("trash: revoke moves the head in one commit, restore moves it back, sweep purges it", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const backend = new DenoKvBackend(kv);
  await using store = new HandleStore(backend, { clock: clock.fn });
  const user = freshUser(), other = freshUser();
  const h = await store.mint("big", stateOfBytes(300_000, "é"), { user, ttlDays: 30 });
  await store.patch(h, [SetKey("", "n", 1)], { user, writer: "p" });
  const before = await store.get(h, { user });
  const chunks = await keysOf(kv, ["mcpstate", "u", user, "c"]);
  const log = await logKeys(kv, user, h);
  await store.revoke(h, { user });
  // The head moved to the trash; chunks and changelog did not move.
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "h"]), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "i"]), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "t"]), [
    ["mcpstate", "u", user, "t", h],
  ]);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "c"]), chunks);
  assert.deepEqual(await logKeys(kv, user, h), log);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xh"]), []);
  // Invisible to every primitive but untrash, and the handle stays taken.
  assert.equal(await backend.read(user, h), null);
  assert.deepEqual(await backend.changes(user, h, 0), []);
  assert.deepEqual(await backend.list(user, { limit: 10 }), []);
  assert.deepEqual(
    await backend.records!.users({ limit: 1000 }).then((u) => u.includes(user)),
    false,
  );
  const ctx = { now: clock.now, graceMs: 0 };
  assert.deepEqual(await backend.insert(user, { ...before, state: "{}" } as never, ctx), {
    inserted: false,
  });
  assert.equal(await backend.untrash(other, h, ctx), null);
  // Back exactly as it was, changelog included.
  assert.deepEqual(await store.restore(h, { user }), before);
  assert.deepEqual(await store.get(h, { user }), before);
  // (The mint's entry of a 300 KB state is an omitted marker.)
  assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [1, 2]);
  const r = await store.changesSince(h, 1, { user });
  assert.ok(!r.truncated && r.changes[0]!.writer === "p");
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "t"]), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xt"]), []);
  assert.equal((await store.list(user)).length, 1);
  assert.equal((await keysOf(kv, ["mcpstate", "xh"])).length, 1);

  // Past the undo window: nothing to restore; sweep (of all users) purges everything.
  await store.revoke(h, { user });
  const g = await store.mint("small", { a: 1 }, { user: other });
  await store.revoke(g, { user: other });
  clock.advance(7 * DAY);
  await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
  assert.equal(await store.sweep(), 0);
  assert.deepEqual(await recordKeysOf(kv, user), []);
  assert.deepEqual(await recordKeysOf(kv, other), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xt"]), []);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);

  // Sweep of one user purges only that user's trash.
  const a = await store.mint("small", { a: 1 }, { user });
  const b = await store.mint("small", { b: 1 }, { user: other });
  await store.revoke(a, { user });
  await store.revoke(b, { user: other });
  clock.advance(7 * DAY + 1);
  await store.sweep(user);
  assert.deepEqual(await recordKeysOf(kv, user), []);
  assert.equal((await keysOf(kv, ["mcpstate", "u", other, "t"])).length, 1);
  assert.equal((await keysOf(kv, ["mcpstate", "xt"])).length, 1);
});

Deno.test("trash: the largest inline head with the longest metadata fits; an import beside a trashed copy replaces it on the next revoke", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const backend = new DenoKvBackend(kv);
  await using store = new HandleStore(backend, { clock: clock.fn });
  const user = "ü".repeat(200);
  const writer = "😀".repeat(128);
  const h = await store.mint("k" + "-".repeat(31), stateOfBytes(63_488, "€"), {
    user,
    writer,
    ttlDays: 1,
    randomChars: 64,
  });
  const before = await store.get(h, { user });
  await store.revoke(h, { user });
  assert.deepEqual(await store.restore(h, { user }), before);

  // importRecord() writes a live record beside a trashed copy, as the
  // memory backend does; the next revoke drops the older trashed copy.
  const x = await store.mint("note", stateOfBytes(200_000), { user: "imp" });
  await store.patch(x, [SetKey("", "n", 1)], { user: "imp" });
  await store.revoke(x, { user: "imp" });
  const ctx = { now: clock.now, graceMs: 0 };
  const imported = {
    handle: x,
    kind: "note",
    state: '{"imported":true}',
    version: 9,
    createdAt: clock.now,
    updatedAt: clock.now,
    expiresAt: null,
    lastWriter: "import",
  };
  assert.equal(await backend.records!.import("imp", imported, ctx), "inserted");
  assert.equal(await backend.untrash("imp", x, ctx), null);
  await store.revoke(x, { user: "imp" });
  assert.deepEqual(await keysOf(kv, ["mcpstate", "u", "imp", "c"]), []);
  assert.deepEqual(await logKeys(kv, "imp", x), []);
  assert.deepEqual(await backend.untrash("imp", x, ctx), imported);
});

/**
 * Starts the child program with `args` (a `kv-pause` or `kv-log` workload,
 * see its module doc) and reads its output up to the line `until`.
 */
async function faultChild(args: string[], until: string): Promise<Child> {
  const child = spawnChild(args);
  while (await child.line(`the child, before ${until}`) !== until) { /* an earlier line */ }
  return child;
}

Deno.test("16 writers in 2 processes on one KV file with 100 KB (chunked) states all land; the losers release their chunk sets", async () => {
  const file = `${dir}/writers.kv`;
  // Every writer has its own store (its own Deno.Kv), so they all race.
  const { user } = await writersInTwoProcesses(`denokv:///${file}`, {
    stores: [8, 8],
    count: 6,
    pad: 100_000,
  });
  using kv = await Deno.openKv(file);
  // Only the head's chunk set is left.
  assert.equal((await chunkSets(kv, user)).size, 1);
  assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
});

Deno.test("a writer killed between its chunk writes and the head swap leaves the previous version", async (t) => {
  for (const stage of ["swap", "chunks"]) {
    await t.step(
      `killed at the ${stage === "swap" ? "head swap" : "second chunk commit"}`,
      async () => {
        const file = `${dir}/kill-${stage}.kv`;
        const user = freshUser();
        const before = stateOfBytes(MIB, "é");
        let h: string;
        {
          await using store = await HandleStore.fromUrl(`denokv:///${file}`);
          h = await store.mint("big", before, { user });
        }
        const child = await faultChild(["kv-pause", file, user, h, stage, "z"], "paused");
        child.kill();
        assert.equal((await child.ended()).status.signal, "SIGKILL");

        const kv = await Deno.openKv(file);
        const backend = new DenoKvBackend(kv);
        const store = new HandleStore(backend);
        try {
          const s = await store.get(h, { user });
          assert.equal(s.version, 1);
          assert.deepEqual(s.state, before);
          // The killed writer left an announced, unadopted chunk set.
          assert.equal((await keysOf(kv, ["mcpstate", "xw"])).length, 1);
          assert.equal((await chunkSets(kv, user)).size, 2);
          // Too young to collect: a writer could still be about to adopt it.
          await store.sweep();
          assert.equal((await chunkSets(kv, user)).size, 2);
          // Later (here: with no minimum age) sweep collects it.
          const late = new DenoKvBackend(kv, { orphanAgeMs: 0 });
          assert.equal(await late.sweep(null, 0, Date.now()), 0);
          assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
          assert.equal((await chunkSets(kv, user)).size, 1);
          assert.deepEqual((await store.get(h, { user })).state, before);
          // The changelog holds no entry of the killed write (the mint's is a marker).
          assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [1]);
          assert.equal((await store.changesSince(h, 0, { user })).truncated, true);
          const next = stateOfBytes(MIB, "ö");
          assert.equal((await store.save(h, next, { user, expectVersion: 1 })).version, 2);
          assert.deepEqual((await store.get(h, { user })).state, next);
          assert.equal((await chunkSets(kv, user)).size, 1);
        } finally {
          await store.close();
          kv.close();
        }
      },
    );
  }
});

/**
 * Asserts that the changelog after `since` is either truncated, or every
 * entry up to the state's version, each the patch that appended its place of
 * the state's `log`. Returns how many entries it checked.
 */
async function assertLogInStep(
  store: HandleStore,
  h: string,
  user: string,
  since: number,
): Promise<number> {
  const s = await store.get<{ n: number; log: string[] }>(h, { user });
  assert.equal(s.state.n, s.state.log.length);
  const r = await store.changesSince(h, since, { user });
  if (r.truncated) {
    assert.equal(r.current.version, s.version);
    return 0;
  }
  assert.equal(r.version, s.version);
  assert.deepEqual(r.changes.map((c) => c.version), versions(since + 1, s.version));
  const appended = r.changes.map((c) => (c.ops as { value: string }[])[1]!.value);
  assert.deepEqual(appended, s.state.log.slice(s.state.log.length - appended.length));
  return appended.length;
}

Deno.test("a writer killed at the commit of its third write leaves no write without its entry, no entry without its write", async () => {
  const file = `${dir}/kill-log.kv`;
  const user = freshUser();
  let h: string;
  {
    await using store = await HandleStore.fromUrl(`denokv:///${file}`);
    h = await store.mint("log", { n: 0, log: [] }, { user });
  }
  const child = await faultChild(["kv-log", file, user, h, "3", "k"], "paused");
  child.kill();
  assert.equal((await child.ended()).status.signal, "SIGKILL");

  await using store = await HandleStore.fromUrl(`denokv:///${file}`);
  const v = (await store.get(h, { user })).version;
  assert.equal(v, 3);
  // Retention keeps the last 100 entries: all of them are there, in step with the state.
  const since = Math.max(1, v - 100);
  assert.equal(await assertLogInStep(store, h, user, since), v - since);
  // Writers go on from there, entry and all.
  await store.patch(h, [Increment("", "n"), Append("log", "after")], { user });
  assert.equal(await assertLogInStep(store, h, user, since + 1), v - since);
});

Deno.test("a sweeper collecting orphans at age 0 never breaks concurrent large writes", async () => {
  const kv = await Deno.openKv(`${dir}/sweeper.kv`);
  const store = new HandleStore(new DenoKvBackend(kv));
  const sweeper = new DenoKvBackend(kv, { orphanAgeMs: 0 });
  // A backend per writer, so that they race instead of taking turns.
  const writers = Array.from({ length: 4 }, () => new HandleStore(new DenoKvBackend(kv)));
  try {
    const user = freshUser();
    const h = await store.mint("big", { n: 0, pad: "p".repeat(150_000) }, { user });
    let stop = false;
    const sweeping = (async () => {
      let n = 0;
      while (!stop) {
        await sweeper.sweep(null, 0, Date.now());
        n++;
      }
      return n;
    })();
    await Promise.all(writers.map(async (w) => {
      for (let i = 0; i < 10; i++) await w.patch(h, [Increment("", "n")], { user });
    }));
    stop = true;
    assert.ok(await sweeping > 0);
    const s = await store.get<{ n: number; pad: string }>(h, { user });
    assert.equal(s.state.n, 40);
    assert.equal(s.state.pad.length, 150_000);
    await sweeper.sweep(null, 0, Date.now());
    assert.equal((await chunkSets(kv, user)).size, 1);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
  } finally {
    for (const w of writers) await w.close();
    await store.close();
    kv.close();
  }
});

Deno.test("leases: one key beside the head that touches nothing else, read 10 keys a call, swept once lapsed", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  const racers = Array.from({ length: 8 }, () => new DenoKvBackend(kv));
  try {
    const user = freshUser();
    const hs: string[] = [];
    for (let i = 0; i < 25; i++) hs.push(await store.mint("task", { i }, { user }));
    const entries = async () => {
      const out: [Deno.KvKey, string][] = [];
      for await (const e of kv.list({ prefix: ["mcpstate"] })) out.push([e.key, e.versionstamp]);
      return out;
    };
    const before = await entries();
    for (let i = 0; i < 25; i += 2) {
      await store.lease(hs[i]!, { user, writer: `w${i}`, seconds: 60 });
    }
    const after = await entries();
    const isLease = ([k]: [Deno.KvKey, string]) => k[3] === "l";
    // Every other key, head included, is as it was: same versionstamps.
    assert.deepEqual(after.filter((e) => !isLease(e)), before);
    assert.deepEqual(
      after.filter(isLease).map(([k]) => k),
      hs.filter((_, i) => i % 2 === 0).sort().map((h) => ["mcpstate", "u", user, "l", h]),
    );
    assert.deepEqual((await kv.get(["mcpstate", "u", user, "l", hs[0]!])).value, {
      holder: "w0",
      expiresAt: clock.now + 60_000,
    });
    // list() reads the 25 lease keys in three getMany calls; each lease lands on its handle.
    const listed = await store.list(user);
    assert.equal(listed.length, 25);
    for (const info of listed) {
      const i = hs.indexOf(info.handle);
      assert.equal(info.activeLease?.holder, i % 2 === 0 ? `w${i}` : undefined);
    }
    // Backends racing for one lease: exactly one wins, and all are told who.
    const raced = await Promise.all(
      racers.map((b, i) =>
        b.leases.acquire(user, hs[1]!, { holder: `r${i}`, expiresAt: clock.now + 5_000 }, clock.now)
      ),
    );
    const winners = raced.filter((r) => r.acquired);
    assert.equal(winners.length, 1);
    for (const r of raced) assert.deepEqual(r.lease, winners[0]!.lease);
    // sweep(user) drops the lapsed leases (and only those).
    await store.lease(hs[2]!, { user, writer: "w2", seconds: 120 });
    clock.advance(60_000);
    await store.sweep(user);
    assert.deepEqual((await keysOf(kv, ["mcpstate", "u", user, "l"])).map((k) => k[4]), [hs[2]]);
    assert.deepEqual(
      after.filter((e) => !isLease(e)),
      (await entries()).filter((e) => !isLease(e)),
    );
  } finally {
    for (const b of racers) await b.close();
    await store.close();
    kv.close();
  }
});

Deno.test("a watcher hears versions another process writes to the KV file within a bounded time", async () => {
  const file = `${dir}/watch.kv`;
  const user = freshUser();
  await using store = await HandleStore.fromUrl(`denokv:///${file}`);
  const h = await store.mint("live", { n: 0 }, { user });
  const stop = new AbortController();
  const guard = setTimeout(() => stop.abort(), 20_000);
  // A safety-net poll of 10 minutes: only the backend's feed can deliver in time.
  const it = store.watch<{ n: number }>(h, { user, signal: stop.signal, pollMs: 600_000 });
  try {
    assert.equal((await it.next()).value?.version, 1);
    // Another process patches the handle 4 times, 300 ms apart.
    const child = spawnChild(["patch", `denokv:///${file}`, user, h]);
    assert.equal(await child.line("the writer process"), "ready");
    const wrote = new Map<number, number>();
    const writing = (async () => {
      for (let i = 0; i < 4; i++) {
        await sleep(300);
        await child.send("patch");
        const [v, at] = (await child.line("the writer process")).split(" ");
        wrote.set(Number(v), Number(at));
      }
      await child.succeeded();
    })();
    const seen: [number, number][] = [];
    while ((seen.at(-1)?.[0] ?? 1) < 5) {
      const r = await it.next();
      assert.equal(r.done, false, "the watch ended early (timed out?)");
      assert.equal(r.value!.state.n, r.value!.version - 1);
      seen.push([r.value!.version, Date.now()]);
    }
    await writing;
    const lags = seen.map(([v, at]) => at - wrote.get(v)!);
    console.log(`versions seen ${seen.map(([v]) => v)}, ms after the child's commit: ${lags}`);
    for (const [i, [v]] of seen.entries()) assert.ok(i === 0 || v > seen[i - 1]![0]);
    for (const lag of lags) assert.ok(lag < 2_000, `seen ${lag} ms after the write`);
  } finally {
    clearTimeout(guard);
    await it.return?.(undefined);
  }
  assert.equal(stop.signal.aborted, false, "the watch waited 20 s");
});

Deno.test("a lease holder killed with SIGKILL: its lease holds until it lapses, then another takes it; the key expires", async () => {
  const file = `${dir}/lease.kv`;
  const user = freshUser();
  await using store = await HandleStore.fromUrl(`denokv:///${file}`);
  const h = await store.mint("task", { a: 1 }, { user });
  const g = await store.mint("task", { b: 1 }, { user });
  const child = spawnChild(["lease", `denokv:///${file}`, user, "laptop/killed", "1.5", h, g]);
  const leased = await child.line("the lease holder");
  const [hAt, gAt] = leased.split(" ").slice(1).map(Number) as [number, number];
  child.kill();
  assert.equal((await child.ended()).status.signal, "SIGKILL");

  const held = { holder: "laptop/killed", expiresAt: new Date(hAt) };
  assert.deepEqual((await store.get(h, { user })).activeLease, held);
  const refused = await store.lease(h, { user, writer: "phone/next", seconds: 60 });
  assert.deepEqual(refused, { acquired: false, ...held });
  const gKey = ["mcpstate", "u", user, "l", g];
  const kv = await Deno.openKv(file);
  try {
    assert.deepEqual((await kv.get(gKey)).value, { holder: "laptop/killed", expiresAt: gAt });
    await new Promise((r) => setTimeout(r, Math.max(0, gAt - Date.now()) + 20));
    // Lapsed: judged by expiresAt at once, whether or not Deno KV's expiry
    // pass (on open, then about once a minute) has removed the key yet.
    assert.equal((await store.get(h, { user })).activeLease, undefined);
    assert.equal((await store.list(user)).some((i) => i.activeLease), false);
  } finally {
    kv.close();
  }
  const taken = await store.lease(h, { user, writer: "phone/next", seconds: 60 });
  assert.equal(taken.acquired, true);
  assert.equal((await store.get(h, { user })).activeLease?.holder, "phone/next");
  assert.equal((await store.get(h, { user })).version, 1);
  // The key carries expireIn: a fresh open of the file runs the expiry pass and it is gone.
  const fresh = await Deno.openKv(file);
  try {
    assert.equal((await fresh.get(gKey)).versionstamp, null);
    assert.notEqual((await fresh.get(["mcpstate", "u", user, "l", h])).value, null);
  } finally {
    fresh.close();
  }
});

Deno.test("denokv URLs: forms, KV Connect token handling and redaction (no live endpoint)", async (t) => {
  await t.step("local and remote forms", () => {
    assert.deepEqual(parseDenoKvUrl("denokv:///:memory:"), { kind: "memory", path: ":memory:" });
    assert.deepEqual(parseDenoKvUrl("denokv:////var/lib/s.kv"), {
      kind: "file",
      path: "/var/lib/s.kv",
    });
    assert.deepEqual(parseDenoKvUrl("denokv:///rel/s.kv"), { kind: "file", path: "rel/s.kv" });
    const home = Deno.env.get("HOME");
    assert.deepEqual(parseDenoKvUrl("denokv:///~/.mcpstate/state.kv"), {
      kind: "file",
      path: `${home}/.mcpstate/state.kv`,
    });
    assert.deepEqual(parseDenoKvUrl("denokv+https://kv.example.com/db/1?x=y"), {
      kind: "remote",
      path: "https://kv.example.com/db/1?x=y",
    });
    assert.deepEqual(parseDenoKvUrl("DENOKV+HTTP://127.0.0.1:4512"), {
      kind: "remote",
      path: "http://127.0.0.1:4512/",
    });
  });

  await t.step("malformed URLs are invalid_argument, credentials redacted", async () => {
    for (const bad of ["denokv://host/x.kv", "denokv:///", "denokv+https://", "denokv+ftp://x"]) {
      await rejectsWith(() => DenoKvBackend.fromUrl(bad), "invalid_argument");
    }
    await rejectsWith(() => DenoKvBackend.fromUrl("denokv:///x.kv?mode=rw"), "invalid_argument");
    const e = await rejectsWith(
      () => HandleStore.fromUrl("denokv+https://admin:hunter2@kv.example.com/db"),
      "invalid_argument",
    );
    assert.ok(!e.message.includes("hunter2"), e.message);
    assert.ok(!e.message.includes("admin"), e.message);
    assert.match(e.message, /denokv\+https:\/\/\*\*\*@kv\.example\.com/);
    assert.match(e.message, /DENO_KV_ACCESS_TOKEN/);
  });

  const saved = Deno.env.get("DENO_KV_ACCESS_TOKEN");
  try {
    await t.step("a missing DENO_KV_ACCESS_TOKEN is a clear invalid_argument", async () => {
      Deno.env.delete("DENO_KV_ACCESS_TOKEN");
      const e = await rejectsWith(
        () => HandleStore.fromUrl("denokv+https://kv.example.com/db?k=v"),
        "invalid_argument",
      );
      assert.match(e.message, /DENO_KV_ACCESS_TOKEN/);
      assert.match(e.message, /https:\/\/kv\.example\.com\/db/);
    });

    await t.step("the token goes to the endpoint as a bearer and never into messages", async () => {
      const token = "tok-" + crypto.randomUUID();
      Deno.env.set("DENO_KV_ACCESS_TOKEN", token);
      const seen: { path: string; auth: string | null }[] = [];
      let status = 401;
      await using server = Deno.serve(
        { hostname: "127.0.0.1", port: 0, onListen: () => {} },
        (req) => {
          seen.push({ path: new URL(req.url).pathname, auth: req.headers.get("authorization") });
          // A chatty endpoint that echoes the token it was given.
          return new Response(`bad token ${req.headers.get("authorization")}`, { status });
        },
      );
      const base = `denokv+http://127.0.0.1:${server.addr.port}/kv/db1?session=s3cr3t`;
      const refused = await rejectsWith(() => HandleStore.fromUrl(base), "backend_error");
      assert.deepEqual(seen, [{ path: "/kv/db1", auth: `Bearer ${token}` }]);
      assert.ok(!refused.message.includes(token), refused.message);
      assert.ok(!refused.message.includes("s3cr3t"), refused.message);
      assert.match(refused.message, /refused the access token/);
      assert.match(refused.message, /DENO_KV_ACCESS_TOKEN/);
      status = 500;
      const failed = await rejectsWith(() => HandleStore.fromUrl(base), "backend_error");
      assert.ok(!failed.message.includes(token), failed.message);
      assert.ok(!failed.message.includes("s3cr3t"), failed.message);
      assert.match(failed.message, /Could not open Deno KV at http:\/\/127\.0\.0\.1:\d+\/kv\/db1/);
    });
  } finally {
    if (saved === undefined) Deno.env.delete("DENO_KV_ACCESS_TOKEN");
    else Deno.env.set("DENO_KV_ACCESS_TOKEN", saved);
  }
});

Deno.test("without --unstable-kv a denokv URL is a clear invalid_argument; importing needs no flag", async () => {
  const child = spawnChild(["open", "denokv:///:memory:"], { unstableKv: false });
  const out = JSON.parse(await child.line("the child without --unstable-kv"));
  await child.succeeded();
  assert.equal(out.openKv, "undefined");
  assert.equal(out.code, "invalid_argument");
  assert.match(out.message, /--unstable-kv/);
  assert.match(out.message, /"unstable": \["kv"\]/);
});

Deno.test("denokv: processes creating one new file at the same moment all open it", async () => {
  await createAtOnce(Array.from({ length: 10 }, (_, k) => `denokv:///${dir}/race-${k}.kv`), 150);
});

Deno.test("denokv tests: clean up", async () => {
  sharedKv.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("encrypt in place: a state sealed past the inline limit is chunked, a chunked one's old set collected; an entry too long once sealed keeps its omitted marker", async () => {
  using kv = await Deno.openKv(":memory:");
  const backend = new DenoKvBackend(kv);
  const history = { maxEntryBytes: 60_000 };
  await using plain = new HandleStore(backend, { history });
  const user = freshUser();
  // 50 KB inline; sealed, over the inline limit.
  const a = await plain.mint("big", { s: "x".repeat(50_000) }, { user, idempotencyKey: "a" });
  const b = await plain.mint("big", { s: "y".repeat(300_000) }, { user });
  const [old] = await chunkSets(kv, user);
  // A 55 KB entry: one KV value as it is, not once sealed.
  await plain.patch(b, [SetKey("", "t", "z".repeat(55_000))], { user });
  const before = [await plain.get(a, { user }), await plain.get(b, { user })];
  assert.equal((await plain.changesSince(b, 1, { user })).truncated, false);
  const key = crypto.getRandomValues(new Uint8Array(32)).toBase64();
  await using sealed = new HandleStore(backend, { history, encryption: { keys: { k: key } } });
  const counts = await sealed.maintenance.encrypt();
  assert.equal(counts.left, 0);
  assert.deepEqual([await sealed.get(a, { user }), await sealed.get(b, { user })], before);
  const sets = await chunkSets(kv, user);
  assert.equal(sets.size, 2, "a and b are chunked");
  assert.ok(!sets.has(old), "b's plaintext chunks were collected");
  // The entry is kept as its omitted marker: the history through it is no longer whole.
  assert.equal((await sealed.changesSince(b, 1, { user })).truncated, true);
  await rejectsWith(() => sealed.stateAt(b, 1, { user }), "invalid_argument");
  const again = await sealed.mint("big", { s: "x".repeat(50_000) }, { user, idempotencyKey: "a" });
  assert.equal(again, a);
  for await (const e of kv.list<unknown>({ prefix: ["mcpstate", "u", user] })) {
    const text = JSON.stringify(
      e.value,
      (_, v) => v instanceof Uint8Array ? new TextDecoder().decode(v) : v,
    );
    assert.ok(!/xxxxxxxx|yyyyyyyy|zzzzzzzz/.test(text), `plaintext left at ${String(e.key)}`);
  }
});
