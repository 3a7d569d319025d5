/**
 * The shared bucket's idempotency keys, fuzzed: a real `mcpstate serve
 * --transport http --allow-anonymous` process and several anonymous callers
 * (both protocol eras, one client name) that mint with keys drawn from a
 * small pool, so that keys collide across callers and calls all the time.
 *
 * Every mint must succeed (only a key the store refuses outright — empty,
 * over 256 characters, U+0000, a lone surrogate — is `invalid_argument`);
 * no answer may say that a key was used; the same key with the same call
 * returns the handle that call got first; and no call ever gets a handle
 * that a different call got (another state, kind, TTL or era).
 *
 * @module
 */

import fc from "fast-check";
import type { Client } from "@modelcontextprotocol/client";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { type Era, newClient } from "../tests/_server_harness.ts";
import { startServer } from "./_server.ts";
import { messageOf } from "./_util.ts";

/** What {@link fuzzSharedBucket} did. */
export interface SharedBucketReport {
  /** Mints sent. */
  calls: number;
  /** Mints that made a new handle. */
  newHandles: number;
  /** Mints that repeated an earlier call and got its handle back. */
  replays: number;
  /** Mints whose key the store refuses outright (`invalid_argument`). */
  refusedKeys: number;
}

const ERA_OF: readonly Era[] = ["2026-07-28", "2025-11-25", "2026-07-28", "2025-11-25"];

/** Keys every caller draws from, so that they collide. */
const KEYS = [
  "k",
  "retry-1",
  "00000000-0000-4000-8000-000000000000",
  "研究",
  "\u{1F511}",
  "x".repeat(256),
];
/** Keys the store refuses outright, whoever sends them. */
const REFUSED_KEYS = ["", "x".repeat(257), "k\u0000", "\ud800"];

const mintArb = fc.record({
  caller: fc.nat({ max: ERA_OF.length - 1 }),
  key: fc.oneof(
    { arbitrary: fc.constantFrom(...KEYS), weight: 9 },
    { arbitrary: fc.constantFrom(...REFUSED_KEYS), weight: 1 },
  ),
  kind: fc.constantFrom("note", "memo"),
  state: fc.oneof(
    fc.constantFrom({}, { a: 1 }, { owner: "alice" }, { owner: "bob" }),
    fc.dictionary(fc.constantFrom("a", "b", "\u0000"), fc.constantFrom(0, "x", null), {
      maxKeys: 2,
    }),
  ),
  ttl: fc.constantFrom(undefined, 1, 7),
});

/**
 * Runs `calls` random mints against a fresh anonymous server.
 *
 * @param calls How many mints.
 * @param seed The generator's seed.
 * @param fail Records a violation.
 * @param deadline `performance.now()` after which to stop (a violation).
 * @returns The counts.
 */
export async function fuzzSharedBucket(
  calls: number,
  seed: number,
  fail: (message: string) => void,
  deadline: number,
): Promise<SharedBucketReport> {
  const report: SharedBucketReport = { calls: 0, newHandles: 0, replays: 0, refusedKeys: 0 };
  const server = await startServer(["--backend", "memory://", "--allow-anonymous"]);
  const clients: Client[] = [];
  try {
    for (const era of ERA_OF) {
      const client = newClient(era, "gauntlet-bucket");
      await client.connect(new StreamableHTTPClientTransport(server.url));
      clients.push(client);
    }
    /** The first handle of each call (era, key and arguments), and the call of each handle. */
    const handleOf = new Map<string, string>();
    const callOf = new Map<string, string>();
    const mints = fc.sample(mintArb, { seed, numRuns: Math.max(1, calls) });
    for (const [i, m] of mints.entries()) {
      if (performance.now() > deadline) {
        fail(`shared bucket: time limit reached after ${i} of ${calls} mints`);
        break;
      }
      const args = {
        kind: m.kind,
        state: m.state,
        idempotency_key: m.key,
        ...(m.ttl === undefined ? {} : { ttl_days: m.ttl }),
      };
      const call = JSON.stringify([ERA_OF[m.caller], m.key, m.kind, m.state, m.ttl ?? null]);
      const where = `shared bucket mint #${i} (caller ${m.caller}, ${
        JSON.stringify(args).slice(0, 200)
      })`;
      report.calls++;
      let text = "";
      let isError = false;
      try {
        const res = await clients[m.caller]!.callTool({ name: "state_save", arguments: args });
        text = (res.content as { text?: string }[] | undefined)?.[0]?.text ?? "";
        isError = res.isError === true;
      } catch (e) {
        fail(`${where}: threw ${messageOf(e).slice(0, 300)}`);
        continue;
      }
      if (/already used/i.test(text)) fail(`${where}: the answer tells that the key was used`);
      let payload: Record<string, unknown>;
      try {
        payload = JSON.parse(text);
      } catch {
        fail(`${where}: the answer is not JSON: ${text.slice(0, 200)}`);
        continue;
      }
      if (REFUSED_KEYS.includes(m.key)) {
        const code = (payload.error as Record<string, unknown> | undefined)?.code;
        if (!isError || code !== "invalid_argument") {
          fail(`${where}: expected invalid_argument for the key, got ${text.slice(0, 200)}`);
        } else report.refusedKeys++;
        continue;
      }
      if (isError || typeof payload.handle !== "string") {
        fail(`${where}: a mint failed: ${text.slice(0, 300)}`);
        continue;
      }
      const handle = payload.handle;
      const first = handleOf.get(call);
      if (first !== undefined) {
        if (handle !== first) fail(`${where}: a repeated call got ${handle}, not ${first}`);
        else report.replays++;
      } else if (callOf.has(handle)) {
        fail(`${where}: got the handle of another call: ${callOf.get(handle)}`);
      } else {
        handleOf.set(call, handle);
        callOf.set(handle, call);
        report.newHandles++;
      }
    }
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    await server.stop();
  }
  return report;
}
