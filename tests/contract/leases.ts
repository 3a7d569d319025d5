/**
 * Leases: advisory, never bumping a version, lapsing on time, per user;
 * across processes, outliving a killed holder and held by one of many racers.
 * {@link leasePrimitivesHold} checks the primitives of a backend without
 * native lease expiry, with a look inside its engine.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Backend, HandleStore, Increment, toPayload } from "../../mod.ts";
import { DAY, freshUser, recordOf, rejectsWith, sleep } from "../_helpers.ts";
import { spawnChild } from "../_child.ts";
import { group, step } from "./_group.ts";

export default group("leases", ["leases"], [
  step(
    "lease(): advisory, shown by get and list, never bumps the version, lapses on time",
    async ({ store, clock, openStore }) => {
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
      const saved = await store.save(h, { step: 2 }, {
        user,
        expectVersion: 1,
        writer: "phone/b",
      });
      assert.equal(saved.version, 2);
      await store.patch(h, [Increment("", "step")], { user, writer: "phone/b" });
      assert.equal((await store.get(h, { user })).activeLease?.holder, "laptop/a");
      // A second store on the same backend sees it.
      await using second = await openStore({ clock: clock.fn });
      assert.equal((await second.get(h, { user })).activeLease?.holder, "laptop/a");
      assert.equal((await second.lease(h, { user, writer: "x", seconds: 5 })).acquired, false);
      // The holder renews it.
      clock.advance(30_000);
      const renewed = await store.lease(h, { user, writer: "laptop/a", seconds: 60 });
      assert.equal(renewed.acquired, true);
      assert.equal(renewed.expiresAt.getTime(), clock.now + 60_000);
      // It lapses on time; then another holder may take it.
      clock.advance(60_000);
      assert.equal((await store.get(h, { user })).activeLease, undefined);
      assert.equal(
        (await store.lease(h, { user, writer: "phone/b", seconds: 10 })).acquired,
        true,
      );
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
  ),
  step(
    "lease(): bad input is refused and changes nothing; leases are per user",
    async ({ store, clock }) => {
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
  ),
  step(
    "a write's lease: taken in the write's own backend call, another holder's left alone",
    async ({ backend, clock }) => {
      for (const history of [true, false]) {
        const calls: string[] = [];
        await using store = new HandleStore(countingView(backend, calls), {
          clock: clock.fn,
          ...(history ? {} : { history: false }),
        });
        const user = freshUser();
        const mine = (seconds = 60) => ({
          holder: "laptop/a",
          expiresAt: new Date(clock.now + seconds * 1000),
        });
        const lease = { seconds: 60 };
        const once = async <T>(op: string, write: () => Promise<T>): Promise<T> => {
          calls.length = 0;
          const out = await write();
          assert.deepEqual(calls, [op], `history ${history}: one ${op}, no other call`);
          return out;
        };
        const w = { user, writer: "laptop/a", lease };
        const h = await once("insert", () => store.mint("task", { n: 0 }, w));
        assert.deepEqual((await store.get(h, { user })).activeLease, mine());
        clock.advance(1000);
        const saved = await once(
          history ? "update" : "save",
          () => store.save(h, { n: 1 }, { ...w, expectVersion: 1 }),
        );
        assert.deepEqual([saved.version, saved.activeLease], [2, mine()]);
        clock.advance(1000);
        const patched = await once("update", () => store.patch(h, [Increment("", "n")], w));
        assert.deepEqual([patched.version, patched.state, patched.activeLease], [
          3,
          { n: 2 },
          mine(),
        ]);
        const touched = await once("update", () => store.touch(h, { ...w, ttlDays: 1 }));
        assert.deepEqual([touched.version, touched.activeLease], [4, mine()]);
        assert.deepEqual((await store.get(h, { user })).activeLease, mine());
        // Another holder's lease in force: the write lands, the lease is
        // answered and left as it was.
        const theirs = { holder: "phone/b", expiresAt: new Date(clock.now + 30_000) };
        await store.release(h, { user, writer: "laptop/a" });
        await store.lease(h, { user, writer: "phone/b", seconds: 30 });
        clock.advance(1000);
        const s2 = await once(
          history ? "update" : "save",
          () => store.save(h, { n: 5 }, { ...w, expectVersion: 4 }),
        );
        assert.deepEqual([s2.version, s2.lastWriter, s2.activeLease], [5, "laptop/a", theirs]);
        const p2 = await once("update", () => store.patch(h, [Increment("", "n")], w));
        assert.deepEqual([p2.version, p2.activeLease], [6, theirs]);
        const got = await store.get(h, { user });
        assert.deepEqual([got.version, got.state, got.activeLease], [6, { n: 6 }, theirs]);
        // A stale save writes nothing and takes no lease.
        await rejectsWith(() => store.save(h, { n: 0 }, { ...w, expectVersion: 1 }), "stale_write");
        assert.deepEqual((await store.get(h, { user })).activeLease, theirs);
        // Once theirs lapses, the next write takes the lease.
        clock.advance(30_000);
        const p3 = await once("update", () => store.patch(h, [Increment("", "n")], w));
        assert.deepEqual([p3.version, p3.activeLease], [7, mine()]);
        // A patch that changes nothing still leaves the writer holding the lease.
        clock.advance(1000);
        const same = await store.patch(h, [Increment("", "n", 0)], w);
        assert.deepEqual([same.version, same.activeLease], [7, mine()]);
        // Without the option, nothing is leased and results carry no lease.
        const plain = await store.patch(h, [Increment("", "n")], { user, writer: "c" });
        assert.equal(plain.activeLease, undefined);
        const other = await store.mint("task", {}, { user });
        assert.equal((await store.get(other, { user })).activeLease, undefined);
      }
    },
  ),
  step(
    "a write's lease: bad lease input is refused before anything is written",
    async ({ store }) => {
      const user = freshUser();
      const h = await store.mint("task", { n: 0 }, { user });
      const bad: unknown[] = [
        { seconds: 0 },
        { seconds: 86_401 },
        { seconds: "60" },
        null,
        { seconds: 5, holder: "" },
        { seconds: 5 }, // no writer, no holder
      ];
      for (const lease of bad) {
        const o = { user, lease: lease as { seconds: number } };
        await rejectsWith(() => store.mint("task", {}, o), "invalid_argument");
        await rejectsWith(
          () => store.save(h, { n: 9 }, { ...o, expectVersion: 1 }),
          "invalid_argument",
        );
        await rejectsWith(() => store.patch(h, [Increment("", "n")], o), "invalid_argument");
      }
      const s = await store.get(h, { user });
      assert.deepEqual([s.version, s.activeLease], [1, undefined]);
      assert.equal((await store.list(user)).length, 1);
      // A holder other than the writer label.
      const p = await store.patch(h, [Increment("", "n")], {
        user,
        writer: "w",
        lease: { seconds: 5, holder: "laptop/x" },
      });
      assert.equal(p.activeLease?.holder, "laptop/x");
    },
  ),
  step(
    "a lease outlives its holder's kill -9 until it lapses, then another holder takes it",
    ({ target }) => leaseOutlivesKilledHolder(target.url!),
    ["crossProcess"],
  ),
  step(
    "two processes of four stores each race for 20 leases: each has one holder",
    async ({ target }) => {
      const url = target.url!;
      const user = freshUser();
      await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
      const hs: string[] = [];
      for (let i = 0; i < 20; i++) hs.push(await store.mint("task", {}, { user }));
      const children = ["A", "B"].map((tag) => spawnChild(["leases", url, user, tag, "4", ...hs]));
      const outs = await Promise.all(children.map(async (child) => {
        const line = await child.line("the racing process");
        await child.succeeded();
        return JSON.parse(line) as Record<string, string[]>;
      }));
      const won = new Map<string, string[]>();
      for (const [holder, mine] of outs.flatMap((o) => Object.entries(o))) {
        for (const h of mine) won.set(h, [...(won.get(h) ?? []), holder]);
      }
      for (const h of hs) {
        assert.equal(won.get(h)?.length, 1, `${h}: ${won.get(h)}`);
        assert.equal((await store.get(h, { user })).activeLease?.holder, won.get(h)![0]);
      }
    },
    ["crossProcess"],
  ),
]);

/**
 * A lease taken by another OS process stays in force after that process is
 * killed with SIGKILL, until it lapses on the real clock; then another holder
 * takes it. Neither lease touches the record.
 *
 * @param url The backend URL, shared by both processes.
 */
