/**
 * Budgeted reads through the server: `state_load` of a 1 MiB state (about
 * 10,000 small log entries) as a `tools/call` over the HTTP handler, in
 * process (no socket), on the memory backend: whole with no budget
 * (`--max-read-bytes 0`, the group's baseline), with the default budget of
 * 131,072 bytes, with `max_bytes: 4096`, and three `paths`. Each call is
 * the whole exchange: the request parsed, the tool run, the result written
 * as JSON twice (text block and `structuredContent`) and read back.
 *
 * @module
 */

import { HandleStore, type JsonObject } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { ANONYMOUS_USER, createHttpHandler } from "../src/server/mod.ts";
import { rawRequest } from "../tests/_raw_mcp.ts";

const MIB = 1 << 20;

function logState(): JsonObject {
  const entries: JsonObject[] = [];
  const state = { title: "Runners", entries };
  for (let i = 0; JSON.stringify(state).length < MIB - 200; i++) {
    entries.push({
      at: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
      by: `agent-${i % 7}`,
      note: `run ${i}: arm64 first by ${i % 90} s`,
      ok: i % 9 > 0,
    });
  }
  return state;
}

const store = new HandleStore(new MemoryBackend());
const state = logState();
const handle = await store.mint("log", state, { user: ANONYMOUS_USER, randomChars: 26 });
const last = (state.entries as unknown[]).length - 1;

/** A 2026-07-28 `tools/call` of `state_load` through a handler with `maxReadBytes`. */
function loader(maxReadBytes: number) {
  const app = createHttpHandler(store, {
    publicUrl: new URL("http://127.0.0.1/mcp"),
    anonymous: true,
    maxReadBytes,
    leaseSeconds: 0,
  });
  return async (args: JsonObject): Promise<number> => {
    const { status, text } = await rawRequest(app.fetch, "tools/call", {
      name: "state_load",
      arguments: { handle, ...args },
    }, "state_load");
    if (status !== 200 || text.includes('"isError":true')) throw new Error(text.slice(0, 300));
    return text.length;
  };
}

const unbounded = loader(0);
const bounded = loader(131_072);
const group = "state_load of 1 MiB through the server (memory)";

Deno.bench({
  name: "whole state, no budget",
  group,
  baseline: true,
  async fn() {
    await unbounded({});
  },
});
Deno.bench({
  name: "default budget: outline of 128 KiB",
  group,
  async fn() {
    await bounded({});
  },
});
Deno.bench({
  name: "max_bytes 4096: outline of 4 KiB",
  group,
  async fn() {
    await bounded({ max_bytes: 4096 });
  },
});
Deno.bench({
  name: "3 paths, max_bytes 4096",
  group,
  async fn() {
    await bounded({ paths: ["title", `/entries/${last}`, "/entries/0"], max_bytes: 4096 });
  },
});
