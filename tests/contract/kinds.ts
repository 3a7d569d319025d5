/**
 * Typed kinds: states validated by their kind's schema on every write, the
 * schema version kept with each record (through every write path, the
 * trash, export and import), and older states upcast when read.
 *
 * @module
 */

import assert from "node:assert/strict";
import { z } from "zod";
import { Append, type HandleStore, Increment, InvalidState, SetKey, toPayload } from "../../mod.ts";
import { freshUser, rejectsWith } from "../_helpers.ts";
import { group, step } from "./_group.ts";

const Research = z.object({
  sources: z.array(z.string()),
  notes: z.string().default(""),
});

/** Version 2 of research: each source is an object. */
const ResearchV2 = z.object({
  sources: z.array(z.object({ url: z.string(), read: z.boolean() })),
  notes: z.string(),
});

type ResearchV1 = z.output<typeof Research>;

function researchV2(store: HandleStore) {
  return store.kind("research", ResearchV2, {
    version: 2,
    upcast: {
      1: (s: ResearchV1) => ({ ...s, sources: s.sources.map((url) => ({ url, read: false })) }),
    },
  });
}

/** A kind whose rule spans two keys: a merge of two valid edits can break it. */
const Range = z.object({ lo: z.number(), hi: z.number() }).refine((r) => r.lo <= r.hi, {
  message: "lo must not exceed hi",
  path: ["lo"],
});

