/**
 * Small helpers shared by the gauntlet's parts: a seeded random source,
 * deterministic test bodies, percentiles, time limits, process memory.
 *
 * @module
 */

/** A seeded pseudo-random source (sfc32): the same seed gives the same run. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  /** @param seed Any 32-bit integer. */
  constructor(seed: number) {
    this.#a = 0x9e3779b9 ^ seed;
    this.#b = 0x243f6a88 ^ Math.imul(seed, 0x85ebca6b);
    this.#c = 0xb7e15162 ^ Math.imul(seed, 0xc2b2ae35);
    this.#d = seed | 0;
    for (let i = 0; i < 16; i++) this.next();
  }

  /** A float in [0, 1). */
  next(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** A choice by weight: `[[weight, value], …]`. */
  weighted<T>(table: readonly (readonly [number, T])[]): T {
    const total = table.reduce((s, [w]) => s + w, 0);
    let x = this.next() * total;
    for (const [w, v] of table) {
      x -= w;
      if (x < 0) return v;
    }
    return table[table.length - 1]![1];
  }
}

/** A fresh random 31-bit seed. */
export function randomSeed(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0]! >>> 1;
}

const BODY_CHARS = [...'abcdefghijklmnopqrstuvwxyz0123456789 -_.,;:!?"\\/\n\té漢字ß→😀🦕'];

/**
 * A deterministic string of `length` code points, mixing 1- to 4-byte UTF-8
 * characters, quotes and escapes, so that a torn write or a chunk boundary in
 * the middle of a character shows up as a mismatch.
 *
 * @param seed The body's seed.
 * @param length Code points.
 * @returns The body.
 */
export function body(seed: number, length: number): string {
  const rng = new Rng(seed);
  const parts: string[] = [];
  for (let i = 0; i < length; i++) parts.push(BODY_CHARS[rng.int(0, BODY_CHARS.length - 1)]!);
  return parts.join("");
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A timer that can be cancelled, so that a lost race leaves nothing pending. */
export function timer(ms: number): { done: Promise<void>; cancel: () => void } {
  let id: ReturnType<typeof setTimeout> | undefined;
  const done = new Promise<void>((resolve) => {
    id = setTimeout(resolve, ms);
  });
  return { done, cancel: () => clearTimeout(id) };
}

/**
 * Races `p` against a time limit.
 *
 * @returns `p`'s value, or `timedOut` when the limit passed first.
 */
export async function within<T, U>(p: Promise<T>, ms: number, timedOut: U): Promise<T | U> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<U>((resolve) => {
    timer = setTimeout(() => resolve(timedOut), ms);
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The `q`-quantile (0..1) of a list of numbers (nearest rank).
 *
 * @param sorted Ascending values.
 * @param q The quantile.
 */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

/** Rounds to `digits` decimals. */
export function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/**
 * The resident set size of a process in KiB, from `/proc/<pid>/status`
 * (`VmRSS`); `null` where that file does not exist or the process is gone.
 */
export function rssKiB(pid: number): number | null {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/status`);
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(text);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** The number of open file descriptors of a process, or `null` where unknown. */
export function openFds(pid: number): number | null {
  try {
    let n = 0;
    for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
    return n;
  } catch {
    return null;
  }
}

/** `n` formatted with thousands separators. */
export function fmt(n: number): string {
  return n.toLocaleString("en-US");
}

/** The message of anything thrown. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
