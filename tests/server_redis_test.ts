/**
 * Continuity across devices: two HTTP server instances on different ports,
 * behind one public name, sharing one real Redis, serve one user seamlessly.
 */

import assert from "node:assert/strict";
import { httpClient, startHttpServer } from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";
import { startRedis } from "./_redis.ts";

Deno.test("two HTTP instances on one Redis serve one user across devices", async (t) => {
  await using redis = await startRedis();
  await using issuer = await startIssuer();
  const publicUrl = "https://state.example.com/mcp";
  const args = [
    "--backend",
    redis.url,
    "--public-url",
    publicUrl,
    ...issuer.serveArgs,
  ];
  await using one = await startHttpServer(args);
  await using two = await startHttpServer(args);
  assert.notEqual(one.port, two.port);
  const token = await issuer.token({ sub: "alice", aud: publicUrl });
  const laptop = await httpClient(one.url, "2026-07-28", token);
  const phone = await httpClient(two.url, "2025-11-25", token);
  try {
    let handle = "";
    await t.step("minted on one instance, listed and loaded on the other", async () => {
      handle = String(
        (await ok(laptop, "state_save", {
          kind: "trip",
          state: { stops: ["Lisbon"] },
          ttl_days: 30,
        })).handle,
      );
      const listed = await ok(phone, "state_list", {});
      assert.deepEqual((listed.handles as { handle: string }[]).map((h) => h.handle), [handle]);
      const p = await ok(phone, "state_load", { handle });
      assert.deepEqual(p.state, { stops: ["Lisbon"] });
      assert.equal(p.last_writer, `${Deno.hostname()}/test-client`);
    });

    await t.step("a stale save on one instance loses to a save on the other", async () => {
      await ok(phone, "state_save", {
        handle,
        state: { stops: ["Lisbon", "Porto"] },
        expect_version: 1,
      });
      const e = await fails(laptop, "state_save", {
        handle,
        state: { stops: ["Lisbon", "Madrid"] },
        expect_version: 1,
      }, "stale_write");
      assert.deepEqual((e.current as { state: unknown }).state, { stops: ["Lisbon", "Porto"] });
    });

    await t.step("concurrent patches through both instances all land", async () => {
      const calls = [];
      for (let i = 0; i < 25; i++) {
        for (const [c, who] of [[laptop, "l"], [phone, "p"]] as const) {
          calls.push(
            ok(c, "state_patch", {
              handle,
              ops: [{ op: "append", path: "stops", value: `${who}${i}` }],
            }),
          );
        }
      }
      await Promise.all(calls);
      const p = await ok(laptop, "state_load", { handle });
      assert.equal((p.state as { stops: string[] }).stops.length, 52);
      assert.equal(p.version, 2 + 50);
    });

    await t.step("Redis down: backend_error without its URL; back up: served again", async () => {
      await redis.kill();
      const e = await fails(laptop, "state_load", { handle }, "backend_error");
      assert.ok(!JSON.stringify(e).includes(String(redis.port)), JSON.stringify(e));
      await redis.restart();
      let p: Record<string, unknown> | undefined;
      for (let i = 0; i < 50 && !p; i++) {
        p = await ok(phone, "state_load", { handle }).catch(() => undefined);
        if (!p) await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(p?.version, 52);
    });

    await t.step("deleted on one instance, gone on the other", async () => {
      await ok(phone, "state_delete", { handle });
      await fails(laptop, "state_load", { handle }, "handle_not_found");
    });
  } finally {
    await laptop.close();
    await phone.close();
    for (const s of [one, two]) assert.equal((await s.stop()).code, 0, s.stderr());
  }
});
