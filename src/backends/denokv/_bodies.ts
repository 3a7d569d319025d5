/**
 * The Deno KV backend's state bodies. A state of up to 62 KiB lives inside
 * its head; a larger one is written first as immutable chunks under a fresh
 * id, announced by an intent, which a head commit adopts (deleting the
 * intent) or the collector deletes: a chunk set is either adopted or
 * collected, never both. A reader whose chunk set a newer write released
 * starts over.
 *
 * @module
 */

import type { HandleRecord } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { AGAIN, backoff, optimistic } from "../_retry.ts";
import {
  type BodyRef,
  CHUNK_BYTES,
  CHUNKS_PER_COMMIT,
  type ChunkSet,
  decodeBytes,
  DELETE_BATCH,
  DELETE_IN_COMMIT,
  type Encoded,
  encodeText,
  type Head,
  INLINE_MAX,
  type Intent,
  newId,
  Raced,
  recordOf,
} from "./_codec.ts";
import type { KvIo } from "./_io.ts";

/** Writes `enc` as a new chunk set announced by an intent; `null` when another process collected it meanwhile. */
export async function writeChunks(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  enc: Encoded,
): Promise<ChunkSet | null> {
  const d = newId();
  const n = Math.max(1, Math.ceil(enc.bytes.length / CHUNK_BYTES));
  const intent = db.keys.intent(Date.now(), u, h, d);
  let intentVs = "";
  for (let first = 0; first < n; first += CHUNKS_PER_COMMIT) {
    const res = await db.commit((op) => {
      if (first === 0) op.set(intent, { n } satisfies Intent);
      else op.check({ key: intent, versionstamp: intentVs });
      for (let i = first; i < Math.min(n, first + CHUNKS_PER_COMMIT); i++) {
        op.set(
          db.keys.chunk(u, h, d, i),
          enc.bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
        );
      }
    });
    if (!res.ok) return null;
    if (first === 0) intentVs = res.versionstamp;
  }
  return { d, n, intent, intentVs };
}

/** Turns a state into where it will live: inline, or a fresh chunk set. */
export async function bodyOf(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  text: string,
  reuse?: { head: Head; text: string },
): Promise<BodyRef | null> {
  if (reuse && reuse.text === text && reuse.head.d !== undefined) {
    const { d, n = 0, z, x } = reuse.head;
    return { d, n, z, utf16: x === true };
  }
  const enc = encodeText(text);
  if (enc.bytes.length <= INLINE_MAX) {
    return { inline: enc.bytes, z: enc.bytes.length, utf16: enc.utf16 };
  }
  const set = await writeChunks(db, u, h, enc);
  if (!set) return null;
  return { d: set.d, n: set.n, z: enc.bytes.length, utf16: enc.utf16, set };
}

/** Reads a head's state text; throws {@link Raced} when its chunks are gone. */
export async function stateText(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  head: Head,
): Promise<string> {
  if (head.b instanceof Uint8Array) return decodeBytes(head.b, head.x === true);
  if (typeof head.d !== "string" || typeof head.n !== "number") {
    throw new BackendError(
      "A stored Deno KV record is malformed: it has neither a state nor chunks.",
    );
  }
  return await readChunks(
    db,
    [...db.keys.p, "u", u, "c", h, head.d],
    head.n,
    head.z,
    head.x === true,
  );
}

/** Reads and joins `n` chunks under `prefix`, `z` bytes in all; throws {@link Raced} when some are gone. */
export async function readChunks(
  db: KvIo,
  prefix: Deno.KvKey,
  n: number,
  z: number,
  utf16: boolean,
): Promise<string> {
  const entries = await db.range<Uint8Array>({ prefix }, {
    batchSize: Math.min(1000, Math.max(1, n)),
  });
  if (entries.length !== n) throw new Raced();
  const bytes = new Uint8Array(z);
  let at = 0;
  for (const [i, e] of entries.entries()) {
    const idx = e.key[e.key.length - 1];
    if (idx !== i || !(e.value instanceof Uint8Array) || at + e.value.length > z) {
      throw new Raced();
    }
    bytes.set(e.value, at);
    at += e.value.length;
  }
  if (at !== z) throw new Raced();
  return decodeBytes(bytes, utf16);
}

