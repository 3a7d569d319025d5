/**
 * What a server write costs on the wire: the write, its implicit lease and
 * its liveness check go to the engine together. Counted on the client of
 * the real engine — every command ioredis sends, every query postgres.js
 * sends — never timed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Redis } from "ioredis";
import postgres from "postgres";
import { HandleStore, type HandleStoreOptions, Increment } from "../mod.ts";
import { PostgresBackend } from "../src/backends/postgres.ts";
import { RedisBackend } from "../src/backends/redis.ts";
import { freshUser } from "./_helpers.ts";
import { startRedis } from "./_redis.ts";

/** The writes of the server's tools, each with the lease the server asks for. */
async function serverWrites(
  store: HandleStore,
  record: (op: string) => void,
): Promise<{ handle: string; user: string; ops: string[] }> {
  const user = freshUser();
  const w = { user, writer: "laptop/a", lease: { seconds: 60 } };
  record("mint");
  const handle = await store.mint("task", { n: 0 }, w);
  record("save");
  const saved = await store.save(handle, { n: 1 }, { ...w, expectVersion: 1 });
  assert.equal(saved.activeLease?.holder, "laptop/a");
  record("patch");
  const patched = await store.patch(handle, [Increment("", "n")], w);
  assert.equal(patched.activeLease?.holder, "laptop/a");
  record("touch");
  await store.touch(handle, { ...w, ttlDays: 1 });
  record("get");
  const got = await store.get(handle, { user });
  assert.deepEqual([got.version, got.state, got.activeLease?.holder], [4, { n: 2 }, "laptop/a"]);
  record("end");
  return { handle, user, ops: ["mint", "save", "patch", "touch", "get"] };
}

/** Splits a list of `"op"` markers and command names into the commands of each op. */
function byOp(log: string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let op = "";
  for (const x of log) {
    // A store without keys asks whether the backend keeps any data key when
    // it opens, then in the background at most once a second; a connection
    // the pool opens for it reads the array types once. Neither is a write's.
    if (/\.data_keys |^select b\.oid, b\.typarray from pg_catalog\.pg_type/.test(x)) continue;
    if (x.startsWith("@")) out.set(op = x.slice(1), []);
    else out.get(op)?.push(x);
  }
  return out;
}

Deno.test("redis: a server write and its lease are one command; a get is one round trip", async () => {
  await using server = await startRedis();
  const client = new Redis({ host: server.host, port: server.port, lazyConnect: true });
  await client.connect();
  // Every command ioredis sends passes here; a pipeline passes its own
  // buffer as the stream and is then flushed in one write.
  const log: string[] = [];
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((command: { name: string }, stream?: unknown) => {
    log.push(stream === undefined ? command.name : `pipelined ${command.name}`);
    return send(command as never, stream as never);
  }) as typeof client.sendCommand;
  for (const options of [{}, { history: false }] as HandleStoreOptions[]) {
    const store = new HandleStore(new RedisBackend(client), { reclaimIntervalMs: 0, ...options });
    try {
      // The first writes load the scripts into the server (a NOSCRIPT, then EVAL).
      await serverWrites(store, () => {});
      log.length = 0;
      await serverWrites(store, (op) => log.push(`@${op}`));
    } finally {
      await store.close();
    }
    const ops = byOp(log);
    const history = `history ${options.history ?? true}`;
    for (const op of ["mint", "save", "patch", "touch"]) {
      // One script does the write, the expiry check and the lease.
      assert.deepEqual(ops.get(op), ["evalsha"], `${history}: ${op}`);
    }
    const get = ops.get("get")!;
    assert.ok(
      get.length === 1 || get.every((c) => c.startsWith("pipelined")),
      `${history}: get is one round trip, not ${get.join(", ")}`,
    );
  }
  client.disconnect();
});

const BASE_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";

