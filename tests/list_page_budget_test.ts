/**
 * `listPage` with `maxBytes`: a page in its wire form stays within the
 * budget, ends early with a cursor that resumes after its last handle, and
 * always holds at least one handle.
 *
 * @module
 */

import assert from "node:assert/strict";
import { HandleStore, InvalidArgument, toPayload } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";

const encoder = new TextEncoder();
const size = (v: unknown) => encoder.encode(JSON.stringify(v)).length;

/** The page's wire form, as `state_list` renders it (without `ok`). */
function wire(page: Awaited<ReturnType<HandleStore["listPage"]>>) {
  return { handles: page.handles.map(toPayload), next_cursor: page.nextCursor };
}

Deno.test("listPage(maxBytes): pages within the budget that together list every handle once", async () => {
  let now = Date.UTC(2026, 6, 1);
  await using store = new HandleStore(new MemoryBackend(), { clock: () => now++ });
  const user = "u";
  const minted = new Set<string>();
  for (let i = 0; i < 30; i++) {
    minted.add(await store.mint("note", { i }, { user, writer: `writer-${"w".repeat(i * 3)}` }));
  }
  for (const maxBytes of [1, 300, 700, 1500, 4000, 100_000]) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Awaited<ReturnType<HandleStore["listPage"]>> = await store.listPage(user, {
        limit: 20,
        maxBytes,
        cursor,
      });
      pages++;
      assert.ok(page.handles.length >= 1, "at least one handle a page");
      if (page.handles.length > 1) assert.ok(size(wire(page)) <= maxBytes, `${maxBytes}`);
      seen.push(...page.handles.map((h) => h.handle));
      cursor = page.nextCursor;
    } while (cursor !== null);
    assert.equal(seen.length, 30, `${maxBytes}`);
    assert.deepEqual(new Set(seen), minted);
    if (maxBytes === 1) assert.equal(pages, 30, "one handle a page when none fits");
    if (maxBytes === 100_000) assert.equal(pages, 2, "the limit decides when the budget does not");
  }
  // Without maxBytes, the pages are as before.
  const whole = await store.listPage(user, { limit: 30 });
  assert.equal(whole.handles.length, 30);
  assert.equal(whole.nextCursor, null);
  for (const maxBytes of [0, -1, 1.5, NaN, "100"]) {
    await assert.rejects(
      () => store.listPage(user, { maxBytes: maxBytes as number }),
      InvalidArgument,
      String(maxBytes),
    );
  }
});
