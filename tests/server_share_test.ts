/**
 * Shared handles over the HTTP server, with two users authenticated by a
 * real issuer: the grants are made through the library on the server's
 * backend, and the grantee uses the alias handle in the ordinary tools.
 */

import assert from "node:assert/strict";
import { HandleStore } from "../mod.ts";
import { fails, httpClient, ok, startHttpServer, startIssuer } from "./_server_harness.ts";

Deno.test("HTTP: Alice shares read-only then append; Bob reads, is refused a patch, appends; Alice sees via", async () => {
  const dir = await Deno.makeTempDir();
  const backend = `sqlite:///${dir}/state.db`;
  await using issuer = await startIssuer();
  await using server = await startHttpServer(["--backend", backend, ...issuer.serveArgs]);
  const aud = server.url.href;
  const connect = async (sub: string) =>
    await httpClient(server.url, "2026-07-28", await issuer.token({ sub, aud, scope: "state" }));
  const alice = await connect("alice"), bob = await connect("bob");
  const [aliceId, bobId] = [`${issuer.issuer}#alice`, `${issuer.issuer}#bob`];
  try {
    const minted = await ok(alice, "state_save", { kind: "research", state: { notes: ["a"] } });
    const handle = minted.handle as string;
    await using store = await HandleStore.fromUrl(backend, { reclaimIntervalMs: 0 });
    const read = await store.share(handle, { user: aliceId, to: bobId, rights: "read" });

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

    const append = await store.share(handle, { user: aliceId, to: bobId, rights: "append" });
    const patched = await ok(bob, "state_patch", {
      handle: append.handle,
      ops: [{ op: "append", path: "notes", value: "from bob" }],
    });
    assert.equal(patched.version, 2);
    const changes = await ok(alice, "state_changes", { handle, since_version: 1 });
    const entry = (changes.changes as Record<string, unknown>[])[0]!;
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
