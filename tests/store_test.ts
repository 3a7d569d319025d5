import assert from "node:assert/strict";
import { HandleStore } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { FakeClock, rejectsWith } from "./contract.ts";

Deno.test("a state built from shared subtrees is refused at once, not walked exponentially", async () => {
  await using store = new HandleStore(new MemoryBackend());
  let x: unknown[] = [];
  for (let i = 0; i < 60; i++) x = [x, x];
  const started = performance.now();
  const e = await rejectsWith(() => store.mint("big", { x }, { user: "u" }), "state_too_large");
  assert.equal(e.details.limit_bytes, store.maxStateBytes);
  assert.ok(performance.now() - started < 5_000);
});

Deno.test("the background reclaim removes expired records only after the grace period", async () => {
  const clock = new FakeClock();
  await using store = new HandleStore(new MemoryBackend(), {
    clock: clock.fn,
    expiredGraceDays: 2,
    reclaimIntervalMs: 20,
  });
  const h = await store.mint("t", {}, { user: "u", ttlDays: 1 });
  clock.advance(1.5 * 86_400_000);
  await new Promise((r) => setTimeout(r, 80));
  await rejectsWith(() => store.get(h, { user: "u" }), "handle_expired");
  clock.advance(2 * 86_400_000);
  await new Promise((r) => setTimeout(r, 80));
  await rejectsWith(() => store.get(h, { user: "u" }), "handle_not_found");
});
