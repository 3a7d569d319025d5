/**
 * A child process for the lease and watch tests of every backend: a real,
 * separate OS process on the same database (file, server) as the test.
 *
 * - `patch <url> <user> <handle>`: prints `ready`, then for every line on
 *   stdin increments `n` of the handle once and prints the new version;
 *   exits 0 when stdin closes.
 * - `lease <url> <user> <handle> <holder> <seconds>`: takes a lease for
 *   `holder`, prints `leased <expiresAt epoch ms>`, then waits until the test
 *   kills it.
 *
 * Any error is printed to stderr and exits 1.
 *
 * @module
 */

import { HandleStore, Increment } from "../mod.ts";

const [mode, url, user, handle, holder = "", seconds = "0"] = Deno.args;
if (!mode || !url || !user || !handle) {
  console.error("Usage: _live_child.ts patch|lease <url> <user> <handle> [holder seconds]");
  Deno.exit(2);
}

try {
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  if (mode === "patch") {
    console.log("ready");
    let text = "";
    const decoder = new TextDecoder();
    for await (const chunk of Deno.stdin.readable) {
      text += decoder.decode(chunk, { stream: true });
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n")) {
        text = text.slice(nl + 1);
        const s = await store.patch(handle, [Increment("", "n")], { user, writer: "child" });
        console.log(String(s.version));
      }
    }
    await store.close();
  } else if (mode === "lease") {
    const lease = await store.lease(handle, { user, writer: holder, seconds: Number(seconds) });
    if (!lease.acquired) throw new Error(`the lease is held by ${lease.holder}`);
    console.log(`leased ${lease.expiresAt.getTime()}`);
    setInterval(() => {}, 60_000); // until SIGKILL
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} catch (e) {
  console.error(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  Deno.exit(1);
}
