import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { HandleStore, Increment, SetKey } from "../mod.ts";
import type { HandleRecord, WriteContext } from "../src/backend.ts";
import { DenoKvBackend, parseDenoKvUrl } from "../src/backends/denokv.ts";
import { backendContract, FakeClock, freshUser, rejectsWith } from "./contract.ts";

const DAY = 86_400_000;
const MIB = 1_048_576;
const dir = Deno.makeTempDirSync({ prefix: "mcpstate-denokv-" });
const child = fileURLToPath(new URL("./_denokv_child.ts", import.meta.url));

// One Deno.Kv per opened store: like separate processes on one file.
backendContract("denokv file", (opts) => HandleStore.fromUrl(`denokv:///${dir}/contract.kv`, opts));

// Every store the suite opens shares one in-memory Deno.Kv.
const sharedKv = await Deno.openKv(":memory:");
backendContract(
  "denokv :memory:",
  (opts) => Promise.resolve(new HandleStore(new DenoKvBackend(sharedKv), opts)),
);

/** All keys under a prefix. */
async function keysOf(kv: Deno.Kv, prefix: Deno.KvKey): Promise<Deno.KvKey[]> {
  const out: Deno.KvKey[] = [];
  for await (const e of kv.list({ prefix })) out.push(e.key);
  return out;
}

/** The distinct chunk-set ids stored for a user. */
async function chunkSets(kv: Deno.Kv, user: string): Promise<Set<unknown>> {
  return new Set((await keysOf(kv, ["mcpstate", "u", user, "c"])).map((k) => k[5]));
}

/** A state whose compact JSON is exactly `bytes` bytes of UTF-8, made of `pattern` then ASCII. */
function stateOfBytes(bytes: number, pattern = ""): { s: string } {
  const enc = new TextEncoder();
  let body = "";
  let size = enc.encode(JSON.stringify({ s: "" })).length;
  if (pattern) {
    const unit = enc.encode(pattern).length;
    const reps = Math.floor((bytes - size) / unit) - 1;
    body = pattern.repeat(Math.max(0, reps));
    size += unit * Math.max(0, reps);
  }
  body += "a".repeat(bytes - size);
  const state = { s: body };
  assert.equal(enc.encode(JSON.stringify(state)).length, bytes);
  return state;
}

async function openFileKv(name: string): Promise<Deno.Kv> {
  return await Deno.openKv(`${dir}/${name}`);
}

Deno.test("a 1 MiB and a 1 MiB - 1 byte state round-trip, ASCII and multi-byte UTF-8", async () => {
  const kv = await openFileKv("big.kv");
  const store = new HandleStore(new DenoKvBackend(kv));
  try {
    const user = freshUser();
    for (const pattern of ["", "é€😀x", "😀"]) {
      for (const size of [MIB, MIB - 1]) {
        const state = stateOfBytes(size, pattern);
        const h = await store.mint("big", state, { user });
        assert.deepEqual((await store.get(h, { user })).state, state);
        // A second, fresh connection to the file reads the same bytes.
        await using other = await HandleStore.fromUrl(`denokv:///${dir}/big.kv`);
        assert.equal(JSON.stringify((await other.get(h, { user })).state), JSON.stringify(state));
        // A new version of the same size replaces it; a reader sees one version only.
        const next = stateOfBytes(size, pattern ? "ü" : "b");
        const s = await store.save(h, next, { user, expectVersion: 1 });
        assert.equal(s.version, 2);
        assert.deepEqual((await other.get(h, { user })).state, next);
      }
    }
    // Every superseded chunk set was deleted by the head swap that replaced it.
    assert.equal((await chunkSets(kv, user)).size, 6);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
  } finally {
    await store.close();
    kv.close();
  }
});

