/**
 * Identifiers: users, handles, kinds and writers outside ASCII round-trip
 * and page, and U+0000 is refused in every one of them.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  Append,
  type Backend,
  type HandleRecord,
  type HandleStore,
  Increment,
  SetKey,
} from "../../mod.ts";
import { DAY, freshUser, pageThrough, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

export default group("non-ASCII and identifiers", [], [
  step(
    "users and imported handles outside ASCII: get, save, patch, list across pages, revoke",
    async ({ store, backend, clock }) => {
      const id = crypto.randomUUID().slice(0, 8);
      const users = [
        `研究者-${id}`, // CJK
        `\u{1F600}\u{1F469}\u200D\u{1F4BB}-${id}`, // astral, with a zero-width joiner
        `e\u0301mile-${id}`, // a combining mark (NFD)
        `\u05DE\u05E9\u05EA\u05DE\u05E9-${id}`, // right to left (Hebrew)
      ];
      // Kinds outside [a-z0-9-] are never minted: only an import brings them.
      const kinds = ["研究", "\u{1F600}", "cafe\u0301", "\u0628\u062D\u062B", "note"];
      for (const user of users) {
        const minted = await store.mint("doc", { by: user }, { user, writer: "ノート/クロード" });
        assert.equal((await store.get(minted, { user })).lastWriter, "ノート/クロード");
        const imported: string[] = [];
        for (const kind of kinds) {
          clock.advance(10);
          const handle = `${kind}_${id}`;
          await write(backend, user, {
            handle,
            kind,
            state: JSON.stringify({ kind, n: 0 }),
            version: 1,
            createdAt: clock.now,
            updatedAt: clock.now,
            expiresAt: null,
            lastWriter: "\u05D9\u05D1\u05D5\u05D0", // an RTL writer
          });
          imported.push(handle);
        }
        for (const [i, h] of imported.entries()) {
          const s = await store.get(h, { user });
          assert.deepEqual([s.kind, s.version, s.state], [kinds[i], 1, { kind: kinds[i], n: 0 }]);
          assert.equal(s.lastWriter, "\u05D9\u05D1\u05D5\u05D0");
        }
        // Newest first: the imports in reverse, then the mint; every page
        // boundary (limit 1) puts a non-ASCII handle in the cursor.
        const order = [...imported].reverse().concat(minted);
        assert.deepEqual((await store.list(user)).map((x) => x.handle), order);
        for (const limit of [1, 2, 4]) {
          assert.deepEqual(await allPages(store, user, limit), order, `limit ${limit}`);
        }
        const [cjk, emoji] = imported as [string, string];
        clock.advance(10);
        const saved = await store.save(cjk, { n: 1 }, {
          user,
          expectVersion: 1,
          writer: "\u{1F916}",
        });
        assert.deepEqual([saved.version, saved.lastWriter], [2, "\u{1F916}"]);
        const patched = await store.patch(cjk, [Increment("", "n"), SetKey("", "研", "究")], {
          user,
        });
        assert.deepEqual([patched.version, patched.state], [3, { n: 2, 研: "究" }]);
        assert.equal((await store.list(user))[0]?.handle, cjk);
        // The same names under another user are another user's.
        const other = user.normalize("NFC") === user ? `${user}\u0301` : user.normalize("NFC");
        await rejectsWith(() => store.get(cjk, { user: other }), "handle_not_found");
        assert.deepEqual(await store.list(other), []);
        await store.revoke(emoji, { user });
        await rejectsWith(() => store.get(emoji, { user }), "handle_not_found");
        assert.deepEqual(
          await allPages(store, user, 1),
          order.filter((h) => h !== emoji && h !== cjk).toSpliced(0, 0, cjk),
        );
        assert.equal((await store.restore(emoji, { user })).version, 1);
        await store.revoke(emoji, { user });
      }
      // Handles that share one updatedAt are ordered by the handle alone: the
      // cursor's handle decides where the next page starts.
      const user = users[0]!;
      const tied = [...kinds, "a", "z", "é", "\u{10FFFF}"].map((k) => `${k}_${id}t`);
      clock.advance(10);
      for (const handle of tied) {
        await write(backend, user, {
          handle,
          kind: "tied",
          state: "{}",
          version: 1,
          createdAt: clock.now,
          updatedAt: clock.now,
          expiresAt: null,
          lastWriter: null,
        });
      }
      for (const limit of [1, 3]) {
        const top = (await allPages(store, user, limit)).slice(0, tied.length);
        assert.deepEqual(top.toSorted(), tied.toSorted(), `limit ${limit}`);
      }
    },
  ),
  step(
    "U+0000 in a user, handle, kind, writer, holder or key is invalid_argument; nothing is written",
    async ({ store }) => {
      const user = freshUser();
      const h = await store.mint("nul", { keep: true }, { user, writer: "w" });
      const before = await store.get(h, { user });
      const refused = async (what: string, fn: () => unknown) => {
        await rejectsWith(async () => await fn(), "invalid_argument")
          .catch((e) => assert.fail(`${what}: ${e}`));
      };
      const everyCall = (u: string, handle: string) =>
        ({
          mint: () => store.mint("nul", {}, { user: u }),
          get: () => store.get(handle, { user: u }),
          save: () => store.save(handle, {}, { user: u, expectVersion: 1 }),
          patch: () => store.patch(handle, [SetKey("", "x", 1)], { user: u }),
          touch: () => store.touch(handle, { user: u, ttlDays: 1 }),
          revoke: () => store.revoke(handle, { user: u }),
          restore: () => store.restore(handle, { user: u }),
          changesSince: () => store.changesSince(handle, 0, { user: u }),
          lease: () => store.lease(handle, { user: u, writer: "w", seconds: 5 }),
          release: () => store.release(handle, { user: u, writer: "w" }),
          watch: () => store.watch(handle, { user: u }),
          list: () => store.list(u),
          listPage: () => store.listPage(u),
          sweep: () => store.sweep(u),
        }) as Record<string, () => unknown>;
      for (const bad of [`${user}\0`, `${user}\0evil`, "\0", `\0${user}`]) {
        for (const [name, call] of Object.entries(everyCall(bad, h))) {
          await refused(`user ${JSON.stringify(bad)}, ${name}`, call);
        }
      }
      for (const bad of [`${h}\0`, `${h}\0x`, "\0"]) {
        const calls = everyCall(user, bad);
        for (const name of Object.keys(calls)) {
          if (["mint", "list", "listPage", "sweep"].includes(name)) continue;
          await refused(`handle ${JSON.stringify(bad)}, ${name}`, calls[name]!);
        }
      }
      for (const bad of ["nul\0", "\0"]) {
        await refused(`kind ${JSON.stringify(bad)}`, () => store.mint(bad, {}, { user }));
        await refused(
          `list kind ${JSON.stringify(bad)}`,
          () => store.listPage(user, { kind: bad }),
        );
      }
      for (const bad of ["w\0", "\0", "laptop/\0claude"]) {
        const writer = bad;
        await refused("mint writer", () => store.mint("nul", {}, { user, writer }));
        await refused("save writer", () => store.save(h, {}, { user, expectVersion: 1, writer }));
        await refused(
          "patch writer",
          () => store.patch(h, [SetKey("", "x", 1)], { user, writer }),
        );
        await refused("touch writer", () => store.touch(h, { user, ttlDays: 1, writer }));
        await refused("lease holder", () => store.lease(h, { user, writer, seconds: 5 }));
        await refused("release holder", () => store.release(h, { user, writer }));
      }
      for (const idempotencyKey of ["k\0", "\0", "\0".repeat(256)]) {
        await refused("mint key", () => store.mint("nul", {}, { user, idempotencyKey }));
        await refused(
          "save key",
          () => store.save(h, {}, { user, expectVersion: 1, idempotencyKey }),
        );
        await refused(
          "patch key",
          () => store.patch(h, [SetKey("", "x", 1)], { user, idempotencyKey }),
        );
        await refused("touch key", () => store.touch(h, { user, ttlDays: 1, idempotencyKey }));
        await refused("revoke key", () => store.revoke(h, { user, idempotencyKey }));
      }
      assert.deepEqual(await store.get(h, { user }), before);
      assert.deepEqual((await store.list(user)).map((x) => x.handle), [h]);
      // States hold U+0000 in keys and values, and it round-trips exactly.
      const state = { "\0": "a\0b", list: ["\0"] };
      const held = await store.mint("nul", state, { user, idempotencyKey: "k" });
      assert.deepEqual((await store.get(held, { user })).state, state);
      const p = await store.patch(held, [SetKey("", "k\0", "v\0"), Append("list", "\0\0")], {
        user,
      });
      assert.deepEqual((await store.get(held, { user })).state, p.state);
      assert.deepEqual(p.state, { "\0": "a\0b", list: ["\0", "\0\0"], "k\0": "v\0" });
    },
  ),
]);

/** The handles of {@link pageThrough}. */
async function allPages(store: HandleStore, user: string, limit: number): Promise<string[]> {
  return (await pageThrough(store, user, limit)).handles;
}

/**
 * Writes a record straight into the backend, as `mcpstate import` does:
 * through the backend's `importRecord` when it has one, else `insert` (kinds
 * outside `[a-z0-9-]` are never minted: only an import brings them).
 */
async function write(backend: Backend, user: string, record: HandleRecord): Promise<void> {
  const ctx = { now: record.updatedAt, graceMs: 7 * DAY };
  if (backend.records) assert.equal(await backend.records.import(user, record, ctx), "inserted");
  else assert.deepEqual(await backend.insert(user, record, ctx), { inserted: true });
}
