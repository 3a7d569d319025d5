/**
 * A writer process for the PostgreSQL tests: it opens its own store on the
 * URL it is given, says `ready`, waits for one line on stdin (so that every
 * process starts writing at the same moment), then runs `writers` concurrent
 * loops of `count` patches each on one handle and prints a JSON summary.
 * Every patch increments `n` and appends `<tag>:<writer>:<i>` to `log`.
 *
 * With `count` set to `forever` the loops never end, and every other writer
 * passes an idempotency key: the test kills the process (SIGKILL) while its
 * transactions are in flight.
 *
 * Usage: `deno run --allow-all tests/_postgres_child.ts <url> <user> <handle> <tag> <writers> <count|forever>`
 *
 * @module
 */

import { Append, HandleStore, Increment } from "../mod.ts";

const [url, user, handle, tag, writersArg, countArg] = Deno.args;
if (!url || !user || !handle || !tag || !writersArg || !countArg) {
  console.error(
    "usage: _postgres_child.ts <url> <user> <handle> <tag> <writers> <count|forever>",
  );
  Deno.exit(2);
}
const writers = Number(writersArg);
const forever = countArg === "forever";
const count = forever ? Infinity : Number(countArg);

const store = await HandleStore.fromUrl(url);
try {
  console.log("ready");
  const reader = Deno.stdin.readable.getReader();
  await reader.read();
  reader.releaseLock();
  const started = performance.now();
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    for (let i = 0; i < count; i++) {
      const id = `${tag}:${w}:${i}`;
      await store.patch(handle, [Increment("", "n"), Append("log", id)], {
        user,
        writer: `${tag}/w${w}`,
        ...(forever && w % 2 === 1 ? { idempotencyKey: id } : {}),
      });
    }
  }));
  console.log(JSON.stringify({ tag, patches: writers * count, ms: performance.now() - started }));
} finally {
  await store.close();
}
