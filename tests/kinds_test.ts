/**
 * Typed kinds in the library: the compiler holds states to their schema
 * (files that must and must not type-check, run through `deno check`), and
 * the rules that hold whatever the backend (options, schemas of any library,
 * asynchronous schemas, upcasts that fail, unbound kinds). The round trips
 * on every backend are the contract suite's `kinds` group.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import {
  Append,
  defineKind,
  HandleStore,
  InvalidState,
  SetKey,
  type StandardSchemaV1,
} from "../mod.ts";
import { rejectsWith } from "./_helpers.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MOD = new URL("../mod.ts", import.meta.url).href;

/** What every type-level file starts with: a typed `research` kind. */
const PRELUDE = `
import { z } from "zod";
import { Append, defineKind, HandleStore, type Kind } from "${MOD}";
const store = await HandleStore.fromUrl("memory://");
const research = store.kind(
  "research",
  z.object({ sources: z.array(z.string()), notes: z.string().default("") }),
);
const h = await research.mint({ sources: [] }, { user: "u" });
const snap = await research.get(h, { user: "u" });
`;

/** Files that must type-check. */
const GOOD = `${PRELUDE}
const notes: string = snap.state.notes; // the output type: the default makes it present
const sources: string[] = snap.state.sources;
const saved = await research.save(h, { sources: ["a"] }, { user: "u", expectVersion: snap.version });
saved.state.notes satisfies string;
const patched = await research.patch(h, [Append("sources", "b")], { user: "u" });
patched.state.sources satisfies string[];
const read = await research.read(h, { user: "u", maxBytes: 4096 });
if (!read.truncated) read.state.sources satisfies string[];
const paths = await research.read(h, { user: "u", paths: ["/sources/0"] });
paths.values satisfies Record<string, unknown>;
const counter: Kind<{ n: number }, { n: number }> = defineKind("counter", z.object({ n: z.number() }));
export { counter, notes, sources };
`;

/** Files that must not type-check, each for one reason. */
const BAD: Record<string, string> = {
  "mint_wrong_item.ts": `${PRELUDE}await research.mint({ sources: [1] }, { user: "u" });\n`,
  "mint_missing_key.ts": `${PRELUDE}await research.mint({ notes: "x" }, { user: "u" });\n`,
  "save_wrong_type.ts":
    `${PRELUDE}await research.save(h, { sources: "a" }, { user: "u", expectVersion: 1 });\n`,
  "read_wrong_type.ts": `${PRELUDE}const n: number = snap.state.notes;\nexport { n };\n`,
  "read_unknown_key.ts": `${PRELUDE}snap.state.title;\n`,
};

async function denoCheck(files: string[]): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    // A file outside the project needs the project's config for its import map.
    args: ["check", "--quiet", "--no-lock", "--config", `${ROOT}deno.json`, ...files],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, output: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