async function leaseOutlivesKilledHolder(url: string): Promise<void> {
  const user = freshUser();
  await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  const h = await store.mint("task", { step: 1 }, { user, writer: "w" });
  const child = spawnChild(["lease", url, user, "child/a", "2", h]);
  const line = await child.line("the lease holder");
  child.kill();
  const { status, stderr } = await child.ended();
  assert.match(line, /^leased \d+$/, `the child took no lease: ${stderr}`);
  assert.equal(status.signal, "SIGKILL");
  const expiresAt = new Date(Number(line.split(" ")[1]));
  const s = await store.get(h, { user });
  assert.deepEqual(s.activeLease, { holder: "child/a", expiresAt });
  assert.deepEqual([s.version, s.lastWriter], [1, "w"]);
  if (Date.now() < expiresAt.getTime() - 200) {
    assert.deepEqual(await store.lease(h, { user, writer: "test/b", seconds: 5 }), {
      acquired: false,
      holder: "child/a",
      expiresAt,
    });
  }
  // The real clock runs past the lease's end.
  await sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 20);
  assert.equal((await store.get(h, { user })).activeLease, undefined);
  const taken = await store.lease(h, { user, writer: "test/b", seconds: 5 });
  assert.deepEqual([taken.acquired, taken.holder], [true, "test/b"]);
  const after = await store.get(h, { user });
  assert.deepEqual([after.version, after.lastWriter, after.activeLease?.holder], [
    1,
    "w",
    "test/b",
  ]);
}

