/**
 * `HandleStore`'s record-level API behind `mcpstate export`, `import` and
 * `migrate`: `users`, `exportRecords`, `checkRecord`, `importRecord`,
 * `capabilities` and `isExpired`, on the memory backend and on SQLite.
 */

import assert from "node:assert/strict";
import {
  type Backend,
  type HandleRecord,
  HandleStore,
  type HandleStoreOptions,
  McpStateError,
  openBackend,
} from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 6, 28, 12);

/** A store on a fresh backend of each kind, with a clock the test moves. */
const KINDS: [string, () => Promise<Backend>][] = [
  ["memory", () => Promise.resolve(new MemoryBackend())],
  ["sqlite", () => openBackend("sqlite:///:memory:")],
];

function each(
  name: string,
  fn: (store: HandleStore, clock: { now: number }) => Promise<void>,
  options: HandleStoreOptions = {},
): void {
  for (const [kind, open] of KINDS) {
    Deno.test(`${name} [${kind}]`, async () => {
      const clock = { now: T0 };
      await using store = new HandleStore(await open(), {
        clock: () => clock.now,
        reclaimIntervalMs: 0,
        ...options,
      });
      await fn(store, clock);
    });
  }
}

function record(handle: string, version: number, extra: Partial<HandleRecord> = {}): HandleRecord {
  return {
    handle,
    kind: handle.split("_")[0]!,
    // Not what JSON.stringify would write: an import keeps the text byte for byte.
    state: `{"v":${version}, "10":"ten","__proto__":{"x":1},"n":1.50}`,
    version,
    createdAt: T0 - DAY,
    updatedAt: T0 - DAY + version,
    expiresAt: null,
    lastWriter: `writer/v${version}`,
    ...extra,
  };
}

async function refused(
  fn: () => unknown,
  code: string,
  field?: string,
  message?: RegExp,
): Promise<void> {
  await assert.rejects(async () => await fn(), (e: unknown) => {
    assert.ok(e instanceof McpStateError, String(e));
    assert.equal(e.code, code, e.message);
    if (field !== undefined) assert.equal(e.details.field, field, e.message);
    if (message) assert.match(e.message, message);
    return true;
  });
}

each("importRecord writes a record exactly, keeps newer data, replaces older", async (store) => {
  const r = record("note_aaaaaaa1", 3);
  const first = await store.importRecord("alice", r);
  assert.deepEqual(first, { outcome: "inserted", current: r });
  assert.deepEqual(await store.importRecord("alice", r), { outcome: "kept", current: r });
  const older = record("note_aaaaaaa1", 2);
  assert.deepEqual(await store.importRecord("alice", older), { outcome: "kept", current: r });
  const newer = record("note_aaaaaaa1", 5, { expiresAt: T0 + DAY });
  assert.deepEqual(await store.importRecord("alice", newer), {
    outcome: "replaced",
    current: newer,
  });
  const snap = await store.get("note_aaaaaaa1", { user: "alice" });
  assert.deepEqual([snap.version, snap.lastWriter, snap.state.n], [5, "writer/v5", 1.5]);
  // Another user's handle of the same name is another record.
  assert.equal((await store.importRecord("bob", r)).outcome, "inserted");
});

each("importRecord with dryRun says what it would do and writes nothing", async (store) => {
  const r = record("note_aaaaaaa1", 3);
  assert.deepEqual(await store.importRecord("alice", r, { dryRun: true }), {
    outcome: "inserted",
    current: null,
  });
  assert.deepEqual(await store.list("alice", { includeExpired: true }), []);
  await store.importRecord("alice", r);
  const newer = record("note_aaaaaaa1", 4);
  assert.deepEqual(await store.importRecord("alice", newer, { dryRun: true }), {
    outcome: "replaced",
    current: r,
  });
  assert.equal((await store.get(r.handle, { user: "alice" })).version, 3);
});

