/**
 * End-to-end tests of key maintenance (SPEC 9.2) through the real
 * `mcpstate` process, on a SQLite file and on a real Redis server:
 * `mcpstate encrypt` seals a plaintext store with history, trash, expired
 * records and idempotency results, after which a store with keys reads
 * everything as before and no stored value holds a canary; killed with
 * SIGKILL midway and run again it finishes with nothing lost; a writer
 * without keys racing it loses no acknowledged patch; `mcpstate keys
 * rotate`, killed midway and run again, moves every data key to the new
 * key, and the old one leaves the ring; `mcpstate doctor` reports the key
 * ids in use and the plaintext left, before and after.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { Append, HandleStore, SetKey } from "../mod.ts";
import { parseKeyList } from "../src/keyring.ts";
import { mcpstate, type RunResult, spawnMcpstate, tempHome } from "./_cli_run.ts";
import { spawnChild } from "./_child.ts";
import { DAY, sleep, within } from "./_helpers.ts";
import { dumpRedis, startRedis } from "./_redis.ts";
import { sqliteFileCells } from "./_storage_scan.ts";

const kek = () => crypto.getRandomValues(new Uint8Array(32)).toBase64();
const K1 = `k1:${kek()}`, K2 = `k2:${kek()}`;

/** Where a test's data lives: its URL, and every value it stores, as text. */
interface Engine extends AsyncDisposable {
  url: string;
  dump(): Promise<{ where: string; what: string }[]>;
}

/** A new SQLite file in a private home. */
async function sqliteEngine(): Promise<Engine & { home: string }> {
  const home = await tempHome();
  const path = join(home, "state.db");
  return {
    home,
    url: `sqlite:///${path}`,
    dump: () =>
      Promise.resolve(
        sqliteFileCells(path).map((c) => ({ where: `${c.table}.${c.column}`, what: c.text })),
      ),
    async [Symbol.asyncDispose]() {
      await Deno.remove(home, { recursive: true }).catch(() => {});
    },
  };
}

/** A new Redis server. */
async function redisEngine(): Promise<Engine & { home: string }> {
  const srv = await startRedis();
  const home = await tempHome();
  return {
    home,
    url: srv.url,
    dump: () => dumpRedis([srv]),
    async [Symbol.asyncDispose]() {
      await srv[Symbol.asyncDispose]();
      await Deno.remove(home, { recursive: true }).catch(() => {});
    },
  };
}

const ENGINES = { sqlite: sqliteEngine, redis: redisEngine };

function ok(r: RunResult, what: string): void {
  assert.equal(r.code, 0, `${what} failed with exit ${r.code}:\n${r.stderr}\n${r.stdout}`);
}

/** `mcpstate ARGS --backend URL` with the keys `keys` (none: no keys). */
function run(e: Engine & { home: string }, args: string[], keys?: string) {
  return mcpstate(e.home, [...args, "--backend", e.url], {
    env: keys === undefined ? {} : { MCPSTATE_ENCRYPTION_KEYS: keys },
  });
}

/** The users' handles, written without keys: history, trash, an expired record, idempotency results. */
async function seed(url: string, users: string[], tag: string): Promise<void> {
  await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  await using past = await HandleStore.fromUrl(url, {
    reclaimIntervalMs: 0,
    clock: () => Date.now() - 2 * DAY,
  });
  for (const user of users) {
    const h = await store.mint("doc", { title: `${tag} title`, notes: [] }, {
      user,
      idempotencyKey: `mint-${user}`,
    });
    await store.save(h, { title: `${tag} saved`, notes: [`${tag} n1`] }, {
      user,
      expectVersion: 1,
    });
    await store.patch(h, [Append("notes", `${tag} n2`)], { user, idempotencyKey: `patch-${user}` });
    const t = await store.mint("doc", { bin: `${tag} trashed` }, { user });
    await store.patch(t, [SetKey("", "more", `${tag} more`)], { user });
    await store.revoke(t, { user });
    await past.mint("doc", { old: `${tag} expired` }, { user, ttlDays: 1 });
  }
}

/**
 * Everything the users' stores answer (read with `keys`, or none, and the
 * key store `keyStore`), and the seed's replays.
 */
