/**
 * The change feed: a watch hears every version another store writes, and
 * every version another OS process writes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HandleStore, Increment, McpStateError } from "../../mod.ts";
import { freshUser, rejectsWith, within } from "../_helpers.ts";
import { spawnChild } from "../_child.ts";
import { group, step } from "./_group.ts";

export default group("feed and watch", ["feed"], [
  step(
    "watch(): the current snapshot, then every new version from another store, until revoked",
    async ({ store, clock, openStore }) => {
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
  ),
  step(
    "a watcher sees every version another OS process writes, within 5 s each",
    ({ target }) => watcherHearsAnotherProcess(target.url!),
    ["crossProcess"],
  ),
]);

/**
 * A watcher on `url` sees each version another OS process writes, within
 * 5 s each, through the backend's change feed alone (a long safety-net poll).
 *
 * @param url The backend URL, shared by both processes.
 */
async function watcherHearsAnotherProcess(url: string): Promise<void> {
  const user = freshUser();
  await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  const h = await store.mint("live", { n: 0 }, { user });
  const child = spawnChild(["patch", url, user, h]);
  const stop = new AbortController();
  const it = store.watch<{ n: number }>(h, { user, signal: stop.signal, pollMs: 600_000 });
  try {
    assert.equal(await child.line("the writer process"), "ready");
    assert.equal((await it.next()).value?.version, 1);
    for (let version = 2; version <= 4; version++) {
      await child.send("patch");
      assert.equal((await child.line("the writer process")).split(" ")[0], String(version));
      const r = await within(5_000, `version ${version}`, it.next());
      assert.equal(r.done, false);
      assert.equal(r.value?.version, version);
      assert.equal(r.value?.state.n, version - 1);
      assert.equal(r.value?.lastWriter, "child");
    }
  } finally {
    stop.abort();
    await it.return?.(undefined);
    await child.succeeded();
  }
}
