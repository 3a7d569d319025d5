/**
 * A second OS process for `denokv_test.ts`. Modes:
 *
 * - `patch <file> <user> <handle> <writers> <patches> <tag>`: runs `writers`
 *   concurrent patchers (each with its own backend, so they race), each
 *   applying `patches` patches, on one KV file;
 *   prints `done locked=<n>` when every patch has landed, with the number
 *   of "database is locked" answers the backend retried.
 * - `pause <file> <user> <handle> <stage> <fill>`: saves a 1 MiB state over
 *   version 1 through a `Deno.Kv` that stops at one commit, prints `paused`
 *   and waits to be killed. `stage` is `swap` (the head swap, after every
 *   chunk is written) or `chunks` (the second chunk commit).
 * - `log <file> <user> <handle> <stopAt> <tag>`: patches the handle over and
 *   over (each patch appends `<tag>:<i>` to its `log` list), printing
 *   `started` after the first. With `stopAt` > 0 it stops at the commit of
 *   the `stopAt`-th write (the one that sets its changelog entry), prints
 *   `paused` and waits to be killed; with 0 it runs until it is killed.
 * - `write <file> <user> <handle> <count> <gapMs>`: patches the handle
 *   `count` times, `gapMs` apart, printing `wrote <version> <epoch ms>` after
 *   each.
 * - `lease <file> <user> <holder> <ms> <handle>…`: takes a lease of `ms` on
 *   each handle (real clock), prints `leased <expiresAt>…` (one per handle)
 *   and waits to be killed.
 * - `leases <file> <user> <tag> <backends> <handle>…`: `backends` backends
 *   on one `Deno.Kv` race to lease every handle, each as holder
 *   `<tag>/<i>`; prints the handles each holder got, as JSON.
 * - `nokv`: run WITHOUT `--unstable-kv`; prints the payload of the error
 *   that opening a `denokv:` URL gives, as JSON.
 *
 * @module
 */

import { HandleStore, Increment, McpStateError } from "../mod.ts";
import { Append } from "../mod.ts";
import { DenoKvBackend } from "../src/backends/denokv.ts";

const [mode, ...args] = Deno.args;

function say(line: string): void {
  Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));
}

