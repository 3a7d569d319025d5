/**
 * Every stored copy of state content on Deno KV (SPEC 9.2, `mcpstate
 * encrypt`): one listing of the users' subspace `[P, "u"]`, a page at a
 * time, keeps the heads (`h`: a record's state, inline or chunked, and its
 * preview, which its listing index entry repeats), the trash entries (`t`),
 * the changelog entries (`log`, those a read no longer returns included)
 * and the idempotency records (`k`, the kept result's state inline or as a
 * chunked copy, and its preview).
 *
 * A rewrite is one commit that checks the versionstamp read (so a write
 * since wins). A state that is chunked once rewritten is written first as
 * a chunk set announced by an intent, which the commit adopts, as every
 * write of the backend does; chunks the commit supersedes are collected.
 * A handle or user too long for a key part is keyed by its digest: its name
 * is read back from the record's index entry or the user's name key; a
 * trashed record of such a handle (only an import writes one) cannot be
 * named back and is left out, as the trash listing leaves it out.
 *
 * @module
 */

import type * as B from "../../backend.ts";
import { afterCommit, bodyOf, dropChunks, readChunks, releaseBody, stateText } from "./_bodies.ts";
import {
  type BodyRef,
  CHUNK_BYTES,
  CHUNKS_PER_COMMIT,
  decodeBytes,
  DELETE_IN_COMMIT,
  encodeText,
  type Head,
  type IdemValue,
  type IndexEntry,
  INLINE_MAX,
  type LogPlan,
  type LogValue,
  logValueOf,
  newId,
  Raced,
  recordOf,
  type Trashed,
} from "./_codec.ts";
import { putHead } from "./_heads.ts";
import { dropCopy } from "./_idempotency.ts";
import type { KvIo } from "./_io.ts";
import { staleUsage } from "./_usage.ts";

/** Where a copy is: its key and the versionstamp it was read at. */
interface Ref {
  key: Deno.KvKey;
  vs: string;
}

/** The kinds of keys under a user that hold content, by their part after the user. */
const CONTENT = new Set(["h", "t", "log", "k"]);

/** A record's state and preview, as texts. */
function textsOf(state: string, preview: string | undefined): string[] {
  return preview === undefined ? [state] : [state, preview];
}

/** Whether two lists of texts are equal. */
function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}

/** A head whose state now lives in `body`, with `preview`. */
function withBody(head: Head, body: BodyRef, preview: string | undefined): Head {
  const { b: _b, d: _d, n: _n, x: _x, p: _p, ...rest } = head;
  const out: Head = { ...rest, z: body.z };
  if ("inline" in body) out.b = body.inline;
  else Object.assign(out, { d: body.d, n: body.n });
  if (body.utf16) out.x = true;
  if (preview !== undefined) out.p = preview;
  return out;
}

/** The content primitives of a Deno KV backend. */
export class KvContent implements B.ContentPrimitives {
  readonly #db: KvIo;

  /** @param db The backend's KV. */
  constructor(db: KvIo) {
    this.#db = db;
  }

  /** {@inheritDoc ContentPrimitives.scan} */
  async scan(query: { after?: string; limit: number }): Promise<B.ContentPage> {
    const db = this.#db;
    const { entries, cursor } = await db.io(async () => {
      const it = db.kv.list({ prefix: [...db.keys.p, "u"] }, {
        limit: query.limit,
        ...(query.after === undefined ? {} : { cursor: query.after }),
      });
      const entries: Deno.KvEntry<unknown>[] = [];
      for await (const e of it) entries.push(e);
      return { entries, cursor: it.cursor };
    });
    const items: B.StoredContent[] = [];
    for (const e of entries) {
      if (CONTENT.has(e.key[db.keys.p.length + 2] as string)) {
        items.push(...await this.#copies(e));
      }
    }
    return { items, next: entries.length < query.limit || cursor === "" ? null : cursor };
  }

  /** The name of user key part `u`; `null` when it cannot be named back. */
  async #user(u: Deno.KvKeyPart): Promise<string | null> {
    if (typeof u === "string") return u;
    const name = await this.#db.get<string>(this.#db.keys.userName(u));
    return typeof name.value === "string" ? name.value : null;
  }