/**
 * A view of `backend` that records the name of every primitive called
 * through it (its `close` does nothing: the data outlives the view).
 *
 * @param backend The backend.
 * @param calls Where the names go, in call order.
 * @returns The view.
 */
function countingView(backend: Backend, calls: string[]): Backend {
  return new Proxy(backend, {
    get(target, name) {
      if (name === "close") return () => Promise.resolve();
      const v = Reflect.get(target, name, target);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        calls.push(String(name));
        return v.apply(target, args);
      };
    },
  });
}

/** How a test looks inside a backend's engine for {@link leasePrimitivesHold}. */
export interface LeaseProbe {
  /** The user's lease rows, as `"<handle> <holder> <expiresAt>"`, ordered by handle. */
  rows(): Promise<string[]>;
  /** Every record of the engine, as text: leases must never change it. */
  records(): Promise<string>;
}

/**
 * The lease primitives of a backend that sweeps lapsed leases itself (no
 * native expiry), at the backend level with explicit times: one holder at a
 * time, renewal, lapse at `expiresAt`, listing, release by the holder only,
 * sweep of lapsed rows, and no record touched. `a` and `b` may be two
 * connections to one engine.
 *
 * @param a The backend that takes the leases.
 * @param b The backend that lists, sweeps and releases them.
 * @param user A fresh user; `a` inserts its record `n_aaaaaaaa` first.
 * @param probe Looks at the engine's lease rows and records.
 */
export async function leasePrimitivesHold(
  a: Backend,
  b: Backend,
  user: string,
  probe: LeaseProbe,
): Promise<void> {
  const h = "n_aaaaaaaa", other = "n_bbbbbbbb";
  assert.deepEqual(await a.insert(user, recordOf(h), { now: 1, graceMs: 0 }), { inserted: true });
  const before = await probe.records();
  const take = (holder: string, expiresAt: number, now: number, handle = h) =>
    a.leases!.acquire(user, handle, { holder, expiresAt }, now);
  const lease = (holder: string, expiresAt: number) => ({ holder, expiresAt });
  assert.deepEqual(await take("a", 2000, 1000), { acquired: true, lease: lease("a", 2000) });
  assert.deepEqual(await take("b", 3000, 1999), { acquired: false, lease: lease("a", 2000) });
  assert.deepEqual(await take("a", 2500, 1999), { acquired: true, lease: lease("a", 2500) });
  // At its expiry a lease has lapsed: another holder takes it.
  assert.deepEqual(await take("b", 3000, 2500), { acquired: true, lease: lease("b", 3000) });
  assert.deepEqual(await take("c", 1500, 1000, other), { acquired: true, lease: lease("c", 1500) });
  assert.deepEqual(
    await b.leases!.of(user, [h, other, "n_none"], 1499),
    new Map([[h, lease("b", 3000)], [other, lease("c", 1500)]]),
  );
  assert.deepEqual(await b.leases!.of(user, [h, other], 1500), new Map([[h, lease("b", 3000)]]));
  assert.deepEqual(await b.leases!.of(user, [], 0), new Map());
  assert.deepEqual(await b.leases!.of(freshUser(), [h], 0), new Map());
  // Sweep drops the lapsed leases, and only them.
  assert.equal(await b.sweep(null, 0, 1500), 0);
  assert.deepEqual(await probe.rows(), [`${h} b 3000`]);
  // Only the holder releases; a lapsed lease is dropped but not "released".
  assert.equal(await b.leases!.release(user, h, "a", 2000), false);
  assert.equal(await b.leases!.release(freshUser(), h, "b", 2000), false);
  assert.deepEqual(await probe.rows(), [`${h} b 3000`]);
  assert.equal(await b.leases!.release(user, h, "b", 3000), false);
  assert.deepEqual(await probe.rows(), []);
  await take("b", 4000, 3000);
  assert.equal(await b.leases!.release(user, h, "b", 3999), true);
  assert.equal(await b.leases!.release(user, h, "b", 3999), false);
  assert.equal(await probe.records(), before, "a lease changed a record");
}