export default group("kinds", [], [
  step(
    "a typed kind round-trips its states and keeps the schema version with the record",
    async ({ store }) => {
      const user = freshUser();
      const research = store.kind("research", Research);
      const h = await research.mint({ sources: ["a"] }, { user, writer: "w" });
      const got = await research.get(h, { user });
      assert.deepEqual(got.state, { sources: ["a"], notes: "" }, "the schema's output is stored");
      assert.equal(got.schemaVersion, 1);
      assert.equal(toPayload(got).schema_version, 1);
      // The untyped view sees the same record, version included.
      const raw = await store.get(h, { user });
      assert.deepEqual(raw.state, got.state);
      assert.equal(raw.schemaVersion, 1);

      const saved = await research.save(h, { sources: ["a", "b"], notes: "x" }, {
        user,
        expectVersion: 1,
      });
      assert.equal(saved.version, 2);
      assert.equal(saved.schemaVersion, 1);
      const patched = await research.patch(h, [Append("sources", "c")], { user });
      assert.deepEqual(patched.state, { sources: ["a", "b", "c"], notes: "x" });
      assert.equal(patched.schemaVersion, 1);
      const read = await research.read(h, { user, maxBytes: 256 });
      assert.ok(!read.truncated && read.state.sources.length === 3);
      const paths = await research.read(h, { user, paths: ["/sources/2"] });
      assert.deepEqual(paths.values, { "/sources/2": "c" });

      // Listings read metadata only, and show no schema version on any backend.
      const listed = await store.list(user);
      assert.deepEqual(listed.map((i) => [i.handle, i.schemaVersion]), [[h, undefined]]);
      // A handle minted without a kind has no schema version, on the wire neither.
      const plain = await store.mint("note", { text: "t" }, { user });
      const p = await store.get(plain, { user });
      assert.equal(p.schemaVersion, undefined);
      assert.ok(!("schema_version" in toPayload(p)));
      // A view refuses a handle of another kind.
      await rejectsWith(() => research.get(plain, { user }), "invalid_argument");
      await rejectsWith(
        () => research.patch(plain, [SetKey("", "text", "u")], { user }),
        "invalid_argument",
      );
      assert.equal((await store.get(plain, { user })).version, 1);
    },
  ),
  step(
    "a state the schema rejects is invalid_state, with JSON Pointer issues, and nothing is written",
    async ({ store }) => {
      const user = freshUser();
      const research = store.kind("research", Research);
      const e = await rejectsWith(
        () => research.mint({ sources: [7] } as unknown as ResearchV1, { user }),
        "invalid_state",
      );
      assert.ok(e instanceof InvalidState);
      assert.deepEqual(e.details.kind, "research");
      assert.deepEqual((e.details.issues as { path: string }[]).map((i) => i.path), [
        "/sources/0",
      ]);
      assert.equal((await store.list(user)).length, 0, "no handle was minted");

      const h = await research.mint({ sources: [] }, { user });
      await rejectsWith(
        () =>
          research.save(h, { sources: "x" } as unknown as ResearchV1, { user, expectVersion: 1 }),
        "invalid_state",
      );
      const bad = await rejectsWith(
        () => research.patch(h, [Append("sources", "ok"), SetKey("", "notes", 3)], { user }),
        "invalid_state",
      );
      assert.deepEqual(bad.details.issues, [{
        path: "/notes",
        message: (bad.details.issues as { message: string }[])[0]!.message,
      }]);
      const after = await store.get(h, { user });
      assert.equal(after.version, 1, "neither the save nor the patch wrote");
      assert.deepEqual(after.state, { sources: [], notes: "" });
    },
  ),
  step(
    "a merging save is validated after the merge, inside the write",
    async ({ store }) => {
      const user = freshUser();
      const range = store.kind("range", Range);
      const h = await range.mint({ lo: 1, hi: 10 }, { user });
      // Two valid edits from version 1, on disjoint keys; together they break lo <= hi.
      await range.save(h, { lo: 1, hi: 3 }, { user, expectVersion: 1 });
      const e = await rejectsWith(
        () => range.save(h, { lo: 5, hi: 10 }, { user, expectVersion: 1, onConflict: "merge" }),
        "invalid_state",
      );
      assert.equal((e.details.issues as { path: string }[])[0]!.path, "/lo");
      const now = await store.get(h, { user });
      assert.deepEqual([now.version, now.state], [2, { lo: 1, hi: 3 }]);
      // A merge that keeps the rule lands.
      const ok = await range.save(h, { lo: 0, hi: 10 }, {
        user,
        expectVersion: 1,
        onConflict: "merge",
      });
      assert.equal(ok.merged, true);
      assert.deepEqual(ok.state, { lo: 0, hi: 3 });
    },
  ),
  step(
    "concurrent typed patches all land, each validated",
    async ({ store }) => {
      const user = freshUser();
      const counter = store.kind("counter", z.object({ n: z.number().int().max(20) }));
      const h = await counter.mint({ n: 0 }, { user });
      const results = await Promise.allSettled(
        Array.from({ length: 25 }, () => counter.patch(h, [Increment("", "n")], { user })),
      );
      const ok = results.filter((r) => r.status === "fulfilled").length;
      assert.equal(ok, 20, "the first 20 land, the rest would break the schema");
      for (const r of results) {
        if (r.status === "rejected") assert.equal(r.reason.code, "invalid_state");
      }
      const snap = await counter.get(h, { user });
      assert.deepEqual([snap.state.n, snap.version], [20, 21]);
    },
  ),
  step(
    "states written by an older schema version read upcast, and are written back upgraded",
    async ({ store, openStore }) => {
      const user = freshUser();
      const v1 = store.kind("research", Research);
      const v2 = researchV2(store);
      const h = await v1.mint({ sources: ["x"] }, { user });
      // Read: upcast, validated, while the record still says version 1.
      const read = await v2.get(h, { user });
      assert.deepEqual(read.state, { sources: [{ url: "x", read: false }], notes: "" });
      assert.equal(read.schemaVersion, 1);
      assert.deepEqual((await store.get(h, { user })).state, { sources: ["x"], notes: "" });
      // Next write: the ops apply to the upcast state; the record is upgraded.
      const p = await v2.patch(h, [Append("sources", { url: "y", read: true })], { user });
      assert.equal(p.schemaVersion, 2);
      const raw = await store.get(h, { user });
      assert.equal(raw.schemaVersion, 2);
      assert.deepEqual(raw.state, {
        sources: [{ url: "x", read: false }, { url: "y", read: true }],
        notes: "",
      });
      // An ops list that changes nothing still upgrades an old record (one write).
      const h2 = await v1.mint({ sources: [] }, { user });
      const same = await v2.patch(h2, [SetKey("", "notes", "")], { user });
      assert.deepEqual([same.version, same.schemaVersion], [2, 2]);
      const again = await v2.patch(h2, [SetKey("", "notes", "")], { user });
      assert.equal(again.version, 2, "an upgraded record that does not change is not written");

      // A handle written without a kind counts as version 1.
      const plain = await store.mint("research", { sources: ["p"], notes: "n" }, { user });
      assert.deepEqual((await v2.get(plain, { user })).state.sources, [{ url: "p", read: false }]);
      // A save (without history: the engine's one-step conditional write) stamps the version.
      const bare = await openStore({ history: false });
      try {
        const saved = await researchV2(bare).save(plain, { sources: [], notes: "" }, {
          user,
          expectVersion: 1,
        });
        assert.equal(saved.schemaVersion, 2);
        assert.equal((await bare.get(plain, { user })).schemaVersion, 2);
        // A plain save keeps the stored schema version.
        await bare.save(plain, { sources: [], notes: "z" }, { user, expectVersion: 2 });
        assert.equal((await bare.get(plain, { user })).schemaVersion, 2);
      } finally {
        await bare.close();
      }
    },
  ),
  step(
    "the schema version survives the trash, export and import",
    async ({ store, capabilities }) => {
      const user = freshUser();
      const v2 = researchV2(store);
      const h = await v2.mint({ sources: [], notes: "" }, { user });
      await store.revoke(h, { user });
      const back = await store.restore(h, { user });
      assert.equal(back.schemaVersion, 2);
      const records = [];
      for await (const r of store.exportRecords(user)) records.push(r);
      assert.equal(records.length, 1);
      assert.equal(records[0]!.schemaVersion, 2);
      if (!capabilities.importRecord) return;
      const other = freshUser();
      assert.equal((await store.importRecord(other, records[0]!)).outcome, "inserted");
      assert.equal((await store.get(h, { user: other })).schemaVersion, 2);
    },
  ),
]);
