/**
 * Bearer authentication of the HTTP server against a real issuer: key pairs,
 * a JWKS served on loopback, signed (and forged) tokens, key rotation.
 */

import assert from "node:assert/strict";
import type { JWTPayload } from "jose";
import { HandleStore } from "../mod.ts";
import {
  closeAndStop,
  type Era,
  httpClient,
  startHttpServer,
  startIssuedServer,
} from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";
import { oddSubjects } from "./_tenants.ts";

const now = () => Math.floor(Date.now() / 1000);

async function postMcp(url: URL, token?: string): Promise<Response> {
  return await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
}

Deno.test("HTTP bearer auth: identities, forged tokens, metadata, key rotation", async (t) => {
  await using issued = await startIssuedServer(["--auth-jwks-cooldown-ms", "100"]);
  const { issuer, server, backend } = issued;
  const aud = server.url.href;
  const metadataUrl = `${server.origin}/.well-known/oauth-protected-resource/mcp`;
  const clients: Awaited<ReturnType<typeof httpClient>>[] = [];
  const connect = async (who: string, era: Era, alg: "RS256" | "ES256" = "RS256") => {
    const token = await issuer.token({ sub: who, aud, scope: "state" }, { alg });
    const client = await httpClient(server.url, era, token);
    clients.push(client);
    return client;
  };

  try {
    await t.step("RFC 9728 metadata names the issuer, at both well-known paths", async () => {
      for (
        const path of [
          "/.well-known/oauth-protected-resource/mcp",
          "/.well-known/oauth-protected-resource",
        ]
      ) {
        const res = await fetch(`${server.origin}${path}`);
        assert.equal(res.status, 200, path);
        const doc = await res.json();
        assert.equal(doc.resource, aud);
        assert.deepEqual(doc.authorization_servers, [issuer.issuer]);
      }
    });

    const assert401 = async (token: string | undefined, why: string, description?: RegExp) => {
      const res = await postMcp(server.url, token);
      const body = await res.json();
      assert.equal(res.status, 401, `${why}: ${JSON.stringify(body)}`);
      const challenge = res.headers.get("www-authenticate") ?? "";
      assert.match(challenge, /^Bearer /, why);
      assert.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), `${why}: ${challenge}`);
      assert.equal(body.error, "invalid_token", why);
      if (description) assert.match(String(body.error_description), description, why);
      if (token) assert.ok(!JSON.stringify(body).includes(token), "the token is not echoed");
    };

    await t.step("no token → 401 with the resource_metadata challenge", async () => {
      await assert401(undefined, "no token");
      await assert401("", "empty bearer");
      const res = await fetch(server.url, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Basic YWxpY2U6cHc=" },
        body: "{}",
      });
      await res.body?.cancel();
      assert.equal(res.status, 401);
    });

    await t.step("the official client without a token is refused", async () => {
      await assert.rejects(() => httpClient(server.url, "2026-07-28"));
      await assert.rejects(() => httpClient(server.url, "2025-11-25"));
    });

    await t.step("forged, stale and misdirected tokens → 401", async () => {
      const sub = "mallory";
      await assert401(
        await issuer.token({ sub, aud, exp: now() - 3600 }),
        "expired",
        /expired/,
      );
      await assert401(
        await issuer.token({ sub, aud, nbf: now() + 3600 }),
        "not yet valid",
        /not valid yet/,
      );
      await assert401(
        await issuer.token({ sub, aud }, { iss: "https://evil.example" }),
        "wrong issuer",
        /not issued by/,
      );
      await assert401(
        await issuer.token({ sub, aud: "https://other.example/mcp" }),
        "wrong audience",
        /aud/,
      );
      await assert401(issuer.unsignedToken({ sub, aud }), "alg none", /algorithm/);
      await assert401(await issuer.tokenWithUnknownKey({ sub, aud }), "unknown kid", /kid/);
      await assert401(
        await issuer.hs256WithPublicKey({ sub, aud }),
        "HS256 signed with the public key",
        /algorithm/,
      );
      await assert401(await issuer.token({ sub, aud }, { noExp: true }), "no exp", /exp/);
      await assert401(await issuer.token({ aud }), "no sub", /sub/);
      const good = await issuer.token({ sub, aud });
      const [h, p] = good.split(".");
      await assert401(`${h}.${p}.AAAA`, "bad signature", /signature/);
      await assert401("not-a-jwt", "garbage");
    });

    await t.step("alice's handles are invisible to bob (handle_not_found)", async () => {
      const alice = await connect("alice", "2026-07-28");
      const bob = await connect("bob", "2025-11-25", "ES256");
      const { handle } = await ok(alice, "state_save", { kind: "secret", state: { pin: 1234 } });
      const err = await fails(bob, "state_load", { handle }, "handle_not_found");
      assert.ok(!JSON.stringify(err).includes("1234"));
      await fails(
        bob,
        "state_patch",
        { handle, ops: [{ op: "merge", mapping: { x: 1 } }] },
        "handle_not_found",
      );
      await fails(bob, "state_save", { handle, state: {}, expect_version: 1 }, "handle_not_found");
      await fails(bob, "state_touch", { handle }, "handle_not_found");
      await fails(bob, "state_delete", { handle }, "handle_not_found");
      const listed = await ok(bob, "state_list", {});
      assert.deepEqual(listed.handles, []);
      const mine = await ok(alice, "state_load", { handle });
      assert.deepEqual(mine.state, { pin: 1234 });
      assert.equal(mine.version, 1);
      const aliceList = await ok(alice, "state_list", {});
      assert.deepEqual((aliceList.handles as { handle: string }[]).map((x) => x.handle), [handle]);

      // The user id is "<iss>#<sub>": read the database directly.
      await using store = await HandleStore.fromUrl(backend);
      const rows = await store.list(`${issuer.issuer}#alice`);
      assert.deepEqual(rows.map((r) => r.handle), [handle]);
      assert.deepEqual(await store.list("alice"), []);
    });

    await t.step("the same subject from another issuer is another user", async () => {
      await using other = await startIssuer();
      await using server2 = await startHttpServer([
        "--backend",
        backend,
        "--auth-issuer",
        other.issuer, // no --auth-jwks-url: discovered from the issuer's metadata
      ]);
      const client = await httpClient(
        server2.url,
        "2026-07-28",
        await other.token({ sub: "alice", aud: server2.url.href }),
      );
      try {
        assert.deepEqual((await ok(client, "state_list", {})).handles, []);
        // A token of the first issuer is not accepted here.
        const res = await postMcp(
          server2.url,
          await issuer.token({ sub: "alice", aud: server2.url.href }),
        );
        await res.body?.cancel();
        assert.equal(res.status, 401);
      } finally {
        await client.close();
      }
    });

    await t.step(
      "key rotation in the JWKS is picked up; the retired key stops working",
      async () => {
        const before = await issuer.token({ sub: "alice", aud });
        assert.equal((await postMcp(server.url, before)).status, 200);
        await issuer.rotate();
        const after = await issuer.token({ sub: "alice", aud });
        await new Promise((r) => setTimeout(r, 150)); // the refetch cooldown
        const fetches = issuer.jwksFetches();
        const res = await postMcp(server.url, after);
        await res.body?.cancel();
        assert.equal(res.status, 200, "a token signed with the new key is accepted");
        assert.ok(issuer.jwksFetches() > fetches, "the JWKS was fetched again");
        await new Promise((r) => setTimeout(r, 150));
        const old = await postMcp(server.url, before);
        await old.body?.cancel();
        assert.equal(old.status, 401, "a token of the retired key is refused");
        const client = await httpClient(server.url, "2026-07-28", after);
        try {
          assert.equal((await ok(client, "state_list", {})).ok, true);
        } finally {
          await client.close();
        }
      },
    );

    await t.step("the server kept serving through every refusal", async () => {
      const res = await fetch(`${server.origin}/healthz`);
      assert.deepEqual((await res.json()).ok, true);
      const alice = await connect("alice", "2025-11-25");
      const list = await ok(alice, "state_list", {});
      assert.equal((list.handles as unknown[]).length, 1);
    });
  } finally {
    await closeAndStop(clients, server);
  }
});

