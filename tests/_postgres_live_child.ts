/**
 * A writer process for the PostgreSQL watch test: it opens its own store on
 * the URL it is given, says `ready`, then for every line on stdin increments
 * `n` of the handle once and prints the new version; it exits when stdin
 * closes.
 *
 * Usage: `deno run --allow-all tests/_postgres_live_child.ts <url> <user> <handle>`
 *
 * @module
 */

import { HandleStore, Increment } from "../mod.ts";

const [url, user, handle] = Deno.args;
if (!url || !user || !handle) {
  console.error("usage: _postgres_live_child.ts <url> <user> <handle>");
  Deno.exit(2);
}

const store = await HandleStore.fromUrl(url);
try {
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
} finally {
  await store.close();
}
