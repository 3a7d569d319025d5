/**
 * Live collaboration through the server: a client subscribed on one
 * instance hears of a change made through another instance (HTTP on one
 * SQLite file, one Redis, one Deno KV file, one PostgreSQL schema; stdio
 * processes on one SQLite file), handles are per-user resources, and leases tell a resuming session
 * who is at work.
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import {
  fails,
  httpClient,
  type HttpServer,
  ok,
  startHttpServer,
  startIssuer,
  stdioSession,
  type TestIssuer,
} from "./_server_harness.ts";
import { startRedis } from "./_redis.ts";

const PUBLIC_URL = "https://state.example.com/mcp";
const BOUND_MS = 10_000;

/** Collects `notifications/resources/updated` URIs a client receives. */
function updates(client: Client): { uris: string[]; next(uri: string): Promise<number> } {
  const uris: string[] = [];
  const waiters: { uri: string; since: number; resolve: (ms: number) => void }[] = [];
  client.setNotificationHandler("notifications/resources/updated", (n) => {
    uris.push(n.params.uri);
    for (const w of waiters.splice(0)) {
      if (w.uri === n.params.uri) w.resolve(performance.now() - w.since);
      else waiters.push(w);
    }
  });
  return {
    uris,
    /** Resolves with the ms until the next update of `uri`; rejects after the bound. */
    next(uri: string): Promise<number> {
      const { promise, resolve, reject } = Promise.withResolvers<number>();
      const since = performance.now();
      const timer = setTimeout(
        () => reject(new Error(`No update of ${uri} within ${BOUND_MS} ms`)),
        BOUND_MS,
      );
      waiters.push({
        uri,
        since,
        resolve: (ms) => {
          clearTimeout(timer);
          resolve(ms);
        },
      });
      return promise;
    },
  };
}

async function twoInstances(
  backend: string,
  issuer: TestIssuer,
): Promise<[HttpServer, HttpServer]> {
  const args = [
    "--backend",
    backend,
    "--public-url",
    PUBLIC_URL,
    ...issuer.serveArgs,
  ];
  return await Promise.all([startHttpServer(args), startHttpServer(args)]);
}

/** The cross-instance scenario, the same for every backend. */
async function crossInstance(t: Deno.TestContext, backend: string): Promise<void> {
  await using issuer = await startIssuer();
  const [a, b] = await twoInstances(backend, issuer);
  await using _a = a;
  await using _b = b;
  const alice = await issuer.token({ sub: "alice", aud: PUBLIC_URL });
  const bob = await issuer.token({ sub: "bob", aud: PUBLIC_URL });
  const onA = await httpClient(a.url, "2026-07-28", alice);
  const onB = await httpClient(b.url, "2026-07-28", alice);
  const bobOnA = await httpClient(a.url, "2026-07-28", bob);
  try {
    const { handle } = await ok(onB, "state_save", { kind: "doc", state: { n: 0 } }) as {
      handle: string;
    };
    const uri = `mcpstate://state/${handle}`;

    await t.step(
      "handles are the caller's resources: listed, read, and not another's",
      async () => {
        const listed = await onA.listResources();
        assert.deepEqual(listed.resources.map((r) => r.uri), [uri]);
        assert.equal(listed.resources[0]?.mimeType, "application/json");
        const read = await onA.readResource({ uri });
        const body = JSON.parse(String((read.contents[0] as { text: string }).text));
        assert.equal(body.ok, true);
        assert.equal(body.version, 1);
        assert.deepEqual(body.state, { n: 0 });
        assert.deepEqual((await bobOnA.listResources()).resources, []);
        await assert.rejects(() => bobOnA.readResource({ uri }), /not found|No state exists/i);
        await assert.rejects(
          () => bobOnA.listen({ resourceSubscriptions: [uri] }),
          /not found|No state exists/i,
        );
        await assert.rejects(
          () => onA.listen({ resourceSubscriptions: ["mcpstate://state/doc_zzzzzzzz"] }),
          /not found|No state exists/i,
        );
        await assert.rejects(
          () => onA.listen({ resourceSubscriptions: Array.from({ length: 101 }, () => uri) }),
          /at most 100/,
        );
      },
    );

    await t.step("a change made through instance B reaches a subscriber on A", async () => {
      const seen = updates(onA);
      const sub = await onA.listen({ resourceSubscriptions: [uri] });
      try {
        assert.deepEqual(sub.honoredFilter.resourceSubscriptions, [uri]);
        for (let i = 1; i <= 3; i++) {
          const next = seen.next(uri);
          await ok(onB, "state_patch", {
            handle,
            ops: [{ op: "increment", path: "", key: "n" }],
          });
          await next;
          const read = await onA.readResource({ uri });
          const body = JSON.parse(String((read.contents[0] as { text: string }).text));
          assert.ok(body.version >= i + 1, `read version ${body.version} after update ${i}`);
        }
        // Deleting it through B is an update too; the resource is then gone.
        const gone = seen.next(uri);
        await ok(onB, "state_delete", { handle });
        await gone;
        await assert.rejects(() => onA.readResource({ uri }), /not found|No state exists/i);
      } finally {
        await sub.close();
      }
    });
  } finally {
    await Promise.all([onA.close(), onB.close(), bobOnA.close()]);
  }
}