each(
  "importRecord skips a record expired past the grace period by the store's clock",
  async (store, clock) => {
    const gone = record("note_aaaaaaa1", 1, { expiresAt: T0 - 2 * DAY });
    assert.deepEqual(await store.importRecord("alice", gone), { outcome: "expired" });
    // Within the grace period: written, and answered as expired.
    const late = record("note_aaaaaaa2", 1, { expiresAt: T0 - DAY / 2 });
    assert.equal((await store.importRecord("alice", late)).outcome, "inserted");
    await refused(() => store.get(late.handle, { user: "alice" }), "handle_expired");
    // The store's clock decides, not the wall clock.
    clock.now = T0 - 3 * DAY;
    assert.equal((await store.importRecord("alice", gone)).outcome, "inserted");
  },
  { expiredGraceDays: 1 },
);

each("importRecord stores only the fields of a record", async (store) => {
  const r = { ...record("note_aaaaaaa1", 1), extra: "not a field" } as HandleRecord;
  const res = await store.importRecord("alice", r);
  assert.ok(res.outcome === "inserted");
  assert.deepEqual(Object.keys(res.current ?? {}).sort(), Object.keys(record("x_y", 1)).sort());
});

each(
  "checkRecord and importRecord refuse what the store's rules refuse; nothing is written",
  async (store) => {
    const bad: [string, string | undefined, Partial<HandleRecord> | { user: string }, RegExp][] = [
      ["invalid_argument", "user", { user: "" }, /"user" must be a non-empty string/],
      ["invalid_argument", "user", { user: "a\u0000b" }, /"user" holds U\+0000/],
      ["invalid_argument", "user", { user: "a\ud800" }, /"user" holds U\+0000 or a lone surrogate/],
      ["invalid_argument", "handle", { handle: "x".repeat(257) }, /at most 256/],
      ["invalid_argument", "handle", { handle: "note_\u0000" }, /"handle" holds U\+0000/],
      ["invalid_argument", "kind", { kind: "Bad Kind" }, /"kind" "Bad Kind" is not a valid kind/],
      ["invalid_argument", "kind", { kind: "note\u0000" }, /"kind" holds U\+0000/],
      ["invalid_argument", "version", { version: 0 }, /"version" must be a whole number/],
      ["invalid_argument", "version", { version: 1.5 }, /"version" must be a whole number/],
      ["invalid_argument", "created_at", { createdAt: NaN }, /"created_at" must be a time/],
      ["invalid_argument", "updated_at", { updatedAt: 1.5 }, /"updated_at" must be a time/],
      ["invalid_argument", "expires_at", { expiresAt: Infinity }, /"expires_at" must be null/],
      ["invalid_argument", "last_writer", { lastWriter: "w".repeat(257) }, /at most 256/],
      ["invalid_argument", "last_writer", { lastWriter: "w\u0000" }, /"last_writer" holds U\+0000/],
      ["invalid_argument", "state", { state: "[1]" }, /"state" must be a JSON object/],
      ["invalid_argument", "state", { state: "{oops" }, /"state" must be a JSON object/],
      ["invalid_argument", undefined, { state: "[".repeat(70) + "]".repeat(70) }, /object/],
      ["invalid_argument", undefined, { state: `{"a":${"[".repeat(70)}${"]".repeat(70)}}` }, /64/],
      [
        "state_too_large",
        undefined,
        { state: `{"s":"${"é".repeat(60)}"}` },
        /over the limit of 100/,
      ],
    ];
    for (const [code, field, change, message] of bad) {
      const { user = "alice", ...fields } = change as Partial<HandleRecord> & { user?: string };
      const r = { ...record("note_aaaaaaa1", 1), ...fields };
      await refused(() => store.checkRecord(user, r), code, field, message);
      await refused(() => store.importRecord(user, r), code, field, message);
      await refused(() => store.importRecord(user, r, { dryRun: true }), code, field, message);
    }
    await refused(
      () => store.checkRecord("alice", null as unknown as HandleRecord),
      "invalid_argument",
    );
    assert.deepEqual(await store.users(), []);
    store.checkRecord("alice", record("note_aaaaaaa1", 1));
  },
  { maxStateBytes: 100 },
);

