/**
 * The inspector's access rules over real HTTP, without a browser: the
 * one-time token and its cookie, 401 that shows nothing, 403 for a foreign
 * `Host` or `Origin` (another port of localhost included), writes (a
 * restore from the trash, a restore of an earlier version) only with
 * `--write` and the page's own `Origin`; a version past the retained history
 * or a stale one refused with nothing changed, and a timeline whose mint
 * entry retention dropped still showing old values; and `mcpstate inspect`
 * itself, run with the program's permission flags, printing one line.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Append, HandleStore, type HandleStoreOptions, SetKey } from "../mod.ts";
import { serveInspector } from "../src/inspect/server.ts";
import { tempHome } from "./_cli_run.ts";
import { startInspect } from "./_inspect.ts";

/** A request with headers of our choosing (fetch would refuse to set Host). */
async function raw(url: string, headers: Record<string, string> = {}, method = "GET") {
  const u = new URL(url);
  const conn = await Deno.connect({ hostname: u.hostname, port: Number(u.port) });
  const lines = [`${method} ${u.pathname}${u.search} HTTP/1.1`, `Host: ${u.host}`];
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === "host") lines[1] = `Host: ${v}`;
    else lines.push(`${k}: ${v}`);
  }
  lines.push("Connection: close", "Content-Length: 0", "", "");
  await conn.write(new TextEncoder().encode(lines.join("\r\n")));
  const text = await new Response(conn.readable).text();
  const [head = "", body = ""] = text.split("\r\n\r\n");
  return { status: Number(head.split(" ")[1]), head, body };
}

async function withInspector(
  write: boolean,
  fn: (url: string, store: HandleStore) => Promise<void>,
  options: HandleStoreOptions = {},
): Promise<void> {
  const store = await HandleStore.fromUrl("memory://", { reclaimIntervalMs: 0, ...options });
  const serving = serveInspector(store, { user: "alice", writer: "inspect/test", write });
  try {
    await fn(serving.url, store);
  } finally {
    await serving.close();
    await store.close();
  }
}

/** Trades the token for the session cookie. */
async function login(url: string): Promise<string> {
  const res = await fetch(url, { redirect: "manual" });
  await res.body?.cancel();
  assert.equal(res.status, 303);
  return res.headers.get("set-cookie")!.split(";")[0]!;
}

/** Asserts a 401 answer: the short page that asks for a new link, and nothing of the state. */
async function assertRefused(res: Response, what: string, spent = false): Promise<void> {
  assert.equal(res.status, 401, what);
  assert.match(res.headers.get("content-type") ?? "", /^text\/html/, what);
  const body = await res.text();
  assert.match(body, /Run <code>mcpstate inspect<\/code> again for a new link\./, what);
  assert.equal(/used already/.test(body), spent, `${what}: ${body}`);
  for (const secret of ["research", "alice", "secret"]) {
    assert.ok(!body.includes(secret), `${what} showed ${secret}`);
  }
}

Deno.test("inspect http: no token or cookie is 401 with a page that asks for a new link and shows nothing", async () => {
  await withInspector(false, async (url, store) => {
    await store.mint("research", { secret: 1 }, { user: "alice" });
    const origin = new URL(url).origin;
    for (const path of ["/", "/app.js", "/app.css", "/api/info", "/api/handles", "/api/trash"]) {
      await assertRefused(await fetch(origin + path), path);
    }
    await assertRefused(await fetch(`${origin}/?token=${"A".repeat(43)}`), "a wrong token");
    const bad = await fetch(origin + "/api/handles", {
      headers: { cookie: "mcpstate_inspect_x=y" },
    });
    assert.equal(bad.status, 401);
    await bad.body?.cancel();
  });
});

