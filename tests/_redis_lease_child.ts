/**
 * A second OS process for the Redis lease test: takes a lease, prints
 * `{"acquired": …, "holder": …, "expiresAt": …}` on stdout, then holds on
 * (connection open) until it is killed.
 *
 * ```sh
 * deno run --allow-all tests/_redis_lease_child.ts <url> <user> <handle> <holder> <seconds>
 * ```
 *
 * @module
 */

import { HandleStore } from "../mod.ts";

const [url, user, handle, holder, seconds] = Deno.args;
if (!url || !user || !handle || !holder || !seconds) {
  console.error("usage: _redis_lease_child.ts <url> <user> <handle> <holder> <seconds>");
  Deno.exit(2);
}
const store = await HandleStore.fromUrl(url);
const r = await store.lease(handle, { user, writer: holder, seconds: Number(seconds) });
console.log(
  JSON.stringify({ acquired: r.acquired, holder: r.holder, expiresAt: r.expiresAt.getTime() }),
);
setInterval(() => {}, 60_000); // hold the lease's process alive until SIGKILL
