/**
 * Erase on Redis (SPEC 9.1), on a standalone server and on a 3+3 Redis
 * Cluster started by `tests/_redis.ts`: the scenarios of
 * `_erase_scenario.ts`, with the storage dumped from every primary — every
 * key of any type (strings, hashes, lists, sets, sorted sets, streams) and
 * its value. And a transfer with keys, scanned the same way.
 *
 * @module
 */

import { encodeName } from "../src/backends/redis/_codec.ts";
import { openBackend } from "../src/url.ts";
import { type EraseEngine, eraseRace, eraseScenario, transferScan } from "./_erase_scenario.ts";
import { dumpRedis as dumpAll, type RedisServer, startRedis, startRedisCluster } from "./_redis.ts";

/** The erase scenarios on a Redis whose primaries `primaries` gives. */
async function scenarios(
  t: Deno.TestContext,
  url: string,
  primaries: () => Promise<RedisServer[]>,
): Promise<void> {
  const engine: EraseEngine = {
    url,
    open: () => openBackend(url),
    dump: async () => dumpAll(await primaries()),
    spellings: (name) => [encodeName(name)],
  };
  await t.step("every trace of the user, and the grants that name it", () => eraseScenario(engine));
  await t.step("a writer in another process races the erase", () => eraseRace(engine));
  await t.step(
    "a transfer with keys leaves no ciphertext of the old owner",
    () => transferScan(engine),
  );
}

Deno.test("erase: redis standalone", async (t) => {
  await using srv = await startRedis();
  await scenarios(t, srv.url, () => Promise.resolve([srv]));
});

Deno.test("erase: redis cluster (3 masters + 3 replicas)", async (t) => {
  await using c = await startRedisCluster({ nodeTimeoutMs: 1000 });
  await scenarios(t, c.url, () => c.masters());
});
