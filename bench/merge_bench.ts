/**
 * Merged saves: a save with `onConflict: "merge"` whose `expectVersion` is
 * behind (someone patched another key since the caller read), beside a plain
 * save of the same state at the current version, in the same run and on the
 * same store. Both run after the same patch by "someone else" (outside the
 * timing), so the changelog and the state are alike; only the save is
 * timed. The merged save pays for a refused first step, a read of the
 * changelog since its base, the rewind to the base and two diffs: the ratio
 * is the point.
 *
 * @module
 */

import { HandleStore, Increment, type JsonObject } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";

const user = "bench";

/** A state of about `bytes` of small notes, with a counter `n` for the others' patches. */
function stateOf(bytes: number): JsonObject {
  const notes: string[] = [];
  const state = { n: 0, mine: 0, notes };
  for (let i = 0; JSON.stringify(state).length < bytes; i++) {
    notes.push(`note ${i}: arm64 runners finish first`);
  }
  return state;
}

const dir = await Deno.makeTempDir({ prefix: "mcpstate-merge-bench-" });
const stores: [string, HandleStore][] = [
  ["memory", new HandleStore(new MemoryBackend())],
  ["sqlite", await HandleStore.fromUrl(`sqlite:///${dir}/bench.db`)],
];

for (const [backend, store] of stores) {
  for (const [label, bytes] of [["1 KiB", 1024], ["64 KiB", 64 * 1024]] as const) {
    const group = `save ${label} (${backend})`;
    const h = await store.mint("bench", stateOf(bytes), { user });
    let i = 0;

    Deno.bench({
      name: "plain save at the current version",
      group,
      baseline: true,
      async fn(b) {
        await store.patch(h, [Increment("", "n")], { user });
        const now = await store.get(h, { user });
        const mine = { ...now.state, mine: ++i };
        b.start();
        await store.save(h, mine, { user, expectVersion: now.version });
        b.end();
      },
    });

    for (const behind of [1, 10]) {
      Deno.bench({
        name: `merged save, ${behind} write${behind > 1 ? "s" : ""} behind`,
        group,
        async fn(b) {
          const base = await store.get(h, { user });
          for (let k = 0; k < behind; k++) await store.patch(h, [Increment("", "n")], { user });
          const mine = { ...base.state, mine: ++i };
          b.start();
          const r = await store.save(h, mine, {
            user,
            expectVersion: base.version,
            onConflict: "merge",
          });
          b.end();
          if (!r.merged) throw new Error("expected a merge");
        },
      });
    }
  }
}

globalThis.addEventListener("unload", () => {
  for (const [, store] of stores) void store.close();
  try {
    Deno.removeSync(dir, { recursive: true });
  } catch { /* already gone */ }
});
