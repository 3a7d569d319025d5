/**
 * A second OS process for the Redis contention test: patches one handle
 * from several concurrent writers, then prints `{"patches": n}` on stdout.
 *
 * ```sh
 * deno run --allow-all tests/_redis_child.ts <url> <user> <handle> <writers> <patches> <stores> <tag> [startAt]
 * ```
 *
 * Writers are spread round-robin over `stores` stores (each its own
 * connection): 1 makes every writer share one connection, `writers` gives each
 * its own. `startAt` (epoch ms) makes every writer wait until then, so that
 * processes started at different speeds still overlap.
 *
 * @module
 */

import { Append, HandleStore, Increment } from "../mod.ts";

const [url, user, handle, writersArg, patchesArg, storesArg, tag, startAt] = Deno.args;
if (!url || !user || !handle || !writersArg || !patchesArg || !storesArg || !tag) {
  console.error("usage: _redis_child.ts <url> <user> <handle> <writers> <patches> <stores> <tag>");
  Deno.exit(2);
}
const writers = Number(writersArg), patches = Number(patchesArg), nStores = Number(storesArg);
const stores = await Promise.all(
  Array.from({ length: nStores }, () => HandleStore.fromUrl(url)),
);
const wait = Number(startAt ?? 0) - Date.now();
if (wait > 0) await new Promise((r) => setTimeout(r, wait));
try {
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    const store = stores[w % nStores]!;
    for (let i = 0; i < patches; i++) {
      await store.patch(handle, [Increment("", "n"), Append("log", `${tag}:${w}:${i}`)], {
        user,
        writer: `${tag}/${w}`,
      });
    }
  }));
} finally {
  await Promise.all(stores.map((s) => s.close()));
}
console.log(JSON.stringify({ patches: writers * patches }));