/** Reads a record and its state, starting over when a newer write released its chunks. */
export async function loadRecord(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  handle: string,
  first?: Deno.KvEntryMaybe<Head>,
): Promise<{ entry: Deno.KvEntryMaybe<Head>; record: HandleRecord | null; text: string | null }> {
  const deadline = Date.now() + db.timeoutMs;
  let entry = first ?? await db.get<Head>(db.keys.head(u, h));
  return await optimistic(async () => {
    const head = entry.value;
    if (head === null) return { entry, record: null, text: null };
    try {
      const text = await stateText(db, u, h, head);
      return { entry, record: recordOf(handle, head, text), text };
    } catch (e) {
      if (!(e instanceof Raced)) throw e;
    }
    const again = await db.get<Head>(db.keys.head(u, h));
    if (again.versionstamp === entry.versionstamp) {
      throw new BackendError(
        `The state of "${handle}" is incomplete in Deno KV (chunks are missing). Restore it from a backup or revoke the handle.`,
      );
    }
    if (Date.now() >= deadline) {
      throw new BackendError(
        `"${handle}" changed faster than it could be read for ${db.timeoutMs} ms; try again.`,
      );
    }
    entry = again;
    return AGAIN;
  }, backoff);
}

/**
 * Deletes what an intent still at `vs` stands for (a chunk set, or a run of
 * changelog entries); `false` when someone else owns it now.
 */
export async function collect(
  db: KvIo,
  intent: Deno.KvKey,
  vs: string,
  it: Intent,
): Promise<boolean> {
  const base = db.keys.p.length;
  const u = intent[base + 2]!, h = intent[base + 3]!, d = intent[base + 4] as string;
  const n = it.n;
  const keyOf = (i: number): Deno.KvKey =>
    it.l !== undefined ? db.keys.log(u, h, it.l, (it.f ?? 0) + i) : db.keys.chunk(u, h, d, i);
  if (n <= DELETE_IN_COMMIT) {
    const res = await db.commit((op) => {
      op.check({ key: intent, versionstamp: vs }).delete(intent);
      for (let i = 0; i < n; i++) op.delete(keyOf(i));
    });
    return res.ok;
  }
  // Too many for one commit: mark the intent dead first (a writer checking
  // it can no longer adopt the set), then delete the keys, then the intent.
  const res = await db.commit((op) => {
    op.check({ key: intent, versionstamp: vs }).set(
      intent,
      { ...it, dead: true } satisfies Intent,
    );
  });
  if (!res.ok) return false;
  for (let i = 0; i < n; i += DELETE_BATCH) {
    await db.commit((op) => {
      for (let j = i; j < Math.min(n, i + DELETE_BATCH); j++) op.delete(keyOf(j));
    });
  }
  await db.commit((op) => {
    op.check({ key: intent, versionstamp: res.versionstamp }).delete(intent);
  });
  return true;
}

/** Where a head's state lives now, for a commit that keeps it (inline, or its chunk set as it is). */
export function bodyRefOf(head: Head): BodyRef {
  const utf16 = head.x === true;
  if (head.b instanceof Uint8Array) return { inline: head.b, z: head.z, utf16 };
  return { d: head.d!, n: head.n ?? 0, z: head.z, utf16 };
}

/** Releases a chunk set this call wrote but did not get adopted. Errors are left to `sweep`. */
export async function releaseBody(db: KvIo, body: BodyRef | null | undefined): Promise<void> {
  if (!body || !("set" in body) || !body.set) return;
  await collect(db, body.set.intent, body.set.intentVs, { n: body.set.n }).catch(() => false);
}

/**
 * Adds the deletion of a head's chunk set: in this commit when at most
 * `inCommit` chunks, else through a dead intent the collector empties.
 * Returns that intent.
 */
export function dropChunks(
  db: KvIo,
  op: Deno.AtomicOperation,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  old: Head,
  inCommit: number = DELETE_IN_COMMIT,
): Deno.KvKey | null {
  const n = old.n ?? 0, d = old.d!;
  if (n <= inCommit) {
    for (let i = 0; i < n; i++) op.delete(db.keys.chunk(u, h, d, i));
    return null;
  }
  const intent = db.keys.intent(0, u, h, d);
  op.set(intent, { n, dead: true } satisfies Intent);
  return intent;
}

/** Collects what a head commit handed to the collector, right after it (else `sweep` will). */
export async function afterCommit(
  db: KvIo,
  intents: readonly Deno.KvKey[],
  vs: string,
): Promise<void> {
  for (const intent of intents) {
    const it = (await db.get<Intent>(intent).catch(() => null))?.value;
    if (it) await collect(db, intent, vs, it).catch(() => false);
  }
}