async function snapshot(
  url: string,
  users: string[],
  tag: string,
  keys?: string,
  keyStore?: string,
) {
  const options = keys === undefined
    ? {}
    : { encryption: { ...parseKeyList(keys), ...(keyStore ? { keyStore } : {}) } };
  await using store = await HandleStore.fromUrl(url, { ...options, reclaimIntervalMs: 0 });
  const out: Record<string, unknown> = {};
  for (const user of users) {
    const list = await store.list(user, { includeExpired: true, previews: true });
    const handles = [];
    for (const info of list) {
      if (store.isExpired(info)) handles.push({ expired: info.handle });
      else {
        handles.push({
          snap: await store.get(info.handle, { user }),
          changes: await store.changesSince(info.handle, 0, { user }),
        });
      }
    }
    const mint = await store.mint("doc", { title: `${tag} title`, notes: [] }, {
      user,
      idempotencyKey: `mint-${user}`,
    });
    const patch = await store.patch(mint, [Append("notes", `${tag} n2`)], {
      user,
      idempotencyKey: `patch-${user}`,
    });
    out[user] = { list, handles, trash: (await store.trash(user)).handles, mint, patch };
  }
  return out;
}

/** The stored values that hold `needle`. */
async function holding(e: Engine, needle: string) {
  return (await e.dump()).filter((s) => s.what.includes(needle) || s.where.includes(needle));
}

/** The encryption check of `mcpstate doctor --json`. */
interface EncryptionCheck {
  check: string;
  status: string;
  fix?: string;
  details: {
    keyIds: Record<string, number>;
    plaintext: Record<"record" | "trash" | "entry" | "result" | "total", number>;
  };
}

/** The encryption check of `mcpstate doctor --json`, with the keys `keys` (or none). */
async function doctorCheck(e: Engine & { home: string }, keys?: string) {
  const r = await run(e, ["doctor", "--json"], keys);
  const checks = JSON.parse(r.stdout).checks as EncryptionCheck[];
  return checks.find((c) => c.check === "encryption")!;
}

/** Runs `mcpstate ARGS` until `ready()` holds, then kills it with SIGKILL. */
async function killWhen(
  e: Engine & { home: string },
  args: string[],
  keys: string,
  ready: () => Promise<boolean>,
): Promise<void> {
  const child = await spawnMcpstate(e.home, [...args, "--backend", e.url], {
    env: { MCPSTATE_ENCRYPTION_KEYS: keys },
  });
  const drain = Promise.all([child.stdout.cancel(), child.stderr.cancel()]);
  try {
    await within(
      60_000,
      "the run to get midway",
      (async () => {
        while (!await ready()) await sleep(50);
      })(),
    );
  } finally {
    child.kill("SIGKILL");
    const status = await child.status;
    await drain;
    assert.equal(status.signal, "SIGKILL", "the run was killed midway, not finished");
  }
}

