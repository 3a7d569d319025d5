/**
 * Patch cost: 1,000 ops on a state of about 1 MiB, in four mixes (set_key,
 * add_to_set, append, and the three in turn), through `applyOps` and through
 * a `HandleStore` on SQLite. Each group's baseline is the work that no
 * implementation can avoid for such a patch: parsing and stringifying the
 * state (and, on SQLite, reading and writing its row in one transaction).
 * A patch should cost a small multiple of that, not a multiple of the op
 * count.
 *
 *   deno bench --allow-all bench/patch_bench.ts
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { applyOps, HandleStore } from "../mod.ts";
import { BIG_STATE_BYTES, bigState, MIXES, patchOf } from "./_patch_work.ts";

const state = bigState();
const text = JSON.stringify(state);
const size = `${Math.round(BIG_STATE_BYTES / 1024)} KiB`;

Deno.bench({
  name: `JSON.parse + JSON.stringify (${size})`,
  group: `applyOps, 1,000 ops on ${size}`,
  baseline: true,
  fn() {
    JSON.stringify(JSON.parse(text));
  },
});
for (const mix of MIXES) {
  const ops = patchOf(mix);
  Deno.bench({
    name: `applyOps, 1,000 ${mix} ops`,
    group: `applyOps, 1,000 ops on ${size}`,
    n: 20,
    warmup: 2,
    fn() {
      applyOps(state, ops);
    },
  });
}

const dir = await Deno.makeTempDir({ prefix: "mcpstate-patch-bench-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
const path = `${dir}/patch.db`;
const USER = "bench-user";
const store = await HandleStore.fromUrl(`sqlite:///${path}`, {
  reclaimIntervalMs: 0,
  maxStateBytes: 4 * 1024 * 1024,
});
const raw = new DatabaseSync(path);
raw.exec("PRAGMA busy_timeout = 10000");
const rawHandle = await store.mint("bench", state, { user: USER });
const select = raw.prepare("SELECT state FROM handles WHERE user = ? AND handle = ?");
const update = raw.prepare(
  "UPDATE handles SET state = ?, version = version + 1, updated_ms = ? WHERE user = ? AND handle = ?",
);

const storeGroup = `store.patch on SQLite, 1,000 ops on ${size}`;
Deno.bench({
  name: "raw BEGIN IMMEDIATE, SELECT, parse, one change, stringify, UPDATE",
  group: storeGroup,
  baseline: true,
  n: 20,
  warmup: 2,
  fn() {
    raw.exec("BEGIN IMMEDIATE");
    try {
      const s = JSON.parse((select.get(USER, rawHandle) as { state: string }).state);
      s.stats.patches++;
      update.run(JSON.stringify(s), Date.now(), USER, rawHandle);
      raw.exec("COMMIT");
    } catch (e) {
      if (raw.isTransaction) raw.exec("ROLLBACK");
      throw e;
    }
  },
});
for (const mix of MIXES) {
  const handle = await store.mint("bench", state, { user: USER });
  let round = 0;
  Deno.bench({
    name: `store.patch, 1,000 ${mix} ops`,
    group: storeGroup,
    n: 20,
    warmup: 2,
    async fn(b) {
      // Back to the same 1 MiB before each timed patch, untimed.
      const { version } = await store.get(handle, { user: USER });
      await store.save(handle, state, { user: USER, expectVersion: version });
      const ops = patchOf(mix, 1000, ++round);
      b.start();
      await store.patch(handle, ops, { user: USER });
      b.end();
    },
  });
}