each(
  "exportRecords gives every record of a user, expired ones included, in handle order",
  async (store, clock) => {
    const handles = ["note_b", "note_a", "z_1", "é_1", "note_A"];
    for (const [i, h] of handles.entries()) {
      await store.importRecord("alice", record(h, i + 1, { kind: "note" }));
    }
    const minted = await store.mint("doc", { x: 1 }, { user: "alice", ttlDays: 1 });
    const revoked = await store.mint("doc", { x: 2 }, { user: "alice" });
    await store.revoke(revoked, { user: "alice" });
    await store.mint("doc", {}, { user: "bob" });
    clock.now += 2 * DAY; // `minted` expires: still exported while the backend holds it
    const out: HandleRecord[] = [];
    for await (const r of store.exportRecords("alice")) out.push(r);
    const want = [...handles, minted].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    assert.deepEqual(out.map((r) => r.handle), want);
    assert.deepEqual(out.find((r) => r.handle === "note_a"), record("note_a", 2, { kind: "note" }));
    assert.equal(out.find((r) => r.handle === minted)!.state, '{"x":1}');
    const none: HandleRecord[] = [];
    for await (const r of store.exportRecords("nobody")) none.push(r);
    assert.deepEqual(none, []);
    assert.throws(() => store.exportRecords(""), McpStateError);
  },
);

each("exportRecords walks more records than one listing page", async (store) => {
  const n = 1_234;
  for (let i = 0; i < n; i++) {
    await store.importRecord("alice", record(`note_${String(i).padStart(5, "0")}`, 1));
  }
  let count = 0, last = "";
  for await (const r of store.exportRecords("alice")) {
    assert.ok(r.handle > last);
    last = r.handle;
    count++;
  }
  assert.equal(count, n);
});

each("users pages through every user that holds a record", async (store) => {
  const users = ["carol", "alice", "bob", "dave", "ü"];
  for (const u of users) await store.importRecord(u, record("note_aaaaaaa1", 1));
  assert.deepEqual((await store.users()).toSorted(), users.toSorted());
  const seen: string[] = [];
  let page = await store.users({ limit: 2 });
  seen.push(...page);
  while (page.length === 2) {
    page = await store.users({ after: page[1]!, limit: 2 });
    seen.push(...page);
  }
  assert.deepEqual(seen.toSorted(), users.toSorted());
  assert.equal(new Set(seen).size, users.length);
  for (const limit of [0, 10_001, 1.5, "2"]) {
    await refused(() => store.users({ limit: limit as number }), "invalid_argument", "limit");
  }
  await refused(() => store.users({ after: 1 as unknown as string }), "invalid_argument", "after");
});

each("isExpired judges by the store's clock", async (store, clock) => {
  const h = await store.mint("note", {}, { user: "alice", ttlDays: 1 });
  const [info] = await store.list("alice", { includeExpired: true });
  assert.equal(store.isExpired(info!), false);
  clock.now += DAY;
  assert.equal(store.isExpired(info!), true);
  assert.equal(store.isExpired({ expiresAt: null }), false);
  await refused(() => store.get(h, { user: "alice" }), "handle_expired");
});

Deno.test("a backend without listUsers and an import primitive: capabilities say so, and the calls fail clearly", async () => {
  const full = new MemoryBackend();
  // The optional primitives hidden: the records group (users and the import primitive).
  const hidden = new Set<string | symbol>(["records"]);
  const bare = new Proxy(full, {
    get(target, name) {
      if (hidden.has(name)) return undefined;
      const v = Reflect.get(target, name, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Backend;
  await using store = new HandleStore(bare, { reclaimIntervalMs: 0 });
  assert.deepEqual(store.capabilities, { users: false, importRecord: false, grants: true });
  await refused(() => store.users(), "invalid_argument", undefined, /cannot list its users/);
  const r = record("note_aaaaaaa1", 1);
  await refused(() => store.importRecord("alice", r), "invalid_argument", undefined, /import/);
  assert.deepEqual(await store.importRecord("alice", r, { dryRun: true }), {
    outcome: "inserted",
    current: null,
  });
  await using whole = new HandleStore(new MemoryBackend(), { reclaimIntervalMs: 0 });
  assert.deepEqual(whole.capabilities, { users: true, importRecord: true, grants: true });
});
