/**
 * The Deno KV backend's idempotency records: read in the snapshot of the
 * write, written in its commit (a large result's state as a chunked copy
 * written first), and reclaimed by `sweep`.
 *
 * @module
 */

import type { HandleRecord, Replayed, WriteContext } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import {
  type BodyRef,
  CHUNK_BYTES,
  CHUNKS_PER_COMMIT,
  decodeBytes,
  DELETE_BATCH,
  DELETE_IN_COMMIT,
  encodeText,
  type Head,
  type IdemValue,
  indexOf,
  INLINE_MAX,
  newId,
  Raced,
  recordOf,
  type Trashed,
} from "./_codec.ts";
import { readChunks } from "./_bodies.ts";
import type { KvIo } from "./_io.ts";

/** The idempotency part of a write: its mutations and the chunk copy of a large result. */
export interface IdemPart {
  /** Adds the record's mutations to the write's commit. */
  add: (op: Deno.AtomicOperation) => void;
  /** The chunked copy of a large result, to delete when the write loses. */
  copy: { d: string; n: number } | null;
}

/** Reads the head and, when the call carries a claim, its idempotency record, in one snapshot. */
export async function readHeads(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  ctx: WriteContext,
): Promise<[Deno.KvEntryMaybe<Head>, Deno.KvEntryMaybe<IdemValue> | null]> {
  const c = ctx.idempotency;
  if (!c) return [await db.get<Head>(db.keys.head(u, h)), null];
  const [head, idem] = await db.io(() =>
    db.kv.getMany<[Head, IdemValue]>([db.keys.head(u, h), db.keys.idem(u, c)])
  );
  return [head, idem];
}

/** Like {@link DenoKvBackend.#heads}, with the trash entry of the handle in the same snapshot. */
export async function readHeadsAndTrash(
  db: KvIo,
  u: Deno.KvKeyPart,
  h: Deno.KvKeyPart,
  ctx: WriteContext,
): Promise<
  [Deno.KvEntryMaybe<Head>, Deno.KvEntryMaybe<IdemValue> | null, Deno.KvEntryMaybe<Trashed>]
> {
  const c = ctx.idempotency;
  if (!c) {
    const [head, trash] = await db.io(() =>
      db.kv.getMany<[Head, Trashed]>([db.keys.head(u, h), db.keys.trash(u, h)])
    );
    return [head, null, trash];
  }
  const [head, trash, idem] = await db.io(() =>
    db.kv.getMany<[Head, Trashed, IdemValue]>([
      db.keys.head(u, h),
      db.keys.trash(u, h),
      db.keys.idem(u, c),
    ])
  );
  return [head, idem, trash];
}

/** The replay answer when a live idempotency record exists. */
export async function replayOf(
  db: KvIo,
  u: Deno.KvKeyPart,
  idem: Deno.KvEntryMaybe<IdemValue> | null,
  ctx: WriteContext,
): Promise<Replayed | null> {
  const v = idem?.value;
  if (!v || v.t <= ctx.now) return null;
  if (!v.r) return { replayed: true, fingerprint: v.f, result: null };
  let text: string;
  if (v.b instanceof Uint8Array) text = decodeBytes(v.b, v.x === true);
  else {
    try {
      text = await readChunks(
        db,
        [...db.keys.p, "u", u, "q", v.d ?? ""],
        v.n ?? 0,
        v.z ?? 0,
        v.x === true,
      );
    } catch (e) {
      if (!(e instanceof Raced)) throw e;
      throw new BackendError(
        "The stored result of this idempotency key is incomplete; retry with a new key after checking the handle's state.",
      );
    }
  }
  const r = v.r;
  return {
    replayed: true,
    fingerprint: v.f,
    result: recordOf(r.h, r, text),
  };
}

/**
 * Prepares the idempotency record of a write: a copy of a large result's
 * state is written first (with `expireIn`, so a crash leaves nothing for
 * long). Returns the mutation builder and the copy (to delete on a lost race).
 */
export async function prepareIdem(
  db: KvIo,
  u: Deno.KvKeyPart,
  ctx: WriteContext,
  prev: Deno.KvEntryMaybe<IdemValue> | null,
  result: HandleRecord | null,
  resultBody: BodyRef | null,
): Promise<IdemPart> {
  const c = ctx.idempotency;
  if (!c || !prev) return { add: () => {}, copy: null };
  const key = db.keys.idem(u, c);
  const expireIn = Math.max(1, Math.round(c.expiresAt - ctx.now));
  const value: IdemValue = { f: c.fingerprint, t: c.expiresAt, r: result && indexOf(result) };
  let copy: { d: string; n: number } | null = null;
  if (result) {
    const enc = resultBody && "inline" in resultBody
      ? { bytes: resultBody.inline, utf16: resultBody.utf16 }
      : encodeText(result.state);
    if (enc.utf16) value.x = true;
    if (enc.bytes.length <= INLINE_MAX) value.b = enc.bytes;
    else {
      const d = newId(), n = Math.ceil(enc.bytes.length / CHUNK_BYTES);
      for (let first = 0; first < n; first += CHUNKS_PER_COMMIT) {
        await db.commit((op) => {
          for (let i = first; i < Math.min(n, first + CHUNKS_PER_COMMIT); i++) {
            op.set(
              db.keys.copy(u, d, i),
              enc.bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
              { expireIn },
            );
          }
        });
      }
      Object.assign(value, { d, n, z: enc.bytes.length });
      copy = { d, n };
    }
  }
  const old = prev.value;
  const add = (op: Deno.AtomicOperation) => {
    op.check(prev);
    op.set(key, value, { expireIn });
    op.set(db.keys.idemExpiry(c.expiresAt, key), 0, { expireIn });
    if (old) {
      if (old.t !== c.expiresAt) op.delete(db.keys.idemExpiry(old.t, key));
      if (old.d !== undefined && (old.n ?? 0) <= DELETE_IN_COMMIT) {
        for (let i = 0; i < (old.n ?? 0); i++) op.delete(db.keys.copy(u, old.d, i));
      }
    }
  };
  return { add, copy };
}

/** Deletes the chunked copy of a result (best effort: `sweep` collects what is left). */
export async function dropCopy(
  db: KvIo,
  u: Deno.KvKeyPart,
  copy: { d: string; n: number } | null,
): Promise<void> {
  if (!copy) return;
  for (let i = 0; i < copy.n; i += DELETE_BATCH) {
    await db.commit((op) => {
      for (let j = i; j < Math.min(copy.n, i + DELETE_BATCH); j++) {
        op.delete(db.keys.copy(u, copy.d, j));
      }
    }).catch(() => null);
  }
}

/** Deletes an idempotency record past its expiry, with its index entry and copy. */
export async function dropIdem(db: KvIo, key: Deno.KvKey, t: number, now: number): Promise<void> {
  const entry = await db.get<IdemValue>(key);
  const v = entry.value;
  const u = key[db.keys.p.length + 1]!;
  if (v && v.t > now) return;
  const copyN = v?.n ?? 0;
  await db.commit((op) => {
    op.check(entry).delete(db.keys.idemExpiry(t, key));
    if (v) {
      op.delete(key);
      if (v.t !== t) op.delete(db.keys.idemExpiry(v.t, key));
      if (v.d !== undefined && copyN <= DELETE_IN_COMMIT) {
        for (let i = 0; i < copyN; i++) op.delete(db.keys.copy(u, v.d, i));
      }
    }
  });
  if (v?.d !== undefined && copyN > DELETE_IN_COMMIT) {
    await dropCopy(db, u, { d: v.d, n: copyN });
  }
}
