/**
 * The contract of the two backend primitives behind `mcpstate export`,
 * `import` and `migrate`: `listUsers` and `restore`. Every backend that
 * provides them runs these steps unchanged.
 *
 * ```ts ignore
 * Deno.test("restore contract: sqlite", (t) => restoreContract(t, backend));
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend, HandleRecord, WriteContext } from "../src/backend.ts";

const DAY = 86_400_000;
/** One expiry for every sample record made by this process, so that equal calls give equal records. */
const FUTURE = Date.now() + 30 * DAY + 7;

/** A write context with the default grace period. */
export function restoreContext(now = Date.now()): WriteContext {
  return { now, graceMs: 7 * DAY };
}

/**
 * A record with every field set, for restore tests.
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
    // Not what JSON.stringify would write: a restore keeps the text byte for byte.
    state: `{"v":${version},"10":"ten","__proto__":{"x":1},"s":"\\u0000\\ud800é"}`,
    version,
    createdAt: Date.UTC(2026, 0, 1) + 123,
    updatedAt: t,
    expiresAt: FUTURE,
    lastWriter: `writer/v${version}`,
    ...extra,
  };
}

/**
 * Runs the contract steps against one backend.
 *
 * @param t The test context.
 * @param backend The backend (with `listUsers` and `restore`).
 */
export async function restoreContract(t: Deno.TestContext, backend: Backend): Promise<void> {
  assert.equal(typeof backend.listUsers, "function", "the backend lacks listUsers()");
  assert.equal(typeof backend.importRecord, "function", "the backend lacks importRecord()");
  const restore = backend.importRecord!.bind(backend);
  const listUsers = backend.listUsers!.bind(backend);
  const tag = crypto.randomUUID().slice(0, 8);

  await t.step(
    "restore() inserts a record exactly as given and reads back every field",
    async () => {
      const user = `rc-${tag}-a`;
      const rec = sampleRecord("note_aaaaaaaa", 7);
      assert.equal(await restore(user, rec, restoreContext()), "inserted");
      assert.deepEqual(await backend.read(user, rec.handle), rec);
      const rows = await backend.list(user, { limit: 10 });
      assert.deepEqual(rows.map((r) => [r.handle, r.version, r.updatedAt]), [[
        rec.handle,
        7,
        rec.updatedAt,
      ]]);
    },
  );

  await t.step("restore() keeps an equal or newer version and replaces an older one", async () => {
    const user = `rc-${tag}-b`;
    const v5 = sampleRecord("doc_bbbbbbbb", 5);
    assert.equal(await restore(user, v5, restoreContext()), "inserted");
    assert.equal(await restore(user, v5, restoreContext()), "kept");
    const v3 = sampleRecord("doc_bbbbbbbb", 3, { lastWriter: "older" });
    assert.equal(await restore(user, v3, restoreContext()), "kept");
    assert.deepEqual(await backend.read(user, v5.handle), v5);
    const v9 = sampleRecord("doc_bbbbbbbb", 9, { kind: "doc", expiresAt: null, lastWriter: null });
    assert.equal(await restore(user, v9, restoreContext()), "replaced");
    assert.deepEqual(await backend.read(user, v5.handle), v9);
  });

  await t.step("restore() is scoped to the user", async () => {
    const a = `rc-${tag}-c1`, b = `rc-${tag}-c2`;
    const rec = sampleRecord("note_cccccccc", 2);
    assert.equal(await restore(a, rec, restoreContext()), "inserted");
    assert.equal(await backend.read(b, rec.handle), null);
    assert.equal(await restore(b, sampleRecord("note_cccccccc", 1), restoreContext()), "inserted");
    assert.deepEqual(await backend.read(a, rec.handle), rec);
  });

  await t.step("restore() writes an expired record that is still in its grace period", async () => {
    const user = `rc-${tag}-d`;
    const rec = sampleRecord("note_dddddddd", 2, { expiresAt: Date.now() - DAY });
    assert.equal(await restore(user, rec, restoreContext()), "inserted");
    assert.deepEqual(await backend.read(user, rec.handle), rec);
  });

  await t.step("listUsers() pages through every user exactly once, in order", async () => {
    const mine = Array.from({ length: 7 }, (_, i) => `rc-${tag}-list-${i}`);
    for (const u of mine) await restore(u, sampleRecord("note_eeeeeeee", 1), restoreContext());
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 10_000; pages++) {
      const page = await listUsers({ limit: 3, ...(after === undefined ? {} : { after }) });
      assert.ok(page.length <= 3);
      seen.push(...page);
      if (page.length < 3) break;
      after = page[page.length - 1];
    }
    assert.equal(new Set(seen).size, seen.length, "a user was listed twice");
    const ours = seen.filter((u) => mine.includes(u));
    assert.deepEqual(ours, mine, "every user, once, in ascending order");
  });

  await t.step("listUsers() leaves out a user whose records are all gone", async () => {
    const user = `rc-${tag}-gone`;
    const rec = sampleRecord("note_ffffffff", 1);
    await restore(user, rec, restoreContext());
    const r = await backend.remove(user, rec.handle, restoreContext());
    assert.deepEqual(r, { removed: true });
    const all: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await listUsers({ limit: 500, ...(after === undefined ? {} : { after }) });
      all.push(...page);
      if (page.length < 500) break;
      after = page[page.length - 1];
    }
    assert.ok(!all.includes(user));
  });
}