  /** The handle of key part `h` of user `u`; `null` when it cannot be named back. */
  async #handle(u: Deno.KvKeyPart, h: Deno.KvKeyPart): Promise<string | null> {
    if (typeof h === "string") return h;
    const head = (await this.#db.get<Head>(this.#db.keys.head(u, h))).value;
    if (!head) return null;
    const index = await this.#db.get<IndexEntry>(this.#db.keys.index(u, head.u, h));
    return index.value?.h ?? null;
  }

  /** The copies an entry holds (none for one this backend cannot name, or that raced a write). */
  async #copies(e: Deno.KvEntry<unknown>): Promise<B.StoredContent[]> {
    const db = this.#db, n = db.keys.p.length;
    const u = e.key[n + 1]!, what = e.key[n + 2] as string;
    const user = await this.#user(u);
    if (user === null) return [];
    const ref: Ref = { key: e.key, vs: e.versionstamp };
    if (what === "k") {
      const v = e.value as IdemValue;
      if (!v.r) return [];
      const state = await this.#idemState(u, v);
      if (state === null) return [];
      return [{ kind: "result", user, handle: v.r.h, texts: textsOf(state, v.r.p), ref }];
    }
    const h = e.key[n + 3]!;
    const handle = what === "t" && typeof h !== "string" ? null : await this.#handle(u, h);
    if (handle === null) return [];
    if (what === "log") {
      const v = e.value as LogValue;
      return [{ kind: "entry", user, handle, texts: [decodeBytes(v.b, v.x === true)], ref }];
    }
    const head = what === "h" ? e.value as Head : (e.value as Trashed).h;
    let state: string;
    try {
      state = await stateText(db, u, h, head);
    } catch (err) {
      if (err instanceof Raced) return []; // rewritten meanwhile: its chunks went
      throw err;
    }
    const kind = what === "h" ? "record" : "trash";
    return [{ kind, user, handle, texts: textsOf(state, head.p), ref }];
  }

  /** The state of an idempotency record's result; `null` when its copy is gone. */
  async #idemState(u: Deno.KvKeyPart, v: IdemValue): Promise<string | null> {
    if (v.b instanceof Uint8Array) return decodeBytes(v.b, v.x === true);
    const prefix = [...this.#db.keys.p, "u", u, "q", v.d ?? ""];
    try {
      return await readChunks(this.#db, prefix, v.n ?? 0, v.z ?? 0, v.x === true);
    } catch (e) {
      if (e instanceof Raced) return null;
      throw e;
    }
  }

  /** {@inheritDoc ContentPrimitives.replace} */
  async replace(
    item: B.StoredContent,
    texts: string[],
  ): Promise<{ replaced: boolean; current: B.StoredContent | null }> {
    const { key } = item.ref as Ref;
    const entry = await this.#db.get<unknown>(key);
    const current = entry.value === null ? null : (await this.#copies(entry as never))[0] ?? null;
    if (!current || current.ref === undefined || !same(current.texts, item.texts)) {
      return { replaced: false, current };
    }
    const done = await this.#put(item, entry as Deno.KvEntry<unknown>, texts);
    if (done) return { replaced: true, current: null };
    const again = await this.#db.get<unknown>(key);
    return {
      replaced: false,
      current: again.value === null ? null : (await this.#copies(again as never))[0] ?? null,
    };
  }

  /** Writes `texts` in place of the copy `entry` holds, if it is still at its versionstamp. */
  async #put(item: B.StoredContent, entry: Deno.KvEntry<unknown>, texts: string[]) {
    const db = this.#db, n = db.keys.p.length;
    const u = entry.key[n + 1]!;
    if (item.kind === "entry") {
      const v = entry.value as LogValue;
      const value = logValueOf({ version: 0, at: v.a, text: texts[0]! });
      return (await db.commit((op) => op.check(entry).set(entry.key, value))).ok;
    }
    if (item.kind === "result") return await this.#putResult(u, entry as never, texts);
    const h = entry.key[n + 3]!;
    const old = item.kind === "record" ? entry.value as Head : (entry.value as Trashed).h;
    const body = await bodyOf(db, u, h, texts[0]!);
    if (!body) return false;
    let ok = false, after: Deno.KvKey[] = [];
    try {
      const res = await db.commit((op) => {
        op.check(entry);
        if (item.kind === "record") {
          const next = recordOf(item.handle, old, texts[0]!);
          if (texts[1] !== undefined) next.preview = texts[1];
          const log: LogPlan = old.L === undefined
            ? { drops: [] }
            : { L: old.L, g: old.g!, ga: old.ga!, drops: [] };
          after = putHead(db, op, u, h, old, next, body, newId(), log);
          staleUsage(db, op, u);
        } else {
          const t = entry.value as Trashed;
          op.set(entry.key, { ...t, h: withBody(old, body, texts[1]) } satisfies Trashed);
          if ("set" in body && body.set) {
            op.check({ key: body.set.intent, versionstamp: body.set.intentVs });
            op.delete(body.set.intent);
          }
          if (old.d !== undefined) {
            const intent = dropChunks(db, op, u, h, old);
            if (intent) after.push(intent);
          }
        }
      });
      if (!res.ok) return false;
      ok = true;
      await afterCommit(db, after, res.versionstamp);
      return true;
    } finally {
      if (!ok) await releaseBody(db, body);
    }
  }

  /** Rewrites an idempotency record's result, if it is still at its versionstamp. */
  async #putResult(u: Deno.KvKeyPart, entry: Deno.KvEntry<IdemValue>, texts: string[]) {
    const db = this.#db, v = entry.value;
    // At least a day: the record's expiry is judged by `t` against the store's
    // clock, which need not be this machine's (an injected clock), so the key
    // may outlive it a little but a rewrite never drops it early.
    const expireIn = Math.max(86_400_000, Math.round(v.t - Date.now()));
    const { b: _b, d: _d, n: _n, z: _z, x: _x, ...rest } = v;
    const value: IdemValue = {
      ...rest,
      r: { ...v.r!, ...(texts[1] === undefined ? {} : { p: texts[1] }) },
    };
    const enc = encodeText(texts[0]!);
    if (enc.utf16) value.x = true;
    let copy: { d: string; n: number } | null = null;
    if (enc.bytes.length <= INLINE_MAX) value.b = enc.bytes;
    else {
      const d = newId(), count = Math.ceil(enc.bytes.length / CHUNK_BYTES);
      for (let first = 0; first < count; first += CHUNKS_PER_COMMIT) {
        await db.commit((op) => {
          for (let i = first; i < Math.min(count, first + CHUNKS_PER_COMMIT); i++) {
            const bytes = enc.bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
            op.set(db.keys.copy(u, d, i), bytes, { expireIn });
          }
        });
      }
      Object.assign(value, { d, n: count, z: enc.bytes.length });
      copy = { d, n: count };
    }
    const oldN = v.d === undefined ? 0 : v.n ?? 0;
    const res = await db.commit((op) => {
      op.check(entry).set(entry.key, value, { expireIn });
      if (oldN <= DELETE_IN_COMMIT) {
        for (let i = 0; i < oldN; i++) op.delete(db.keys.copy(u, v.d!, i));
      }
    });
    if (!res.ok) await dropCopy(db, u, copy);
    else if (oldN > DELETE_IN_COMMIT) await dropCopy(db, u, { d: v.d!, n: oldN });
    return res.ok;
  }
}