Deno.test("states at the inline limit and one byte over round-trip with the longest metadata", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  try {
    const writer = "é".repeat(256);
    const kind = "k" + "-".repeat(31);
    // The longest user and idempotency key kept as key parts, and longer ones (hashed).
    const cases = [["ü".repeat(200), "k".repeat(190)], ["ü".repeat(1024), "é".repeat(244)]];
    for (const [user, key] of cases as [string, string][]) {
      for (const size of [63_487, 63_488, 63_489, 65_536, 65_537]) {
        for (const pattern of ["", "é"]) {
          const state = stateOfBytes(size, pattern);
          const h = await store.mint(kind, state, {
            user,
            writer,
            ttlDays: 1,
            idempotencyKey: key + size + pattern,
            randomChars: 64,
          });
          const again = await store.mint(kind, state, {
            user,
            writer,
            ttlDays: 1,
            idempotencyKey: key + size + pattern,
            randomChars: 64,
          });
          assert.equal(again, h);
          const s = await store.get(h, { user });
          assert.deepEqual(s.state, state);
          assert.equal(s.lastWriter, writer);
          const p = await store.patch(h, [SetKey("", "t", 1)], {
            user,
            writer,
            idempotencyKey: key + "p" + size + pattern,
          });
          assert.deepEqual(
            await store.patch(h, [SetKey("", "t", 1)], {
              user,
              writer,
              idempotencyKey: key + "p" + size + pattern,
            }),
            p,
          );
        }
      }
    }
  } finally {
    await store.close();
    kv.close();
  }
});

Deno.test("large states: chunk sets are released on replace, kept on touch, deleted on revoke and sweep", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  try {
    const user = freshUser();
    const h = await store.mint("big", stateOfBytes(300_000, "é"), { user, ttlDays: 1 });
    const [first] = await chunkSets(kv, user);
    await store.touch(h, { user, ttlDays: 2 });
    assert.deepEqual([...await chunkSets(kv, user)], [first]);
    const patched = await store.patch(h, [SetKey("", "n", 1)], { user });
    assert.equal(patched.version, 3);
    const sets = await chunkSets(kv, user);
    assert.equal(sets.size, 1);
    assert.ok(!sets.has(first));
    await store.revoke(h, { user });
    assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user]), []);

    const e = await store.mint("big", stateOfBytes(200_000), { user, ttlDays: 1 });
    clock.advance(DAY + 1);
    await rejectsWith(() => store.get(e, { user }), "handle_expired");
    assert.equal(await store.sweep(), 1);
    await rejectsWith(() => store.get(e, { user }), "handle_not_found");
    // Nothing of the user is left but the registry of user names.
    assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user]), []);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xh"]), []);
  } finally {
    await store.close();
    kv.close();
  }
});

Deno.test("a state of more than 48 chunks is written, replaced, revoked and collected", async () => {
  const kv = await Deno.openKv(":memory:");
  const store = new HandleStore(new DenoKvBackend(kv), { maxStateBytes: 4 * MIB });
  try {
    const user = freshUser();
    const a = stateOfBytes(3.5 * MIB, "€");
    const h = await store.mint("huge", a, { user });
    assert.equal((await keysOf(kv, ["mcpstate", "u", user, "c"])).length, 56);
    assert.deepEqual((await store.get(h, { user })).state, a);
    const b = stateOfBytes(3.5 * MIB - 7, "ß");
    await store.save(h, b, { user, expectVersion: 1 });
    assert.deepEqual((await store.get(h, { user })).state, b);
    assert.equal((await chunkSets(kv, user)).size, 1);
    await store.revoke(h, { user });
    assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user]), []);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
  } finally {
    await store.close();
    kv.close();
  }
});

Deno.test("idempotent writes of large states replay exactly; their copies are reclaimed", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const store = new HandleStore(new DenoKvBackend(kv), { clock: clock.fn });
  try {
    const user = freshUser();
    const h = await store.mint("big", stateOfBytes(500_000, "é"), { user, idempotencyKey: "m" });
    const p1 = await store.patch(h, [Increment("", "n")], { user, idempotencyKey: "p1" });
    await store.patch(h, [Increment("", "n", 10)], { user });
    assert.deepEqual(
      await store.patch(h, [Increment("", "n")], { user, idempotencyKey: "p1" }),
      p1,
    );
    const cur = await store.get<{ n: number }>(h, { user });
    assert.equal(cur.state.n, 11);
    const s1 = await store.save(h, stateOfBytes(400_000), {
      user,
      expectVersion: 3,
      idempotencyKey: "s1",
    });
    await store.patch(h, [SetKey("", "z", 1)], { user });
    assert.deepEqual(
      await store.save(h, stateOfBytes(400_000), { user, expectVersion: 3, idempotencyKey: "s1" }),
      s1,
    );
    assert.ok((await keysOf(kv, ["mcpstate", "u", user, "q"])).length > 0);
    clock.advance(DAY + 1);
    await store.sweep(user);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "k"]), []);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "q"]), []);
    assert.equal((await store.get(h, { user })).version, 5);
  } finally {
    await store.close();
    kv.close();
  }
});

