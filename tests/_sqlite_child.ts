/**
 * A child process for the SQLite tests: a real, separate OS process writing
 * to the same database file as the test.
 *
 * - `increment <url> <user> <handle> <tag> <count> [pauseMs]`: prints `ready`,
 *   waits for a `go` line on stdin, then patches the handle `count` times
 *   (increment `n`, append `<tag>:<i>` to `log`), pausing `pauseMs` between
 *   patches when given, and exits 0.
 * - `crash <url> <user> <handle>`: patches forever and prints `<i> <version>`
 *   after each acknowledged patch, until the test kills it.
 * - `hold <path> - - <ms>`: takes the write lock of the database file with a
 *   raw `BEGIN IMMEDIATE`, sets `n` to 100 in every state, prints `locked`,
 *   holds the lock `ms` milliseconds, then commits and exits 0.
 *
 * Any error is printed to stderr and exits 1.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { Append, HandleStore, Increment } from "../mod.ts";

const [mode, url, user, handle, tag = "c", count = "0", pauseMs = "0"] = Deno.args;
if (!mode || !url || !user || !handle) {
  console.error("Usage: _sqlite_child.ts increment|crash|hold <url> <user> <handle> [tag] [count]");
  Deno.exit(2);
}

const encoder = new TextEncoder();
function say(line: string): void {
  const bytes = encoder.encode(line + "\n");
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

async function waitForGo(): Promise<void> {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of Deno.stdin.readable) {
    text += decoder.decode(chunk, { stream: true });
    if (text.includes("go\n")) return;
  }
  throw new Error("stdin closed before go");
}

try {
  if (mode === "hold") {
    const db = new DatabaseSync(url);
    db.exec("BEGIN IMMEDIATE");
    db.exec("UPDATE handles SET state = json_set(state, '$.n', 100)");
    say("locked");
    await new Promise((r) => setTimeout(r, Number(tag)));
    db.exec("COMMIT");
    db.close();
    Deno.exit(0);
  }
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  if (mode === "increment") {
    say("ready");
    await waitForGo();
    for (let i = 0; i < Number(count); i++) {
      await store.patch(handle, [Increment("", "n"), Append("log", `${tag}:${i}`)], {
        user,
        writer: tag,
      });
      if (Number(pauseMs) > 0) await new Promise((r) => setTimeout(r, Number(pauseMs)));
    }
    await store.close();
  } else if (mode === "crash") {
    for (let i = 0;; i++) {
      const s = await store.patch(handle, [Increment("", "n"), Append("log", i)], { user });
      say(`${i} ${s.version}`);
    }
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} catch (e) {
  console.error(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  Deno.exit(1);
}
