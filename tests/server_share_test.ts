/**
 * Shared handles over the HTTP server, with two users authenticated by a
 * real issuer: the grants are made through the library on the server's
 * backend, and the grantee uses the alias handle in the ordinary tools.
 */

import assert from "node:assert/strict";
import { HandleStore } from "../mod.ts";
import { httpClient, startHttpServer, startIssuedServer } from "./_server_harness.ts";
import { startIssuer } from "./_issuer.ts";
import { fails, ok } from "./_tool_calls.ts";

const TOOLS = ["--tools", "save,load,list,patch,delete,changes,share"];

Deno.test("HTTP: Alice shares read-only then append; Bob reads, is refused a patch, appends; Alice sees via", async () => {
  await using issued = await startIssuedServer(TOOLS);
  const { issuer, server, backend } = issued;
  const aud = server.url.href;
  const connect = async (sub: string) =>
    await httpClient(server.url, "2026-07-28", await issuer.token({ sub, aud, scope: "state" }));
  const alice = await connect("alice"), bob = await connect("bob");
  const [aliceId, bobId] = [`${issuer.issuer}#alice`, `${issuer.issuer}#bob`];
  try {
    const minted = await ok(alice, "state_save", { kind: "research", state: { notes: ["a"] } });
    const handle = minted.handle as string;
    await using store = await HandleStore.fromUrl(backend, { reclaimIntervalMs: 0 });
    const read = await ok(alice, "state_share", { handle, to: bobId, rights: "read" }) as {
      handle: string;
      grant: string;
      rights: string;
      expires_at: string | null;
    };
    assert.equal(read.rights, "read");
    assert.equal(read.expires_at, null);
    // Hostile arguments: clear errors, no grant.
    for (const rights of ["admin", "READ", ""]) {
      await fails(alice, "state_share", { handle, to: bobId, rights }, "invalid_argument");
    }
    for (const to of ["", aliceId]) {
      await fails(alice, "state_share", { handle, to, rights: "read" }, "invalid_argument");
    }
    await fails(bob, "state_share", { handle, to: "*", rights: "read" }, "handle_not_found");
    const wider = await fails(bob, "state_share", {
      handle: read.handle,
      to: "*",
      rights: "write",
    }, "permission_denied");
    assert.deepEqual([wider.rights, wider.needed], ["read", "write"]);
    assert.equal((await store.grants(handle, { user: aliceId })).length, 1);

    const loaded = await ok(bob, "state_load", { handle: read.handle });
    assert.deepEqual(loaded.state, { notes: ["a"] });
    assert.equal(loaded.handle, read.handle);
    assert.equal(loaded.shared_by, aliceId);
    assert.equal(loaded.rights, "read");
    const listed = await ok(bob, "state_list", {});
    assert.deepEqual(
      (listed.handles as Record<string, unknown>[]).map((h) => [h.handle, h.rights]),
      [[read.handle, "read"]],
    );
    const refused = await fails(bob, "state_patch", {
      handle: read.handle,
      ops: [{ op: "append", path: "notes", value: "b" }],
    }, "permission_denied");
    assert.equal(refused.rights, "read");
    assert.equal(refused.needed, "append");
    await fails(bob, "state_delete", { handle: read.handle }, "permission_denied");

    const append = await ok(alice, "state_share", {
      handle,
      to: bobId,
      rights: "append",
      ttl_days: 7,
    }) as { handle: string; grant: string };
    const patched = await ok(bob, "state_patch", {
      handle: append.handle,
      ops: [{ op: "append", path: "notes", value: "from bob" }],
    });
    // mint, the two shares (each an entry of the handle), Bob's patch.
    assert.equal(patched.version, 4);
    const changes = await ok(alice, "state_changes", { handle, since_version: 1 });
    const ops = (changes.changes as Record<string, unknown>[]).map((c) => c.op);
    assert.deepEqual(ops, ["share", "share", "patch"]);
    const entry = (changes.changes as Record<string, unknown>[])[2]!;
    assert.equal(entry.via, append.grant);
    assert.deepEqual((await ok(alice, "state_load", { handle })).state, {
      notes: ["a", "from bob"],
    });

    await store.unshare(append.grant, { user: aliceId });
    const gone = await fails(bob, "state_patch", {
      handle: append.handle,
      ops: [{ op: "append", path: "notes", value: "late" }],
    }, "handle_not_found");
    assert.equal(gone.reason, "grant_revoked");
    // Someone else's alias is not found for Alice either (she owns the handle, not the alias).
    await fails(alice, "state_load", { handle: read.handle }, "handle_not_found");
  } finally {
    await alice.close();
    await bob.close();
  }
});

Deno.test("HTTP: an anonymous server never offers state_share, even when named", async () => {
  await using server = await startHttpServer([
    "--backend",
    "memory://",
    "--allow-anonymous",
    ...TOOLS,
  ]);
  const client = await httpClient(server.url, "2026-07-28");
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("state_load") && !names.includes("state_share"), names.join());
  } finally {
    await client.close();
  }
});

Deno.test("HTTP: an authenticated server with default tools does not offer state_share", async () => {
  await using issuer = await startIssuer();
  await using server = await startHttpServer(["--backend", "memory://", ...issuer.serveArgs]);
  const token = await issuer.token({ sub: "a", aud: server.url.href, scope: "state" });
  const client = await httpClient(server.url, "2026-07-28", token);
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(!names.includes("state_share"));
  } finally {
    await client.close();
  }
});
