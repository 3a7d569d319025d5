/**
 * Import: the two backend primitives behind `mcpstate export`, `import` and
 * `migrate`, `importRecord` (a record written exactly as given) and
 * `listUsers` (every user, page by page). {@link importContract} runs the
 * same steps on a backend outside the suite.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend, HandleRecord, WriteContext } from "../../mod.ts";
import { DAY } from "../_helpers.ts";
import { group, step } from "./_group.ts";

/** One expiry for every sample record of this process, so that equal calls give equal records. */
const FUTURE = Date.now() + 30 * DAY + 7;

/** A write context with the default grace period. */
export function importContext(now = Date.now()): WriteContext {
  return { now, graceMs: 7 * DAY };
}

/**
 * A record with every field set, for import tests.
 *
 * @param handle The handle.
 * @param version The version.
 * @param extra Fields to override.
 * @returns The record.
 */
export function sampleRecord(
  handle: string,
  version: number,
  extra: Partial<HandleRecord> = {},
): HandleRecord {
  const t = Date.UTC(2026, 6, 28, 12) + version * 1000;
  return {
    handle,
    kind: handle.split("_")[0] ?? "note",
    // Not what JSON.stringify would write: an import keeps the text byte for byte.
    state: `{"v":${version},"10":"ten","__proto__":{"x":1},"s":"\\u0000\\ud800é"}`,
    version,
    createdAt: Date.UTC(2026, 0, 1) + 123,
    updatedAt: t,
    expiresAt: FUTURE,
    lastWriter: `writer/v${version}`,
    ...extra,
  };
}

/** The tag in the user names of the steps run on each backend: one per backend. */
const tags = new WeakMap<Backend, string>();

function tagOf(backend: Backend): string {
  let tag = tags.get(backend);
  if (tag === undefined) tags.set(backend, tag = crypto.randomUUID().slice(0, 8));
  return tag;
}

/** The steps, each on a backend with `importRecord` and `listUsers`, with its tag. */
const STEPS: [string, (backend: Backend, tag: string) => Promise<void>][] = [
  [
    "importRecord() inserts a record exactly as given and reads back every field",
    async (b, tag) => {
      const user = `rc-${tag}-a`;
      const rec = sampleRecord("note_aaaaaaaa", 7);
      assert.equal(await b.records!.import(user, rec, importContext()), "inserted");
      assert.deepEqual(await b.read(user, rec.handle), rec);
      const rows = await b.list(user, { limit: 10 });
      assert.deepEqual(rows.map((r) => [r.handle, r.version, r.updatedAt]), [[
        rec.handle,
        7,
        rec.updatedAt,
      ]]);
    },
  ],
  ["importRecord() keeps an equal or newer version and replaces an older one", async (b, tag) => {
    const user = `rc-${tag}-b`;
    const v5 = sampleRecord("doc_bbbbbbbb", 5);
    assert.equal(await b.records!.import(user, v5, importContext()), "inserted");
    assert.equal(await b.records!.import(user, v5, importContext()), "kept");
    const v3 = sampleRecord("doc_bbbbbbbb", 3, { lastWriter: "older" });
    assert.equal(await b.records!.import(user, v3, importContext()), "kept");
    assert.deepEqual(await b.read(user, v5.handle), v5);
    const v9 = sampleRecord("doc_bbbbbbbb", 9, { kind: "doc", expiresAt: null, lastWriter: null });
    assert.equal(await b.records!.import(user, v9, importContext()), "replaced");
    assert.deepEqual(await b.read(user, v5.handle), v9);
  }],
  ["importRecord() is scoped to the user", async (b, tag) => {
    const x = `rc-${tag}-c1`, y = `rc-${tag}-c2`;
    const rec = sampleRecord("note_cccccccc", 2);
    assert.equal(await b.records!.import(x, rec, importContext()), "inserted");
    assert.equal(await b.read(y, rec.handle), null);
    assert.equal(
      await b.records!.import(y, sampleRecord("note_cccccccc", 1), importContext()),
      "inserted",
    );
    assert.deepEqual(await b.read(x, rec.handle), rec);
  }],
  ["importRecord() writes an expired record that is still in its grace period", async (b, tag) => {
    const user = `rc-${tag}-d`;
    const rec = sampleRecord("note_dddddddd", 2, { expiresAt: Date.now() - DAY });
    assert.equal(await b.records!.import(user, rec, importContext()), "inserted");
    assert.deepEqual(await b.read(user, rec.handle), rec);
  }],
  ["listUsers() pages through every user exactly once, in order", async (b, tag) => {
    const mine = Array.from({ length: 7 }, (_, i) => `rc-${tag}-list-${i}`);
    for (const u of mine) {
      await b.records!.import(u, sampleRecord("note_eeeeeeee", 1), importContext());
    }
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 10_000; pages++) {
      const page = await b.records!.users({ limit: 3, ...(after === undefined ? {} : { after }) });
      assert.ok(page.length <= 3);
      seen.push(...page);
      if (page.length < 3) break;
      after = page[page.length - 1];
    }
    assert.equal(new Set(seen).size, seen.length, "a user was listed twice");
    const ours = seen.filter((u) => mine.includes(u));
    assert.deepEqual(ours, mine, "every user, once, in ascending order");
  }],
  ["listUsers() leaves out a user whose records are all gone", async (b, tag) => {
    const user = `rc-${tag}-gone`;
    const rec = sampleRecord("note_ffffffff", 1);
    await b.records!.import(user, rec, importContext());
    const r = await b.remove(user, rec.handle, importContext());
    assert.deepEqual(r, { removed: true });
    const all: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await b.records!.users({
        limit: 500,
        ...(after === undefined ? {} : { after }),
      });
      all.push(...page);
      if (page.length < 500) break;
      after = page[page.length - 1];
    }
    assert.ok(!all.includes(user));
  }],
];

export default group(
  "import",
  ["importRecord", "users"],
  STEPS.map(([name, run]) => step(name, ({ backend }) => run(backend, tagOf(backend)))),
);

/**
 * Runs the import steps against one backend, as steps of `t`.
 *
 * @param t The test context.
 * @param backend The backend (with `importRecord` and `listUsers`).
 */
export async function importContract(t: Deno.TestContext, backend: Backend): Promise<void> {
  assert.equal(typeof backend.records!.users, "function", "the backend lacks listUsers()");
  assert.equal(typeof backend.records!.import, "function", "the backend lacks importRecord()");
  const tag = tagOf(backend);
  for (const [name, run] of STEPS) await t.step(name, () => run(backend, tag));
}
