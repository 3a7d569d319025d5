/**
 * Erase on Redis (SPEC 9.1), on a standalone server and on a 3+3 Redis
 * Cluster started by `tests/_redis.ts`: the scenarios of
 * `_erase_scenario.ts`, with the storage dumped from every primary — every
 * key of any type (strings, hashes, lists, sets, sorted sets, streams) and
 * its value. And a transfer with keys, scanned the same way.
 *
 * @module
 */

import { Redis } from "ioredis";
import { encodeName } from "../src/backends/redis/_codec.ts";
import { openBackend } from "../src/url.ts";
import {
  type EraseEngine,
  eraseRace,
  eraseScenario,
  type Stored,
  transferScan,
} from "./_erase_scenario.ts";
import { type RedisServer, startRedis, startRedisCluster } from "./_redis.ts";

/** Every key and value on `primaries`. */
async function dumpAll(primaries: RedisServer[]): Promise<Stored[]> {
  const out: Stored[] = [];
  for (const p of primaries) {
    const r = new Redis(p.port, p.host, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await r.connect();
      let cursor = "0";
      do {
        const [next, keys] = await r.scan(cursor, "COUNT", 1000);
        cursor = next;
        for (const key of keys) out.push({ where: key, what: await valueOf(r, key) });
      } while (cursor !== "0");
    } finally {
      r.disconnect();
    }
  }
  return out;
}

/** The value of `key` as text, whatever its type. */
async function valueOf(r: Redis, key: string): Promise<string> {
  const type = await r.type(key);
  switch (type) {
    case "string":
      return (await r.get(key)) ?? "";
    case "hash":
      return JSON.stringify(await r.hgetall(key));
    case "list":
      return JSON.stringify(await r.lrange(key, 0, -1));
    case "set":
      return JSON.stringify(await r.smembers(key));
    case "zset":
      return JSON.stringify(await r.zrange(key, "0", "-1", "WITHSCORES"));
    case "stream":
      return JSON.stringify(await r.xrange(key, "-", "+"));
    case "none":
      return "";
    default:
      throw new Error(`key ${key} has a type the dump does not know: ${type}`);
  }
}

Deno.test("erase: redis standalone", async (t) => {
  await using srv = await startRedis();
  const engine: EraseEngine = {
    url: srv.url,
    open: () => openBackend(srv.url),
    dump: () => dumpAll([srv]),
    spellings: (name) => [encodeName(name)],
  };
  await t.step("every trace of the user, and the grants that name it", () => eraseScenario(engine));
  await t.step("a writer in another process races the erase", () => eraseRace(engine));
  await t.step(
    "a transfer with keys leaves no ciphertext of the old owner",
    () => transferScan(engine),
  );
});

Deno.test("erase: redis cluster (3 masters + 3 replicas)", async (t) => {
  await using c = await startRedisCluster({ nodeTimeoutMs: 1000 });
  const engine: EraseEngine = {
    url: c.url,
    open: () => openBackend(c.url),
    dump: async () => dumpAll(await c.masters()),
    spellings: (name) => [encodeName(name)],
  };
  await t.step("every trace of the user, and the grants that name it", () => eraseScenario(engine));
  await t.step("a writer in another process races the erase", () => eraseRace(engine));
  await t.step(
    "a transfer with keys leaves no ciphertext of the old owner",
    () => transferScan(engine),
  );
});