Deno.test("JWT sub and iss: anything but the configured issuer and a non-empty string sub is 401, never 500", async (t) => {
  await using issuer = await startIssuer();
  await using server = await startHttpServer(["--backend", "memory://", ...issuer.serveArgs]);
  const aud = server.url.href;
  const bob = await httpClient(server.url, "2026-07-28", await issuer.token({ sub: "bob", aud }));
  try {
    const { handle } = await ok(bob, "state_save", { kind: "secret", state: { pin: 4321 } });
    const refused = async (token: string, why: string) => {
      const res = await postMcp(server.url, token);
      const text = await res.text();
      assert.equal(res.status, 401, `${why}: ${text}`);
      assert.equal(JSON.parse(text).error, "invalid_token", why);
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer .*resource_metadata=/, why);
      assert.ok(!text.includes("4321"), why);
    };
    for (const [why, sub] of oddSubjects("bob")) {
      await t.step(`sub ${why} → 401 invalid_token`, async () => {
        await refused(await issuer.token({ sub, aud } as unknown as JWTPayload), why);
      });
    }
    await t.step("sub of exactly 1,024 characters is a user", async () => {
      const res = await postMcp(server.url, await issuer.token({ sub: "b".repeat(1024), aud }));
      await res.body?.cancel();
      assert.equal(res.status, 200);
    });
    await t.step("iss other than the configured issuer, spelled closely → 401", async () => {
      for (const iss of [`${issuer.issuer}/`, ` ${issuer.issuer}`, issuer.issuer.toUpperCase()]) {
        await refused(await issuer.token({ sub: "bob", aud }, { iss }), `iss ${iss}`);
      }
    });
    await t.step("the server kept serving, Bob's state untouched", async () => {
      assert.deepEqual((await ok(bob, "state_load", { handle })).state, { pin: 4321 });
      assert.doesNotMatch(server.stderr(), /Internal Server Error|TypeError/);
    });
  } finally {
    await bob.close();
  }
});