Deno.test("inspect http: the token is traded once for an HttpOnly, SameSite=Strict cookie and a token-less URL", async () => {
  await withInspector(false, async (url) => {
    const token = new URL(url).searchParams.get("token")!;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    assert.ok(token.length * 6 >= 128, "the token carries fewer than 128 bits");
    const res = await fetch(url, { redirect: "manual" });
    await res.body?.cancel();
    assert.equal(res.status, 303);
    assert.equal(res.headers.get("location"), "/");
    const cookie = res.headers.get("set-cookie") ?? "";
    assert.match(cookie, /; HttpOnly/);
    assert.match(cookie, /; SameSite=Strict/);
    assert.match(cookie, /; Path=\//);
    const session = cookie.split(";")[0]!;
    const page = await fetch(new URL(url).origin + "/", { headers: { cookie: session } });
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<title>mcpstate inspect<\/title>/);
    assert.match(page.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    assert.equal(page.headers.get("cache-control"), "no-store");
    const info = await fetch(new URL(url).origin + "/api/info", { headers: { cookie: session } });
    assert.deepEqual((await info.json()).user, "alice");
    // One time: the same token again is refused, and shows nothing.
    await assertRefused(await fetch(url, { redirect: "manual" }), "the spent link", true);
  });
});

Deno.test("inspect http: a spent link opened again is served with the session cookie (a reload), else a page asking to run mcpstate inspect again", async () => {
  await withInspector(false, async (url, store) => {
    await store.mint("research", { secret: 1 }, { user: "alice" });
    const session = await login(url);
    const reload = await fetch(url, { headers: { cookie: session }, redirect: "manual" });
    assert.equal(reload.status, 200);
    assert.match(await reload.text(), /<title>mcpstate inspect<\/title>/);
    // A second browser (no cookie) with the same link.
    await assertRefused(await fetch(url, { redirect: "manual" }), "the spent link", true);
    const stale = await fetch(url, { headers: { cookie: "mcpstate_inspect_x=y" } });
    await assertRefused(stale, "the spent link with a stale cookie", true);
  });
});

Deno.test("inspect http: a foreign Host or Origin is 403, even with the token, which stays unused", async () => {
  await withInspector(false, async (url) => {
    const u = new URL(url);
    assert.equal((await raw(url, { Host: "evil.example" })).status, 403);
    assert.equal((await raw(url, { Host: `attacker.test:${u.port}` })).status, 403);
    assert.equal((await raw(url, { Origin: "http://evil.example" })).status, 403);
    assert.equal((await raw(url, { Origin: "null" })).status, 403);
    // Another server on localhost shares cookies with this one: its origin is foreign.
    assert.equal(
      (await raw(url, { Origin: `http://127.0.0.1:${Number(u.port) + 1}` })).status,
      403,
    );
    assert.equal(
      (await raw(url, { Origin: `http://localhost:${Number(u.port) + 1}` })).status,
      403,
    );
    // The loopback names with the right port are fine, and the token was not spent above.
    const ok = await raw(url, {
      Host: `localhost:${u.port}`,
      Origin: `http://localhost:${u.port}`,
    });
    assert.equal(ok.status, 303);
  });
});

/** A POST of `body` as JSON to `path`, with the session cookie and `headers`. */
function post(
  url: string,
  cookie: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = { origin: new URL(url).origin },
): Promise<Response> {
  return fetch(new URL(url).origin + path, {
    method: "POST",
    headers: { cookie, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** Asserts that a write without `Origin` and one from a foreign `Origin` are 403. */
async function refusedWithoutOwnOrigin(send: (h: Record<string, string>) => Promise<Response>) {
  const noOrigin = await send({});
  assert.equal(noOrigin.status, 403, "a write without Origin");
  await noOrigin.body?.cancel();
  const foreign = await send({ origin: "http://evil.example" });
  assert.equal(foreign.status, 403, "a write from a foreign Origin");
  await foreign.body?.cancel();
}

Deno.test("inspect http: a restore needs --write and the page's own Origin", async () => {
  for (const write of [false, true]) {
    await withInspector(write, async (url, store) => {
      const cookie = await login(url);
      const h = await store.mint("note", { a: 1 }, { user: "alice" });
      await store.revoke(h, { user: "alice" });
      await refusedWithoutOwnOrigin((headers) =>
        post(url, cookie, "/api/restore", { handle: h }, headers)
      );
      const res = await post(url, cookie, "/api/restore", { handle: h });
      const body = await res.json();
      if (!write) {
        assert.equal(res.status, 403);
        assert.equal(body.error.code, "read_only");
        assert.equal(
          (await store.trash("alice")).handles.length,
          1,
          "a read-only inspector restored",
        );
      } else {
        assert.equal(res.status, 200);
        assert.equal(body.restored.handle, h);
        assert.equal((await store.get(h, { user: "alice" })).version, 1);
      }
    });
  }
});

Deno.test("inspect http: restoring a version needs --write and the page's own Origin, and saves as inspect's writer", async () => {
  for (const write of [false, true]) {
    await withInspector(write, async (url, store) => {
      const cookie = await login(url);
      const user = "alice";
      const h = await store.mint("note", { n: 1 }, { user });
      await store.save(h, { n: 2 }, { user, expectVersion: 1 });
      await store.save(h, { n: 3 }, { user, expectVersion: 2 });
      const ask = { handle: h, version: 1, expect_version: 3 };
      await refusedWithoutOwnOrigin((headers) =>
        post(url, cookie, "/api/restore-version", ask, headers)
      );
      const res = await post(url, cookie, "/api/restore-version", ask);
      const body = await res.json();
      const now = await store.get(h, { user });
      if (!write) {
        assert.equal(res.status, 403);
        assert.equal(body.error.code, "read_only");
        assert.equal(now.version, 3, "a read-only inspector saved");
        return;
      }
      assert.equal(res.status, 200);
      assert.deepEqual(body, { ok: true, handle: h, version: 4, restored_version: 1 });
      assert.deepEqual(now.state, { n: 1 });
      const log = await store.changesSince(h, 3, { user });
      assert.ok(!log.truncated);
      assert.equal(log.changes[0]?.writer, "inspect/test");
      assert.equal(log.changes[0]?.op, "save");
    });
  }
});

Deno.test("inspect http: a version past the retained history is history_unavailable, a stale restore is 409, and neither changes anything", async () => {
  await withInspector(true, async (url, store) => {
    const cookie = await login(url);
    const user = "alice";
    const h = await store.mint("doc", { n: 0 }, { user });
    for (let i = 1; i <= 3; i++) await store.patch(h, [SetKey("", "n", i)], { user });
    // Entries 3 and 4 are kept: the mint's is gone, version 2 is the oldest the store rebuilds.
    const state = async () => {
      const s = await store.get(h, { user });
      return { version: s.version, state: s.state };
    };
    const restore = (version: number, expect: number) =>
      post(url, cookie, "/api/restore-version", { handle: h, version, expect_version: expect });
    const before = await state();
    assert.deepEqual(before, { version: 4, state: { n: 3 } });
    const gone = await restore(1, 4);
    assert.equal(gone.status, 400);
    const { error } = await gone.json();
    assert.equal(error.code, "invalid_argument");
    assert.equal(error.reason, "history_unavailable");
    assert.equal(error.field, "version");
    assert.deepEqual(await state(), before);
    const stale = await restore(2, 3);
    assert.equal(stale.status, 409);
    const staleError = (await stale.json()).error;
    assert.equal(staleError.code, "stale_write");
    assert.equal(staleError.current_version, 4);
    assert.match(staleError.message, /^Not restored: version 4 was written/);
    assert.deepEqual(await state(), before);
    for (
      const bad of [
        { handle: h, version: 4, expect_version: 4 },
        { handle: h, version: 0, expect_version: 4 },
        { handle: h, version: "1", expect_version: 4 },
        { handle: h, version: 2 },
        { version: 2, expect_version: 4 },
      ]
    ) {
      const res = await post(url, cookie, "/api/restore-version", bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.equal((await res.json()).error.code, "invalid_argument");
    }
    assert.deepEqual(await state(), before);
    const ok = await restore(2, 4);
    assert.equal(ok.status, 200);
    assert.deepEqual(await state(), { version: 5, state: { n: 1 } });
  }, { history: { maxEntries: 2 } });
});

Deno.test("inspect http: the timeline of a handle whose mint entry retention dropped still shows the values each change replaced", async () => {
  await withInspector(false, async (url, store) => {
    const cookie = await login(url);
    const user = "alice";
    const h = await store.mint("doc", { n: 0, tags: ["a"] }, { user });
    await store.patch(h, [SetKey("", "n", 1)], { user });
    await store.save(h, { n: 2, tags: ["a"] }, { user, expectVersion: 2 });
    await store.save(h, { n: 2 }, { user, expectVersion: 3 });
    const res = await fetch(`${new URL(url).origin}/api/history?handle=${h}`, {
      headers: { cookie },
    });
    const t = await res.json();
    assert.equal(t.version, 4);
    assert.equal(t.from, 3);
    assert.equal(t.replayed, true);
    assert.equal(t.restorableFrom, 2);
    assert.deepEqual(t.entries.map((e: { version: number }) => e.version), [4, 3]);
    assert.deepEqual(t.entries[1].changes, [
      { kind: "changed", path: "/n", value: "2", old: "1" },
    ]);
    assert.deepEqual(t.entries[0].changes, [{ kind: "removed", path: "/tags", old: '["a"]' }]);
  }, { history: { maxEntries: 2 } });
});

Deno.test("inspect http: the timeline says what a share, an unshare and a transfer did", async () => {
  await withInspector(false, async (url, store) => {
    const cookie = await login(url);
    const h = await store.mint("doc", { n: 0 }, { user: "alice" });
    const g = await store.share(h, { user: "alice", to: "bob", rights: "append" });
    await store.unshare(g.grant, { user: "alice" });
    await store.share(h, { user: "alice", to: "*", rights: "read" });
    const res = await fetch(`${new URL(url).origin}/api/history?handle=${h}`, {
      headers: { cookie },
    });
    const t = await res.json();
    assert.deepEqual(
      t.entries.map((e: { op: string; event?: string; changes: unknown[] }) => [
        e.op,
        e.event,
        e.changes.length,
      ]),
      [
        ["share", "shared with anyone with the link (read)", 0],
        ["unshare", `ended the grant ${g.grant}`, 0],
        ["share", 'shared with "bob" (append)', 0],
        ["mint", undefined, 1],
      ],
    );
  });
});

Deno.test("inspect http: one patch or save that adds two items to a list shows each at its own index", async () => {
  await withInspector(false, async (url, store) => {
    const cookie = await login(url);
    const h = await store.mint("research", { sources: ["x"] }, { user: "alice" });
    await store.patch(h, [Append("sources", "a"), Append("sources", "b")], { user: "alice" });
    await store.save(h, { sources: ["x", "a", "b", "c", "d"] }, {
      user: "alice",
      expectVersion: 2,
    });
    const res = await fetch(`${new URL(url).origin}/api/history?handle=${h}`, {
      headers: { cookie },
    });
    const t = await res.json();
    const changes = (v: number) =>
      t.entries.find((e: { version: number }) => e.version === v).changes.map((
        c: { kind: string; path: string; value: string },
      ) => [c.kind, c.path, c.value]);
    assert.deepEqual(changes(2), [
      ["added", "/sources/1", '"a"'],
      ["added", "/sources/2", '"b"'],
    ]);
    assert.deepEqual(changes(3), [
      ["added", "/sources/3", '"c"'],
      ["added", "/sources/4", '"d"'],
    ]);
  });
});

Deno.test("inspect http: the API answers store errors with their code, and the script parses", async () => {
  await withInspector(false, async (url, store) => {
    const origin = new URL(url).origin;
    const cookie = await login(url);
    const get = (path: string) => fetch(origin + path, { headers: { cookie } });
    const missing = await get("/api/state?handle=note_aaaaaaaa");
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, "handle_not_found");
    const bad = await get("/api/handles?kind=NOT%20A%20KIND");
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, "invalid_argument");
    // Another user's handle is not found, as everywhere.
    const bobs = await store.mint("note", {}, { user: "bob" });
    assert.equal(
      (await (await get(`/api/state?handle=${bobs}`)).json()).error.code,
      "handle_not_found",
    );
    const js = await (await get("/app.js")).text();
    new Function(js); // a syntax error throws here
  });
});

Deno.test("inspect http: mcpstate inspect prints one line, serves with the binary's permissions, stops on SIGTERM", async () => {
  const home = await tempHome();
  try {
    const inspect = await startInspect(home, ["--backend", "memory://", "--user", "bob"]);
    assert.match(inspect.url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    const res = await fetch(inspect.url, { redirect: "manual" });
    await res.body?.cancel();
    const cookie = res.headers.get("set-cookie")!.split(";")[0]!;
    const info = await (await fetch(inspect.origin + "/api/info", { headers: { cookie } })).json();
    assert.equal(info.user, "bob");
    assert.equal(info.write, false);
    assert.match(info.writer, /^inspect\/.+/);
    const { code, stderr } = await inspect.stop();
    assert.equal(code, 0, stderr);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
