/**
 * Small helpers shared by the test files: a fake clock, fresh user names,
 * error and time assertions, paging, and reading a child process's output
 * line by line.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type HandlePage, type HandleRecord, type HandleStore, McpStateError } from "../mod.ts";

/** One day in milliseconds. */
export const DAY = 86_400_000;

/** A fake clock the tests move by hand. */
export class FakeClock {
  /** Current epoch ms. */
  now: number;
  /** @param start Start time, epoch ms. */
  constructor(start = Date.UTC(2026, 6, 28, 12)) {
    this.now = start;
  }
  /** The clock function to pass as `clock`. */
  readonly fn = (): number => this.now;
  /** @param ms How far to move. */
  advance(ms: number): void {
    this.now += ms;
  }
}

/** A user name no other test uses. */
export function freshUser(tag = "u"): string {
  return `${tag}-${crypto.randomUUID()}`;
}

/**
 * Runs `fn` with a new temporary folder, and removes the folder with
 * everything in it after, however `fn` ends.
 *
 * @returns What `fn` resolved to.
 */
export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir();
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Asserts that `fn` rejects with an `McpStateError` of `code`.
 *
 * @returns The error.
 */
export async function rejectsWith(
  fn: () => Promise<unknown>,
  code: string,
): Promise<McpStateError> {
  try {
    await fn();
  } catch (e) {
    if (!(e instanceof McpStateError)) throw e;
    assert.equal(e.code, code, `expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

/**
 * `promise`, or a failure naming `what` after `ms`.
 *
 * @returns What `promise` resolves to.
 */
export async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Retries `fn` until it succeeds or `ms` pass.
 *
 * @returns What `fn` resolved to the first time it did.
 */
export async function eventually<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + ms;
  while (true) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await sleep(50);
    }
  }
}

/**
 * Every handle of `user`, newest first, read `limit` at a time through
 * `listPage`, with the cursors it handed out.
 *
 * @returns The handles and the cursors.
 */
export async function pageThrough(
  store: HandleStore,
  user: string,
  limit: number,
): Promise<{ handles: string[]; cursors: string[] }> {
  const handles: string[] = [];
  const cursors: string[] = [];
  let cursor: string | null = null;
  do {
    const page: HandlePage = await store.listPage(user, { limit, cursor });
    handles.push(...page.handles.map((x) => x.handle));
    cursor = page.nextCursor;
    if (cursor !== null) cursors.push(cursor);
  } while (cursor !== null && handles.length < 10_000);
  return { handles, cursors };
}

/**
 * A record of `handle` with every other field at its plainest — its kind
 * from the handle, state `{}`, version 1, made and written at epoch ms 1, no
 * expiry, no writer — and `extra` over them.
 */
export function recordOf(handle: string, extra: Partial<HandleRecord> = {}): HandleRecord {
  return {
    handle,
    kind: handle.split("_")[0]!,
    state: "{}",
    version: 1,
    createdAt: 1,
    updatedAt: 1,
    expiresAt: null,
    lastWriter: null,
    ...extra,
  };
}

/** Compares two strings by the bytes of their UTF-8 encodings, for `Array.prototype.sort`. */
export function byUtf8(a: string, b: string): number {
  const x = new TextEncoder().encode(a), y = new TextEncoder().encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i]! - y[i]!;
  }
  return x.length - y.length;
}

/** Reads a stream line by line. */
export class Lines {
  #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";
  #done = false;
  /** @param stream A process's stdout (or stdin). */
  constructor(stream: ReadableStream<Uint8Array>) {
    this.#reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  }
  /** The next whole line, or `null` at the end of the stream (an unfinished last line is dropped). */
  async next(): Promise<string | null> {
    for (;;) {
      const nl = this.#buffer.indexOf("\n");
      if (nl >= 0) {
        const line = this.#buffer.slice(0, nl);
        this.#buffer = this.#buffer.slice(nl + 1);
        return line;
      }
      if (this.#done) return null;
      const { value, done } = await this.#reader.read();
      if (done) this.#done = true;
      else this.#buffer += value;
    }
  }
  /** Reads and drops every line up to the end of the stream. */
  async drain(): Promise<void> {
    while (await this.next() !== null) { /* drop */ }
  }
  /** Stops reading; the stream is cancelled. */
  async cancel(): Promise<void> {
    await this.#reader.cancel().catch(() => {});
  }
}

/** All of a stream, as text. */
export async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(stream).text();
}
