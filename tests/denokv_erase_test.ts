/**
 * Erase on Deno KV (SPEC 9.1), on real KV files: the scenarios of
 * `_erase_scenario.ts`, with the storage dumped whole (`kv.list` of every
 * entry, keys and values). And a transfer with keys, scanned the same way.
 *
 * @module
 */

import { openBackend } from "../src/url.ts";
import { type EraseEngine, eraseRace, eraseScenario, transferScan } from "./_erase_scenario.ts";
import { kvDump } from "./_storage_scan.ts";

/** An engine on a new KV file in `dir`. */
function engineIn(dir: string, name: string): EraseEngine {
  const file = `${dir}/${name}.kv`;
  const url = `denokv:///${file}`;
  return { url, open: () => openBackend(url), dump: () => kvDump(file) };
}

Deno.test("erase: deno kv", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    await t.step(
      "every trace of the user, and the grants that name it",
      () => eraseScenario(engineIn(dir, "scenario")),
    );
    await t.step(
      "a writer in another process races the erase",
      () => eraseRace(engineIn(dir, "race")),
    );
    await t.step(
      "a transfer with keys leaves no ciphertext of the old owner",
      () => transferScan(engineIn(dir, "transfer")),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
