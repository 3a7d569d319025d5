/**
 * The tool layer in-process, served over real HTTP to the official client:
 * a failing backend never leaks its text, an unexpected exception is
 * `internal_error` with the class name only, and `registerStateTools` works
 * inside someone else's server.
 */

import assert from "node:assert/strict";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { type Backend, type HandleRecord, HandleStore } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import {
  ANONYMOUS_USER,
  createHttpHandler,
  registerStateTools,
  writerLabel,
} from "../src/server/mod.ts";
import { type Era, ERAS, httpClient } from "./_server_harness.ts";
import { fails, ok } from "./_tool_calls.ts";
import { DEFAULT_TOOL_NAMES } from "./_server_scenario.ts";

const SECRET = "hunter2";

type Mode = "fine" | "throw" | "corrupt" | "getter";

/** A real memory backend that can be switched into failure modes. */
function switchable(inner: MemoryBackend): { backend: Backend; set(mode: Mode): void } {
  let mode: Mode = "fine";
  const fail = () => {
    throw new Error(
      `connect ECONNREFUSED: redis://admin:${SECRET}@10.1.2.3:6379/0 refused the connection`,
    );
  };
  const corrupt = (r: HandleRecord | null): HandleRecord | null => {
    if (!r) return r;
    if (mode === "corrupt") return { ...r, state: `{"pin": "${SECRET}", broken` };
    if (mode === "getter") {
      return Object.defineProperty({ ...r }, "expiresAt", {
        get() {
          throw new RangeError(`password=${SECRET}`);
        },
      });
    }
    return r;
  };
  const backend: Backend = {
    insert: (...a) => mode === "throw" ? fail() : inner.insert(...a),
    read: async (...a) => mode === "throw" ? fail() : corrupt(await inner.read(...a)),
    save: (...a) => mode === "throw" ? fail() : inner.save(...a),
    update: (...a) => mode === "throw" ? fail() : inner.update(...a),
    remove: (...a) => mode === "throw" ? fail() : inner.remove(...a),
    untrash: (...a) => mode === "throw" ? fail() : inner.untrash(...a),
    changes: (...a) => mode === "throw" ? fail() : inner.changes(...a),
    list: (...a) => mode === "throw" ? fail() : inner.list(...a),
    sweep: (...a) => inner.sweep(...a),
    close: () => Promise.resolve(),
  };
  return { backend, set: (m) => mode = m };
}

function serve(fetch: (r: Request) => Promise<Response>) {
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    fetch,
  );
  return {
    url: new URL(`http://127.0.0.1:${server.addr.port}/mcp`),
    close: async () => {
      ac.abort();
      await server.finished;
    },
  };
}

Deno.test("a failing backend: backend_error without its text; a broken record: internal_error with the class only", async (t) => {
  const sw = switchable(new MemoryBackend());
  const store = new HandleStore(sw.backend);
  const logged: string[] = [];
  const app = createHttpHandler(store, {
    publicUrl: new URL("http://127.0.0.1/mcp"),
    anonymous: true,
    onError: (e) => logged.push(String(e instanceof Error ? e.message : e)),
  });
  const http = serve(app.fetch);
  const clients = await Promise.all(ERAS.map((era: Era) => httpClient(http.url, era)));
  try {
    const handle = await store.mint("note", { pin: SECRET }, {
      user: ANONYMOUS_USER,
      randomChars: 26,
    });
    for (const [i, client] of clients.entries()) {
      await t.step(`${ERAS[i]}: the backend throws`, async () => {
        sw.set("throw");
        for (
          const [tool, args] of [
            ["state_load", { handle }],
            ["state_save", { kind: "note", state: {} }],
            ["state_patch", { handle, ops: [] }],
            ["state_delete", { handle }],
          ] as const
        ) {
          const e = await fails(client, tool, args, "backend_error");
          const text = JSON.stringify(e);
          assert.ok(!text.includes(SECRET), text);
          assert.ok(!text.includes("10.1.2.3"), text);
          assert.deepEqual(Object.keys(e).sort(), ["code", "message"]);
        }
        assert.ok(
          logged.some((l) => l.includes("***@10.1.2.3")),
          "the operator's log has the detail",
        );
        assert.ok(
          !logged.some((l) => l.includes("10.1.2.3") && l.includes(SECRET)),
          "…with the URL's credentials redacted",
        );
      });
      await t.step(`${ERAS[i]}: a corrupt record and a throwing getter`, async () => {
        for (const [mode, cls] of [["corrupt", "SyntaxError"], ["getter", "RangeError"]] as const) {
          sw.set(mode);
          const e = await fails(client, "state_load", { handle }, "internal_error");
          assert.equal(e.error_class, cls);
          const text = JSON.stringify(e);
          assert.ok(!text.includes(SECRET), text);
          assert.ok(!text.includes("broken"), text);
        }
        sw.set("fine");
        assert.deepEqual((await ok(client, "state_load", { handle })).state, { pin: SECRET });
      });
    }
  } finally {
    for (const c of clients) await c.close();
    await app.close();
    await http.close();
    await store.close();
  }
});

Deno.test("registerStateTools inside another server: its own tools, identity and writer", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: "my-server", version: "1.0.0" }, {
      capabilities: { tools: {} },
    });
    server.registerTool("echo", {
      description: "Echoes its input.",
      inputSchema: z.object({ text: z.string() }),
    }, ({ text }) => ({ content: [{ type: "text", text }] }));
    registerStateTools(server, store, {
      user: ({ httpRequest }) => httpRequest?.headers.get("x-user") ?? "nobody",
      writer: writerLabel(undefined, "my-server"),
    });
    return server;
  });
  const http = serve((req) => handler.fetch(req));
  try {
    const client = await httpClient(http.url, "2026-07-28");
    try {
      const names = (await client.listTools()).tools.map((x) => x.name).sort();
      assert.deepEqual(names, ["echo", ...DEFAULT_TOOL_NAMES]);
      const { handle } = await ok(client, "state_save", { kind: "note", state: { a: 1 } });
      const loaded = await ok(client, "state_load", { handle });
      assert.equal(loaded.last_writer, "my-server/test-client");
      assert.deepEqual((await store.list("nobody")).map((h) => h.handle), [handle]);
    } finally {
      await client.close();
    }
  } finally {
    await handler.close();
    await http.close();
  }
});