Deno.test("postgres: a server write and its lease are one statement; a stale guess falls back to the locked step", async () => {
  const schema = `mcpstate_test_trips_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const log: string[] = [];
  // postgres.js reports every query it sends on the pool's connections.
  const sql = postgres(BASE_URL, {
    onnotice: () => {},
    debug: (_conn, query) => log.push(query.replace(/\s+/g, " ").trim()),
  });
  try {
    const backend = new PostgresBackend(sql, { schema });
    await backend.initialize();
    for (const options of [{}, { history: false }] as HandleStoreOptions[]) {
      log.length = 0;
      const store = new HandleStore(backend, { reclaimIntervalMs: 0, ...options });
      const { handle, user } = await serverWrites(store, (op) => log.push(`@${op}`));
      const ops = byOp(log);
      const history = `history ${options.history ?? true}`;
      // A mint and a save without history are conditional statements of
      // their own; a read-modify-write step (a save with history, a patch, a
      // touch) is computed from the record this backend last saw and written
      // in one statement while the row is still that record. The lease goes
      // with each.
      for (const op of ["mint", "save", "patch", "touch"]) {
        assert.equal(ops.get(op)!.length, 1, `${history}: ${op}: ${ops.get(op)}`);
        assert.match(ops.get(op)![0]!, /INSERT INTO "[^"]+"\.leases/, `${history}: ${op}`);
      }
      assert.equal(ops.get("get")!.length, 1, `${history}: get: ${ops.get("get")}`);

      // Another instance (another process) writes: this one's guess is stale.
      const other = new HandleStore(new PostgresBackend(sql, { schema }), { reclaimIntervalMs: 0 });
      await other.patch(handle, [Increment("", "n")], { user });
      log.length = 0;
      const w = { user, writer: "laptop/a", lease: { seconds: 60 } };
      log.push("@patch");
      const patched = await store.patch(handle, [Increment("", "n")], w);
      const qs = byOp(log).get("patch")!;
      assert.deepEqual([patched.version, patched.state], [6, { n: 4 }], history);
      // The guessed statement wrote nothing; the locked step did, in one transaction.
      assert.match(qs[0]!, /^WITH w AS \( UPDATE/, `${history}: ${qs}`);
      assert.ok(/^(begin|BEGIN)/.test(qs[1]!), `${history}: then a transaction: ${qs}`);
      assert.ok(/^(commit|COMMIT)/.test(qs[qs.length - 1]!), `${history}: ${qs}`);
      // Another process wrote it: for a while this handle's steps skip the guess.
      await other.patch(handle, [Increment("", "n")], { user });
      log.length = 0;
      log.push("@patch");
      const again = await store.patch(handle, [Increment("", "n")], w);
      const qs2 = byOp(log).get("patch")!;
      assert.deepEqual([again.version, again.state], [8, { n: 6 }], history);
      assert.ok(/^(begin|BEGIN)/.test(qs2[0]!), `${history}: straight to the transaction: ${qs2}`);
      // An instance that has not seen the handle: a plain read, then the guessed statement.
      const fresh = new HandleStore(new PostgresBackend(sql, { schema }), { reclaimIntervalMs: 0 });
      await fresh.list(user);
      log.length = 0;
      log.push("@patch");
      const cold = await fresh.patch(handle, [Increment("", "n")], w);
      const qs3 = byOp(log).get("patch")!;
      assert.deepEqual([cold.version, cold.state], [9, { n: 7 }], history);
      assert.equal(qs3.length, 2, `${history}: ${qs3}`);
      assert.match(qs3[0]!, /^SELECT /, `${history}: ${qs3}`);
      assert.match(qs3[1]!, /^WITH w AS \( UPDATE/, `${history}: ${qs3}`);
      await fresh.close();
      await other.close();
      const since = await store.changesSince(handle, 0, { user });
      if (options.history !== false) {
        assert.ok(!since.truncated);
        if (!since.truncated) {
          assert.deepEqual(since.changes.map((c) => c.version), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        }
      }
    }
  } finally {
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await sql.end();
  }
});