for (const [name, make] of Object.entries(ENGINES)) {
  Deno.test(`cli encrypt: ${name} — a plaintext store with history, trash and idempotency results is encrypted; it reads the same with keys and no value holds a canary; doctor before and after`, async () => {
    await using e = await make();
    const tag = `canary${crypto.randomUUID().slice(0, 8)}`;
    const users = ["ann", "bob", "cy"];
    await seed(e.url, users, tag);
    const before = await snapshot(e.url, users, tag);
    assert.ok((await holding(e, tag)).length > 0);
    const off = await doctorCheck(e);
    assert.equal(off.status, "ok");
    const plain = await doctorCheck(e, K1);
    assert.equal(plain.status, "warn");
    assert.equal(plain.details.plaintext.total > 0, true);
    for (const k of ["record", "trash", "entry", "result"] as const) {
      assert.ok(plain.details.plaintext[k] > 0, `${k}: ${JSON.stringify(plain.details)}`);
    }
    const r = await run(e, ["encrypt", "--json"], K1);
    ok(r, "encrypt");
    const counts = JSON.parse(r.stdout);
    assert.equal(counts.ok, true);
    assert.equal(counts.encrypted.total, plain.details.plaintext.total);
    assert.deepEqual(await holding(e, tag), []);
    assert.deepEqual(await snapshot(e.url, users, tag, K1), before);
    const again = await run(e, ["encrypt"], K1);
    ok(again, "encrypt again");
    assert.match(again.stdout, /^Nothing to encrypt: /);
    const done = await doctorCheck(e, K1);
    assert.equal(done.status, "ok", JSON.stringify(done));
    assert.equal(done.details.plaintext.total, 0);
    assert.deepEqual(done.details.keyIds, { k1: users.length });
    const keyless = await doctorCheck(e);
    assert.equal(keyless.status, "warn");
    assert.deepEqual(keyless.details.keyIds, { k1: users.length });
    const ann = (before.ann as { list: { handle: string }[] }).list[0]!.handle;
    const noKey = await run(e, ["get", ann, "--user", "ann"]);
    assert.equal(noKey.code, 1, noKey.stderr);
    assert.match(noKey.stderr, /no_key/);
  });

  Deno.test(`cli encrypt: ${name} — killed with SIGKILL midway, run again, it finishes: nothing lost, nothing left in plaintext`, async () => {
    await using e = await make();
    const tag = `canary${crypto.randomUUID().slice(0, 8)}`;
    const users = Array.from({ length: 15 }, (_, i) => `user${String(i).padStart(2, "0")}`);
    await seed(e.url, users, tag);
    const before = await snapshot(e.url, users, tag);
    const sealed = async () =>
      (await e.dump()).filter((s) => s.what.includes("mse1.")).length >= 10;
    await killWhen(e, ["encrypt", "--rate", "20"], K1, sealed);
    const midway = await doctorCheck(e, K1);
    assert.ok(midway.details.plaintext.total > 0, "plaintext is left after the kill");
    assert.ok((await holding(e, tag)).length > 0);
    const r = await run(e, ["encrypt", "--json"], K1);
    ok(r, "encrypt after the kill");
    assert.equal(JSON.parse(r.stdout).left, 0);
    assert.deepEqual(await holding(e, tag), []);
    assert.deepEqual(await snapshot(e.url, users, tag, K1), before);
  });

  Deno.test(`cli encrypt: ${name} — a writer without keys patches while encrypt runs: every acknowledged patch is kept, then sealed`, async () => {
    await using e = await make();
    const tag = `canary${crypto.randomUUID().slice(0, 8)}`;
    const users = Array.from({ length: 10 }, (_, i) => `user${i}`);
    await seed(e.url, users, tag);
    const writer = "zz-writer";
    const h = await (async () => {
      await using store = await HandleStore.fromUrl(e.url, { reclaimIntervalMs: 0 });
      return await store.mint("log", { n: 0, log: [] }, { user: writer });
    })();
    const wtag = `w${crypto.randomUUID().slice(0, 8)}`;
    // A server's pace (a patch every 20 ms a loop, half of them under
    // idempotency keys): a writer that rewrote the handle faster than a
    // compare-and-set round trip would win every time.
    const child = spawnChild(["writers", e.url, writer, h, wtag, "2", "1", "forever", "20"]);
    const acked: string[] = [];
    try {
      assert.equal(await child.line("ready"), "ready");
      await child.send("go");
      while (acked.length < 10) acked.push((await child.line("an ack")).split(" ")[0]!);
      const collecting = (async () => {
        for (let line; (line = await child.stdout.next()) !== null;) {
          acked.push(line.split(" ")[0]!);
        }
      })();
      const beside = await run(e, ["encrypt", "--rate", "60"], K1);
      // A writer without keys either meets the sealed handle (no_key) or, with
      // a record cached from before (Redis), writes plaintext over it again:
      // either way nothing it acknowledged may be lost, and encrypt says so.
      if (beside.code !== 0) {
        assert.equal(beside.code, 1, beside.stderr);
        assert.match(beside.stderr, /a server without the keys is still writing/);
      }
      child.kill();
      await collecting;
    } finally {
      child.kill();
    }
    await child.ended();
    ok(await run(e, ["encrypt"], K1), "encrypt once the writer stopped");
    await using store = await HandleStore.fromUrl(e.url, {
      encryption: parseKeyList(K1),
      reclaimIntervalMs: 0,
    });
    const snap = await store.get<{ n: number; log: string[] }>(h, { user: writer });
    assert.ok(acked.length > 10);
    const log = new Set(snap.state.log);
    assert.deepEqual(acked.filter((a) => !log.has(a)), [], "every acknowledged patch is there");
    assert.equal(snap.state.n, snap.state.log.length);
    assert.equal(log.size, snap.state.log.length, "no patch is there twice");
    assert.equal(snap.version, snap.state.n + 1);
    const since = await store.changesSince(h, snap.version - 5, { user: writer });
    assert.ok(!since.truncated && since.changes.length === 5, "the last entries open");
    const census = await store.maintenance.census();
    assert.deepEqual(census.plaintext, { record: 0, trash: 0, entry: 0, result: 0 });
    assert.deepEqual(await holding(e, tag), []);
  });

  Deno.test(`cli keys rotate: ${name} — killed midway everything stays readable; run again, every data key is under the new key and the old one leaves the ring`, async () => {
    await using e = await make();
    const tag = `canary${crypto.randomUUID().slice(0, 8)}`;
    const users = Array.from({ length: 30 }, (_, i) => `user${String(i).padStart(2, "0")}`);
    await seed(e.url, users, tag);
    const before = await snapshot(e.url, users, tag);
    ok(await run(e, ["encrypt"], K1), "encrypt");
    const both = `${K2},${K1}`;
    const under = async (id: string) =>
      (await e.dump()).filter((s) =>
        (s.where === "data_keys.key_id" && s.what === id) ||
        (s.where.endsWith(":k") && s.what.startsWith(`["${id}"`))
      ).length;
    await killWhen(e, ["keys", "rotate", "--rate", "5"], both, async () => await under("k2") >= 3);
    const rotated = await under("k2");
    assert.ok(rotated >= 3 && rotated < users.length, `${rotated} rotated before the kill`);
    assert.deepEqual(await snapshot(e.url, users, tag, both), before, "readable midway");
    const midway = await doctorCheck(e, both);
    assert.equal(midway.status, "warn");
    assert.match(midway.fix ?? "", /keys rotate/);
    const r = await run(e, ["keys", "rotate"], both);
    ok(r, "keys rotate");
    assert.match(r.stdout, new RegExp(`Rewrapped ${users.length - rotated} data keys under k2`));
    assert.match(r.stdout, /k1 can leave the ring/);
    assert.deepEqual(await snapshot(e.url, users, tag, K2), before);
    const done = await doctorCheck(e, K2);
    assert.equal(done.status, "ok", JSON.stringify(done));
    assert.deepEqual(done.details.keyIds, { k2: users.length });
    const json = await run(e, ["keys", "rotate", "--json"], K2);
    ok(json, "keys rotate again");
    assert.deepEqual(
      [JSON.parse(json.stdout).rewrapped, JSON.parse(json.stdout).already],
      [0, users.length],
    );
    const old = await run(e, ["get", "x", "--user", "ann"], K1);
    assert.notEqual(old.code, 0);
  });
}

