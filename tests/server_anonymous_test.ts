/**
 * Idempotent mints in the shared bucket (`--allow-anonymous`), over real HTTP
 * against a real server process, with two independent callers: a key is
 * scoped by itself together with the whole call, so one caller's key never
 * hands its handle to another caller's different call, and no caller learns
 * that a key was used.
 */

import assert from "node:assert/strict";
import { type Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { type Era, ERAS, httpClient, newClient, startHttpServer } from "./_server_harness.ts";
import { call, fails, ok } from "./_tool_calls.ts";

/** A client of its own, named `name`, connected over HTTP. */
async function namedClient(url: URL, era: Era, name: string): Promise<Client> {
  const client = newClient(era, name);
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
}

Deno.test("anonymous HTTP: one caller's idempotency key never hands its handle to another", async (t) => {
  await using server = await startHttpServer(["--backend", "memory://", "--allow-anonymous"]);
  const open: Client[] = [];
  try {
    for (const era of ERAS) {
      const alice = await httpClient(server.url, era);
      const bob = await httpClient(server.url, era);
      open.push(alice, bob);
      const key = `shared-key-${era}`;
      const aliceCall = {
        kind: "note",
        state: { owner: "alice", secret: 42 },
        idempotency_key: key,
      };
      const bobCall = { kind: "note", state: { owner: "bob" }, idempotency_key: key };
      const mint = async (client: Client, args: Record<string, unknown>): Promise<string> => {
        const r = await call(client, "state_save", args);
        // Never "key already used", never any other error: nobody learns of the key.
        assert.equal(r.isError, false, JSON.stringify(r.payload));
        assert.deepEqual(Object.keys(r.payload).sort(), ["handle", "ok", "version"]);
        assert.equal(r.payload.version, 1);
        return String(r.payload.handle);
      };
      let first = "";

      await t.step(
        `${era}: the same key with another state is a new mint, not an error`,
        async () => {
          first = await mint(alice, aliceCall);
          const other = await mint(bob, bobCall);
          assert.notEqual(other, first);
          assert.deepEqual((await ok(bob, "state_load", { handle: other })).state, {
            owner: "bob",
          });
          const mine = await ok(alice, "state_load", { handle: first });
          assert.deepEqual([mine.version, mine.state], [1, aliceCall.state]);
        },
      );

      await t.step(
        `${era}: a retry returns the first handle and applies nothing twice`,
        async () => {
          assert.equal(await mint(alice, aliceCall), first);
          assert.equal(await mint(alice, aliceCall), first);
          const bobs = await mint(bob, bobCall);
          assert.equal(await mint(bob, bobCall), bobs);
          assert.notEqual(bobs, first);
          assert.equal((await ok(alice, "state_load", { handle: first })).version, 1);
        },
      );

      await t.step(`${era}: any other argument with the same key is a new mint`, async () => {
        const variants = [
          { ...aliceCall, kind: "memo" },
          { ...aliceCall, ttl_days: 1 },
          { ...aliceCall, state: { secret: 42, owner: "alice" } }, // other key order
          { ...aliceCall, state: { ...aliceCall.state, more: null } },
        ];
        const handles = new Set([first]);
        for (const args of variants) handles.add(await mint(bob, args));
        assert.equal(handles.size, variants.length + 1);
      });

      await t.step(`${era}: callers racing on one key each get their own handle`, async () => {
        const raceKey = `race-${era}`;
        const states = Array.from({ length: 6 }, (_, i) => ({ caller: i }));
        const handles = await Promise.all(
          states.map((state, i) =>
            mint(i % 2 ? bob : alice, { kind: "note", state, idempotency_key: raceKey })
          ),
        );
        assert.equal(new Set(handles).size, states.length);
        for (const [i, handle] of handles.entries()) {
          assert.deepEqual((await ok(alice, "state_load", { handle })).state, states[i]);
        }
      });

      await t.step(`${era}: a key holding U+0000 is invalid_argument`, async () => {
        const e = await fails(alice, "state_save", {
          kind: "note",
          state: {},
          idempotency_key: `k\u0000${era}`,
        }, "invalid_argument");
        assert.equal(e.field, "idempotency_key");
      });

      // A caller who sends the same key with byte-for-byte the same call is a
      // retry to the server: in the shared bucket nobody can be told apart,
      // so the key is the secret (like the handle) and the first handle comes
      // back. The writer label is part of the call: another client's is not.
      await t.step(`${era}: only the exact same call from the same client replays`, async () => {
        assert.equal(await mint(bob, aliceCall), first);
        if (era === "2026-07-28") {
          const carol = await namedClient(server.url, era, "another-client");
          open.push(carol);
          assert.notEqual(await mint(carol, aliceCall), first);
        }
      });
    }
  } finally {
    for (const c of open) await c.close();
  }
});
