/**
 * Deno KV benchmarks: each operation through `HandleStore` beside the raw
 * `Deno.Kv` calls plus the JSON work they cannot avoid (the group's
 * baseline), on the same KV file in the same run. A 1 MiB state does not fit
 * in one Deno KV value, so its baselines are the simplest raw chunked read
 * and write: one range read of the chunks; chunks written under a fresh id,
 * then one `check().set()` commit of the head that also deletes the old
 * chunks. The ratios, not the absolute numbers, are the point. `save` and
 * `patch` also run through a store with `history: false`, so the cost of the
 * changelog (its entry, its diff, its retention, all in the same commit) is
 * the ratio between the two store rows.
 *
 * @module
 */

import { HandleStore, Increment, type JsonObject } from "../mod.ts";
import { DenoKvBackend } from "../src/backends/denokv.ts";

const dir = await Deno.makeTempDir({ prefix: "mcpstate-bench-" });
globalThis.addEventListener("unload", () => {
  kv.close();
  Deno.removeSync(dir, { recursive: true });
});

/** A structured state of about `bytes` bytes of JSON: a list of small notes. */
function stateOf(bytes: number): JsonObject {
  const items: JsonObject[] = [];
  const base = { sources: [] as string[], notes: "", items };
  let i = 0;
  while (JSON.stringify(base).length < bytes - 160) {
    items.push({
      id: i,
      title: `Finding ${i}`,
      text: `arm64 builds finish first on the shared runners; ${i * 7919}`,
      tags: ["ci", i % 2 ? "arm64" : "x64"],
      score: (i % 10) / 10,
    });
    i++;
  }
  base.notes = "n".repeat(Math.max(0, bytes - JSON.stringify(base).length));
  return base;
}

const KIB = 1024;
/** Leaves room for the `v`/`n` counters the benchmarks add. */
const sizes = [
  ["1 KiB", stateOf(KIB)],
  ["60 KiB", stateOf(60 * KIB)],
  ["1 MiB", stateOf(1024 * KIB - 64)],
] as const;
const USER = "bench-user";
const CHUNK = 65_536;

const kv = await Deno.openKv(`${dir}/bench.kv`);
const store = new HandleStore(new DenoKvBackend(kv), { reclaimIntervalMs: 0 });
const plain = new HandleStore(new DenoKvBackend(kv), { reclaimIntervalMs: 0, history: false });
const enc = new TextEncoder();
const dec = new TextDecoder();

// ---- the raw side: a record is one value, or a head and chunks.

interface RawHead {
  id: string;
  n: number;
}

async function rawRead(key: Deno.KvKey, chunked: boolean): Promise<JsonObject> {
  if (!chunked) {
    const e = await kv.get<string>(key);
    return JSON.parse(e.value!);
  }
  // Read the head, then its chunks; a newer writer may have deleted them: read again.
  let parts: Uint8Array[];
  for (;;) {
    const head = await kv.get<RawHead>(key);
    parts = [];
    for await (const c of kv.list<Uint8Array>({ prefix: [...key, head.value!.id] })) {
      parts.push(c.value);
    }
    if (parts.length === head.value!.n) break;
  }
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return JSON.parse(dec.decode(bytes));
}

/** One optimistic write: read the versionstamp, then check-and-set. `false` when it lost. */
async function rawWrite(key: Deno.KvKey, state: JsonObject, chunked: boolean): Promise<boolean> {
  const text = JSON.stringify(state);
  if (!chunked) {
    const cur = await kv.get(key);
    return (await kv.atomic().check(cur).set(key, text).commit()).ok;
  }
  const bytes = enc.encode(text);
  const id = crypto.randomUUID();
  const n = Math.ceil(bytes.length / CHUNK);
  for (let first = 0; first < n; first += 12) {
    const op = kv.atomic();
    for (let i = first; i < Math.min(n, first + 12); i++) {
      op.set([...key, id, i], bytes.subarray(i * CHUNK, (i + 1) * CHUNK));
    }
    await op.commit();
  }
  const cur = await kv.get<RawHead>(key);
  const op = kv.atomic().check(cur).set(key, { id, n } satisfies RawHead);
  for (let i = 0; i < (cur.value?.n ?? 0); i++) op.delete([...key, cur.value!.id, i]);
  const ok = (await op.commit()).ok;
  if (!ok) {
    const undo = kv.atomic();
    for (let i = 0; i < n; i++) undo.delete([...key, id, i]);
    await undo.commit();
  }
  return ok;
}

