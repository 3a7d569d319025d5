/**
 * Live collaboration through the server: a client subscribed on one
 * instance hears of a change made through another instance (HTTP on one
 * SQLite file, one Redis, one Deno KV file, one PostgreSQL schema; stdio
 * processes on one SQLite file), handles are per-user resources, and leases tell a resuming session
 * who is at work.
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { listenBody, mcpHeaders, post, type Posted, sameHandleFor } from "./_tenants.ts";
import { httpClient, type HttpServer, startHttpServer, stdioSession } from "./_server_harness.ts";
import { startIssuer, type TestIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";
import { startRedis } from "./_redis.ts";
import { withTempDir } from "./_helpers.ts";

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
        // The owner is told it is in the trash (and until when it can come back).
        await assert.rejects(() => onA.readResource({ uri }), /revoked and is in your trash/);
      } finally {
        await sub.close();
      }
    });
  } finally {
    await Promise.all([onA.close(), onB.close(), bobOnA.close()]);
  }
}

Deno.test("live: two HTTP instances on one SQLite file", (t) =>
  withTempDir((dir) => crossInstance(t, `sqlite:///${dir}/state.db`)));

Deno.test("live: two HTTP instances on one Redis", async (t) => {
  await using redis = await startRedis();
  await crossInstance(t, redis.url);
});

Deno.test("live: two HTTP instances on one Deno KV file", (t) =>
  withTempDir((dir) => crossInstance(t, `denokv:///${dir}/state.kv`)));

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

/** Whether no update of `uri` arrives within `ms`, after everything before it arrived. */
async function silent(seen: { uris: string[] }, uri: string, ms = 600): Promise<boolean> {
  const before = seen.uris.filter((u) => u === uri).length;
  await new Promise((r) => setTimeout(r, ms));
  return seen.uris.filter((u) => u === uri).length === before;
}

