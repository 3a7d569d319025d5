/**
 * What the changelog's way back costs in bytes: for typical writes, the
 * stored entry (the text a backend keeps) with its `undo`, beside the same
 * entry without it (what earlier releases stored). Prints a markdown table
 * for `docs/benchmarks.md`.
 *
 * ```sh
 * deno run --allow-all bench/entry_size.ts
 * ```
 *
 * @module
 */

import {
  Append,
  HandleStore,
  Increment,
  type JsonObject,
  Merge,
  type PatchOp,
  SetKey,
} from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";

const user = "u";
const backend = new MemoryBackend();
const store = new HandleStore(backend);

function notes(bytes: number): string[] {
  const out: string[] = [];
  for (let i = 0; JSON.stringify(out).length < bytes; i++) out.push(`note ${i}: arm64 runs first`);
  return out;
}

/** The last entry of `h`: its stored size, and its size without `undo`. */
async function lastEntry(h: string): Promise<[number, number]> {
  const entries = await backend.changes(user, h, 0);
  const text = entries[entries.length - 1]!.text;
  const { undo: _, ...rest } = JSON.parse(text);
  const size = (s: string) => new TextEncoder().encode(s).length;
  return [size(text), size(JSON.stringify(rest))];
}

const cases: [string, JsonObject, (h: string, s: JsonObject, v: number) => Promise<unknown>][] = [];
const patch = (ops: PatchOp[]) => (h: string) =>
  store.patch(h, ops, { user, writer: "laptop/claude" });
const save = (f: (s: JsonObject) => JsonObject) => (h: string, s: JsonObject, v: number) =>
  store.save(h, f(s), { user, expectVersion: v, writer: "laptop/claude" });

const small = { title: "Runners", sources: notes(900), stats: { runs: 3 } };
const large = { title: "Runners", sources: notes(64 * 1024), stats: { runs: 3 } };
cases.push([
  "patch: append a URL",
  small,
  patch([Append("sources", "https://arxiv.org/abs/2401.00001")]),
]);
cases.push(["patch: increment a counter", small, patch([Increment("stats", "runs")])]);
cases.push([
  "patch: set_key, 200 bytes over 200",
  { ...small, draft: "d".repeat(200) },
  patch([SetKey("", "draft", "e".repeat(200))]),
]);
cases.push([
  "patch: merge of 5 keys",
  small,
  patch([Merge({ a: 1, b: "two", c: [3], d: { e: 4 }, f: null })]),
]);
cases.push([
  "save 1 KiB: one note edited",
  small,
  save((s) => ({ ...s, title: "Runners, arm64 first" })),
]);
cases.push([
  "save 1 KiB: one item appended",
  small,
  save((s) => ({ ...s, sources: [...(s.sources as string[]), "x"] })),
]);
cases.push([
  "save 64 KiB: one note edited",
  large,
  save((s) => ({ ...s, title: "Runners, arm64 first" })),
]);
cases.push([
  "save 64 KiB: one item appended",
  large,
  save((s) => ({ ...s, sources: [...(s.sources as string[]), "x"] })),
]);
cases.push([
  "save 64 KiB: first 10 items dropped",
  large,
  save((s) => ({ ...s, sources: (s.sources as string[]).slice(10) })),
]);

console.log("| write | entry with undo | without | added |");
console.log("| --- | ---: | ---: | ---: |");
for (const [label, state, write] of cases) {
  const h = await store.mint("doc", state, { user, writer: "laptop/claude" });
  await write(h, state, 1);
  const [withUndo, without] = await lastEntry(h);
  const added = withUndo - without;
  console.log(
    `| ${label} | ${withUndo} B | ${without} B | +${added} B (+${
      Math.round((added / without) * 100)
    }%) |`,
  );
}
await store.close();
