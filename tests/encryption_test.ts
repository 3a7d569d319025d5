/**
 * Encryption at rest on SQLite (SPEC 9.2), seen from the file: with keys, no
 * cell of any table holds a canary of a state, preview, changelog entry or
 * kept idempotency result; a ciphertext moved to another row reads
 * `tampered` and the failing call changes nothing; export writes plaintext
 * and import encrypts; a separate key store makes erase shred a copy; a
 * transfer leaves no cell holding a ciphertext of the old owner.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Append, HandleStore, type HandleStoreOptions, SetKey } from "../mod.ts";
import { SqliteBackend } from "../src/backends/sqlite.ts";
import { FakeClock, freshUser, rejectsWith, withTempDir } from "./_helpers.ts";
import { sqliteFileCells } from "./_storage_scan.ts";
import { transferScan } from "./_erase_scenario.ts";

const KEYS = { k1: crypto.getRandomValues(new Uint8Array(32)).toBase64() };

function holding(path: string, canaries: string[]) {
  return sqliteFileCells(path).filter((c) => canaries.some((x) => c.text.includes(x)));
}

async function open(path: string, options: HandleStoreOptions = {}) {
  return new HandleStore(await SqliteBackend.fromUrl(`sqlite:///${path}`), options);
}

Deno.test("encryption: no cell of any SQLite table holds a canary of states, previews, entries or idempotency results", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/enc.db`, user = freshUser("enc");
    const c = ["canary-title-q1", "canary-note-q2", "canary-patch-q3", "canary-save-q4"];
    {
      await using store = await open(path, { encryption: { keys: KEYS } });
      const h = await store.mint("doc", { title: c[0]!, notes: [c[1]!] }, {
        user,
        idempotencyKey: "mint-1",
      });
      await store.patch(h, [Append("notes", c[2]!)], { user, idempotencyKey: "patch-1" });
      const v = (await store.get(h, { user })).version;
      await store.save(h, { title: c[3]!, notes: [c[1]!, c[2]!] }, {
        user,
        expectVersion: v,
        idempotencyKey: "save-1",
      });
      const f = await store.fork(h, { user });
      await store.revoke(f, { user });
      // Replays answer the plaintext they kept sealed.
      const again = await store.mint("doc", { title: c[0]!, notes: [c[1]!] }, {
        user,
        idempotencyKey: "mint-1",
      });
      assert.equal(again, h);
      const snap = await store.get(h, { user });
      assert.deepEqual(snap.state, { title: c[3], notes: [c[1], c[2]] });
      const [row] = (await store.list(user, { previews: true })).filter((m) => m.handle === h);
      assert.match(row?.preview ?? "", /canary-save-q4/);
      const log = await store.changesSince(h, 0, { user });
      assert.ok(JSON.stringify(log).includes(c[2]!));
      // Export writes plaintext; import into another encrypted file seals.
      const exported = [];
      for await (const r of store.exportRecords(user)) exported.push(r);
      assert.ok(exported.some((r) => r.state.includes(c[3]!)));
      await using copy = await open(`${dir}/copy.db`, { encryption: { keys: KEYS } });
      for (const r of exported) await copy.importRecord(user, r);
      assert.deepEqual((await copy.get(h, { user })).state, snap.state);
    }
    assert.deepEqual(holding(path, c), []);
    assert.deepEqual(holding(`${dir}/copy.db`, c), []);
    // The control: without keys, the same writes leave the canaries in the file.
    {
      await using plain = await open(`${dir}/plain.db`);
      await plain.mint("doc", { title: c[0]! }, { user });
    }
    assert.ok(holding(`${dir}/plain.db`, c).length > 0);
  });
});

Deno.test("encryption: a ciphertext moved to another row reads tampered, and nothing is changed", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/moved.db`, user = freshUser("enc");
    const clock = new FakeClock();
    await using store = await open(path, { clock: clock.fn, encryption: { keys: KEYS } });
    const a = await store.mint("doc", { who: "a" }, { user });
    const b = await store.mint("doc", { who: "b" }, { user });
    const db = new DatabaseSync(path);
    try {
      db.prepare(
        "UPDATE handles SET state = (SELECT state FROM handles WHERE handle = ?) WHERE handle = ?",
      ).run(b, a);
      const before = db.prepare("SELECT * FROM handles WHERE handle = ?").get(a);
      const logBefore = db.prepare("SELECT count(*) AS n FROM changes WHERE handle = ?").get(a);
      for (
        const call of [
          () => store.get(a, { user }),
          () => store.patch(a, [SetKey("", "who", "c")], { user }),
          () => store.touch(a, { user, ttlDays: 3 }),
        ]
      ) {
        const e = await rejectsWith(call, "encryption_error");
        assert.equal(e.details.reason, "tampered");
      }
      assert.deepEqual(db.prepare("SELECT * FROM handles WHERE handle = ?").get(a), before);
      assert.deepEqual(
        db.prepare("SELECT count(*) AS n FROM changes WHERE handle = ?").get(a),
        logBefore,
      );
      assert.deepEqual((await store.get(b, { user })).state, { who: "b" });
    } finally {
      db.close();
    }
  });
});

Deno.test("encryption: with a separate key store, erase leaves a copy taken before it unreadable", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/data.db`, user = freshUser("shred");
    const encryption = { keys: KEYS, keyStore: `sqlite:///${dir}/keys.db` };
    let h: string;
    {
      await using store = await open(path, { encryption });
      h = await store.mint("doc", { a: "gone" }, { user });
    }
    await Deno.copyFile(path, `${dir}/backup.db`);
    {
      await using store = await open(path, { encryption });
      assert.equal(sqliteFileCells(path).filter((c) => c.table === "data_keys").length, 0);
      assert.equal(
        sqliteFileCells(`${dir}/keys.db`).filter((c) => c.table === "data_keys").length,
        4,
      );
      await store.erase(user);
    }
    await using backup = await open(`${dir}/backup.db`, { encryption });
    const e = await rejectsWith(() => backup.get(h, { user }), "encryption_error");
    assert.equal(e.details.reason, "no_key");
  });
});

Deno.test("encryption: concurrent patches from two connections all land, each sealed", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/race.db`, user = freshUser("race");
    await using a = await open(path, { encryption: { keys: KEYS } });
    await using b = await open(path, { encryption: { keys: KEYS } });
    const h = await a.mint("doc", { n: [] }, { user });
    await Promise.all(
      Array.from(
        { length: 40 },
        (_, i) => (i % 2 ? a : b).patch(h, [Append("n", i)], { user, writer: `w${i % 2}` }),
      ),
    );
    const snap = await b.get(h, { user });
    assert.equal(snap.version, 41);
    assert.deepEqual((snap.state.n as number[]).toSorted((x, y) => x - y), [
      ...Array(40).keys(),
    ]);
    const log = await a.changesSince(h, 0, { user });
    assert.ok(!log.truncated);
    assert.equal(log.changes.length, 41);
  });
});

Deno.test("encryption: a transfer leaves no cell holding a ciphertext of the old owner", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/transfer.db`, url = `sqlite:///${path}`;
    await transferScan({
      url,
      open: () => SqliteBackend.fromUrl(url),
      dump: () =>
        Promise.resolve(sqliteFileCells(path).map((c) => ({ where: c.table, what: c.text }))),
    });
  });
});
