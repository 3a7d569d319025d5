/**
 * Typed kinds: a patch (one counter set, so the state keeps its size) and a
 * save through a kind's view (zod 4 schema,
 * validated after the ops apply, inside the write) beside the same write
 * through the untyped store, in the same run and on the same store. The
 * ratio is the price of the schema check, and of the encode that checks the
 * schema's output as JSON.
 *
 * @module
 */

import { z } from "zod";
import { HandleStore, type JsonObject, SetKey } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";

const user = "bench";

const Notes = z.object({ n: z.number(), notes: z.array(z.string()) });

/** A state of about `bytes` of short notes. */
function stateOf(bytes: number): { n: number; notes: string[] } {
  const notes: string[] = [];
  const state = { n: 0, notes };
  for (let i = 0; JSON.stringify(state).length < bytes; i++) {
    notes.push(`note ${i}: arm64 runners finish first`);
  }
  return state;
}

const dir = await Deno.makeTempDir({ prefix: "mcpstate-kinds-bench-" });
const stores: [string, HandleStore][] = [
  ["memory", new HandleStore(new MemoryBackend())],
  ["sqlite", await HandleStore.fromUrl(`sqlite:///${dir}/bench.db`)],
];

for (const [backend, store] of stores) {
  const notes = store.kind("notes", Notes);
  for (const [label, bytes] of [["1 KiB", 1024], ["64 KiB", 64 * 1024]] as const) {
    const group = `${label} (${backend})`;
    const plain = await store.mint("notes", stateOf(bytes), { user });
    const typed = await notes.mint(stateOf(bytes), { user });
    let i = 0;
    Deno.bench({
      name: "patch, untyped",
      group: `patch ${group}`,
      baseline: true,
      async fn() {
        await store.patch(plain, [SetKey("", "n", ++i)], { user });
      },
    });
    Deno.bench({
      name: "patch through the kind",
      group: `patch ${group}`,
      async fn() {
        await notes.patch(typed, [SetKey("", "n", ++i)], { user });
      },
    });
    const base = stateOf(bytes);
    Deno.bench({
      name: "save, untyped",
      group: `save ${group}`,
      baseline: true,
      async fn(b) {
        const now = await store.get(plain, { user });
        b.start();
        await store.save(plain, { ...base, n: ++i } as JsonObject, {
          user,
          expectVersion: now.version,
        });
        b.end();
      },
    });
    Deno.bench({
      name: "save through the kind",
      group: `save ${group}`,
      async fn(b) {
        const now = await store.get(typed, { user });
        b.start();
        await notes.save(typed, { ...base, n: ++i }, { user, expectVersion: now.version });
        b.end();
      },
    });
  }
}

globalThis.addEventListener("unload", () => {
  for (const [, store] of stores) void store.close();
  try {
    Deno.removeSync(dir, { recursive: true });
  } catch { /* already gone */ }
});