Deno.test("users and handles that cannot be key parts as they are stay apart", async () => {
  const kv = await Deno.openKv(":memory:");
  const store = new HandleStore(new DenoKvBackend(kv));
  try {
    // Names too long for a key part are hashed; they must stay apart.
    const users = [
      "a\ufffd",
      "é".repeat(1024),
      "é".repeat(1023) + "e",
      "x".repeat(1024),
    ];
    const handles = new Map<string, string>();
    for (const user of users) {
      handles.set(user, await store.mint("own", { user }, { user, idempotencyKey: "same" }));
    }
    for (const user of users) {
      const mine = handles.get(user)!;
      assert.deepEqual((await store.get(mine, { user })).state, { user });
      assert.deepEqual((await store.list(user)).map((i) => i.handle), [mine]);
      for (const other of users) {
        if (other === user) continue;
        await rejectsWith(() => store.get(mine, { user: other }), "handle_not_found");
      }
    }
    const backend = store.backend;
    const listed: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await backend.listUsers!({
        limit: 2,
        ...(after === undefined ? {} : { after }),
      });
      listed.push(...page);
      if (page.length < 2) break;
      after = page[page.length - 1];
    }
    assert.deepEqual([...listed].sort(), [...users].sort());
    assert.equal(new Set(listed).size, users.length);
    // A lone-surrogate handle is refused before it could alias a real one.
    await rejectsWith(() => store.get("own_\ud800", { user: users[0]! }), "invalid_argument");
  } finally {
    await store.close();
    kv.close();
  }
});

Deno.test("restore() inserts, replaces an older version, and keeps a newer one", async () => {
  const kv = await Deno.openKv(":memory:");
  const backend = new DenoKvBackend(kv);
  try {
    const user = freshUser();
    const ctx: WriteContext = { now: 1_000, graceMs: 0 };
    const rec = (version: number, state: string): HandleRecord => ({
      handle: "note_abcdefgh",
      kind: "note",
      state,
      version,
      createdAt: 10,
      updatedAt: 100 + version,
      expiresAt: null,
      lastWriter: "import",
    });
    assert.equal(
      await backend.restore(user, rec(3, JSON.stringify(stateOfBytes(90_000))), ctx),
      "inserted",
    );
    assert.equal(await backend.restore(user, rec(2, '{"old":1}'), ctx), "kept");
    assert.equal(await backend.restore(user, rec(5, '{"new":1}'), ctx), "replaced");
    assert.deepEqual(await backend.read(user, "note_abcdefgh"), rec(5, '{"new":1}'));
    assert.equal((await backend.list(user, { limit: 10 }))[0]!.version, 5);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "u", user, "c"]), []);
    assert.deepEqual(await backend.listUsers({ limit: 10 }), [user]);
  } finally {
    await backend.close();
    kv.close();
  }
});

async function run(args: string[], flags = ["--unstable-kv"]): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", ...flags, child, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, `child failed: ${new TextDecoder().decode(out.stderr)}`);
  return text;
}

Deno.test("16 writers in 2 processes on one KV file all land", async () => {
  const file = `${dir}/writers.kv`;
  const user = freshUser();
  const perWriter = 30;
  let locked = 0;
  for (const size of [0, 100_000]) {
    let h: string;
    {
      await using store = await HandleStore.fromUrl(`denokv:///${file}`);
      h = await store.mint("counter", { n: 0, log: [], pad: "p".repeat(size) }, { user });
    }
    const rounds = size ? 6 : perWriter;
    const outs = await Promise.all(
      ["A", "B"].map((tag) => run(["patch", file, user, h, "8", String(rounds), tag])),
    );
    for (const o of outs) assert.match(o, /done locked=\d+/);
    locked += outs.reduce((n, o) => n + Number(/locked=(\d+)/.exec(o)?.[1]), 0);
    await using store = await HandleStore.fromUrl(`denokv:///${file}`);
    const s = await store.get<{ n: number; log: string[] }>(h, { user });
    assert.equal(s.state.n, 16 * rounds);
    assert.equal(s.state.log.length, 16 * rounds);
    assert.equal(new Set(s.state.log).size, 16 * rounds);
    assert.equal(s.version, 1 + 16 * rounds);
  }
  // Informational: how often the other process held the file's lock.
  console.log(`"database is locked" answers retried: ${locked}`);
  const kv = await Deno.openKv(file);
  try {
    // Losers released their chunk sets: only the head's is left.
    assert.equal((await chunkSets(kv, user)).size, 1);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
  } finally {
    kv.close();
  }
});

