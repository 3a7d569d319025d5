/**
 * The merge group of the backend contract: `save` with `onConflict: "merge"`
 * on one engine, through stores that each open their own connection to the
 * same data (as processes and instances do): disjoint edits from one base
 * merge, overlapping ones conflict with the right pointers, concurrent
 * writers lose nothing, the merged changelog entry shows its base, a base
 * beyond the retained history is `history_unavailable`, and a save without
 * `onConflict` behaves as it always did.
 *
 * ```ts ignore
 * mergeContract("sqlite file", (options) => HandleStore.fromUrl(url, options));
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  Append,
  type ChangeInfo,
  type HandleStore,
  type HandleStoreOptions,
  Increment,
  type JsonObject,
  SetKey,
  StaleWrite,
  StateTooLarge,
} from "../mod.ts";

/** Opens a store on the engine under test; every call is a new connection to the same data. */
export type OpenMergeStore = (options?: HandleStoreOptions) => Promise<HandleStore>;

/** A user no other test uses. */
function freshUser(): string {
  return `merge-${crypto.randomUUID()}`;
}

async function staleOf(p: Promise<unknown>): Promise<StaleWrite> {
  try {
    await p;
  } catch (e) {
    if (e instanceof StaleWrite) return e;
    throw e;
  }
  assert.fail("expected a stale_write");
}

async function changesAfter(store: HandleStore, h: string, v: number, user: string) {
  const r = await store.changesSince(h, v, { user });
  assert.ok(!r.truncated, "the changelog reaches back");
  return r.truncated ? [] : r.changes;
}

/**
 * Registers the merge tests for one engine.
 *
 * @param name The engine's name in the test names.
 * @param open Opens a store on it (a new connection each call).
 */
