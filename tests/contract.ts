/**
 * The backend contract: one suite, run unchanged against every backend. A
 * backend proves itself by passing it.
 *
 * ```ts ignore
 * backendContract("sqlite file", () => openBackend(url));
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  AddToSet,
  Append,
  type Backend,
  DelKey,
  type HandlePage,
  type HandleRecord,
  HandleStore,
  type HandleStoreOptions,
  Increment,
  McpStateError,
  Merge,
  SetKey,
  StaleWrite,
  toPayload,
} from "../mod.ts";

/** Opens a store on the backend under test; each call may be a new connection to the same data. */
export type OpenStore = (options?: HandleStoreOptions) => Promise<HandleStore>;

/** Opens the backend under test; each call may be a new connection to the same data. */
export type OpenBackend = () => Promise<Backend>;

/** The backend each store of the suite runs on, for the steps that write below the store. */
const backendOf = new WeakMap<HandleStore, Backend>();

const DAY = 86_400_000;

/** A fake clock the tests move by hand. */
export class FakeClock {
  /** Current epoch ms. */
  now: number;
  /** @param start Start time, epoch ms. */
  constructor(start = Date.UTC(2026, 6, 28, 12)) {
    this.now = start;
  }
  /** The clock function to pass as `clock`. */
  readonly fn = (): number => this.now;
  /** @param ms How far to move. */
  advance(ms: number): void {
    this.now += ms;
  }
}

/** A user name no other test uses. */
export function freshUser(tag = "u"): string {
  return `${tag}-${crypto.randomUUID()}`;
}

/**
 * Asserts that `fn` rejects with an `McpStateError` of `code`.
 *
 * @returns The error.
 */
