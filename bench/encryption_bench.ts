/**
 * Encryption at rest on SQLite (SPEC 9.2): a 1 KiB `save` and `get` through
 * a store with keys beside the same calls through a store without them, on
 * files of the same directory, in one run. Targets: save at most 1.25× and
 * get at most 2× the time without encryption.
 *
 * A store keeps what it opened or sealed last for each handle, so a `get` of
 * a state it has seen costs no decryption; the group `get, written by
 * another store` times the other case (each read follows a save through a
 * second store on the same file, so the reader opens new ciphertext).
 *
 * @module
 */

import { HandleStore, type JsonObject } from "../mod.ts";

const dir = await Deno.makeTempDir({ prefix: "mcpstate-bench-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

/** A state of about 1 KiB of JSON. */
function state(i: number): JsonObject {
  const notes = Array.from({ length: 12 }, (_, n) => `note ${n} of write ${i}: arm64 first`);
  return { title: `Run ${i}`, notes, pad: "p".repeat(1024 - JSON.stringify(notes).length - 40) };
}

const KEYS = { k1: crypto.getRandomValues(new Uint8Array(32)).toBase64() };

async function setup(name: string, encrypted: boolean) {
  const open = () =>
    HandleStore.fromUrl(
      `sqlite:///${dir}/${name}.db`,
      encrypted ? { encryption: { keys: KEYS } } : {},
    );
  const store = await open();
  const other = await open();
  const user = "bench";
  const handle = await store.mint("doc", state(0), { user });
  let version = 1;
  const save = async (through = store) => {
    await through.save(handle, state(version), { user, expectVersion: version });
    version++;
  };
  return {
    save: async () => await save(),
    get: () => store.get(handle, { user }),
    /** A get of a version that `other` wrote, timed alone. */
    fresh: async (b: Deno.BenchContext) => {
      await save(other);
      b.start();
      await store.get(handle, { user });
      b.end();
    },
  };
}

const plain = await setup("plain", false);
const sealed = await setup("sealed", true);

Deno.bench("save 1 KiB, no encryption", { group: "save", baseline: true }, plain.save);
Deno.bench("save 1 KiB, encryption", { group: "save" }, sealed.save);
Deno.bench("get 1 KiB, no encryption", { group: "get", baseline: true }, async () => {
  await plain.get();
});
Deno.bench("get 1 KiB, encryption", { group: "get" }, async () => {
  await sealed.get();
});
Deno.bench("get, written by another store, no encryption", {
  group: "fresh",
  baseline: true,
}, plain.fresh);
Deno.bench("get, written by another store, encryption", { group: "fresh" }, sealed.fresh);