export function mergeContract(name: string, open: OpenMergeStore): void {
  const test = (what: string, fn: (open: OpenMergeStore) => Promise<void>) =>
    Deno.test(`merge [${name}]: ${what}`, () => fn(open));

  test("disjoint edits from one base merge; the merged entry names its base", async (open) => {
    await using a = await open();
    await using b = await open();
    const user = freshUser();
    const h = await a.mint("doc", { notes: "", sources: ["a"], stats: { n: 0 } }, { user });
    const base = await a.get(h, { user });
    // Someone else: a patch that appends, then a save that changes the stats.
    await b.patch(h, [Append("sources", "b")], { user, writer: "other" });
    const other = await b.get(h, { user });
    await b.save(h, { ...other.state, stats: { n: 5 } }, {
      user,
      expectVersion: 2,
      writer: "other",
    });
    // The caller wrote from version 1: notes only.
    const mine = { ...base.state, notes: "arm64 wins" };
    const saved = await a.save(h, mine, {
      user,
      expectVersion: base.version,
      onConflict: "merge",
      writer: "me",
    });
    assert.equal(saved.merged, true);
    assert.equal(saved.baseVersion, 1);
    assert.equal(saved.version, 4);
    const want = { notes: "arm64 wins", sources: ["a", "b"], stats: { n: 5 } };
    assert.deepEqual(saved.state, want);
    assert.deepEqual((await b.get(h, { user })).state, want, "what is stored");
    const log = await changesAfter(a, h, 1, user);
    assert.deepEqual(log.map((c) => [c.version, c.op, c.writer]), [
      [2, "patch", "other"],
      [3, "save", "other"],
      [4, "save", "me"],
    ]);
    const entry = log[2] as ChangeInfo;
    assert.equal(entry.merged_from, 1);
    assert.deepEqual(entry.patch, [{ op: "add", path: "/notes", value: "arm64 wins" }]);
    assert.equal("undo" in entry, false, "the way back is not shown");
    // The whole story from the base: theirs in 2 and 3, the caller's in 4.
    assert.deepEqual((await a.stateAt(h, 1, { user })).state, base.state);
    assert.deepEqual((await a.stateAt(h, 3, { user })).state, {
      notes: "",
      sources: ["a", "b"],
      stats: { n: 5 },
    });
  });

  test("overlapping edits are stale_write with the pointers both changed; nothing is written", async (open) => {
    await using a = await open();
    await using b = await open();
    const user = freshUser();
    const h = await a.mint("doc", {
      notes: "",
      tags: ["x"],
      deep: { a: { b: 1 }, c: 2 },
      list: [1, 2, 3],
    }, { user });
    const base = await a.get(h, { user });
    await b.patch(h, [
      SetKey("", "notes", "theirs"),
      SetKey("/deep/a", "b", 10),
      Append("list", 4),
    ], { user });
    const e = await staleOf(a.save(h, {
      notes: "mine", // same key: conflict
      tags: ["x", "y"], // only mine: would merge
      deep: { a: "replaced", c: 2 }, // mine replaced a place that theirs changed inside
      list: [1, 3], // a removal: the whole list, which theirs appended to
    }, { user, expectVersion: base.version, onConflict: "merge" }));
    assert.deepEqual(e.details.conflicts, ["/deep/a/b", "/list", "/notes"]);
    assert.equal(e.details.base_version, 1);
    assert.equal(e.details.expected_version, 1);
    assert.equal((e.details.current as JsonObject).version, 2);
    assert.match(e.message, /overlap at \/deep\/a\/b, \/list, \/notes/);
    const now = await b.get(h, { user });
    assert.equal(now.version, 2, "the refused save wrote nothing");
    assert.deepEqual(now.state.tags, ["x"]);
    // Re-applying only around the conflicts, from the current version, lands.
    const again = await a.save(h, { ...now.state, tags: ["x", "y"] }, {
      user,
      expectVersion: now.version,
      onConflict: "merge",
    });
    assert.equal(again.merged, undefined, "no one wrote in between: a plain save");
    assert.equal(again.version, 3);
  });

  test("concurrent writers from one base: disjoint keys and appends all land, nothing lost", async (open) => {
    const stores = await Promise.all(Array.from({ length: 6 }, () => open()));
    try {
      const user = freshUser();
      const h = await stores[0]!.mint("doc", { log: [], counters: {} }, { user });
      const base = await stores[0]!.get<{ log: string[]; counters: JsonObject }>(h, { user });
      const results = await Promise.all(stores.map((s, i) =>
        s.save(h, {
          log: [...base.state.log, `w${i}`],
          counters: { ...base.state.counters, [`w${i}`]: i },
        }, { user, expectVersion: 1, onConflict: "merge", writer: `w${i}` })
      ));
      assert.equal(results.filter((r) => !r.merged).length, 1, "exactly one plain save");
      assert.deepEqual(results.map((r) => r.version).sort((x, y) => x - y), [2, 3, 4, 5, 6, 7]);
      for (const r of results) if (r.merged) assert.equal(r.baseVersion, 1);
      const end = await stores[0]!.get<{ log: string[]; counters: JsonObject }>(h, { user });
      assert.equal(end.version, 7);
      assert.deepEqual([...end.state.log].sort(), ["w0", "w1", "w2", "w3", "w4", "w5"]);
      assert.deepEqual(end.state.counters, { w0: 0, w1: 1, w2: 2, w3: 3, w4: 4, w5: 5 });
      // The log's order is the order of the versions that appended.
      const log = await changesAfter(stores[0]!, h, 1, user);
      assert.deepEqual(log.map((c) => c.writer), end.state.log);
      assert.equal(log.filter((c) => c.merged_from === 1).length, 5);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  test("concurrent writers of one key from one base: one lands, the others conflict at it", async (open) => {
    const stores = await Promise.all(Array.from({ length: 4 }, () => open()));
    try {
      const user = freshUser();
      const h = await stores[0]!.mint("doc", { title: "draft", body: "" }, { user });
      const outcomes = await Promise.allSettled(
        stores.map((s, i) =>
          s.save(h, { title: `title ${i}`, body: "" }, {
            user,
            expectVersion: 1,
            onConflict: "merge",
          })
        ),
      );
      const won = outcomes.filter((o) => o.status === "fulfilled");
      assert.equal(won.length, 1);
      for (const o of outcomes) {
        if (o.status === "rejected") {
          assert.ok(o.reason instanceof StaleWrite, String(o.reason));
          assert.deepEqual(o.reason.details.conflicts, ["/title"]);
        }
      }
      const end = await stores[0]!.get(h, { user });
      assert.equal(end.version, 2);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  test("patches racing a merging save: every patch and the save land", async (open) => {
    await using a = await open();
    await using b = await open();
    const user = freshUser();
    const h = await a.mint("doc", { hits: 0, notes: "" }, { user });
    const patches = Array.from({ length: 20 }, () => b.patch(h, [Increment("", "hits")], { user }));
    const save = a.save(h, { hits: 0, notes: "kept" }, {
      user,
      expectVersion: 1,
      onConflict: "merge",
    });
    const [saved] = await Promise.all([save, ...patches]);
    const end = await a.get<{ hits: number; notes: string }>(h, { user });
    assert.equal(end.state.hits, 20);
    assert.equal(end.state.notes, "kept");
    assert.equal(end.version, 22);
    assert.ok(saved.version >= 2);
  });

  test("a base beyond the retained history is a plain stale_write saying so", async (open) => {
    await using a = await open({ history: { maxEntries: 2 } });
    const user = freshUser();
    const h = await a.mint("doc", { a: 0, b: 0 }, { user });
    for (let i = 1; i <= 3; i++) await a.patch(h, [SetKey("", "a", i)], { user });
    const e = await staleOf(
      a.save(h, { a: 0, b: 1 }, { user, expectVersion: 1, onConflict: "merge" }),
    );
    assert.equal(e.details.reason, "history_unavailable");
    assert.equal(e.details.conflicts, undefined);
    assert.equal(e.details.base_version, 1);
    assert.match(e.message, /no longer reaches back to version 1/);
    // Within the history it merges.
    const ok = await a.save(h, { a: 2, b: 1 }, { user, expectVersion: 3, onConflict: "merge" });
    assert.equal(ok.merged, true);
    assert.deepEqual(ok.state, { a: 3, b: 1 });
    await using none = await open({ history: false });
    const g = await none.mint("doc", { a: 0 }, { user });
    await none.patch(g, [SetKey("", "a", 1)], { user });
    const f = await staleOf(
      none.save(g, { a: 0, b: 1 }, { user, expectVersion: 1, onConflict: "merge" }),
    );
    assert.equal(f.details.reason, "history_unavailable");
    // Version 0 never existed: nothing to merge from.
    const z = await staleOf(a.save(h, { b: 2 }, { user, expectVersion: 0, onConflict: "merge" }));
    assert.equal(z.details.reason, "history_unavailable");
  });

  test("without onConflict a stale save is refused as in mcpstate 0.2", async (open) => {
    await using a = await open();
    const user = freshUser();
    const h = await a.mint("doc", { a: 0, b: 0 }, { user });
    await a.patch(h, [SetKey("", "a", 1)], { user });
    for (const onConflict of [undefined, "fail"] as const) {
      const e = await staleOf(a.save(h, { a: 0, b: 1 }, {
        user,
        expectVersion: 1,
        ...(onConflict ? { onConflict } : {}),
      }));
      assert.deepEqual(Object.keys(e.details).sort(), [
        "base_version",
        "changes",
        "current",
        "expected_version",
        "handle",
      ]);
      assert.equal((await a.get(h, { user })).version, 2);
    }
    await assert.rejects(
      () => a.save(h, { a: 1 }, { user, expectVersion: 2, onConflict: "yes" as "merge" }),
      /on_conflict/,
    );
  });

  test("a merged save retried with its idempotency key answers the first result", async (open) => {
    await using a = await open();
    const user = freshUser();
    const h = await a.mint("doc", { a: 0, b: 0 }, { user });
    await a.patch(h, [SetKey("", "a", 1)], { user });
    const options = { user, expectVersion: 1, onConflict: "merge" as const, idempotencyKey: "k1" };
    const first = await a.save(h, { a: 0, b: 1 }, options);
    const again = await a.save(h, { a: 0, b: 1 }, options);
    assert.equal(first.merged, true);
    assert.deepEqual(
      [again.version, again.merged, again.baseVersion, again.state],
      [3, true, 1, { a: 1, b: 1 }],
    );
    assert.equal((await a.get(h, { user })).version, 3, "applied once");
    // The same key for a failing save is another call.
    await assert.rejects(
      () => a.save(h, { a: 0, b: 1 }, { ...options, onConflict: "fail" }),
      /idempotency/,
    );
  });

  test("a merge over the size cap is state_too_large and writes nothing", async (open) => {
    await using a = await open({ maxStateBytes: 200 });
    const user = freshUser();
    const h = await a.mint("doc", { a: "", b: "" }, { user });
    await a.patch(h, [SetKey("", "a", "x".repeat(100))], { user });
    await assert.rejects(
      () =>
        a.save(h, { a: "", b: "y".repeat(100) }, { user, expectVersion: 1, onConflict: "merge" }),
      StateTooLarge,
    );
    assert.equal((await a.get(h, { user })).version, 2);
  });
}