Deno.test("cli encrypt: without keys, encrypt and keys rotate are usage errors (exit 2, one line); keys needs rotate", async () => {
  const home = await tempHome();
  for (const args of [["encrypt"], ["keys", "rotate"], ["keys", "spin"], ["keys"]]) {
    const r = await mcpstate(home, [...args, "--backend", "memory://"]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
  await Deno.remove(home, { recursive: true });
});

Deno.test("cli encrypt: sqlite — with --key-store the data keys are made, counted and rotated in the key store", async () => {
  await using e = await sqliteEngine();
  const keysDb = join(e.home, "keys.db");
  const store = ["--key-store", `sqlite:///${keysDb}`];
  const tag = `canary${crypto.randomUUID().slice(0, 8)}`;
  const users = ["ann", "bob"];
  await seed(e.url, users, tag);
  const before = await snapshot(e.url, users, tag);
  ok(await run(e, ["encrypt", ...store], K1), "encrypt");
  assert.deepEqual(await holding(e, tag), []);
  const count = (path: string, id: string) => {
    const db = new DatabaseSync(path);
    try {
      return Number(db.prepare("SELECT count(*) AS n FROM data_keys WHERE key_id = ?").get(id)!.n);
    } finally {
      db.close();
    }
  };
  assert.deepEqual([count(keysDb, "k1"), count(join(e.home, "state.db"), "k1")], [2, 0]);
  const r = await run(e, ["keys", "rotate", ...store], `${K2},${K1}`);
  ok(r, "keys rotate");
  assert.match(r.stdout, /Rewrapped 2 data keys under k2/);
  assert.deepEqual([count(keysDb, "k2"), count(keysDb, "k1")], [2, 0]);
  const doctor = await run(e, ["doctor", "--json", ...store], K2);
  const check = (JSON.parse(doctor.stdout).checks as EncryptionCheck[])
    .find((c) => c.check === "encryption")!;
  assert.deepEqual([check.status, check.details.keyIds], ["ok", { k2: 2 }]);
  assert.deepEqual(await snapshot(e.url, users, tag, K2, `sqlite:///${keysDb}`), before);
});