Deno.test("live: two HTTP instances on one SQLite file", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    await crossInstance(t, `sqlite:///${dir}/state.db`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("live: two HTTP instances on one Redis", async (t) => {
  await using redis = await startRedis();
  await crossInstance(t, redis.url);
});

Deno.test("live: two HTTP instances on one Deno KV file", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    await crossInstance(t, `denokv:///${dir}/state.kv`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("live: two HTTP instances on one PostgreSQL schema", async (t) => {
  const base = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
    "postgres://postgres@127.0.0.1:5432/test";
  const schema = `mcpstate_test_live_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  try {
    await crossInstance(t, `${base}?schema=${schema}`);
  } finally {
    const { default: postgres } = await import("postgres");
    const sql = postgres(base, { onnotice: () => {} });
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  }
});

Deno.test("live: two stdio processes on one SQLite file; leases through the tools", async (t) => {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  const a = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: backend,
    MCPSTATE_WRITER: "laptop/a",
  });
  const b = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: backend,
    MCPSTATE_WRITER: "phone/b",
    MCPSTATE_LEASE_SECONDS: "3",
  });
  try {
    const { handle } = await ok(b.client, "state_save", { kind: "plan", state: { steps: [] } }) as {
      handle: string;
    };
    const uri = `mcpstate://state/${handle}`;

    await t.step("a subscriber on one process hears the other's writes", async () => {
      const seen = updates(a.client);
      const sub = await a.client.listen({ resourceSubscriptions: [uri] });
      try {
        const next = seen.next(uri);
        await ok(b.client, "state_patch", {
          handle,
          ops: [{ op: "append", path: "steps", value: "book" }],
        });
        await next;
      } finally {
        await sub.close();
      }
    });

    await t.step("a write's implicit lease shows who is at work, and blocks no one", async () => {
      // B's writes above took (and renewed) B's 3 s lease; A sees it on load and list.
      const loaded = await ok(a.client, "state_load", { handle });
      assert.equal((loaded.active_lease as { holder: string }).holder, "phone/b");
      const listed = await ok(a.client, "state_list", {});
      const row = (listed.handles as Record<string, unknown>[]).find((h) => h.handle === handle);
      assert.equal((row?.active_lease as { holder: string }).holder, "phone/b");
      // An explicit lease by A is refused while B's is in force, naming B.
      const refused = await ok(a.client, "state_lease", { handle, seconds: 60 });
      assert.equal(refused.acquired, false);
      assert.equal((refused.active_lease as { holder: string }).holder, "phone/b");
      // A still writes: no stale write, and the result names the other holder.
      const saved = await ok(a.client, "state_save", {
        handle,
        state: { steps: ["book", "pack"] },
        expect_version: loaded.version,
      });
      assert.equal(saved.version, Number(loaded.version) + 1);
      assert.equal((saved.active_lease as { holder: string }).holder, "phone/b");
      // B's lease lapses on time; then A's explicit lease is granted.
      const lapse = Date.parse((refused.active_lease as { expires_at: string }).expires_at);
      await new Promise((r) => setTimeout(r, Math.max(0, lapse - Date.now()) + 100));
      const taken = await ok(a.client, "state_lease", { handle, seconds: 60 });
      assert.equal(taken.acquired, true);
      assert.equal((taken.active_lease as { holder: string }).holder, "laptop/a");
      const fromB = await ok(b.client, "state_load", { handle });
      assert.equal((fromB.active_lease as { holder: string }).holder, "laptop/a");
      // Only the holder releases it.
      const notMine = await ok(b.client, "state_lease", { handle, release: true });
      assert.equal(notMine.released, false);
      const mine = await ok(a.client, "state_lease", { handle, release: true });
      assert.equal(mine.released, true);
      assert.equal(mine.active_lease, null);
      assert.equal((await ok(b.client, "state_load", { handle })).active_lease, undefined);
      await fails(a.client, "state_lease", { handle, seconds: 0 }, "invalid_argument");
      await fails(a.client, "state_lease", { handle: "plan_zzzzzzzz" }, "handle_not_found");
    });
  } finally {
    await a.close();
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("live: a 2025-era stdio client subscribes with resources/subscribe", async () => {
  const dir = await Deno.makeTempDir();
  const env = { MCPSTATE_BACKEND: `sqlite:///${dir}/state.db` };
  const legacy = await stdioSession("2025-11-25", env);
  const modern = await stdioSession("2026-07-28", env);
  try {
    assert.equal(legacy.client.getServerCapabilities()?.resources?.subscribe, true);
    const { handle } = await ok(legacy.client, "state_save", { kind: "x", state: {} }) as {
      handle: string;
    };
    const uri = `mcpstate://state/${handle}`;
    const seen = updates(legacy.client);
    assert.deepEqual(await legacy.client.subscribeResource({ uri }), {});
    const next = seen.next(uri);
    await ok(modern.client, "state_patch", {
      handle,
      ops: [{ op: "set_key", path: "", key: "a", value: 1 }],
    });
    await next;
    await legacy.client.unsubscribeResource({ uri });
    await ok(modern.client, "state_patch", {
      handle,
      ops: [{ op: "set_key", path: "", key: "a", value: 2 }],
    });
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(seen.uris, [uri], "no update after unsubscribing");
  } finally {
    await legacy.close();
    await modern.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("live: 2025-era HTTP is stateless, so it is not offered subscriptions", async () => {
  await using issuer = await startIssuer();
  await using server = await startHttpServer([
    "--public-url",
    PUBLIC_URL,
    "--backend",
    "memory://",
    ...issuer.serveArgs,
  ]);
  const token = await issuer.token({ sub: "alice", aud: PUBLIC_URL });
  const legacy = await httpClient(server.url, "2025-11-25", token);
  const modern = await httpClient(server.url, "2026-07-28", token);
  try {
    assert.equal(legacy.getServerCapabilities()?.resources?.subscribe, false);
    assert.equal(modern.getServerCapabilities()?.resources?.subscribe, true);
  } finally {
    await Promise.all([legacy.close(), modern.close()]);
  }
});
