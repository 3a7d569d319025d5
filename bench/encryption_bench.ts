/**
 * Encryption at rest on SQLite (SPEC 9.2): a 1 KiB `save` and `get` through
 * a store with keys beside the same calls through a store without them, on
 * files of the same directory, in one run. Targets: save at most 1.25× and
 * get at most 2× the time without encryption.
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
  const store = await HandleStore.fromUrl(
    `sqlite:///${dir}/${name}.db`,
    encrypted ? { encryption: { keys: KEYS } } : {},
  );
  const user = "bench";
  const handle = await store.mint("doc", state(0), { user });
  let version = 1;
  return {
    save: async () => {
      await store.save(handle, state(version), { user, expectVersion: version });
      version++;
    },
    get: () => store.get(handle, { user }),
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