Deno.test("types: a typed kind's methods take the schema's input and return its output", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "mcpstate-kinds-types-" });
  try {
    await t.step("a file that uses the shapes right type-checks", async () => {
      const good = `${dir}/good.ts`;
      await Deno.writeTextFile(good, GOOD);
      const r = await denoCheck([good]);
      assert.equal(r.code, 0, r.output);
    });
    await t.step("each file with a state of the wrong shape fails to type-check", async () => {
      const files = Object.keys(BAD).map((name) => `${dir}/${name}`);
      for (const [name, text] of Object.entries(BAD)) {
        await Deno.writeTextFile(`${dir}/${name}`, text);
      }
      // One run checks them all (a run costs seconds); each file must have its own error.
      const r = await denoCheck(files);
      assert.notEqual(r.code, 0, r.output);
      for (const name of Object.keys(BAD)) {
        assert.match(
          r.output,
          new RegExp(`TS\\d{4}[\\s\\S]*?${name.replace(".", "\\.")}:\\d+`),
          `${name} type-checked, but its state has the wrong shape:\n${r.output}`,
        );
      }
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A Standard Schema written by hand, as another library would provide it. */
function positiveCounter(async = false): StandardSchemaV1<{ n: number }, { n: number }> {
  const check = (v: unknown) => {
    const n = (v as { n?: unknown })?.n;
    return typeof n === "number" && n >= 0
      ? { value: { n } }
      : { issues: [{ message: "n must be a number, 0 or more", path: [{ key: "n" }] }] };
  };
  return {
    "~standard": {
      version: 1,
      vendor: "hand-made",
      validate: async ? (v) => Promise.resolve(check(v)) : check,
    },
  };
}

Deno.test("kinds: any Standard Schema works; an asynchronous one cannot check a patch", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const user = "u";
  const counter = store.kind("counter", positiveCounter(), {
    jsonSchema: { type: "object", properties: { n: { type: "number", minimum: 0 } } },
  });
  assert.deepEqual(counter.jsonSchema?.properties, { n: { type: "number", minimum: 0 } });
  const h = await counter.mint({ n: 1 }, { user });
  const e = await rejectsWith(
    () => counter.patch(h, [SetKey("", "n", -1)], { user }),
    "invalid_state",
  );
  assert.deepEqual(e.details.issues, [{ path: "/n", message: "n must be a number, 0 or more" }]);

  const slow = store.kind("slow", positiveCounter(true));
  assert.equal(slow.jsonSchema, null, "no converter, no jsonSchema option: none");
  const s = await slow.mint({ n: 1 }, { user });
  await rejectsWith(() => slow.mint({ n: -1 }, { user }), "invalid_state");
  assert.equal((await slow.save(s, { n: 2 }, { user, expectVersion: 1 })).version, 2);
  await rejectsWith(() => slow.patch(s, [SetKey("", "n", 3)], { user }), "invalid_argument");
  assert.deepEqual((await slow.get(s, { user })).state, { n: 2 });
});

Deno.test("kinds: malformed names, schemas and options are invalid_argument", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const schema = z.object({});
  for (
    const make of [
      () => store.kind("Bad_Name", schema),
      () => store.kind("ok", {} as unknown as StandardSchemaV1),
      () => store.kind("ok", schema, { version: 0 }),
      () => store.kind("ok", schema, { version: 1.5 }),
      () => store.kind("ok", schema, { version: 2, upcast: { 2: (s) => s } }),
      () => store.kind("ok", schema, { version: 2, upcast: { 1: "x" as never } }),
    ]
  ) {
    assert.throws(make, (e: Error & { code?: string }) => e.code === "invalid_argument");
  }
});

Deno.test("kinds: issues name JSON Pointers; a stored state that breaks the schema reads as invalid_state", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const user = "u";
  const tags = store.kind("tags", z.object({ by: z.record(z.string(), z.array(z.string())) }));
  const e = await rejectsWith(
    () => tags.mint({ by: { "a/b~c": ["x", 1 as unknown as string] } }, { user }),
    "invalid_state",
  );
  assert.equal((e.details.issues as { path: string }[])[0]!.path, "/by/a~1b~0c/1");
  // A state written without the kind, then read through it.
  const h = await store.mint("tags", { by: { x: 1 } }, { user });
  await rejectsWith(() => tags.get(h, { user }), "invalid_state");
  assert.deepEqual((await store.get(h, { user })).state, { by: { x: 1 } });
  // The repair goes through the typed view and lands.
  const fixed = await tags.save(h, { by: { x: ["1"] } }, { user, expectVersion: 1 });
  assert.equal(fixed.schemaVersion, 1);
});

Deno.test("kinds: an upcast that throws is invalid_state, and nothing is written", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const user = "u";
  const h = await store.kind("doc", z.object({ text: z.string() })).mint({ text: "" }, { user });
  const v2 = store.kind("doc", z.object({ text: z.string(), words: z.number() }), {
    version: 2,
    upcast: {
      1: () => {
        throw new Error("no way up");
      },
    },
  });
  const e = await rejectsWith(() => v2.get(h, { user }), "invalid_state");
  assert.match(e.message, /no way up/);
  await rejectsWith(() => v2.patch(h, [SetKey("", "words", 0)], { user }), "invalid_state");
  assert.equal((await store.get(h, { user })).version, 1);
  assert.ok(e instanceof InvalidState);
});

Deno.test("kinds: defineKind is unbound until bound; a typed mint retried with its key mints once", async () => {
  await using store = await HandleStore.fromUrl("memory://");
  const user = "u";
  const notes = defineKind("notes", z.object({ lines: z.array(z.string()) }));
  await rejectsWith(() => notes.mint({ lines: [] }, { user }), "invalid_argument");
  const bound = notes.bind(store);
  const a = await bound.mint({ lines: [] }, { user, idempotencyKey: "k" });
  const b = await bound.mint({ lines: [] }, { user, idempotencyKey: "k" });
  assert.equal(a, b);
  const p = await bound.patch(a, [Append("lines", "x")], { user });
  assert.deepEqual([p.version, p.state.lines], [2, ["x"]]);
});
