/**
 * `transfer` under encryption at rest on SQLite (SPEC 9.2): a handle of
 * about 1 KiB with 20 changelog entries moved back and forth between two
 * users, through a store with keys (which opens the record and its
 * changelog and seals them anew for the new owner, written in the move's
 * own transaction) beside a store without them, on files of the same
 * directory, in one run.
 *
 * @module
 */

import { HandleStore, type JsonObject, SetKey } from "../mod.ts";

const dir = await Deno.makeTempDir({ prefix: "mcpstate-bench-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

/** A state of about 1 KiB of JSON. */
function state(): JsonObject {
  const notes = Array.from({ length: 12 }, (_, n) => `note ${n}: arm64 first`);
  return { title: "Run", n: 0, notes, pad: "p".repeat(1024 - JSON.stringify(notes).length - 40) };
}

const KEYS = { k1: crypto.getRandomValues(new Uint8Array(32)).toBase64() };

async function setup(name: string, encrypted: boolean) {
  const store = await HandleStore.fromUrl(
    `sqlite:///${dir}/${name}.db`,
    { history: { maxEntries: 20 }, ...encrypted ? { encryption: { keys: KEYS } } : {} },
  );
  const users = ["alice", "bob"];
  const handle = await store.mint("doc", state(), { user: users[0]! });
  for (let n = 1; n < 20; n++) await store.patch(handle, [SetKey("", "n", n)], { user: users[0]! });
  let turn = 0;
  return async () => {
    const [user, to] = [users[turn % 2]!, users[(turn + 1) % 2]!];
    await store.transfer(handle, { user, to });
    turn++;
  };
}

const plain = await setup("plain", false);
const sealed = await setup("sealed", true);

Deno.bench("transfer, 20 entries, no encryption", {
  group: "transfer",
  baseline: true,
}, plain);
Deno.bench("transfer, 20 entries, encryption", { group: "transfer" }, sealed);
