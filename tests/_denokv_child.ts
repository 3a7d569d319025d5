/**
 * The fault-injection child of `denokv_test.ts`: a process whose `Deno.Kv`
 * stops at one chosen commit of the backend's own, so that the test can kill
 * it there with SIGKILL. (The cross-process workloads every backend runs are
 * in `contract/_child.ts`; these two modes need the Deno KV backend's
 * internals.)
 *
 * - `pause <file> <user> <handle> <stage> <fill>`: saves a 1 MiB state over
 *   version 1 through a `Deno.Kv` that stops at one commit, prints `paused`
 *   and waits to be killed. `stage` is `swap` (the head swap, after every
 *   chunk is written) or `chunks` (the second chunk commit).
 * - `log <file> <user> <handle> <stopAt> <tag>`: patches the handle over and
 *   over (each patch appends `<tag>:<i>` to its `log` list), printing
 *   `started` after the first; it stops at the commit of the `stopAt`-th
 *   write (the one that sets its changelog entry), prints `paused` and waits
 *   to be killed.
 *
 * @module
 */

import { Append, HandleStore, Increment } from "../mod.ts";
import { DenoKvBackend } from "../src/backends/denokv.ts";

const [mode, ...args] = Deno.args;

function say(line: string): void {
  Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));
}

/** A `Deno.Kv` whose commits pass through `onCommit` first. */
function interceptCommits(
  kv: Deno.Kv,
  onCommit: (sets: Deno.KvKey[], checks: Deno.KvKey[]) => Promise<void>,
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
                  return await t.commit();
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

if (mode === "pause") {
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
} else {
  throw new Error(`unknown mode ${mode}`);
}