Deno.test("a writer killed between its chunk writes and the head swap leaves the previous version", async (t) => {
  for (const stage of ["swap", "chunks"]) {
    await t.step(
      `killed at the ${stage === "swap" ? "head swap" : "second chunk commit"}`,
      async () => {
        const file = `${dir}/kill-${stage}.kv`;
        const user = freshUser();
        const before = stateOfBytes(MIB, "é");
        let h: string;
        {
          await using store = await HandleStore.fromUrl(`denokv:///${file}`);
          h = await store.mint("big", before, { user });
        }
        const proc = new Deno.Command(Deno.execPath(), {
          args: ["run", "--allow-all", "--unstable-kv", child, "pause", file, user, h, stage, "z"],
          stdout: "piped",
          stderr: "null",
        }).spawn();
        const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
        let seen = "";
        while (!seen.includes("paused")) {
          const { value, done } = await reader.read();
          if (done) break;
          seen += value;
        }
        assert.match(seen, /paused/);
        proc.kill("SIGKILL");
        const status = await proc.status;
        assert.equal(status.signal, "SIGKILL");
        await reader.cancel().catch(() => {});

        const kv = await Deno.openKv(file);
        const store = new HandleStore(new DenoKvBackend(kv));
        try {
          const s = await store.get(h, { user });
          assert.equal(s.version, 1);
          assert.deepEqual(s.state, before);
          // The killed writer left an announced, unadopted chunk set.
          assert.equal((await keysOf(kv, ["mcpstate", "xw"])).length, 1);
          assert.equal((await chunkSets(kv, user)).size, 2);
          // Too young to collect: a writer could still be about to adopt it.
          await store.sweep();
          assert.equal((await chunkSets(kv, user)).size, 2);
          // Later (here: with no minimum age) sweep collects it.
          const late = new DenoKvBackend(kv, { orphanAgeMs: 0 });
          assert.equal(await late.sweep(null, 0, Date.now()), 0);
          assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
          assert.equal((await chunkSets(kv, user)).size, 1);
          assert.deepEqual((await store.get(h, { user })).state, before);
          const next = stateOfBytes(MIB, "ö");
          assert.equal((await store.save(h, next, { user, expectVersion: 1 })).version, 2);
          assert.deepEqual((await store.get(h, { user })).state, next);
          assert.equal((await chunkSets(kv, user)).size, 1);
        } finally {
          await store.close();
          kv.close();
        }
      },
    );
  }
});

Deno.test("a sweeper collecting orphans at age 0 never breaks concurrent large writes", async () => {
  const kv = await Deno.openKv(`${dir}/sweeper.kv`);
  const store = new HandleStore(new DenoKvBackend(kv));
  const sweeper = new DenoKvBackend(kv, { orphanAgeMs: 0 });
  // A backend per writer, so that they race instead of taking turns.
  const writers = Array.from({ length: 4 }, () => new HandleStore(new DenoKvBackend(kv)));
  try {
    const user = freshUser();
    const h = await store.mint("big", { n: 0, pad: "p".repeat(150_000) }, { user });
    let stop = false;
    const sweeping = (async () => {
      let n = 0;
      while (!stop) {
        await sweeper.sweep(null, 0, Date.now());
        n++;
      }
      return n;
    })();
    await Promise.all(writers.map(async (w) => {
      for (let i = 0; i < 10; i++) await w.patch(h, [Increment("", "n")], { user });
    }));
    stop = true;
    assert.ok(await sweeping > 0);
    const s = await store.get<{ n: number; pad: string }>(h, { user });
    assert.equal(s.state.n, 40);
    assert.equal(s.state.pad.length, 150_000);
    await sweeper.sweep(null, 0, Date.now());
    assert.equal((await chunkSets(kv, user)).size, 1);
    assert.deepEqual(await keysOf(kv, ["mcpstate", "xw"]), []);
  } finally {
    for (const w of writers) await w.close();
    await store.close();
    kv.close();
  }
});

