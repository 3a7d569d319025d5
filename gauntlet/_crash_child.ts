/**
 * The writer of the crash-consistency gauntlet: a separate OS process that
 * does mixed writes (mint, save, patch with `Increment` and `Append`, touch,
 * revoke, restore from the trash) on several concurrent lanes until it is
 * killed, and reports every
 * step on stdout as one JSON line:
 *
 * - `{"t":"ready"}` once the store is open;
 * - `{"t":"begin","id":…,"lane":…,"op":…,…}` before a write is sent;
 * - `{"t":"ack","id":…,…}` after it returned (acknowledged);
 * - `{"t":"fail","id":…,"code":…,"message":…}` when it was refused.
 *
 * A lane owns its handles, so at most one write per handle is in flight,
 * except on the shared counter that every lane patches. The parent rebuilds
 * the expected store from these lines (see `crash.ts`).
 *
 * Usage: `_crash_child.ts <backend url> <user> <lanes> <seed> [honest|early-ack]`.
 * `early-ack` is a deliberately broken writer that acknowledges patches
 * before they are sent, so that the checker can be shown to catch a lost
 * write.
 *
 * @module
 */

import { Append, HandleStore, Increment, McpStateError } from "../mod.ts";
import { body, Rng } from "./_util.ts";

const [url, user, lanesArg = "3", seedArg = "1", mode = "honest"] = Deno.args;
const EARLY_ACK = mode === "early-ack";
if (!url || !user) {
  console.error("Usage: _crash_child.ts <backend url> <user> <lanes> <seed>");
  Deno.exit(2);
}

const encoder = new TextEncoder();
/** One line, written synchronously: once it returns, the parent can read it. */
function say(line: Record<string, unknown>): void {
  const bytes = encoder.encode(JSON.stringify(line) + "\n");
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

/** A state's length in code points: mostly small, sometimes past a KV value or a page. */
function bodyLength(rng: Rng): number {
  return rng.weighted([
    [85, rng.int(0, 1500)],
    [12, rng.int(1500, 20_000)],
    [3, rng.int(40_000, 120_000)],
  ]);
}

interface Owned {
  handle: string;
  version: number;
  rev: number;
  n: number;
  log: number[];
}

let nextId = 0;
const writer = `crash-child/${Deno.pid}`;
/** The child stops by itself after this long or this many writes, killed or not. */
const MAX_MS = 60_000;
const MAX_WRITES = 50_000;
setTimeout(() => Deno.exit(3), MAX_MS);

async function step<T>(
  begin: Record<string, unknown>,
  run: () => Promise<T>,
  ack: (result: T) => Record<string, unknown>,
  early?: Record<string, unknown>,
): Promise<T | undefined> {
  const id = nextId++;
  say({ t: "begin", id, ...begin });
  try {
    if (EARLY_ACK && early) {
      say({ t: "ack", id, ...early });
      // Broken on purpose, and slow to send what it acknowledged: a kill lands
      // in that window however fast the backend's writes are.
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const result = await run();
    if (!(EARLY_ACK && early)) say({ t: "ack", id, ...ack(result) });
    return result;
  } catch (e) {
    const code = e instanceof McpStateError ? e.code : "exception";
    say({ t: "fail", id, code, message: e instanceof Error ? e.message : String(e) });
    return undefined;
  }
}

try {
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  say({ t: "ready" });
  const baseSeed = Number(seedArg);
  const shared = await step(
    { op: "mint-shared", lane: -1 },
    () => store.mint("counter", { n: 0, log: [] }, { user, writer }),
    (h) => ({ h, v: 1 }),
  );

  const lane = async (laneNo: number): Promise<void> => {
    const rng = new Rng(baseSeed * 31 + laneNo);
    const owned: Owned[] = [];
    const trashed: Owned[] = [];
    while (nextId < MAX_WRITES) {
      const op = owned.length === 0 && trashed.length === 0 ? "mint" : rng.weighted(
        [
          [owned.length < 6 ? 12 : 2, "mint"],
          [20, "save"],
          [35, "patch"],
          [shared ? 15 : 0, "shared"],
          [10, "touch"],
          [owned.length > 1 ? 6 : 0, "revoke"],
          [trashed.length > 0 ? 4 : 0, "restore"],
        ] as const,
      );
      const target = owned.length > 0 ? rng.pick(owned) : undefined;
      if (op === "mint") {
        const seed = rng.int(1, 2 ** 30);
        const len = bodyLength(rng);
        const ttl = rng.next() < 0.3 ? rng.int(1, 30) : null;
        const state = { lane: laneNo, rev: 0, n: 0, log: [], seed, len, body: body(seed, len) };
        const h = await step(
          { lane: laneNo, op, seed, len, ttl },
          () => store.mint("crash", state, { user, writer, ttlDays: ttl }),
          (handle) => ({ h: handle, v: 1 }),
        );
        if (h) owned.push({ handle: h, version: 1, rev: 0, n: 0, log: [] });
      } else if (op === "save" && target) {
        const seed = rng.int(1, 2 ** 30);
        const len = bodyLength(rng);
        const rev = target.rev + 1;
        const state = {
          lane: laneNo,
          rev,
          n: target.n,
          log: target.log,
          seed,
          len,
          body: body(seed, len),
        };
        const snap = await step(
          { lane: laneNo, op, h: target.handle, expect: target.version, rev, seed, len },
          () => store.save(target.handle, state, { user, writer, expectVersion: target.version }),
          (s) => ({ v: s.version }),
        );
        if (snap) {
          target.version = snap.version;
          target.rev = rev;
        }
      } else if (op === "patch" && target) {
        const by = rng.int(1, 3);
        const id = nextId;
        const snap = await step(
          { lane: laneNo, op, h: target.handle, by },
          () =>
            store.patch(target.handle, [Increment("", "n", by), Append("log", id)], {
              user,
              writer,
            }),
          (s) => ({ v: s.version }),
          { v: target.version + 1 },
        );
        if (snap) {
          target.version = snap.version;
          target.n += by;
          target.log = [...target.log, id];
        }
      } else if (op === "shared" && shared) {
        const id = nextId;
        await step(
          { lane: laneNo, op, h: shared },
          () => store.patch(shared, [Increment("", "n", 1), Append("log", id)], { user, writer }),
          (s) => ({ v: s.version }),
          { v: 0 },
        );
      } else if (op === "touch" && target) {
        const ttl = rng.next() < 0.3 ? null : rng.int(1, 30);
        const snap = await step(
          { lane: laneNo, op, h: target.handle, ttl },
          () => store.touch(target.handle, { user, writer, ttlDays: ttl }),
          (s) => ({ v: s.version, exp: s.expiresAt === null ? null : s.expiresAt.getTime() }),
        );
        if (snap) target.version = snap.version;
      } else if (op === "revoke" && target) {
        const done = await step(
          { lane: laneNo, op, h: target.handle },
          () => store.revoke(target.handle, { user }).then(() => true),
          () => ({}),
        );
        if (done) {
          owned.splice(owned.indexOf(target), 1);
          trashed.push(target);
        }
      } else if (op === "restore" && trashed.length > 0) {
        const back = rng.pick(trashed);
        const snap = await step(
          { lane: laneNo, op, h: back.handle },
          () => store.restore(back.handle, { user }),
          (s) => ({ v: s.version }),
        );
        if (snap) {
          trashed.splice(trashed.indexOf(back), 1);
          owned.push(back);
        }
      }
    }
  };

  await Promise.all(Array.from({ length: Number(lanesArg) }, (_, i) => lane(i)));
} catch (e) {
  console.error(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  Deno.exit(1);
}