Deno.test("live: two users' handles of one name each hear only their own updates", async () => {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  await using issuer = await startIssuer();
  const handle = "notes_samename";
  await sameHandleFor(backend, [`${issuer.issuer}#alice`, `${issuer.issuer}#bob`], handle);
  await using server = await startHttpServer([
    "--backend",
    backend,
    "--public-url",
    PUBLIC_URL,
    ...issuer.serveArgs,
  ]);
  const [alice, bob] = await Promise.all(
    ["alice", "bob"].map(async (sub) =>
      httpClient(server.url, "2026-07-28", await issuer.token({ sub, aud: PUBLIC_URL }))
    ),
  ) as [Client, Client];
  const uri = `mcpstate://state/${handle}`;
  const aliceHears = updates(alice);
  const bobHears = updates(bob);
  const subs = [
    await alice.listen({ resourceSubscriptions: [uri] }),
    await bob.listen({ resourceSubscriptions: [uri] }),
  ];
  try {
    const patch = (c: Client) =>
      ok(c, "state_patch", { handle, ops: [{ op: "increment", path: "", key: "n" }] });
    const aliceNext = aliceHears.next(uri);
    await patch(alice);
    await aliceNext;
    assert.ok(await silent(bobHears, uri), "Bob heard of a change to Alice's handle");
    const bobNext = bobHears.next(uri);
    await patch(bob);
    await bobNext;
    assert.ok(await silent(aliceHears, uri), "Alice heard of a change to Bob's handle");
    assert.deepEqual([aliceHears.uris.length, bobHears.uris.length], [1, 1]);
    // Each still reads only their own state.
    for (const c of [alice, bob]) {
      const read = await c.readResource({ uri });
      assert.deepEqual(JSON.parse(String((read.contents[0] as { text: string }).text)).state, {
        n: 1,
      });
    }
  } finally {
    for (const s of subs) await s.close();
    await Promise.all([alice.close(), bob.close()]);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("live: listen limits per user and for all users; another user is unaffected; closing frees a slot", async (t) => {
  // Streams are raw HTTP here, closed with their own AbortController: that
  // closes the connection for sure, which is what frees a slot on the server.
  await using issuer = await startIssuer();
  await using server = await startHttpServer([
    "--backend",
    "memory://",
    "--public-url",
    PUBLIC_URL,
    ...issuer.serveArgs,
    "--max-listen-streams",
    "3",
    "--max-listen-streams-per-user",
    "2",
    "--max-watches-per-user",
    "3",
  ]);
  const tokens = {
    alice: await issuer.token({ sub: "alice", aud: PUBLIC_URL }),
    bob: await issuer.token({ sub: "bob", aud: PUBLIC_URL }),
  };
  const [alice, bob] = await Promise.all(
    [tokens.alice, tokens.bob].map((token) => httpClient(server.url, "2026-07-28", token)),
  ) as [Client, Client];
  const mint = async (c: Client) =>
    String((await ok(c, "state_save", { kind: "doc", state: {} })).handle);
  const [a1, a2, a3, a4] = [
    await mint(alice),
    await mint(alice),
    await mint(alice),
    await mint(alice),
  ];
  const b1 = await mint(bob);
  const uri = (h: string) => `mcpstate://state/${h}`;
  const open: Posted[] = [];
  const listen = async (who: keyof typeof tokens, handles: string[]) => {
    const r = await post(
      server.url,
      mcpHeaders(tokens[who], "subscriptions/listen"),
      listenBody(handles.map(uri)),
    );
    open.push(r);
    return r;
  };
  const listens = async (who: keyof typeof tokens, handles: string[]) => {
    const r = await listen(who, handles);
    assert.ok(r.acknowledged, `${who} ${handles}: ${r.text}`);
    return r;
  };
  /** Retries while a closed stream's slot is being freed. */
  const listensWithin = async (who: keyof typeof tokens, handles: string[]) => {
    const deadline = Date.now() + 5000;
    for (;;) {
      const r = await listen(who, handles);
      if (r.acknowledged) return r;
      assert.ok(Date.now() < deadline, `${who} ${handles}: ${r.text}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  };
  const refused = async (
    who: keyof typeof tokens,
    handles: string[],
    limit: string,
    max: number,
  ) => {
    const r = await listen(who, handles);
    assert.equal(r.status, 200);
    assert.ok(!r.acknowledged, `${who} should be refused by --${limit}`);
    assert.equal(r.error?.code, -32000, r.text);
    assert.match(String(r.error?.message), new RegExp(`--${limit} ${max}\\b`));
    assert.deepEqual(r.error?.data, { limit, max });
  };
  const hears = async (stream: Posted, c: Client, handle: string) => {
    const heard = stream.updated(uri(handle), 10_000);
    await ok(c, "state_patch", { handle, ops: [{ op: "increment", path: "", key: "n" }] });
    assert.ok(await heard, `no update of ${handle}`);
  };
  try {
    const s1 = await listens("alice", [a1, a2]);
    let s2: Posted | undefined;

    await t.step(
      "watched handles: a stream that would pass --max-watches-per-user is refused",
      async () => {
        await refused("alice", [a3, a4], "max-watches-per-user", 3);
        // A handle Alice already watches costs nothing more.
        s2 = await listens("alice", [a2, a3]);
      },
    );

    await t.step(
      "open streams: a third of Alice's is refused by --max-listen-streams-per-user",
      async () => {
        await refused("alice", [a1], "max-listen-streams-per-user", 2);
      },
    );

    await t.step("Bob is unaffected by Alice's limits, until the server-wide one", async () => {
      const mine = await listens("bob", [b1]);
      await refused("bob", [b1], "max-listen-streams", 3);
      await hears(mine, bob, b1);
    });

    await t.step(
      "closing a stream frees its slot, for anyone; the others keep working",
      async () => {
        s1.close();
        await listensWithin("bob", [b1]);
        await hears(s2!, alice, a3);
      },
    );

    await t.step("closing every stream frees every slot and watch", async () => {
      for (const s of open.splice(0)) s.close();
      await listensWithin("alice", [a1, a3, a4]);
      await listens("alice", [a4]);
      await listens("bob", [b1]);
    });
  } finally {
    for (const s of open) s.close();
    await Promise.all([alice.close(), bob.close()]);
  }
});

Deno.test("live: stdio holds the same limits, and a deeply nested listen keeps the connection", async () => {
  const dir = await Deno.makeTempDir();
  const s = await stdioSession("2026-07-28", {
    MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
    MCPSTATE_MAX_LISTEN_STREAMS_PER_USER: "1",
    MCPSTATE_MAX_WATCHES_PER_USER: "2",
  });
  const open: { close(): Promise<void> }[] = [];
  try {
    const mint = async () =>
      `mcpstate://state/${(await ok(s.client, "state_save", { kind: "doc", state: {} })).handle}`;
    const [h1, h2, h3] = [await mint(), await mint(), await mint()];
    await assert.rejects(
      () => s.client.listen({ resourceSubscriptions: [h1, h2, h3] }),
      /--max-watches-per-user 2\b/,
    );
    const first = await s.client.listen({ resourceSubscriptions: [h1, h2] });
    open.push(first);
    await assert.rejects(
      () => s.client.listen({ resourceSubscriptions: [h1] }),
      /--max-listen-streams-per-user 1\b/,
    );
    await first.close();
    // The cancellation travels on the same pipe, ahead of the next request.
    open.push(await s.client.listen({ resourceSubscriptions: [h3] }));
    let deep: unknown = "x";
    for (let i = 0; i < 10_000; i++) deep = [deep];
    await assert.rejects(() => s.client.listen({ resourceSubscriptions: [deep as string] }));
    assert.equal((await ok(s.client, "state_list", {})).ok, true);
    assert.doesNotMatch(s.stderr(), /Maximum call stack/);

    // A 2025-era client's resources/subscribe counts against the watches, not the streams.
    await using legacy = await stdioSession("2025-11-25", {
      MCPSTATE_BACKEND: `sqlite:///${dir}/state.db`,
      MCPSTATE_MAX_LISTEN_STREAMS_PER_USER: "1",
      MCPSTATE_MAX_WATCHES_PER_USER: "2",
    });
    await legacy.client.subscribeResource({ uri: h1 });
    await legacy.client.subscribeResource({ uri: h2 });
    await assert.rejects(
      () => legacy.client.subscribeResource({ uri: h3 }),
      /--max-watches-per-user 2\b/,
    );
    await legacy.client.unsubscribeResource({ uri: h1 });
    assert.deepEqual(await legacy.client.subscribeResource({ uri: h3 }), {});
  } finally {
    for (const sub of open) await sub.close();
    await s.close();
    await Deno.remove(dir, { recursive: true });
  }
});
