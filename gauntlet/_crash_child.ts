/**
 * The writer of the crash-consistency gauntlet: a separate OS process that
 * does mixed writes (mint, save, patch with `Increment` and `Append`, touch,
 * revoke, restore from the trash; fork, share with a second user and patch
 * through the alias as that user, unshare, transfer to a third user and
 * back, with or without `keep`) on several concurrent lanes until it is
 * killed, and reports every step on stdout as one JSON line:
 *
 * - `{"t":"ready"}` once the store is open;
 * - `{"t":"begin","id":…,"lane":…,"op":…,…}` before a write is sent;
 * - `{"t":"ack","id":…,…}` after it returned (acknowledged);
 * - `{"t":"fail","id":…,"code":…,"message":…}` when it was refused.
 *
 * A lane owns its handles (whichever user holds them), so at most one write
 * per handle is in flight, except on the shared counter that every lane
 * patches; a write's `begin` line names the handle's holder (`u`). The
 * parent rebuilds the expected store from these lines (`_crash_model.ts`).
 *
 * Every state carries `mark`, a string the parent looks for in the engine's
 * storage: with encryption keys (`MCPSTATE_ENCRYPTION_KEYS`, as the CLI
 * takes them) it must be found nowhere.
 *
 * Usage: `_crash_child.ts <backend url> <user> <lanes> <seed> <mode> <mark> [skip]`,
 * mode `honest`, `early-ack` or `lost-unshare`, skip a comma list of
 * operations to leave out of the mix. `early-ack` is a deliberately broken writer that acknowledges patches
 * before they are sent, `lost-unshare` one that acknowledges unshares it
 * never sends, so that the checker can be shown to catch them.
 *
 * @module
 */

import { Append, HandleStore, Increment, McpStateError, type Rights } from "../mod.ts";
import { parseKeyList } from "../src/keyring.ts";
import { crashUsers } from "./_crash_model.ts";
import { body, Rng } from "./_util.ts";

const [url, user, lanesArg = "3", seedArg = "1", mode = "honest", mark = "", skipArg = ""] =
  Deno.args;
const skip = new Set(skipArg.split(","));
const keyList = Deno.env.get("MCPSTATE_ENCRYPTION_KEYS");
const EARLY_ACK = mode === "early-ack";
const LOST_UNSHARE = mode === "lost-unshare";
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
  /** Who holds it now. */
  owner: string;
  version: number;
  rev: number;
  n: number;
  log: number[];
  /** Grants in force that this lane made. */
  grants: { grant: string; alias: string; rights: Rights }[];
  /** A transfer kept a grant for the old owner (its alias is not printed). */
  kept: boolean;
}

const users = crashUsers(user);
/** The user a transfer moves a handle held by `owner` to. */
const otherThan = (owner: string) => owner === users.owner ? users.other : users.owner;

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

/** The `begin` fields of a write on `t`: lane, operation, handle, and the user it runs for. */
function on(lane: number, op: string, t: Owned): Record<string, unknown> {
  return { lane, op, h: t.handle, u: t.owner };
}

/** A handle the lane just made (a mint or a fork), at version 1. */
function newOwned(handle: string, owner: string, from: Pick<Owned, "rev" | "n" | "log">): Owned {
  return {
    handle,
    owner,
    version: 1,
    rev: from.rev,
    n: from.n,
    log: from.log,
    grants: [],
    kept: false,
  };
}

