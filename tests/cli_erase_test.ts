/**
 * `mcpstate erase --user U [--yes]` (SPEC 9.1), run as the real CLI on a
 * SQLite file: without `--yes` it prints the counts and exits 1 with nothing
 * changed; with it, it erases and prints the counts; `--user` is required.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { HandleStore } from "../mod.ts";
import { mcpstate, tempHome } from "./_cli_run.ts";

Deno.test("cli: erase counts without --yes (exit 1), erases with it (exit 0)", async () => {
  const home = await tempHome();
  try {
    const url = `sqlite:///${join(home, "erase.db")}`;
    {
      await using store = await HandleStore.fromUrl(url);
      const h = await store.mint("note", { text: "secret" }, { user: "ann" });
      await store.mint("note", { text: "gone" }, { user: "ann" });
      await store.share(h, { user: "ann", to: "bo", rights: "read" });
      await store.mint("note", { text: "kept" }, { user: "bo" });
    }
    const env = { env: { MCPSTATE_BACKEND: url } };
    const dry = await mcpstate(home, ["erase", "--user", "ann"], env);
    assert.equal(dry.code, 1, dry.stderr);
    assert.equal(dry.stdout.trim(), 'Would erase user "ann": 2 handles and 1 grant.');
    assert.match(dry.stderr, /--yes/);
    const json = await mcpstate(home, ["erase", "--user", "ann", "--json"], env);
    assert.equal(json.code, 1);
    assert.deepEqual(JSON.parse(json.stdout), {
      ok: false,
      erased: false,
      user: "ann",
      handles: 2,
      grants: 1,
    });
    {
      await using store = await HandleStore.fromUrl(url);
      assert.equal((await store.list("ann")).length, 2, "a dry run erased");
    }
    const yes = await mcpstate(home, ["erase", "--user", "ann", "--yes"], env);
    assert.equal(yes.code, 0, yes.stderr);
    assert.equal(yes.stdout.trim(), 'Erased user "ann": 2 handles and 1 grant.');
    const again = await mcpstate(home, ["erase", "--yes", "--user", "ann", "--json"], env);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(JSON.parse(again.stdout), {
      ok: true,
      erased: true,
      user: "ann",
      handles: 0,
      grants: 0,
    });
    await using store = await HandleStore.fromUrl(url);
    assert.deepEqual(await store.list("ann"), []);
    assert.deepEqual(await store.users(), ["bo"]);
    assert.equal((await store.list("bo")).length, 1);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: erase needs --user (exit 2), and is listed in --help", async () => {
  const home = await tempHome();
  try {
    const env = { env: { MCPSTATE_BACKEND: "memory://", MCPSTATE_USER: "ann" } };
    const r = await mcpstate(home, ["erase", "--yes"], env);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--user/);
    const help = await mcpstate(home, ["--help"], env);
    assert.match(help.stdout, /^ {2}erase +Erase every trace of a user/m);
    const own = await mcpstate(home, ["erase", "--help"], env);
    assert.equal(own.code, 0);
    assert.match(own.stdout, /^Usage: mcpstate erase --user USER \[--yes\]/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
