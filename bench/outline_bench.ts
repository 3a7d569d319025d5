/**
 * Budgeted reads: the cost of an outline of a 1 MiB state, at a 128 KiB and
 * a 4 KiB budget, beside `JSON.parse` + `JSON.stringify` of the same state
 * in the same run (the group's baseline: what reading the state whole costs
 * at least). Each state is a parsed copy, as a read has it. The ratios, not
 * the absolute numbers, are the point: `deno task bench` writes them to
 * `docs/dev/bench-results.md`, and `docs/benchmarks.md` quotes them.
 *
 * @module
 */

import { HandleStore, type JsonObject, outline } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";

const MIB = 1 << 20;
const KIB = 1024;

/** Repeats `unit` into a string of about `bytes` UTF-8 bytes. */
function textOf(unit: string, bytes: number): string {
  const unitBytes = new TextEncoder().encode(unit).length;
  return unit.repeat(Math.ceil(bytes / unitBytes));
}

/** About 1 MiB of small log entries: many values in a few levels. */
function notes(): JsonObject {
  const entries: JsonObject[] = [];
  const state = {
    title: "Runners",
    sources: Array.from({ length: 50 }, (_, i) => `https://arxiv.org/abs/2401.${10000 + i}`),
    entries,
  };
  for (let i = 0; JSON.stringify(state).length < MIB - 200; i++) {
    const at = new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString();
    entries.push({
      at,
      by: `agent-${i % 7}`,
      note: `run ${i}: arm64 first by ${i % 90} s`,
      ok: i % 9 > 0,
    });
  }
  return state;
}

/** A wide object: 80,000 keys of small values. */
function wide(): JsonObject {
  const entries: JsonObject = {};
  for (let i = 0; i < 80_000; i++) entries[`k${i}`] = i % 2 ? i % 1000 : "ok";
  return { entries };
}

const shapes: [string, JsonObject][] = [
  ["log entries", notes()],
  ["one ASCII text", { title: "Runners", notes: textOf("Arm64 runners finish first. ", MIB) }],
  ["non-ASCII text", { notes: textOf("Läufer schneller — 速い走者 🚀 ", MIB) }],
  ["80,000 keys", wide()],
  ["300,000-item list", { log: Array.from({ length: 300_000 }, (_, i) => i % 250) }],
];

for (const [label, built] of shapes) {
  const text = JSON.stringify(built);
  const state = JSON.parse(text) as JsonObject;
  const size = new TextEncoder().encode(text).length;
  const group = `outline: ${label} (${Math.round(size / KIB)} KiB)`;
  Deno.bench({
    name: "JSON.parse + JSON.stringify",
    group,
    baseline: true,
    fn() {
      JSON.stringify(JSON.parse(text));
    },
  });
  for (const budget of [128 * KIB, 4 * KIB]) {
    Deno.bench({
      name: `outline at ${budget / KIB} KiB`,
      group,
      fn() {
        const out = outline(state, budget);
        if (!out.truncated) throw new Error("expected an outline");
      },
    });
  }
}

// Through the store: a budgeted read beside a plain get of the same 1 MiB state.
const store = new HandleStore(new MemoryBackend());
const USER = "bench-user";
const handle = await store.mint("bench", notes(), { user: USER });
const group = "store: 1 MiB of log entries (memory)";
Deno.bench({
  name: "store.get",
  group,
  baseline: true,
  async fn() {
    await store.get(handle, { user: USER });
  },
});
for (const maxBytes of [128 * KIB, 4 * KIB]) {
  Deno.bench({
    name: `store.read, maxBytes ${maxBytes / KIB} KiB`,
    group,
    async fn() {
      await store.read(handle, { user: USER, maxBytes });
    },
  });
}
Deno.bench({
  name: "store.read, 3 paths, maxBytes 4 KiB",
  group,
  async fn() {
    await store.read(handle, {
      user: USER,
      maxBytes: 4 * KIB,
      paths: ["title", "/entries/0", "/entries/5000/note"],
    });
  },
});
