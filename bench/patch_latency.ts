/**
 * What a big patch does to everyone else: Alice patches a state of about
 * 1 MiB with 1,000 ops at a time (each mix of `_patch_work.ts`) through a
 * `HandleStore` on SQLite, while Bob, on the same store, loads his own small
 * handle in a loop, and a second process on the same database file saves
 * Bob's other handle in a loop. Prints, per mix, how long Alice's patches
 * take and how long Bob waits, as a Markdown table.
 *
 *   deno run --allow-all bench/patch_latency.ts [--patches 10]
 *
 * @module
 */

import { parseArgs } from "node:util";
import { HandleStore, McpStateError } from "../mod.ts";
import { bigState, MIXES, patchOf } from "./_patch_work.ts";

const { values } = parseArgs({
  options: {
    patches: { type: "string", default: "10" },
    // Child mode: save a handle in a loop until the file `stop` exists, then print latencies.
    child: { type: "string" },
    handle: { type: "string" },
    stop: { type: "string" },
  },
});
const USER_A = "alice";
const USER_B = "bob";
const CAP = 8 * 1024 * 1024;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}
const ms = (x: number) => x < 10 ? x.toFixed(2) : x.toFixed(0);

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

if (values.child) {
  // Another process on the same file: Bob's saves, each one write transaction.
  await using store = await HandleStore.fromUrl(`sqlite:///${values.child}`, {
    reclaimIntervalMs: 0,
  });
  const handle = values.handle as string;
  const stop = values.stop as string;
  const lat: number[] = [];
  let failed = 0;
  let version = (await store.get(handle, { user: USER_B })).version;
  await Deno.writeTextFile(`${stop}.ready`, "");
  while (!await exists(stop)) {
    const t0 = performance.now();
    try {
      version = (await store.save(handle, { n: version }, {
        user: USER_B,
        expectVersion: version,
      })).version;
    } catch (e) {
      // The database stayed locked past the busy timeout: the save failed.
      if (!(e instanceof McpStateError && e.code === "backend_error")) throw e;
      failed++;
    }
    lat.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 2));
  }
  console.log(JSON.stringify({ lat, failed }));
  Deno.exit(0);
}

const dir = await Deno.makeTempDir({ prefix: "mcpstate-patch-latency-" });
const path = `${dir}/state.db`;
const rows: string[] = [];
try {
  await using store = await HandleStore.fromUrl(`sqlite:///${path}`, {
    reclaimIntervalMs: 0,
    maxStateBytes: CAP,
  });
  const state = bigState();
  const bobLoad = await store.mint("note", { n: 0, text: "b".repeat(1000) }, { user: USER_B });
  const bobSave = await store.mint("note", { n: 0 }, { user: USER_B });

  // Bob alone, for reference.
  const idle: number[] = [];
  for (let i = 0; i < 300; i++) {
    const t0 = performance.now();
    await store.get(bobLoad, { user: USER_B });
    idle.push(performance.now() - t0);
  }
  idle.sort((a, b) => a - b);

  for (const mix of MIXES) {
    const alice = await store.mint("notes", state, { user: USER_A });
    const stop = `${dir}/stop-${mix}`;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        new URL(import.meta.url).pathname,
        "--child",
        path,
        "--handle",
        bobSave,
        "--stop",
        stop,
      ],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    while (!await exists(`${stop}.ready`)) await new Promise((r) => setTimeout(r, 20));
    let busy = true;
    const waits: number[] = [];
    const bob = (async () => {
      while (busy) {
        const t0 = performance.now();
        await store.get(bobLoad, { user: USER_B });
        waits.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    const took: number[] = [];
    for (let round = 1; round <= Number(values.patches); round++) {
      const ops = patchOf(mix, 1000, round);
      const t0 = performance.now();
      await store.patch(alice, ops, { user: USER_A });
      took.push(performance.now() - t0);
      // Alice pauses briefly between patches, as a real client does.
      await new Promise((r) => setTimeout(r, 20));
    }
    busy = false;
    await bob;
    await Deno.writeTextFile(stop, "");
    const out = await child.output();
    const other = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      lat: number[];
      failed: number;
    };
    const saves = other.lat.sort((a, b) => a - b);
    took.sort((a, b) => a - b);
    waits.sort((a, b) => a - b);
    rows.push(
      `| ${mix} | ${ms(pct(took, 50))} | ${ms(took.at(-1)!)} | ${ms(pct(waits, 50))} | ${
        ms(pct(waits, 99))
      } | ${ms(waits.at(-1)!)} | ${ms(pct(saves, 50))} | ${ms(pct(saves, 99))} | ${
        ms(saves.at(-1)!)
      } | ${other.failed} of ${saves.length} |`,
    );
    await store.revoke(alice, { user: USER_A });
  }
  console.log(
    `Bob's load with nobody else working: p50 ${ms(pct(idle, 50))} ms, p99 ${
      ms(pct(idle, 99))
    } ms.\n`,
  );
  console.log(
    "| mix (1,000 ops, ~1 MiB) | Alice's patch p50 (ms) | max | Bob's load p50 (ms) | p99 | max | Bob's save, other process, p50 (ms) | p99 | max | saves failed (locked) |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const r of rows) console.log(r);
} finally {
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
