/**
 * The Deno KV backend's key layout, under the backend's prefix `P`:
 *
 * - `[P, "u", user, "h", handle]` — a record's head (metadata, and its state
 *   inline or the id of its chunk set); `"c"` its chunks, `"log"` its
 *   changelog, `"t"` its trash entry, `"l"` its lease, `"i"` the listing
 *   index (`-updatedAt`, handle), `"k"` idempotency records and `"q"` their
 *   chunked results;
 * - `[P, "xh" | "xt" | "xk" | "xw", time, …]` — what `sweep` walks: expiry,
 *   trash and idempotency indexes, and write intents;
 * - `[P, "n", user]` — the users, for `listUsers`;
 * - `[P, "dk", user]` — a user's wrapped data key (`_data_keys.ts`).
 *
 * A user name, handle or idempotency key that is too long for a key part, or
 * not well-formed Unicode, is keyed by its SHA-256.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { IdempotencyClaim } from "../../backend.ts";
import { InvalidArgument } from "../../errors.ts";

/** A user name longer than this (UTF-8 bytes) is keyed by its SHA-256. */
const USER_PART_MAX = 400;
/** A handle or idempotency key longer than this (UTF-8 bytes) is keyed by its SHA-256. */
const NAME_PART_MAX = 200;

const encoder = new TextEncoder();

/** The keys of one backend, under its prefix. */
export class Keys {
  /** The prefix. */
  readonly p: Deno.KvKeyPart[];

  /**
   * @param prefix The prefix: at most 4 parts of at most 64 characters or bytes.
   * @throws {InvalidArgument} for another prefix.
   */
  constructor(prefix: Deno.KvKey) {
    this.p = checkPrefix(prefix);
  }

  /** The key part of a handle (or of an idempotency scope or key). */
  handle(handle: string): Deno.KvKeyPart {
    return keyPart(handle, NAME_PART_MAX);
  }

  /** The head of a record. */
  head(u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.p, "u", u, "h", h];
  }

  /** A record's entry in its user's listing index (newest first). */
  index(u: Deno.KvKeyPart, updatedAt: number, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.p, "u", u, "i", 0 - updatedAt, h];
  }

  /** Chunk `i` of chunk set `d` of a record. */
  chunk(u: Deno.KvKeyPart, h: Deno.KvKeyPart, d: string, i: number): Deno.KvKey {
    return [...this.p, "u", u, "c", h, d, i];
  }

  /** The idempotency record of a claim. */
  idem(u: Deno.KvKeyPart, c: IdempotencyClaim): Deno.KvKey {
    return [...this.p, "u", u, "k", this.handle(c.scope), this.handle(c.key)];
  }

  /** Chunk `i` of the chunked copy `d` of an idempotency record's result. */
  copy(u: Deno.KvKeyPart, d: string, i: number): Deno.KvKey {
    return [...this.p, "u", u, "q", d, i];
  }

  /** A record's entry in the expiry index that `sweep` walks. */
  expiry(at: number, u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.p, "xh", at, u, h];
  }

  /** An idempotency record's entry in its expiry index. */
  idemExpiry(at: number, idemKey: Deno.KvKey): Deno.KvKey {
    const n = this.p.length;
    return [...this.p, "xk", at, idemKey[n + 1]!, idemKey[n + 3]!, idemKey[n + 4]!];
  }

  /** The intent of chunk set (or collection) `d`, written at `at` (0: handed to the collector). */
  intent(at: number, u: Deno.KvKeyPart, h: Deno.KvKeyPart, d: string): Deno.KvKey {
    return [...this.p, "xw", at, u, h, d];
  }

  /** A user's name, for `listUsers`. */
  userName(u: Deno.KvKeyPart): Deno.KvKey {
    return [...this.p, "n", u];
  }

  /** Changelog entry `version` of log `log`. */
  log(u: Deno.KvKeyPart, h: Deno.KvKeyPart, log: string, version: number): Deno.KvKey {
    return [...this.p, "u", u, "log", h, log, version];
  }

  /** A trashed record. */
  trash(u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.p, "u", u, "t", h];
  }

  /** A trashed record's entry in the trash index that `sweep` walks. */
  trashExpiry(at: number, u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.p, "xt", at, u, h];
  }

  /** The lease of `(user, handle)`. */
  lease(user: string, handle: string): Deno.KvKey {
    return [...this.p, "u", this.user(user), "l", this.handle(handle)];
  }

  /** The key part of a user. */
  user(user: string): Deno.KvKeyPart {
    return keyPart(user, USER_PART_MAX);
  }
}

/** A key part for a user-supplied name: the name itself, or a SHA-256 digest (bytes) when it is too long or not well-formed Unicode. */
export function keyPart(name: string, maxBytes: number): Deno.KvKeyPart {
  if (
    name.isWellFormed() && (name.length * 3 <= maxBytes || encoder.encode(name).length <= maxBytes)
  ) {
    return name;
  }
  // JSON.stringify escapes lone surrogates, so distinct names hash distinct texts.
  return new Uint8Array(createHash("sha256").update(JSON.stringify(name)).digest());
}

/** Whether two key parts are equal. */
export function samePart(a: Deno.KvKeyPart, b: Deno.KvKeyPart): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }
  return a === b;
}

/** Whether two keys are equal. */
export function sameKey(a: Deno.KvKey, b: Deno.KvKey): boolean {
  return a.length === b.length && a.every((x, i) => samePart(x, b[i]!));
}

/** The prefix, checked. */
function checkPrefix(prefix: Deno.KvKey): Deno.KvKeyPart[] {
  const ok = Array.isArray(prefix) && prefix.length <= 4 &&
    prefix.every((p) =>
      (typeof p === "string" && p.length <= 64) ||
      (typeof p === "number" && Number.isFinite(p)) ||
      typeof p === "boolean" || typeof p === "bigint" ||
      (p instanceof Uint8Array && p.length <= 64)
    );
  if (!ok) {
    throw new InvalidArgument(
      'prefix must be a Deno KV key of at most 4 parts (strings of at most 64 characters, numbers, booleans, bigints or Uint8Arrays of at most 64 bytes), e.g. ["mcpstate"].',
      { field: "prefix" },
    );
  }
  return [...prefix];
}