export async function rejectsWith(
  fn: () => Promise<unknown>,
  code: string,
): Promise<McpStateError> {
  try {
    await fn();
  } catch (e) {
    if (!(e instanceof McpStateError)) throw e;
    assert.equal(e.code, code, `expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

/**
 * `promise`, or a failure naming `what` after `ms`.
 *
 * @returns What `promise` resolves to.
 */
export async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Registers the contract suite for one backend.
 *
 * @param name The backend's name in test output.
 * @param openBackend Opens it (the suite puts its stores on what this opens).
 */
export function backendContract(name: string, openBackend: OpenBackend): void {
  const openStore: OpenStore = async (options) => {
    const backend = await openBackend();
    const store = new HandleStore(backend, options);
    backendOf.set(store, backend);
    return store;
  };
  Deno.test(`contract: ${name}`, async (t) => {
    const clock = new FakeClock();
    const store = await openStore({ clock: clock.fn });
    try {
      await contractSteps(t, store, clock, openStore);
    } finally {
      await store.close();
    }
  });
}

async function contractSteps(
  t: Deno.TestContext,
  store: HandleStore,
  clock: FakeClock,
  openStore: OpenStore,
): Promise<void> {
  await t.step("mint() returns a kind-prefixed handle and get() reads version 1", async () => {
    const user = freshUser();
    const h = await store.mint("research", { sources: [], notes: "" }, {
      user,
      writer: "laptop/claude-code",
      ttlDays: 7,
    });
    assert.match(h, /^research_[a-z2-7]{8}$/);
    const s = await store.get(h, { user });
    assert.deepEqual(s.state, { sources: [], notes: "" });
    assert.equal(s.version, 1);
    assert.equal(s.kind, "research");
    assert.equal(s.lastWriter, "laptop/claude-code");
    assert.equal(s.createdAt.getTime(), clock.now);
    assert.equal(s.updatedAt.getTime(), clock.now);
    assert.equal(s.expiresAt?.getTime(), clock.now + 7 * DAY);
    const long = await store.mint("secret", {}, { user, randomChars: 26 });
    assert.match(long, /^secret_[a-z2-7]{26}$/);
  });

  await t.step(
    "another user's handle is handle_not_found, like one that never existed",
    async () => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      const h = await store.mint("note", { secret: 1 }, { user: alice });
      const e1 = await rejectsWith(() => store.get(h, { user: bob }), "handle_not_found");
      const e2 = await rejectsWith(
        () => store.get("note_aaaaaaaa", { user: bob }),
        "handle_not_found",
      );
      assert.deepEqual(Object.keys(e1.details), Object.keys(e2.details));
      await rejectsWith(
        () => store.save(h, { x: 1 }, { user: bob, expectVersion: 1 }),
        "handle_not_found",
      );
      await rejectsWith(
        () => store.patch(h, [SetKey("", "x", 1)], { user: bob }),
        "handle_not_found",
      );
      await rejectsWith(() => store.touch(h, { user: bob, ttlDays: 1 }), "handle_not_found");
      await rejectsWith(() => store.revoke(h, { user: bob }), "handle_not_found");
      assert.deepEqual(await store.list(bob), []);
      assert.deepEqual((await store.get(h, { user: alice })).state, { secret: 1 });
    },
  );

  await t.step("save() with the current version writes version+1", async () => {
    const user = freshUser();
    const h = await store.mint("doc", { a: 1 }, { user });
    clock.advance(1000);
    const s = await store.save(h, { a: 2 }, { user, expectVersion: 1, writer: "w2" });
    assert.equal(s.version, 2);
    assert.deepEqual(s.state, { a: 2 });
    assert.equal(s.lastWriter, "w2");
    assert.equal(s.updatedAt.getTime(), clock.now);
    assert.equal(s.createdAt.getTime(), clock.now - 1000);
    assert.deepEqual(await store.get(h, { user }), s);
  });

  await t.step("save() rejects a stale version and keeps the winner's state", async () => {
    const user = freshUser();
    const h = await store.mint("doc", { a: 1 }, { user });
    await store.save(h, { a: 2 }, { user, expectVersion: 1, writer: "winner" });
    const e = await rejectsWith(
      () => store.save(h, { a: 3 }, { user, expectVersion: 1, writer: "loser" }),
      "stale_write",
    );
    assert.ok(e instanceof StaleWrite);
    assert.equal(e.details.expected_version, 1);
    const current = e.details.current as Record<string, unknown>;
    assert.equal(current.version, 2);
    assert.deepEqual(current.state, { a: 2 });
    assert.equal(current.last_writer, "winner");
    assert.equal(typeof current.updated_at, "string");
    assert.match(e.message, /re-read|Re-read/);
    const p = e.toPayload();
    assert.equal(p.code, "stale_write");
    assert.deepEqual((await store.get(h, { user })).state, { a: 2 });
  });

  await t.step("of 8 concurrent saves from one version exactly one wins", async () => {
    const user = freshUser();
    const h = await store.mint("race", { n: 0 }, { user });
    const results = await Promise.allSettled(
      Array.from(
        { length: 8 },
        (_, i) => store.save(h, { n: i + 1 }, { user, expectVersion: 1, writer: `w${i}` }),
      ),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r) => r.status === "rejected");
    assert.equal(won.length, 1);
    assert.equal(lost.length, 7);
    for (const r of lost) assert.ok((r as PromiseRejectedResult).reason instanceof StaleWrite);
    const s = await store.get(h, { user });
    assert.equal(s.version, 2);
    assert.deepEqual(s.state, (won[0] as PromiseFulfilledResult<{ state: unknown }>).value.state);
  });

  await t.step("8 writers x 50 patches on one handle all land", async () => {
    const user = freshUser();
    const h = await store.mint("counter", { n: 0, log: [] }, { user });
    const second = await openStore({ clock: clock.fn });
    try {
      await Promise.all(Array.from({ length: 8 }, async (_, w) => {
        const s = w % 2 === 0 ? store : second;
        for (let i = 0; i < 50; i++) {
          await s.patch(h, [Increment("", "n"), Append("log", `${w}:${i}`)], {
            user,
            writer: `w${w}`,
          });
        }
      }));
    } finally {
      await second.close();
    }
    const s = await store.get<{ n: number; log: string[] }>(h, { user });
    assert.equal(s.state.n, 400);
    assert.equal(s.state.log.length, 400);
    assert.equal(new Set(s.state.log).size, 400);
    assert.equal(s.version, 401);
    // Every write appended its entry atomically: the last 100 are all there, in order.
    const tail = await store.changesSince(h, 301, { user });
    assert.ok(!tail.truncated);
    if (!tail.truncated) {
      assert.deepEqual(
        tail.changes.map((c) => c.version),
        Array.from({ length: 100 }, (_, i) => 302 + i),
      );
      const appended = tail.changes.map((c) => (c.ops as { value: string }[])[1]!.value);
      assert.deepEqual(appended, s.state.log.slice(300));
    }
  });

  await t.step("patch() applies every op kind atomically", async () => {
    const user = freshUser();
    const h = await store.mint("p", { tags: ["a"], profile: { name: "x", n: 1 } }, { user });
    const s = await store.patch(h, [
      Append("tags", "b"),
      AddToSet("tags", "a"),
      AddToSet("tags", { k: 1, j: 2 }),
      AddToSet("tags", { j: 2, k: 1 }),
      SetKey("profile", "city", "Oslo"),
      DelKey("profile", "name"),
      Increment("profile", "n", 2.5),
      Merge({ z: null }, "profile"),
      SetKey("/profile", "a~b/c", true),
    ], { user, writer: "p1" });
    assert.deepEqual(s.state, {
      tags: ["a", "b", { k: 1, j: 2 }],
      profile: { n: 3.5, city: "Oslo", z: null, "a~b/c": true },
    });
    assert.equal(s.version, 2);
    await rejectsWith(
      () => store.patch(h, [Append("tags", "c"), Increment("tags", "x")], { user }),
      "patch_error",
    );
    await rejectsWith(
      () => store.patch(h, [{ op: "nope" } as never], { user }),
      "patch_error",
    );
    assert.deepEqual(await store.get(h, { user }), s);
  });

  await t.step("a patch that changes nothing writes nothing", async () => {
    const user = freshUser();
    const h = await store.mint("p", { tags: ["a"], m: { k: 1 } }, { user, writer: "first" });
    clock.advance(5);
    const s = await store.patch(h, [
      AddToSet("tags", "a"),
      DelKey("m", "absent"),
      Merge({ k: 1 }, "m"),
    ], {
      user,
      writer: "second",
    });
    assert.equal(s.version, 1);
    assert.equal(s.lastWriter, "first");
    assert.equal(s.updatedAt.getTime(), clock.now - 5);
    const empty = await store.patch(h, [], { user, writer: "third" });
    assert.equal(empty.version, 1);
  });

  await t.step("touch() renews or clears the expiry and bumps the version", async () => {
    const user = freshUser();
    const h = await store.mint("t", { a: 1 }, { user, ttlDays: 1 });
    clock.advance(1000);
    const s = await store.touch(h, { user, ttlDays: 2, writer: "toucher" });
    assert.equal(s.version, 2);
    assert.equal(s.expiresAt?.getTime(), clock.now + 2 * DAY);
    assert.equal(s.lastWriter, "toucher");
    const n = await store.touch(h, { user, ttlDays: null });
    assert.equal(n.expiresAt, null);
    assert.equal(n.version, 3);
  });

  await t.step(
    "save() ttlDays: undefined keeps, null clears, a number renews from now",
    async () => {
      const user = freshUser();
      const h = await store.mint("t", { a: 1 }, { user, ttlDays: 3 });
      const created = clock.now;
      clock.advance(DAY);
      let s = await store.save(h, { a: 2 }, { user, expectVersion: 1 });
      assert.equal(s.expiresAt?.getTime(), created + 3 * DAY);
      s = await store.save(h, { a: 3 }, { user, expectVersion: 2, ttlDays: 0.5 });
      assert.equal(s.expiresAt?.getTime(), clock.now + DAY / 2);
      s = await store.save(h, { a: 4 }, { user, expectVersion: 3, ttlDays: null });
      assert.equal(s.expiresAt, null);
    },
  );

  await t.step("an expired handle is handle_expired and cannot be revived", async () => {
    const user = freshUser();
    const h = await store.mint("e", { a: 1 }, { user, ttlDays: 1.5 });
    const live = await store.mint("e", { b: 1 }, { user });
    const created = clock.now;
    clock.advance(1.5 * DAY);
    const e = await rejectsWith(() => store.get(h, { user }), "handle_expired");
    assert.equal(e.details.expired_at, new Date(created + 1.5 * DAY).toISOString());
    assert.equal(e.details.ttl_days, 1.5);
    await rejectsWith(() => store.touch(h, { user, ttlDays: 5 }), "handle_expired");
    await rejectsWith(() => store.save(h, { a: 2 }, { user, expectVersion: 1 }), "handle_expired");
    await rejectsWith(() => store.patch(h, [SetKey("", "a", 3)], { user }), "handle_expired");
    assert.deepEqual((await store.list(user)).map((i) => i.handle), [live]);
    assert.deepEqual(
      (await store.list(user, { includeExpired: true })).map((i) => i.handle).sort(),
      [h, live].sort(),
    );
    assert.equal(await store.sweep(user), 1);
    await rejectsWith(() => store.get(h, { user }), "handle_not_found");
    assert.equal((await store.get(live, { user })).version, 1);
  });

  await t.step("ttl_days in handle_expired is rounded to 3 decimals", async () => {
    const user = freshUser();
    const h = await store.mint("e", {}, { user, ttlDays: 1 / 3 });
    clock.advance(DAY);
    const e = await rejectsWith(() => store.get(h, { user }), "handle_expired");
    assert.equal(e.details.ttl_days, 0.333);
  });

  await t.step(
    "list() is newest first and metadata only; listPage() pages exactly once",
    async () => {
      const user = freshUser();
      const handles: string[] = [];
      for (let i = 0; i < 7; i++) {
        clock.advance(10);
        handles.push(await store.mint(i % 2 ? "odd" : "even", { i }, { user, writer: `w${i}` }));
      }
      const all = await store.list(user);
      assert.deepEqual(all.map((x) => x.handle), [...handles].reverse());
      assert.ok(!("state" in all[0]!));
      assert.equal(all[0]!.lastWriter, "w6");
      assert.ok(all[0]!.createdAt instanceof Date);
      assert.deepEqual(
        (await store.list(user, { kind: "odd" })).map((x) => x.handle),
        [handles[5], handles[3], handles[1]],
      );
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: Awaited<ReturnType<HandleStore["listPage"]>> = await store.listPage(user, {
          limit: 3,
          cursor,
        });
        seen.push(...page.handles.map((x) => x.handle));
        cursor = page.nextCursor;
        pages++;
      } while (cursor);
      assert.equal(pages, 3);
      assert.deepEqual(seen, [...handles].reverse());
      const first = await store.listPage(user);
      assert.equal(first.handles.length, 7);
      assert.equal(first.nextCursor, null);
      await rejectsWith(() => store.listPage(user, { cursor: "garbage" }), "invalid_argument");
      await rejectsWith(() => store.listPage(user, { cursor: "c1.e30" }), "invalid_argument");
      for (const limit of [0, 501, 1.5, NaN]) {
        await rejectsWith(() => store.listPage(user, { limit }), "invalid_argument");
      }
    },
  );

  await t.step("listPage() keeps its place when handles share an updatedAt", async () => {
    const user = freshUser();
    const made = new Set<string>();
    for (let i = 0; i < 5; i++) made.add(await store.mint("same", { i }, { user }));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<HandleStore["listPage"]>> = await store.listPage(user, {
        limit: 2,
        cursor,
      });
      seen.push(...page.handles.map((x) => x.handle));
      cursor = page.nextCursor;
    } while (cursor);
    assert.equal(seen.length, 5);
    assert.deepEqual(new Set(seen), made);
  });

  await t.step("revoke() deletes; the handle is then handle_not_found", async () => {
    const user = freshUser();
    const h = await store.mint("r", { a: 1 }, { user });
    await store.revoke(h, { user });
    await rejectsWith(() => store.get(h, { user }), "handle_not_found");
    await rejectsWith(() => store.revoke(h, { user }), "handle_not_found");
    assert.deepEqual(await store.list(user), []);
  });

  await t.step(
    "idempotency keys: a retry returns the first result and applies nothing twice",
    async () => {
      const user = freshUser();
      const h1 = await store.mint("i", { n: 0 }, { user, idempotencyKey: "mint-1" });
      const h2 = await store.mint("i", { n: 0 }, { user, idempotencyKey: "mint-1" });
      assert.equal(h1, h2);
      assert.equal((await store.list(user)).length, 1);
      await rejectsWith(
        () => store.mint("i", { n: 1 }, { user, idempotencyKey: "mint-1" }),
        "invalid_argument",
      );
      assert.equal((await store.list(user)).length, 1);

      const p1 = await store.patch(h1, [Increment("", "n")], { user, idempotencyKey: "p-1" });
      await store.patch(h1, [Increment("", "n", 10)], { user, idempotencyKey: "p-2" });
      const p1again = await store.patch(h1, [Increment("", "n")], { user, idempotencyKey: "p-1" });
      assert.deepEqual(p1again, p1);
      await rejectsWith(
        () => store.patch(h1, [Increment("", "n", 5)], { user, idempotencyKey: "p-1" }),
        "invalid_argument",
      );
      const now = await store.get<{ n: number }>(h1, { user });
      assert.equal(now.state.n, 11);
      assert.equal(now.version, 3);

      const s1 = await store.save(h1, { n: 100 }, {
        user,
        expectVersion: 3,
        idempotencyKey: "s-1",
      });
      const s1again = await store.save(h1, { n: 100 }, {
        user,
        expectVersion: 3,
        idempotencyKey: "s-1",
      });
      assert.deepEqual(s1again, s1);
      const t1 = await store.touch(h1, { user, ttlDays: 3, idempotencyKey: "t-1" });
      assert.deepEqual(await store.touch(h1, { user, ttlDays: 3, idempotencyKey: "t-1" }), t1);
      assert.equal((await store.get(h1, { user })).version, 5);
      await store.revoke(h1, { user, idempotencyKey: "r-1" });
      await store.revoke(h1, { user, idempotencyKey: "r-1" });
      await rejectsWith(() => store.get(h1, { user }), "handle_not_found");
      // Keys are per user: another user's identical key is a different call.
      const other = freshUser();
      const h3 = await store.mint("i", { n: 0 }, { user: other, idempotencyKey: "mint-1" });
      assert.notEqual(h3, h1);
    },
  );

  await t.step("every JSON string and prototype-named key round-trips exactly", async () => {
    const user = freshUser();
    const state = JSON.parse(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": 1}, "prototype": [], ' +
        '"nul": "a\\u0000b", "lone": "\\ud800x\\udfff", "emoji": "\u{1F600}", "empty": {}, ' +
        '"list": [], "nested": [[], {}, [{}]], "big": 9007199254740991, "tenth": 0.1, ' +
        '"huge": 1e308, "tiny": 5e-324, "neg": -12.5, "t": true, "f": false, "n": null, ' +
        '"": "empty key", "a.b": "dotted", "/x~y": "pointer-ish"}',
    );
    const h = await store.mint("rt", state, { user });
    const s = await store.get(h, { user });
    assert.equal(JSON.stringify(s.state), JSON.stringify(state));
    assert.ok(Object.hasOwn(s.state, "__proto__"));
    assert.equal(Object.getPrototypeOf(s.state), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const p = await store.patch(h, [
      SetKey("", "__proto__", { x: 1 }),
      SetKey("constructor", "k", 2),
    ], {
      user,
    });
    assert.deepEqual((p.state as Record<string, unknown>)["__proto__"], { x: 1 });
    assert.equal(({} as Record<string, unknown>).x, undefined);
    const back = await store.get(h, { user });
    assert.equal(JSON.stringify(back.state), JSON.stringify(p.state));
  });

  await t.step(
    "a state at the size cap round-trips; one byte over is state_too_large",
    async () => {
      const user = freshUser();
      const cap = store.maxStateBytes;
      const fill = (n: number) => ({ s: "x".repeat(n - '{"s":""}'.length) });
      const h = await store.mint("big", fill(cap), { user });
      const s = await store.get<{ s: string }>(h, { user });
      assert.equal(JSON.stringify(s.state).length, cap);
      const e = await rejectsWith(
        () => store.mint("big", fill(cap + 1), { user }),
        "state_too_large",
      );
      assert.equal(e.details.size_bytes, cap + 1);
      assert.equal(e.details.limit_bytes, cap);
      await rejectsWith(
        () => store.save(h, fill(cap + 1), { user, expectVersion: 1 }),
        "state_too_large",
      );
      await rejectsWith(
        () => store.patch(h, [SetKey("", "more", "y")], { user }),
        "state_too_large",
      );
      const multi = { s: "é".repeat(cap / 2) };
      await rejectsWith(() => store.mint("big", multi, { user }), "state_too_large");
      assert.equal((await store.get(h, { user })).version, 1);
    },
  );

  await t.step("every hostile input is refused with its code and changes nothing", async () => {
    const user = freshUser();
    const h = await store.mint("safe", { keep: true }, { user, ttlDays: 1 });
    const before = await store.get(h, { user });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const deep = (n: number): Record<string, unknown> => n === 1 ? {} : { d: deep(n - 1) };
    class Thing {
      a = 1;
    }
    const badStates: [string, unknown][] = [
      ["undefined", { a: undefined }],
      ["function", { a: () => 1 }],
      ["symbol", { a: Symbol("s") }],
      ["bigint", { a: 1n }],
      ["NaN", { a: NaN }],
      ["Infinity", { a: Infinity }],
      ["-Infinity", { a: [-Infinity] }],
      ["Date", { a: new Date() }],
      ["Map", { a: new Map() }],
      ["class instance", { a: new Thing() }],
      ["cycle", cyclic],
      ["depth 65", deep(65)],
      ["array root", [1, 2]],
      ["string root", "text"],
      ["null root", null],
      ["Date root", new Date()],
    ];
    for (const [what, bad] of badStates) {
      await rejectsWith(() => store.mint("safe", bad as never, { user }), "invalid_argument")
        .catch((e) => assert.fail(`${what}: ${e}`));
      await rejectsWith(
        () => store.save(h, bad as never, { user, expectVersion: 1 }),
        "invalid_argument",
      ).catch((e) => assert.fail(`${what}: ${e}`));
    }
    await store.save(h, deep(64), { user, expectVersion: 1 }).then(() =>
      store.save(h, before.state, { user, expectVersion: 2 })
    );
    const after = await store.get(h, { user });
    for (const ttlDays of [NaN, Infinity, -Infinity, "7", true, 0, -1, 36526, {}]) {
      await rejectsWith(
        () => store.mint("safe", {}, { user, ttlDays: ttlDays as never }),
        "invalid_argument",
      );
      await rejectsWith(
        () => store.touch(h, { user, ttlDays: ttlDays as never }),
        "invalid_argument",
      );
      await rejectsWith(
        () => store.save(h, {}, { user, expectVersion: 3, ttlDays: ttlDays as never }),
        "invalid_argument",
      );
    }
    for (const kind of ["", "Research", "1abc", "a_b", "a".repeat(33), "ü", 7]) {
      await rejectsWith(() => store.mint(kind as never, {}, { user }), "invalid_argument");
    }
    for (const expectVersion of [-1, 1.5, "3", NaN, null]) {
      await rejectsWith(
        () => store.save(h, {}, { user, expectVersion: expectVersion as never }),
        "invalid_argument",
      );
    }
    for (const badUser of ["", 7, null, undefined, "x".repeat(1025)]) {
      await rejectsWith(() => store.get(h, { user: badUser as never }), "invalid_argument");
      await rejectsWith(() => store.mint("k", {}, { user: badUser as never }), "invalid_argument");
    }
    for (const handle of ["", 7, null, "x".repeat(257)]) {
      await rejectsWith(() => store.get(handle as never, { user }), "invalid_argument");
    }
    await rejectsWith(() => store.patch(h, "nope" as never, { user }), "patch_error");
    await rejectsWith(() => store.patch(h, [SetKey("", "a", NaN)], { user }), "invalid_argument");
    await rejectsWith(
      () => store.patch(h, [Append("", { d: undefined })], { user }),
      "invalid_argument",
    );
    await rejectsWith(() => store.mint("k", {}, { user, idempotencyKey: "" }), "invalid_argument");
    await rejectsWith(() => store.mint("k", {}, { user, writer: 5 as never }), "invalid_argument");
    assert.deepEqual(await store.get(h, { user }), after);
    assert.equal((await store.list(user)).length, 1);
  });

  await t.step(
    "users and imported handles outside ASCII: get, save, patch, list across pages, revoke",
    async () => {
      const id = crypto.randomUUID().slice(0, 8);
      const users = [
        `研究者-${id}`, // CJK
        `\u{1F600}\u{1F469}\u200D\u{1F4BB}-${id}`, // astral, with a zero-width joiner
        `e\u0301mile-${id}`, // a combining mark (NFD)
        `\u05DE\u05E9\u05EA\u05DE\u05E9-${id}`, // right to left (Hebrew)
      ];
      // Kinds outside [a-z0-9-] are never minted: only an import brings them.
      const kinds = ["研究", "\u{1F600}", "cafe\u0301", "\u0628\u062D\u062B", "note"];
      for (const user of users) {
        const minted = await store.mint("doc", { by: user }, { user, writer: "ノート/クロード" });
        assert.equal((await store.get(minted, { user })).lastWriter, "ノート/クロード");
        const imported: string[] = [];
        for (const kind of kinds) {
          clock.advance(10);
          const handle = `${kind}_${id}`;
          await importRecord(store, user, {
            handle,
            kind,
            state: JSON.stringify({ kind, n: 0 }),
            version: 1,
            createdAt: clock.now,
            updatedAt: clock.now,
            expiresAt: null,
            lastWriter: "\u05D9\u05D1\u05D5\u05D0", // an RTL writer
          });
          imported.push(handle);
        }
        for (const [i, h] of imported.entries()) {
          const s = await store.get(h, { user });
          assert.deepEqual([s.kind, s.version, s.state], [kinds[i], 1, { kind: kinds[i], n: 0 }]);
          assert.equal(s.lastWriter, "\u05D9\u05D1\u05D5\u05D0");
        }
        // Newest first: the imports in reverse, then the mint; every page
        // boundary (limit 1) puts a non-ASCII handle in the cursor.
        const order = [...imported].reverse().concat(minted);
        assert.deepEqual((await store.list(user)).map((x) => x.handle), order);
        for (const limit of [1, 2, 4]) {
          assert.deepEqual(await allPages(store, user, limit), order, `limit ${limit}`);
        }
        const [cjk, emoji] = imported as [string, string];
        clock.advance(10);
        const saved = await store.save(cjk, { n: 1 }, {
          user,
          expectVersion: 1,
          writer: "\u{1F916}",
        });
        assert.deepEqual([saved.version, saved.lastWriter], [2, "\u{1F916}"]);
        const patched = await store.patch(cjk, [Increment("", "n"), SetKey("", "研", "究")], {
          user,
        });
        assert.deepEqual([patched.version, patched.state], [3, { n: 2, 研: "究" }]);
        assert.equal((await store.list(user))[0]?.handle, cjk);
        // The same names under another user are another user's.
        const other = user.normalize("NFC") === user ? `${user}\u0301` : user.normalize("NFC");
        await rejectsWith(() => store.get(cjk, { user: other }), "handle_not_found");
        assert.deepEqual(await store.list(other), []);
        await store.revoke(emoji, { user });
        await rejectsWith(() => store.get(emoji, { user }), "handle_not_found");
        assert.deepEqual(
          await allPages(store, user, 1),
          order.filter((h) => h !== emoji && h !== cjk).toSpliced(0, 0, cjk),
        );
        assert.equal((await store.restore(emoji, { user })).version, 1);
        await store.revoke(emoji, { user });
      }
      // Handles that share one updatedAt are ordered by the handle alone: the
      // cursor's handle decides where the next page starts.
      const user = users[0]!;
      const tied = [...kinds, "a", "z", "é", "\u{10FFFF}"].map((k) => `${k}_${id}t`);
      clock.advance(10);
      for (const handle of tied) {
        await importRecord(store, user, {
          handle,
          kind: "tied",
          state: "{}",
          version: 1,
          createdAt: clock.now,
          updatedAt: clock.now,
          expiresAt: null,
          lastWriter: null,
        });
      }
      for (const limit of [1, 3]) {
        const top = (await allPages(store, user, limit)).slice(0, tied.length);
        assert.deepEqual(top.toSorted(), tied.toSorted(), `limit ${limit}`);
      }
    },
  );

  await t.step(
    "U+0000 in a user, handle, kind, writer, holder or key is invalid_argument; nothing is written",
    async () => {
      const user = freshUser();
      const h = await store.mint("nul", { keep: true }, { user, writer: "w" });
      const before = await store.get(h, { user });
      const refused = async (what: string, fn: () => unknown) => {
        await rejectsWith(async () => await fn(), "invalid_argument")
          .catch((e) => assert.fail(`${what}: ${e}`));
      };
      const everyCall = (u: string, handle: string) =>
        ({
          mint: () => store.mint("nul", {}, { user: u }),
          get: () => store.get(handle, { user: u }),
          save: () => store.save(handle, {}, { user: u, expectVersion: 1 }),
          patch: () => store.patch(handle, [SetKey("", "x", 1)], { user: u }),
          touch: () => store.touch(handle, { user: u, ttlDays: 1 }),
          revoke: () => store.revoke(handle, { user: u }),
          restore: () => store.restore(handle, { user: u }),
          changesSince: () => store.changesSince(handle, 0, { user: u }),
          lease: () => store.lease(handle, { user: u, writer: "w", seconds: 5 }),
          release: () => store.release(handle, { user: u, writer: "w" }),
          watch: () => store.watch(handle, { user: u }),
          list: () => store.list(u),
          listPage: () => store.listPage(u),
          sweep: () => store.sweep(u),
        }) as Record<string, () => unknown>;
      for (const bad of [`${user}\0`, `${user}\0evil`, "\0", `\0${user}`]) {
        for (const [name, call] of Object.entries(everyCall(bad, h))) {
          await refused(`user ${JSON.stringify(bad)}, ${name}`, call);
        }
      }
      for (const bad of [`${h}\0`, `${h}\0x`, "\0"]) {
        const calls = everyCall(user, bad);
        for (const name of Object.keys(calls)) {
          if (["mint", "list", "listPage", "sweep"].includes(name)) continue;
          await refused(`handle ${JSON.stringify(bad)}, ${name}`, calls[name]!);
        }
      }
      for (const bad of ["nul\0", "\0"]) {
        await refused(`kind ${JSON.stringify(bad)}`, () => store.mint(bad, {}, { user }));
        await refused(
          `list kind ${JSON.stringify(bad)}`,
          () => store.listPage(user, { kind: bad }),
        );
      }
      for (const bad of ["w\0", "\0", "laptop/\0claude"]) {
        const writer = bad;
        await refused("mint writer", () => store.mint("nul", {}, { user, writer }));
        await refused("save writer", () => store.save(h, {}, { user, expectVersion: 1, writer }));
        await refused("patch writer", () => store.patch(h, [SetKey("", "x", 1)], { user, writer }));
        await refused("touch writer", () => store.touch(h, { user, ttlDays: 1, writer }));
        await refused("lease holder", () => store.lease(h, { user, writer, seconds: 5 }));
        await refused("release holder", () => store.release(h, { user, writer }));
      }
      for (const idempotencyKey of ["k\0", "\0", "\0".repeat(256)]) {
        await refused("mint key", () => store.mint("nul", {}, { user, idempotencyKey }));
        await refused(
          "save key",
          () => store.save(h, {}, { user, expectVersion: 1, idempotencyKey }),
        );
        await refused(
          "patch key",
          () => store.patch(h, [SetKey("", "x", 1)], { user, idempotencyKey }),
        );
        await refused("touch key", () => store.touch(h, { user, ttlDays: 1, idempotencyKey }));
        await refused("revoke key", () => store.revoke(h, { user, idempotencyKey }));
      }
      assert.deepEqual(await store.get(h, { user }), before);
      assert.deepEqual((await store.list(user)).map((x) => x.handle), [h]);
      // States hold U+0000 in keys and values, and it round-trips exactly.
      const state = { "\0": "a\0b", list: ["\0"] };
      const held = await store.mint("nul", state, { user, idempotencyKey: "k" });
      assert.deepEqual((await store.get(held, { user })).state, state);
      const p = await store.patch(held, [SetKey("", "k\0", "v\0"), Append("list", "\0\0")], {
        user,
      });
      assert.deepEqual((await store.get(held, { user })).state, p.state);
      assert.deepEqual(p.state, { "\0": "a\0b", list: ["\0", "\0\0"], "k\0": "v\0" });
    },
  );

  await t.step("sweep() without a user removes every user's expired records", async () => {
    const a = freshUser(), b = freshUser();
    const ha = await store.mint("s", {}, { user: a, ttlDays: 1 });
    const hb = await store.mint("s", {}, { user: b, ttlDays: 1 });
    const keep = await store.mint("s", {}, { user: b });
    clock.advance(DAY + 1);
    assert.ok(await store.sweep() >= 2);
    await rejectsWith(() => store.get(ha, { user: a }), "handle_not_found");
    await rejectsWith(() => store.get(hb, { user: b }), "handle_not_found");
    assert.equal((await store.get(keep, { user: b })).version, 1);
  });

  await t.step("a second store on the same backend sees every write", async () => {
    const user = freshUser();
    const h = await store.mint("shared", { a: 1 }, { user });
    const other = await openStore({ clock: clock.fn });
    try {
      assert.deepEqual((await other.get(h, { user })).state, { a: 1 });
      await other.patch(h, [SetKey("", "b", 2)], { user });
      assert.deepEqual((await store.get(h, { user })).state, { a: 1, b: 2 });
    } finally {
      await other.close();
    }
  });

  await t.step(
    "every effective write appends a changelog entry; changesSince() returns them",
    async () => {
      const user = freshUser();
      const h = await store.mint("log", { a: 1, list: [] }, { user, writer: "m" });
      clock.advance(10);
      await store.save(h, { a: 2, list: [] }, { user, expectVersion: 1, writer: "s" });
      clock.advance(10);
      await store.patch(h, [Append("list", "x")], { user, writer: "p" });
      await store.patch(h, [AddToSet("list", "x")], { user, writer: "noop" });
      clock.advance(10);
      const touched = await store.touch(h, { user, ttlDays: 2, writer: "t" });
      const r = await store.changesSince(h, 0, { user });
      assert.equal(r.truncated, false);
      if (r.truncated) return;
      assert.equal(r.version, 4);
      assert.deepEqual(r.changes.map((c) => [c.version, c.op, c.writer]), [
        [1, "mint", "m"],
        [2, "save", "s"],
        [3, "patch", "p"],
        [4, "touch", "t"],
      ]);
      assert.deepEqual(r.changes[0]!.patch, [
        { op: "add", path: "/a", value: 1 },
        { op: "add", path: "/list", value: [] },
      ]);
      assert.deepEqual(r.changes[1]!.patch, [{ op: "replace", path: "/a", value: 2 }]);
      assert.deepEqual(r.changes[2]!.ops, [{ op: "append", path: "list", value: "x" }]);
      assert.equal(r.changes[3]!.expires_at, touched.expiresAt?.toISOString());
      assert.equal(r.changes[3]!.at, touched.updatedAt.toISOString());
      const tail = await store.changesSince(h, 3, { user });
      assert.ok(!tail.truncated && tail.changes.length === 1 && tail.changes[0]!.version === 4);
      const none = await store.changesSince(h, 4, { user });
      assert.ok(!none.truncated && none.changes.length === 0);
      await rejectsWith(() => store.changesSince(h, 5, { user }), "invalid_argument");
      await rejectsWith(() => store.changesSince(h, -1, { user }), "invalid_argument");
      await rejectsWith(() => store.changesSince(h, 0, { user: freshUser() }), "handle_not_found");
    },
  );

  await t.step("a stale save carries base_version and the changes since it", async () => {
    const user = freshUser();
    const h = await store.mint("log", { n: 0, tags: [] }, { user });
    await store.patch(h, [Increment("", "n")], { user, writer: "a" });
    await store.save(h, { n: 5, tags: ["x"] }, { user, expectVersion: 2, writer: "b" });
    const e = await rejectsWith(
      () => store.save(h, { n: 9, tags: [] }, { user, expectVersion: 1 }),
      "stale_write",
    );
    assert.equal(e.details.base_version, 1);
    const changes = e.details.changes as Record<string, unknown>[];
    assert.deepEqual(changes.map((c) => c.version), [2, 3]);
    assert.deepEqual(changes[0]!.ops, [{ op: "increment", path: "", key: "n", by: 1 }]);
    assert.deepEqual(changes[1]!.patch, [
      { op: "replace", path: "/n", value: 5 },
      { op: "add", path: "/tags/-", value: "x" },
    ]);
    assert.equal((e.details.current as Record<string, unknown>).version, 3);
  });

  await t.step("saving long arrays stays fast and its diff applies back", async () => {
    const user = freshUser();
    const items = Array.from({ length: 5000 }, (_, i) => ({ i }));
    const h = await store.mint("long", { items }, { user });
    const shifted = { items: [...items.slice(1), { i: 5000 }] };
    const started = performance.now();
    await store.save(h, shifted, { user, expectVersion: 1 });
    const edited = { items: shifted.items.map((x, i) => i === 10 ? { i: -1 } : x) };
    await store.save(h, edited, { user, expectVersion: 2 });
    assert.ok(performance.now() - started < 10_000);
    const r = await store.changesSince(h, 2, { user });
    assert.ok(!r.truncated);
    if (!r.truncated) {
      assert.deepEqual(r.changes[0]!.patch, [{ op: "replace", path: "/items/10/i", value: -1 }]);
    }
    assert.deepEqual((await store.get(h, { user })).state, edited);
  });

  await t.step(
    "the changelog keeps at most maxEntries and maxAgeDays, then truncates",
    async () => {
      const user = freshUser();
      const small = await openStore({
        clock: clock.fn,
        history: { maxEntries: 3, maxAgeDays: 1, maxEntryBytes: 200 },
      });
      try {
        const h = await small.mint("ret", { n: 0 }, { user });
        for (let i = 0; i < 5; i++) await small.patch(h, [Increment("", "n")], { user });
        const all = await small.changesSince(h, 0, { user });
        assert.equal(all.truncated, true);
        if (all.truncated) assert.equal(all.current.version, 6);
        const last3 = await small.changesSince(h, 3, { user });
        assert.ok(!last3.truncated);
        if (!last3.truncated) assert.deepEqual(last3.changes.map((c) => c.version), [4, 5, 6]);
        clock.advance(2 * DAY);
        await small.patch(h, [Increment("", "n")], { user });
        const aged = await small.changesSince(h, 5, { user });
        assert.equal(aged.truncated, true);
        const fresh = await small.changesSince(h, 6, { user });
        assert.ok(!fresh.truncated && fresh.changes.length === 1);
        // An entry over maxEntryBytes is kept as a marker: the log answers truncated.
        await small.patch(h, [SetKey("", "big", "x".repeat(500))], { user });
        assert.equal((await small.changesSince(h, 7, { user })).truncated, true);
      } finally {
        await small.close();
      }
    },
  );

  await t.step("with history off, saves still conflict and changesSince() truncates", async () => {
    const user = freshUser();
    const off = await openStore({ clock: clock.fn, history: false });
    try {
      const h = await off.mint("off", { a: 1 }, { user });
      await off.save(h, { a: 2 }, { user, expectVersion: 1 });
      const e = await rejectsWith(
        () => off.save(h, { a: 3 }, { user, expectVersion: 1 }),
        "stale_write",
      );
      assert.equal(e.details.base_version, 1);
      const r = await off.changesSince(h, 1, { user });
      assert.equal(r.truncated, true);
    } finally {
      await off.close();
    }
  });

  await t.step(
    "revoke() moves a handle to the trash; restore() brings back its last version",
    async () => {
      const user = freshUser();
      const h = await store.mint("tr", { a: 1 }, { user, writer: "w1" });
      await store.patch(h, [SetKey("", "b", 2)], { user, writer: "w2" });
      const before = await store.get(h, { user });
      await store.revoke(h, { user });
      await rejectsWith(() => store.get(h, { user }), "handle_not_found");
      await rejectsWith(() => store.patch(h, [SetKey("", "c", 3)], { user }), "handle_not_found");
      await rejectsWith(() => store.changesSince(h, 0, { user }), "handle_not_found");
      assert.deepEqual(await store.list(user), []);
      await rejectsWith(() => store.restore(h, { user: freshUser() }), "handle_not_found");
      const back = await store.restore(h, { user });
      assert.deepEqual(back, before);
      assert.deepEqual(await store.get(h, { user }), before);
      const log = await store.changesSince(h, 0, { user });
      assert.ok(!log.truncated && log.changes.length === 2);
      await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
      // Past the undo window there is nothing to restore, and sweep empties the trash.
      await store.revoke(h, { user });
      clock.advance(7 * DAY + 1);
      await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
      await store.sweep(user);
      await rejectsWith(() => store.restore(h, { user }), "handle_not_found");
      // trashDays: 0 deletes at once.
      const now = await openStore({ clock: clock.fn, trashDays: 0 });
      try {
        const g = await now.mint("tr", {}, { user });
        await now.revoke(g, { user });
        await rejectsWith(() => now.restore(g, { user }), "handle_not_found");
      } finally {
        await now.close();
      }
    },
  );

  await t.step(
    "lease(): advisory, shown by get and list, never bumps the version, lapses on time",
    async () => {
      const user = freshUser();
      const h = await store.mint("task", { step: 1 }, { user, writer: "a" });
      const other = await store.mint("task", {}, { user });
      const taken = await store.lease(h, { user, writer: "laptop/a", seconds: 60 });
      assert.deepEqual(taken, {
        acquired: true,
        holder: "laptop/a",
        expiresAt: new Date(clock.now + 60_000),
      });
      const s = await store.get(h, { user });
      assert.equal(s.version, 1);
      assert.equal(s.lastWriter, "a");
      assert.deepEqual(s.activeLease, {
        holder: "laptop/a",
        expiresAt: new Date(clock.now + 60_000),
      });
      assert.deepEqual(toPayload(s).active_lease, {
        holder: "laptop/a",
        expires_at: new Date(clock.now + 60_000).toISOString(),
      });
      assert.equal("activeLease" in (await store.get(other, { user })), false);
      const listed = await store.list(user);
      assert.equal(listed.find((i) => i.handle === h)?.activeLease?.holder, "laptop/a");
      assert.equal(listed.find((i) => i.handle === other)?.activeLease, undefined);
      // Another holder is told who is at work, and nothing changes.
      const refused = await store.lease(h, { user, writer: "phone/b", seconds: 30 });
      assert.deepEqual(refused, {
        acquired: false,
        holder: "laptop/a",
        expiresAt: new Date(clock.now + 60_000),
      });
      // A lease never blocks a write, and a write never drops the lease.
      const saved = await store.save(h, { step: 2 }, { user, expectVersion: 1, writer: "phone/b" });
      assert.equal(saved.version, 2);
      await store.patch(h, [Increment("", "step")], { user, writer: "phone/b" });
      assert.equal((await store.get(h, { user })).activeLease?.holder, "laptop/a");
      // A second store on the same backend sees it.
      const second = await openStore({ clock: clock.fn });
      try {
        assert.equal((await second.get(h, { user })).activeLease?.holder, "laptop/a");
        assert.equal((await second.lease(h, { user, writer: "x", seconds: 5 })).acquired, false);
      } finally {
        await second.close();
      }
      // The holder renews it.
      clock.advance(30_000);
      const renewed = await store.lease(h, { user, writer: "laptop/a", seconds: 60 });
      assert.equal(renewed.acquired, true);
      assert.equal(renewed.expiresAt.getTime(), clock.now + 60_000);
      // It lapses on time; then another holder may take it.
      clock.advance(60_000);
      assert.equal((await store.get(h, { user })).activeLease, undefined);
      assert.equal((await store.lease(h, { user, writer: "phone/b", seconds: 10 })).acquired, true);
      // Only the holder releases it.
      assert.equal(await store.release(h, { user, writer: "laptop/a" }), false);
      assert.equal((await store.get(h, { user })).activeLease?.holder, "phone/b");
      assert.equal(await store.release(h, { user, writer: "phone/b" }), true);
      assert.equal(await store.release(h, { user, writer: "phone/b" }), false);
      assert.equal((await store.get(h, { user })).activeLease, undefined);
      assert.equal((await store.get(h, { user })).version, 3);
      // A lapsed lease is not released.
      await store.lease(h, { user, writer: "laptop/a", seconds: 1 });
      clock.advance(1_000);
      assert.equal(await store.release(h, { user, writer: "laptop/a" }), false);
    },
  );

  await t.step(
    "lease(): bad input is refused and changes nothing; leases are per user",
    async () => {
      const alice = freshUser("alice"), bob = freshUser("bob");
      const h = await store.mint("task", {}, { user: alice });
      for (const seconds of [0, -1, NaN, Infinity, 86_401, "60", null]) {
        await rejectsWith(
          () => store.lease(h, { user: alice, writer: "w", seconds: seconds as number }),
          "invalid_argument",
        );
      }
      for (const writer of [undefined, "", 7, "x".repeat(257)]) {
        await rejectsWith(
          () => store.lease(h, { user: alice, writer: writer as string, seconds: 5 }),
          "invalid_argument",
        );
        await rejectsWith(
          () => store.release(h, { user: alice, writer: writer as string }),
          "invalid_argument",
        );
      }
      assert.equal((await store.get(h, { user: alice })).activeLease, undefined);
      await rejectsWith(
        () => store.lease(h, { user: bob, writer: "w", seconds: 5 }),
        "handle_not_found",
      );
      await rejectsWith(
        () => store.lease("task_zzzzzzzz", { user: alice, writer: "w", seconds: 5 }),
        "handle_not_found",
      );
      await store.lease(h, { user: alice, writer: "w", seconds: 5 });
      assert.equal(await store.release(h, { user: bob, writer: "w" }), false);
      assert.equal((await store.get(h, { user: alice })).activeLease?.holder, "w");
      const e = await store.mint("task", {}, { user: alice, ttlDays: 1 });
      clock.advance(DAY);
      await rejectsWith(
        () => store.lease(e, { user: alice, writer: "w", seconds: 5 }),
        "handle_expired",
      );
    },
  );

  await t.step(
    "watch(): the current snapshot, then every new version from another store, until revoked",
    async () => {
      const user = freshUser();
      const h = await store.mint("live", { n: 0 }, { user });
      const other = await openStore({ clock: clock.fn });
      const stop = new AbortController();
      const guard = setTimeout(() => stop.abort(), 20_000);
      const seen: number[] = [];
      try {
        // A long safety-net poll: the backend's own change feed must deliver.
        const it = store.watch<{ n: number }>(h, { user, signal: stop.signal, pollMs: 600_000 });
        const first = await it.next();
        assert.equal(first.done, false);
        assert.equal(first.value?.version, 1);
        seen.push(1);
        for (let i = 1; i <= 3; i++) {
          await other.patch(h, [Increment("", "n")], { user });
          // Wait for this version before writing the next, so none is coalesced.
          while (seen[seen.length - 1]! < i + 1) {
            const r = await it.next();
            assert.equal(r.done, false, "the watch ended early (timed out?)");
            assert.equal(r.value!.state.n, r.value!.version - 1);
            seen.push(r.value!.version);
          }
        }
        assert.deepEqual(seen, [1, 2, 3, 4]);
        // A write to another handle or another user's handle yields nothing:
        // the next yield is the revoke, seen as handle_not_found.
        const unrelated = await other.mint("live", {}, { user });
        await other.patch(unrelated, [Increment("", "n")], { user });
        await other.revoke(h, { user });
        await rejectsWith(() => it.next(), "handle_not_found");
      } finally {
        clearTimeout(guard);
        await other.close();
      }
      assert.equal(stop.signal.aborted, false, "the watch waited 20 s for a change");
      // An aborted watch ends quietly.
      const h2 = await store.mint("live", {}, { user });
      const stop2 = new AbortController();
      const versions: number[] = [];
      for await (const snap of store.watch(h2, { user, signal: stop2.signal })) {
        versions.push(snap.version);
        stop2.abort();
      }
      assert.deepEqual(versions, [1]);
      await rejectsWith(async () => {
        for await (const _ of store.watch("live_zzzzzzzz", { user })) { /* none */ }
      }, "handle_not_found");
      assert.throws(() => store.watch(h2, { user, pollMs: 0 }), McpStateError);
    },
  );

  await t.step("a closed store refuses calls with backend_error", async () => {
    const s = await openStore({ clock: clock.fn });
    await s.close();
    await s.close();
    await rejectsWith(() => s.get("x_aaaaaaaa", { user: "u" }), "backend_error");
  });
}

/**
 * Every handle of `user`, newest first, read `limit` at a time through
 * `listPage`, with the cursors it handed out.
 *
 * @returns The handles and the cursors.
 */
export async function pageThrough(
  store: HandleStore,
  user: string,
  limit: number,
): Promise<{ handles: string[]; cursors: string[] }> {
  const handles: string[] = [];
  const cursors: string[] = [];
  let cursor: string | null = null;
  do {
    const page: HandlePage = await store.listPage(user, { limit, cursor });
    handles.push(...page.handles.map((x) => x.handle));
    cursor = page.nextCursor;
    if (cursor !== null) cursors.push(cursor);
  } while (cursor !== null && handles.length < 10_000);
  return { handles, cursors };
}

/** The handles of {@link pageThrough}. */
async function allPages(store: HandleStore, user: string, limit: number): Promise<string[]> {
  return (await pageThrough(store, user, limit)).handles;
}

/**
 * Writes a record straight into the store's backend, as `mcpstate import`
 * does: through the backend's `importRecord` when it has one, else `insert`.
 */
async function importRecord(store: HandleStore, user: string, record: HandleRecord): Promise<void> {
  const b = backendOf.get(store)!;
  const ctx = { now: record.updatedAt, graceMs: 7 * DAY };
  if (b.importRecord) assert.equal(await b.importRecord(user, record, ctx), "inserted");
  else assert.deepEqual(await b.insert(user, record, ctx), { inserted: true });
}