try {
  const store = await HandleStore.fromUrl(url, {
    reclaimIntervalMs: 0,
    ...(keyList ? { encryption: parseKeyList(keyList) } : {}),
  });
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
      const sharing = owned.filter((o) => o.grants.length > 0);
      const writable = owned.filter((o) => o.grants.some((g) => g.rights !== "read"));
      // A handle with grants is not revoked: its aliases stay checkable.
      const revocable = owned.filter((o) => o.grants.length === 0 && !o.kept);
      const op = owned.length === 0 && trashed.length === 0 ? "mint" : rng.weighted(
        ([
          [owned.length < 6 ? 12 : 2, "mint"],
          [20, "save"],
          [35, "patch"],
          [shared ? 15 : 0, "shared"],
          [10, "touch"],
          [owned.length > 1 && revocable.length > 0 ? 6 : 0, "revoke"],
          [trashed.length > 0 ? 4 : 0, "restore"],
          [owned.length > 0 && owned.length < 8 ? 4 : 0, "fork"],
          [owned.some((o) => o.grants.length < 2) ? 5 : 0, "share"],
          [sharing.length > 0 ? 4 : 0, "unshare"],
          [writable.length > 0 ? 6 : 0, "apatch"],
          [owned.length > 0 ? 4 : 0, "transfer"],
        ] as const).filter(([, o]) => !skip.has(o)),
      );
      const target = owned.length > 0 ? rng.pick(owned) : undefined;
      if (op === "mint") {
        const seed = rng.int(1, 2 ** 30);
        const len = bodyLength(rng);
        const ttl = rng.next() < 0.3 ? rng.int(1, 30) : null;
        const state = {
          lane: laneNo,
          rev: 0,
          n: 0,
          log: [],
          seed,
          len,
          mark,
          body: body(seed, len),
        };
        const h = await step(
          { lane: laneNo, op, seed, len, ttl },
          () => store.mint("crash", state, { user, writer, ttlDays: ttl }),
          (handle) => ({ h: handle, v: 1 }),
        );
        if (h) owned.push(newOwned(h, user, { rev: 0, n: 0, log: [] }));
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
          mark,
          body: body(seed, len),
        };
        const snap = await step(
          { ...on(laneNo, op, target), expect: target.version, rev, seed, len },
          () =>
            store.save(target.handle, state, {
              user: target.owner,
              writer,
              expectVersion: target.version,
            }),
          (s) => ({ v: s.version }),
        );
        if (snap) {
          target.version = snap.version;
          target.rev = rev;
        }
      } else if ((op === "patch" && target) || op === "apatch") {
        // A patch as the owner, or through an alias by the grantee.
        const t = op === "patch" ? target! : rng.pick(writable);
        const g = op === "apatch" ? rng.pick(t.grants.filter((x) => x.rights !== "read")) : null;
        const by = rng.int(1, 3);
        const id = nextId;
        const via = g ? { alias: g.alias, grant: g.grant } : {};
        const snap = await step(
          { ...on(laneNo, op, t), by, ...via },
          () =>
            store.patch(g ? g.alias : t.handle, [Increment("", "n", by), Append("log", id)], {
              user: g ? users.grantee : t.owner,
              writer,
            }),
          (s) => ({ v: s.version }),
          { v: t.version + 1 },
        );
        if (snap) {
          t.version = snap.version;
          t.n += by;
          t.log = [...t.log, id];
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
          { ...on(laneNo, op, target), ttl },
          () => store.touch(target.handle, { user: target.owner, writer, ttlDays: ttl }),
          (s) => ({ v: s.version, exp: s.expiresAt === null ? null : s.expiresAt.getTime() }),
        );
        if (snap) target.version = snap.version;
      } else if (op === "revoke") {
        const t = rng.pick(revocable);
        const done = await step(
          on(laneNo, op, t),
          () => store.revoke(t.handle, { user: t.owner }).then(() => true),
          () => ({}),
        );
        if (done) {
          owned.splice(owned.indexOf(t), 1);
          trashed.push(t);
        }
      } else if (op === "restore" && trashed.length > 0) {
        const back = rng.pick(trashed);
        const snap = await step(
          on(laneNo, op, back),
          () => store.restore(back.handle, { user: back.owner }),
          (s) => ({ v: s.version }),
        );
        if (snap) {
          trashed.splice(trashed.indexOf(back), 1);
          owned.push(back);
        }
      } else if (op === "fork" && target) {
        const h = await step(
          on(laneNo, op, target),
          () => store.fork(target.handle, { user: target.owner, writer }),
          (handle) => ({ h: handle, v: 1 }),
        );
        if (h) owned.push(newOwned(h, target.owner, target));
      } else if (op === "share") {
        await share(laneNo, rng.pick(owned.filter((o) => o.grants.length < 2)), rng);
      } else if (op === "unshare") {
        const t = rng.pick(sharing);
        const g = rng.pick(t.grants);
        const n = await step(
          { ...on(laneNo, op, t), grant: g.grant },
          () => LOST_UNSHARE ? Promise.resolve(1) : store.unshare(g.grant, { user: t.owner }),
          (n) => ({ n }),
        );
        if (n !== undefined) {
          t.grants.splice(t.grants.indexOf(g), 1);
          t.version++;
        }
      } else if (op === "transfer" && target) {
        await transfer(laneNo, target, rng);
      }
    }
  };

  /** Shares `t` with the grantee: a version that changes no state. */
  const share = async (laneNo: number, t: Owned, rng: Rng) => {
    const rights = rng.pick(["read", "append", "write"] as const);
    const g = await step(
      { ...on(laneNo, "share", t), to: users.grantee, rights },
      () => store.share(t.handle, { user: t.owner, to: users.grantee, rights }),
      (g) => ({ grant: g.grant, alias: g.handle }),
    );
    if (g) {
      t.grants.push({ grant: g.grant, alias: g.handle, rights });
      t.version++;
    }
  };

  /** Moves `t` to the other holder, sometimes keeping a grant: a version that changes no state. */
  const transfer = async (laneNo: number, t: Owned, rng: Rng) => {
    const to = otherThan(t.owner);
    const keep = rng.pick([null, null, "read", "write"] as const);
    const done = await step(
      { ...on(laneNo, "transfer", t), to, keep },
      () =>
        store.transfer(t.handle, { user: t.owner, to, ...(keep ? { keep } : {}) }).then(() => true),
      () => ({}),
    );
    if (done) {
      t.owner = to;
      t.grants = [];
      t.kept = keep !== null;
      t.version++;
    }
  };

  await Promise.all(Array.from({ length: Number(lanesArg) }, (_, i) => lane(i)));
} catch (e) {
  console.error(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  Deno.exit(1);
}