Deno.test("denokv URLs: forms, KV Connect token handling and redaction (no live endpoint)", async (t) => {
  await t.step("local and remote forms", () => {
    assert.deepEqual(parseDenoKvUrl("denokv:///:memory:"), { kind: "memory", path: ":memory:" });
    assert.deepEqual(parseDenoKvUrl("denokv:////var/lib/s.kv"), {
      kind: "file",
      path: "/var/lib/s.kv",
    });
    assert.deepEqual(parseDenoKvUrl("denokv:///rel/s.kv"), { kind: "file", path: "rel/s.kv" });
    const home = Deno.env.get("HOME");
    assert.deepEqual(parseDenoKvUrl("denokv:///~/.mcpstate/state.kv"), {
      kind: "file",
      path: `${home}/.mcpstate/state.kv`,
    });
    assert.deepEqual(parseDenoKvUrl("denokv+https://kv.example.com/db/1?x=y"), {
      kind: "remote",
      path: "https://kv.example.com/db/1?x=y",
    });
    assert.deepEqual(parseDenoKvUrl("DENOKV+HTTP://127.0.0.1:4512"), {
      kind: "remote",
      path: "http://127.0.0.1:4512/",
    });
  });

  await t.step("malformed URLs are invalid_argument, credentials redacted", async () => {
    for (const bad of ["denokv://host/x.kv", "denokv:///", "denokv+https://", "denokv+ftp://x"]) {
      await rejectsWith(() => DenoKvBackend.fromUrl(bad), "invalid_argument");
    }
    await rejectsWith(() => DenoKvBackend.fromUrl("denokv:///x.kv?mode=rw"), "invalid_argument");
    const e = await rejectsWith(
      () => HandleStore.fromUrl("denokv+https://admin:hunter2@kv.example.com/db"),
      "invalid_argument",
    );
    assert.ok(!e.message.includes("hunter2"), e.message);
    assert.ok(!e.message.includes("admin"), e.message);
    assert.match(e.message, /denokv\+https:\/\/\*\*\*@kv\.example\.com/);
    assert.match(e.message, /DENO_KV_ACCESS_TOKEN/);
  });

  const saved = Deno.env.get("DENO_KV_ACCESS_TOKEN");
  try {
    await t.step("a missing DENO_KV_ACCESS_TOKEN is a clear invalid_argument", async () => {
      Deno.env.delete("DENO_KV_ACCESS_TOKEN");
      const e = await rejectsWith(
        () => HandleStore.fromUrl("denokv+https://kv.example.com/db?k=v"),
        "invalid_argument",
      );
      assert.match(e.message, /DENO_KV_ACCESS_TOKEN/);
      assert.match(e.message, /https:\/\/kv\.example\.com\/db/);
    });

    await t.step("the token goes to the endpoint as a bearer and never into messages", async () => {
      const token = "tok-" + crypto.randomUUID();
      Deno.env.set("DENO_KV_ACCESS_TOKEN", token);
      const seen: { path: string; auth: string | null }[] = [];
      let status = 401;
      await using server = Deno.serve(
        { hostname: "127.0.0.1", port: 0, onListen: () => {} },
        (req) => {
          seen.push({ path: new URL(req.url).pathname, auth: req.headers.get("authorization") });
          // A chatty endpoint that echoes the token it was given.
          return new Response(`bad token ${req.headers.get("authorization")}`, { status });
        },
      );
      const base = `denokv+http://127.0.0.1:${server.addr.port}/kv/db1?session=s3cr3t`;
      const refused = await rejectsWith(() => HandleStore.fromUrl(base), "backend_error");
      assert.deepEqual(seen, [{ path: "/kv/db1", auth: `Bearer ${token}` }]);
      assert.ok(!refused.message.includes(token), refused.message);
      assert.ok(!refused.message.includes("s3cr3t"), refused.message);
      assert.match(refused.message, /refused the access token/);
      assert.match(refused.message, /DENO_KV_ACCESS_TOKEN/);
      status = 500;
      const failed = await rejectsWith(() => HandleStore.fromUrl(base), "backend_error");
      assert.ok(!failed.message.includes(token), failed.message);
      assert.ok(!failed.message.includes("s3cr3t"), failed.message);
      assert.match(failed.message, /Could not open Deno KV at http:\/\/127\.0\.0\.1:\d+\/kv\/db1/);
    });
  } finally {
    if (saved === undefined) Deno.env.delete("DENO_KV_ACCESS_TOKEN");
    else Deno.env.set("DENO_KV_ACCESS_TOKEN", saved);
  }
});

Deno.test("without --unstable-kv a denokv URL is a clear invalid_argument; importing needs no flag", async () => {
  const out = JSON.parse(await run(["nokv"], []));
  assert.equal(out.openKv, "undefined");
  assert.equal(out.code, "invalid_argument");
  assert.match(out.message, /--unstable-kv/);
  assert.match(out.message, /"unstable": \["kv"\]/);
});

Deno.test("denokv tests: clean up", async () => {
  sharedKv.close();
  await Deno.remove(dir, { recursive: true });
});