for (const [label, state] of sizes) {
  const chunked = label === "1 MiB";
  const rawKey = (name: string): Deno.KvKey => ["raw", label, name];
  await rawWrite(rawKey("get"), state, chunked);
  const storeHandle = await store.mint("bench", state, { user: USER });

  Deno.bench({
    name: `raw ${chunked ? "chunked read" : "kv.get()"} + JSON.parse (${label})`,
    group: `get ${label}`,
    baseline: true,
    async fn() {
      await rawRead(rawKey("get"), chunked);
    },
  });
  Deno.bench({
    name: `store.get (${label})`,
    group: `get ${label}`,
    async fn() {
      await store.get(storeHandle, { user: USER });
    },
  });

  let rawV = 0;
  let storeVersion = 1;
  await rawWrite(rawKey("save"), state, chunked);
  const saveHandle = await store.mint("bench", state, { user: USER });
  Deno.bench({
    name: `raw ${
      chunked ? "chunked write + " : ""
    }kv.get() + atomic().check().set() + JSON.stringify (${label})`,
    group: `save ${label}`,
    baseline: true,
    async fn() {
      if (!await rawWrite(rawKey("save"), { ...state, v: rawV++ }, chunked)) {
        throw new Error("lost the version race");
      }
    },
  });
  Deno.bench({
    name: `store.save (${label})`,
    group: `save ${label}`,
    async fn() {
      await store.save(saveHandle, { ...state, v: storeVersion }, {
        user: USER,
        expectVersion: storeVersion,
      });
      storeVersion++;
    },
  });
  let plainVersion = 1;
  const plainSaveHandle = await plain.mint("bench", state, { user: USER });
  Deno.bench({
    name: `store.save, history off (${label})`,
    group: `save ${label}`,
    async fn() {
      await plain.save(plainSaveHandle, { ...state, v: plainVersion }, {
        user: USER,
        expectVersion: plainVersion,
      });
      plainVersion++;
    },
  });

  // 8 concurrent writers on one record: read-modify-write with retry.
  const rounds = chunked ? 4 : 25;
  const group = `patch 8 writers x ${rounds} (${label})`;
  await rawWrite(rawKey("patch"), { ...state, n: 0 }, chunked);
  const patchHandle = await store.mint("bench", { ...state, n: 0 }, { user: USER });
  Deno.bench({
    name: `raw read + n++ + check/set, retried on conflict, 8 x ${rounds} (${label})`,
    group,
    baseline: true,
    n: chunked ? 2 : 5,
    warmup: 1,
    async fn() {
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = 0; i < rounds; i++) {
          for (let attempt = 0;; attempt++) {
            const s = await rawRead(rawKey("patch"), chunked);
            (s as { n: number }).n++;
            if (await rawWrite(rawKey("patch"), s, chunked)) break;
            await new Promise((r) => setTimeout(r, Math.random() * Math.min(100, 2 << attempt)));
          }
        }
      }));
    },
  });
  Deno.bench({
    name: `store.patch, 8 concurrent writers x ${rounds} (${label})`,
    group,
    n: chunked ? 2 : 5,
    warmup: 1,
    async fn() {
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = 0; i < rounds; i++) {
          await store.patch(patchHandle, [Increment("", "n")], { user: USER });
        }
      }));
    },
  });
  const plainPatchHandle = await plain.mint("bench", { ...state, n: 0 }, { user: USER });
  Deno.bench({
    name: `store.patch, history off, 8 concurrent writers x ${rounds} (${label})`,
    group,
    n: chunked ? 2 : 5,
    warmup: 1,
    async fn() {
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = 0; i < rounds; i++) {
          await plain.patch(plainPatchHandle, [Increment("", "n")], { user: USER });
        }
      }));
    },
  });
}

// listPage for a user with 2,000 handles.
const LIST_USER = "bench-list-user";
{
  const small = stateOf(256);
  for (let i = 0; i < 2_000; i += 50) {
    await Promise.all(
      Array.from({ length: 50 }, () => store.mint("note", small, { user: LIST_USER })),
    );
    const op = kv.atomic();
    for (let j = i; j < i + 50; j++) {
      op.set(["raw-list", LIST_USER, -j, `note_${j}`], { kind: "note", version: 1 });
    }
    await op.commit();
  }
}
Deno.bench({
  name: "raw kv.list() of 51 metadata entries",
  group: "listPage limit 50 of 2,000",
  baseline: true,
  async fn() {
    let n = 0;
    for await (const _ of kv.list({ prefix: ["raw-list", LIST_USER] }, { limit: 51 })) n++;
    if (n !== 51) throw new Error("short page");
  },
});
Deno.bench({
  name: "store.listPage({ limit: 50 })",
  group: "listPage limit 50 of 2,000",
  async fn() {
    const page = await store.listPage(LIST_USER, { limit: 50 });
    if (page.handles.length !== 50) throw new Error("short page");
  },
});
