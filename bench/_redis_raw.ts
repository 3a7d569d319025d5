/**
 * The raw baselines of the Redis bench files: a trivial version check and
 * write of the same bytes, as one script, and the store's way of sending
 * the commands of one tick in one socket write, for a raw client.
 *
 * @module
 */

import process from "node:process";
import type { Redis } from "ioredis";

/** The compare-and-set script: `KEYS[1]`, expected version, new version, state. */
export const RAW_CAS = `
if redis.call('HGET', KEYS[1], 'v') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
  return 1
end
return 0`;

/**
 * Sends the commands `client` gets in the rest of this tick in one socket
 * write, as the Redis backend does while calls are in flight: corks its
 * socket now and uncorks it once the tick's microtasks have run. Call it
 * before each command; it corks once per tick.
 */
export function coalesce(client: Redis): void {
  const c = client as Redis & { coalescing?: boolean };
  if (c.coalescing || !c.stream?.writable) return;
  c.coalescing = true;
  c.stream.cork();
  process.nextTick(() => {
    c.coalescing = false;
    c.stream.uncork();
  });
}