/** A `Deno.Kv` whose commits pass through `onCommit` first. */
function interceptCommits(
  kv: Deno.Kv,
  onCommit: (sets: Deno.KvKey[], checks: Deno.KvKey[]) => Promise<void>,
  onError: (e: unknown) => void = () => {},
): Deno.Kv {
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "atomic") {
        return () => {
          const op = target.atomic();
          const sets: Deno.KvKey[] = [];
          const checks: Deno.KvKey[] = [];
          const proxy: Deno.AtomicOperation = new Proxy(op, {
            get(t, p) {
              if (p === "commit") {
                return async () => {
                  await onCommit(sets, checks);
                  try {
                    return await t.commit();
                  } catch (e) {
                    onError(e);
                    throw e;
                  }
                };
              }
              const v = Reflect.get(t, p, t);
              if (typeof v !== "function") return v;
              return (...a: unknown[]) => {
                if (p === "set") sets.push(a[0] as Deno.KvKey);
                if (p === "check") checks.push((a[0] as Deno.AtomicCheck).key);
                const r = (v as (...x: unknown[]) => unknown).apply(t, a);
                return r === t ? proxy : r;
              };
            },
          });
          return proxy;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

if (mode === "patch") {
  const [file, user, handle, writers, patches, tag] = args as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  // Count the "database is locked" answers the backend absorbed.
  let locked = 0;
  const kv = await Deno.openKv(file);
  const counting = interceptCommits(kv, () => Promise.resolve(), (e) => {
    if (/database is locked/.test(String(e))) locked++;
  });
  await Promise.all(Array.from({ length: Number(writers) }, async (_, w) => {
    // A backend per writer: one backend lets its own writers take turns, and
    // these are meant to race.
    await using store = new HandleStore(new DenoKvBackend(counting));
    for (let i = 0; i < Number(patches); i++) {
      await store.patch(handle, [Increment("", "n"), Append("log", `${tag}:${w}:${i}`)], {
        user,
        writer: `${tag}/${w}`,
      });
    }
  }));
  say(`done locked=${locked}`);
  kv.close();
} else if (mode === "pause") {
  const [file, user, handle, stage, fill] = args as [string, string, string, string, string];
  const kv = await Deno.openKv(file);
  let chunkCommits = 0;
  const paused = interceptCommits(kv, async (sets, checks) => {
    const isSwap = sets.some((k) => k[3] === "h");
    const isChunks = sets.some((k) => k[3] === "c");
    if (isChunks && !isSwap) chunkCommits++;
    const stop = stage === "swap" ? isSwap : isChunks && chunkCommits === 2 && checks.length > 0;
    if (stop) {
      say("paused");
      await new Promise(() => {});
    }
  });
  const store = new HandleStore(new DenoKvBackend(paused));
  const body = fill.repeat(1_048_576 - '{"s":""}'.length);
  await store.save(handle, { s: body }, { user, expectVersion: 1 });
  say("saved (the pause never came)");
} else if (mode === "log") {
  const [file, user, handle, stopAt, tag] = args as [string, string, string, string, string];
  const kv = await Deno.openKv(file);
  let logCommits = 0;
  const paused = interceptCommits(kv, async (sets) => {
    if (!sets.some((k) => k[3] === "log")) return;
    if (++logCommits === Number(stopAt)) {
      say("paused");
      await new Promise(() => {});
    }
  });
  const store = new HandleStore(new DenoKvBackend(paused));
  for (let i = 0;; i++) {
    await store.patch(handle, [Increment("", "n"), Append("log", `${tag}:${i}`)], { user });
    if (i === 0) say("started");
  }
} else if (mode === "write") {
  const [file, user, handle, count, gapMs] = args as [string, string, string, string, string];
  await using store = await HandleStore.fromUrl(`denokv:///${file}`);
  for (let i = 0; i < Number(count); i++) {
    await new Promise((r) => setTimeout(r, Number(gapMs)));
    const s = await store.patch(handle, [Increment("", "n")], { user });
    say(`wrote ${s.version} ${Date.now()}`);
  }
} else if (mode === "lease") {
  const [file, user, holder, ms, ...handles] = args as [string, string, string, string];
  const store = await HandleStore.fromUrl(`denokv:///${file}`);
  const expiresAt: number[] = [];
  for (const h of handles) {
    const l = await store.lease(h, { user, writer: holder, seconds: Number(ms) / 1000 });
    expiresAt.push(l.expiresAt.getTime());
  }
  say(`leased ${expiresAt.join(" ")}`);
  await new Promise(() => {});
} else if (mode === "leases") {
  const [file, user, tag, backends, ...handles] = args as [string, string, string, string];
  const kv = await Deno.openKv(file);
  const won = await Promise.all(Array.from({ length: Number(backends) }, async (_, b) => {
    await using store = new HandleStore(new DenoKvBackend(kv));
    const mine: string[] = [];
    for (const h of handles) {
      const l = await store.lease(h, { user, writer: `${tag}/${b}`, seconds: 60 });
      if (l.acquired) mine.push(h);
    }
    return [`${tag}/${b}`, mine];
  }));
  say(JSON.stringify(Object.fromEntries(won)));
  kv.close();
} else if (mode === "nokv") {
  const before = typeof (Deno as { openKv?: unknown }).openKv;
  try {
    await HandleStore.fromUrl("denokv:///:memory:");
    say(JSON.stringify({ openKv: before, opened: true }));
  } catch (e) {
    const payload = e instanceof McpStateError ? e.toPayload() : { raw: String(e) };
    say(JSON.stringify({ openKv: before, ...payload }));
  }
} else {
  throw new Error(`unknown mode ${mode}`);
}
