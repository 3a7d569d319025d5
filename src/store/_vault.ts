/**
 * Encryption at rest's one seam (SPEC 9.2): a {@link Backend} over another
 * that seals, under the user's data key and bound to `(user, handle)`, every
 * copy of state content the store hands down — a record's state and
 * preview, every changelog entry, and so the records engines keep for
 * idempotency keys — and opens everything it reads back. Engines keep
 * treating content as opaque text.
 *
 * `Backend.update` runs its change synchronously inside the engine's atomic
 * step, and WebCrypto is asynchronous: so an update reads the record, opens
 * it, runs the change on the plaintext and seals the step first, then hands
 * the engine a change that writes that step only when the record is still
 * the one it read, and otherwise starts over from the newer one. A
 * transfer does the same with the whole content: sealed anew for the new
 * owner, written by the move's own step if the record did not change.
 *
 * Without a key ring (a store opened without keys on a backend that keeps
 * data keys) it only refuses sealed content, as `no_key` (and transfers
 * of users who have a data key).
 *
 * @module
 */

import type * as B from "../backend.ts";
import { isReplayed } from "../backend.ts";
import { BackendError, EncryptionError, InvalidArgument } from "../errors.ts";
import { isSealed, KeyRing, open, seal } from "../keyring.ts";
import { utf8Length } from "../json.ts";
import type { EncryptionOptions } from "../types.ts";
import { ByteCappedCache } from "../backends/_cache.ts";

/** How many users' unwrapped data keys a store keeps at most. */
export const KEY_CACHE_SIZE = 1024;

/** The most opened content a store keeps (UTF-16 code units, sealed and plain counted). */
const OPENED_MAX = 32 * 1024 * 1024;

/** Content opened or sealed before, with the data key and the sealed text it is valid for. */
interface Opened {
  key: CryptoKey;
  sealed: string;
  plain: string;
}

/** The changelog entries that carry no state content and may stay clear. */
const CLEAR_OPS = new Set(["share", "unshare", "transfer"]);

/** Thrown inside an engine's step when the record is not the one the change ran on. */
class Retry {
  constructor(readonly current: B.HandleRecord | null) {}
}

/** Whether two reads of a record are the same write. */
function same(a: B.HandleRecord | null, b: B.HandleRecord | null): boolean {
  if (a === null || b === null) return a === b;
  return a.version === b.version && a.state === b.state && a.updatedAt === b.updatedAt;
}

/** Whether a clear changelog entry is one that may stay clear. */
function clearAudit(text: string): boolean {
  try {
    return CLEAR_OPS.has((JSON.parse(text) as { op?: string }).op ?? "");
  } catch {
    return false;
  }
}

/** The data keys and the sealing of one store. */
class Sealer {
  readonly #ring: Promise<KeyRing> | null;
  readonly #keys: () => Promise<B.KeyPrimitives | undefined>;
  /** Unwrapped data keys by user, with the stored form each came from. */
  readonly #cache = new Map<string, { key: CryptoKey; stored: B.StoredKey }>();
  /** Without keys: whether the backend kept any data key when first asked, and who has one. */
  #anyKeys: { none: boolean; at: number } | null = null;
  #probing: Promise<void> | null = null;
  readonly #keyed = new Set<string>();
  // A read of the very text opened or sealed before, by the same data key,
  // costs no decryption: the text is compared whole, so another ciphertext
  // (changed, moved, or of another key) still goes through AES-GCM.
  readonly #opened = new ByteCappedCache<Opened>(
    OPENED_MAX / 8,
    OPENED_MAX,
    (o) => o.sealed.length + o.plain.length,
  );

  constructor(ring: Promise<KeyRing> | null, keys: () => Promise<B.KeyPrimitives | undefined>) {
    this.#ring = ring;
    this.#keys = keys;
    // A failure is asked again by the first write.
    if (ring === null) this.probe().catch(() => {});
  }

  /** Whether the store has keys (else it only refuses sealed content). */
  get on(): boolean {
    return this.#ring !== null;
  }

  /** The key primitives that keep the data keys. */
  keys(): Promise<B.KeyPrimitives | undefined> {
    return this.#keys();
  }

  /** The key ring (the store has keys). */
  ring(): Promise<KeyRing> {
    return this.#ring!;
  }

  /** Drops a user's cached key. */
  forget(user: string): void {
    this.#cache.delete(user);
    this.#keyed.delete(user);
  }

  /**
   * Without keys, refuses a write for a user who has a data key (`no_key`):
   * it would leave plaintext beside their sealed content. Whether the
   * backend keeps any data key at all is asked when the store opens, then
   * again in the background at most once a second while it keeps none, so
   * a write waits for that question only before its first answer. With
   * `strict`, the user's key is asked of the key store whatever that answer.
   */
  async refuseKeyed(user: string, strict = false): Promise<void> {
    if (this.on) return;
    if (this.#anyKeys === null) await this.probe();
    else if (this.#anyKeys.none && Date.now() - this.#anyKeys.at >= 1000) {
      this.probe().catch(() => {});
    }
    if (this.#anyKeys!.none && !strict) return;
    if (!(await this.#keys())) return;
    if (
      (strict || !this.#keyed.has(user)) && (await (await this.#keys())!.get(user)) === null
    ) {
      this.#keyed.delete(user);
      return;
    }
    this.#keyed.add(user);
    throw EncryptionError.noKey();
  }

  /** Asks whether the backend keeps any data key (one question at a time). */
  probe(): Promise<void> {
    this.#probing ??= (async () => {
      try {
        const k = await this.#keys();
        const none = k === undefined || (await k.list({ limit: 1 })).length === 0;
        this.#anyKeys = { none, at: Date.now() };
      } finally {
        this.#probing = null;
      }
    })();
    return this.#probing;
  }

  /** The user's data key; with `create`, made on first use; `null` when it has none. */
  async key(user: string, create: boolean): Promise<CryptoKey | null> {
    const hit = this.#cache.get(user);
    if (hit) {
      this.#cache.delete(user);
      this.#cache.set(user, hit);
      return hit.key;
    }
    return this.#load(user, create, await (await this.#keys())!.get(user));
  }

  /**
   * The user's data key for a write that does not read the record first
   * (a new handle, a save without history), checked against the stored key:
   * a key that another process's `erase` destroyed, or that `keys rotate`
   * rewrapped, is never sealed with from the cache.
   */
  async writeKey(user: string): Promise<CryptoKey> {
    const stored = await (await this.#keys())!.get(user);
    const hit = this.#cache.get(user);
    if (hit && stored?.keyId === hit.stored.keyId && stored.wrapped === hit.stored.wrapped) {
      return hit.key;
    }
    this.#cache.delete(user);
    return (await this.#load(user, true, stored))!;
  }

  async #load(user: string, create: boolean, found: B.StoredKey | null) {
    const ring = await this.#ring!;
    let stored = found;
    let key: CryptoKey;
    if (stored) key = await ring.openDataKey(user, stored);
    else if (!create) return null;
    else {
      const fresh = await ring.newDataKey(user);
      stored = await (await this.#keys())!.create(user, fresh.stored, Date.now());
      key = stored.keyId === fresh.stored.keyId && stored.wrapped === fresh.stored.wrapped
        ? fresh.key
        : await ring.openDataKey(user, stored);
    }
    this.#cache.set(user, { key, stored });
    if (this.#cache.size > KEY_CACHE_SIZE) this.#cache.delete(this.#cache.keys().next().value!);
    return key;
  }

  /** The key to open `texts` of `user` with: refuses plaintext, or sealed text without keys. */
  async opener(user: string, texts: (string | undefined)[]): Promise<CryptoKey | null> {
    const sealed = texts.some((t) => t !== undefined && isSealed(t));
    if (!this.on) {
      if (sealed) throw EncryptionError.noKey();
      return null;
    }
    if (!sealed) {
      if (texts.some((t) => t !== undefined)) throw EncryptionError.plaintext();
      return null;
    }
    const key = await this.key(user, false);
    if (!key) throw EncryptionError.noKey();
    return key;
  }

  /** Opens a record read from the engine. */
  async openRecord<R extends B.HandleMeta & { state?: string }>(
    user: string,
    r: R,
    withPreview = true,
  ): Promise<R> {
    const key = await this.opener(user, [r.state, r.preview]);
    if (!key) return r;
    const out = { ...r };
    if (!withPreview) delete out.preview;
    // At once: each WebCrypto call is a hop to a worker thread.
    const [state, preview] = await Promise.all([
      r.state === undefined ? undefined : this.#open(key, user, r.handle, r.state, "s"),
      withPreview && r.preview !== undefined
        ? this.#open(key, user, r.handle, r.preview, "p")
        : undefined,
    ]);
    if (state !== undefined) out.state = state;
    if (preview !== undefined) out.preview = preview;
    return out;
  }

  /** Opens a record's preview only (listings). */
  async openMeta<M extends B.HandleMeta>(user: string, m: M): Promise<M> {
    if (m.preview === undefined) return m;
    const key = await this.opener(user, [m.preview]);
    return key ? { ...m, preview: await this.#open(key, user, m.handle, m.preview, "p") } : m;
  }

  /** Opens changelog entries; those of share, unshare and transfer may be clear. */
  async openEntries(user: string, handle: string, entries: B.ChangeEntry[]) {
    const out: B.ChangeEntry[] = [];
    let key: CryptoKey | null = null;
    for (const e of entries) {
      if (!isSealed(e.text)) {
        if (this.on && !clearAudit(e.text)) throw EncryptionError.plaintext();
        out.push(e);
        continue;
      }
      key ??= await this.opener(user, [e.text]);
      out.push({ ...e, text: await open(key!, user, handle, e.text) });
    }
    return out;
  }

  /** Opens a replay's kept result. */
  async openReplay(user: string, r: B.Replayed): Promise<B.Replayed> {
    return r.result ? { ...r, result: await this.openRecord(user, r.result) } : r;
  }

  /** Seals a text of `(user, handle)`; a record's state (`slot` "s") or preview ("p") is remembered for reads. */
  async seal(
    key: CryptoKey,
    user: string,
    handle: string,
    text: string,
    slot?: "s" | "p",
  ): Promise<string> {
    const sealed = await seal(key, user, handle, text);
    if (slot) this.#opened.set(`${slot}\0${user}\0${handle}`, { key, sealed, plain: text });
    return sealed;
  }

  /** Seals a record's state and preview. */
  async sealRecord(key: CryptoKey, user: string, r: B.HandleRecord): Promise<B.HandleRecord> {
    const [state, preview] = await Promise.all([
      this.seal(key, user, r.handle, r.state, "s"),
      r.preview === undefined ? undefined : this.seal(key, user, r.handle, r.preview, "p"),
    ]);
    return preview === undefined ? { ...r, state } : { ...r, state, preview };
  }

  /** Seals a changelog entry. */
  async sealEntry(key: CryptoKey, user: string, handle: string, e: B.ChangeEntry) {
    return { ...e, text: await seal(key, user, handle, e.text) };
  }

  /** Seals the entry a write context carries. */
  async sealCtx(key: CryptoKey, user: string, handle: string, ctx: B.WriteContext) {
    return ctx.entry ? { ...ctx, entry: await this.sealEntry(key, user, handle, ctx.entry) } : ctx;
  }

  async #open(
    key: CryptoKey,
    user: string,
    handle: string,
    text: string,
    slot: "s" | "p",
  ): Promise<string> {
    if (!isSealed(text)) throw EncryptionError.plaintext();
    const at = `${slot}\0${user}\0${handle}`;
    const hit = this.#opened.get(at);
    if (hit !== undefined && hit.key === key && hit.sealed === text) return hit.plain;
    let plain: string;
    try {
      plain = await open(key, user, handle, text);
    } catch (e) {
      // The cached data key may be stale: another process erased the user
      // since, and a new key seals their content now. Ask the store again.
      if (this.#cache.get(user)?.key !== key) throw e;
      this.forget(user);
      const fresh = await this.key(user, false);
      if (fresh === null) throw EncryptionError.noKey();
      plain = await open(key = fresh, user, handle, text);
    }
    this.#opened.set(at, { key, sealed: text, plain });
    return plain;
  }
}

/** The longest entry the engine keeps, as plaintext that seals within it. */
function sealedEntryMax(max: number | undefined): number | undefined {
  return max === undefined ? undefined : Math.max(1, Math.floor((max - 5) / 4) * 3 - 28);
}

/**
 * `update` through the seam: the change runs on the opened record, its step
 * sealed, and the engine writes it only if the record is still the one read.
 */
async function update(
  inner: B.Backend,
  s: Sealer,
  args: [string, string, B.Change, B.WriteContext],
): Promise<B.UpdateOutcome | B.Replayed> {
  const [user, handle, change, ctx] = args;
  if (!s.on) {
    await s.refuseKeyed(user);
    return inner.update(user, handle, (cur) => {
      if (cur && isSealed(cur.state)) throw EncryptionError.noKey();
      return change(cur);
    }, ctx);
  }
  let current = await inner.read(user, handle);
  for (;;) {
    const seen = current;
    // Runs on the opened record; a failure is thrown by the engine's step,
    // after its idempotency and grant checks, as the change would have.
    let plan: () => B.Step | null;
    // The answer when the engine runs the plan: what it writes, or the record as it is.
    let answer: B.HandleRecord | null = null;
    try {
      const plain = seen && await s.openRecord(user, seen);
      const step = change(plain);
      answer = step?.record ?? plain;
      if (step === null) plan = () => null;
      else {
        // A record that opened proves the cached key; without one, ask the store.
        const key = seen ? (await s.key(user, true))! : await s.writeKey(user);
        const sealed: B.Step = { record: await s.sealRecord(key, user, step.record) };
        if (step.entry) sealed.entry = await s.sealEntry(key, user, handle, step.entry);
        plan = () => sealed;
      }
    } catch (e) {
      plan = () => {
        throw e;
      };
    }
    try {
      const out = await inner.update(user, handle, (cur) => {
        if (!same(cur, seen)) throw new Retry(cur);
        return plan();
      }, ctx);
      if (isReplayed(out)) return s.openReplay(user, out);
      return { ...out, record: answer };
    } catch (e) {
      if (!(e instanceof Retry)) throw e;
      current = e.current;
    }
  }
}

/** How many times a transfer starts over from a record that changed meanwhile before it gives up. */
const TRANSFER_ATTEMPTS = 100;

/**
 * A record and its changelog as the new owner `to` is to hold them: opened
 * with the old owner's key, sealed with `to`'s (made on first use) and bound
 * to `(to, handle)`; the entries that may stay clear stay as they are.
 */
async function resealed(
  s: Sealer,
  user: string,
  to: string,
  r: B.HandleRecord,
  log: B.ChangeEntry[],
): Promise<B.TransferContent> {
  const h = r.handle;
  if (log.some((e) => !isSealed(e.text) && !clearAudit(e.text))) {
    throw EncryptionError.plaintext();
  }
  const sealed = log.filter((e) => isSealed(e.text));
  // The record first: opening it replaces a stale cached key of the user.
  const plain = await s.openRecord(user, r);
  const from = sealed.length === 0 ? null : await s.opener(user, [sealed[0]!.text]);
  // Nothing of the new owner's was read: their key is checked against the stored one.
  const key = await s.writeKey(to);
  // At once: each WebCrypto call is a hop to a worker thread.
  const [state, preview, ...texts] = await Promise.all([
    s.seal(key, to, h, plain.state, "s"),
    plain.preview === undefined ? undefined : s.seal(key, to, h, plain.preview, "p"),
    ...log.map(async (e) =>
      isSealed(e.text) ? seal(key, to, h, await open(from!, user, h, e.text)) : e.text
    ),
  ]);
  const entries = log.map((e, i) => ({ version: e.version, text: texts[i]! }));
  return preview === undefined
    ? { version: r.version, state: state!, entries }
    : { version: r.version, state: state!, preview, entries };
}

/**
 * `transfer.move` through the seam (SPEC 9.2): the record and its changelog
 * are read and sealed anew for the new owner ({@link resealed}), and the
 * engine writes that content in the move's own atomic step when the record
 * is still at the version read; otherwise (`"changed"`) it starts over.
 * Without keys, a transfer from or to a user who has a data key is refused
 * (`no_key`): content cannot be sealed anew, nor left plaintext beside theirs.
 */
async function move(
  inner: B.Backend,
  s: Sealer,
  args: [string, string, string, B.WriteContext, B.TransferStep],
): Promise<B.TransferOutcome> {
  const [user, handle, to, ctx, step] = args;
  const transfer = inner.transfer!;
  if (!s.on) {
    // Asked of the key store each time, as a restore is: a record sealed since
    // the last answer would move with its old binding and no longer open.
    await Promise.all([s.refuseKeyed(user, true), s.refuseKeyed(to, true)]);
    return transfer.move(user, handle, to, ctx, step);
  }
  for (let attempt = 0; attempt < TRANSFER_ATTEMPTS; attempt++) {
    const [r, log] = await Promise.all([
      inner.read(user, handle),
      inner.changes(user, handle, 0),
    ]);
    if (!r) return "absent";
    const content = await resealed(s, user, to, r, log);
    const out = await transfer.move(user, handle, to, ctx, { ...step, content });
    if (out !== "changed") return out;
  }
  throw new BackendError(
    `The handle ${handle} kept changing while it was being transferred; nothing was transferred. Retry.`,
  );
}

/** The record primitives, core ones, through the seam. */
function coreOps(inner: B.Backend, s: Sealer) {
  return {
    async insert(user: string, record: B.HandleRecord, ctx: B.WriteContext) {
      if (!s.on) return s.refuseKeyed(user).then(() => inner.insert(user, record, ctx));
      const key = await s.writeKey(user);
      const out = await inner.insert(
        user,
        await s.sealRecord(key, user, record),
        await s.sealCtx(key, user, record.handle, ctx),
      );
      return isReplayed(out) ? s.openReplay(user, out) : out;
    },
    // A read leaves the preview out (one decryption less): the store
    // computes it again from the state where it needs one (fork).
    async read(user: string, handle: string) {
      const r = await inner.read(user, handle);
      return r && s.openRecord(user, r, false);
    },
    async save(user: string, handle: string, write: B.ConditionalWrite, ctx: B.WriteContext) {
      let w = write, c = ctx;
      await s.refuseKeyed(user);
      if (s.on) {
        const key = await s.writeKey(user);
        const [state, preview, sealedCtx] = await Promise.all([
          s.seal(key, user, handle, write.state, "s"),
          write.preview === undefined ? undefined : s.seal(key, user, handle, write.preview, "p"),
          s.sealCtx(key, user, handle, ctx),
        ]);
        w = preview === undefined ? { ...write, state } : { ...write, state, preview };
        c = sealedCtx;
      }
      const out = await inner.save(user, handle, w, c);
      if (isReplayed(out)) return s.openReplay(user, out);
      if (!out.ok) {
        return {
          ok: false as const,
          current: out.current && await s.openRecord(user, out.current),
        };
      }
      if (s.on && write.preview !== undefined) {
        return { ...out, record: { ...out.record, state: write.state, preview: write.preview } };
      }
      return { ...out, record: await s.openRecord(user, out.record) };
    },
    update: (user: string, handle: string, change: B.Change, ctx: B.WriteContext) =>
      update(inner, s, [user, handle, change, ctx]),
    async remove(user: string, handle: string, ctx: B.WriteContext) {
      await s.refuseKeyed(user);
      const out = await inner.remove(user, handle, ctx);
      return isReplayed(out) ? s.openReplay(user, out) : out;
    },
    async untrash(user: string, handle: string, ctx: B.WriteContext) {
      // Asked of the key store each time: a trash copy sealed since the last
      // answer would be restored, then fail to open (a changing call that fails).
      await s.refuseKeyed(user, true);
      const r = await inner.untrash(user, handle, ctx);
      return r && s.openRecord(user, r);
    },
    async changes(user: string, handle: string, afterVersion: number) {
      return s.openEntries(user, handle, await inner.changes(user, handle, afterVersion));
    },
    async list(user: string, query: B.ListQuery) {
      const rows = await inner.list(user, query);
      return query.previews ? Promise.all(rows.map((m) => s.openMeta(user, m))) : rows;
    },
    sweep: (user: string | null, at: number, now: number) => inner.sweep(user, at, now),
  };
}

/** The optional groups, through the seam (present exactly when the engine has them). */
function groups(inner: B.Backend, s: Sealer, close: () => Promise<void>): Partial<B.Backend> {
  const out: { -readonly [K in keyof B.Backend]?: B.Backend[K] } = {};
  const { records, leases, trash, erasure, transfer } = inner;
  if (records) {
    out.records = {
      users: (q) => records.users(q),
      import: async (user, record, ctx) => {
        if (!s.on) return s.refuseKeyed(user).then(() => records.import(user, record, ctx));
        const key = await s.writeKey(user);
        return records.import(user, await s.sealRecord(key, user, record), ctx);
      },
    };
  }
  if (leases) {
    const { readLeased } = leases;
    out.leases = {
      acquire: (u, h, l, now) => leases.acquire(u, h, l, now),
      release: (u, h, holder, now) => leases.release(u, h, holder, now),
      of: (u, hs, now) => leases.of(u, hs, now),
    };
    if (readLeased) {
      out.leases.readLeased = async (u, h, now) => {
        const r = await readLeased.call(leases, u, h, now);
        return { ...r, record: r.record && await s.openRecord(u, r.record, false) };
      };
    }
  }
  if (trash) {
    out.trash = {
      list: async (u, q) => Promise.all((await trash.list(u, q)).map((m) => s.openMeta(u, m))),
      until: (u, h) => trash.until(u, h),
    };
  }
  if (erasure) {
    out.erasure = {
      count: (u, now) => erasure.count(u, now),
      erase: async (u, now) => {
        const counts = await erasure.erase(u, now);
        s.forget(u);
        await (await s.keys())?.delete(u);
        s.forget(u);
        return counts;
      },
    };
  }
  if (transfer) {
    out.transfer = { move: (u, h, to, ctx, step) => move(inner, s, [u, h, to, ctx, step ?? {}]) };
  }
  for (const name of ["feed", "quotas", "grants", "keys", "content"] as const) {
    if (inner[name]) Object.assign(out, { [name]: inner[name] });
  }
  out.close = close;
  return out;
}

/**
 * The backend a store with `encryption` (or without keys, on a backend that
 * keeps data keys) works through.
 *
 * @param inner The engine.
 * @param options The store's encryption options; absent: refuse sealed content only.
 * @returns The backend through the seam.
 * @throws {InvalidArgument} when neither the engine nor `keyStore` can keep data keys.
 */
export function vaultOf(inner: B.Backend, options: EncryptionOptions | undefined): B.Backend {
  let keyStore: Promise<B.Backend> | undefined;
  const keys = (): Promise<B.KeyPrimitives | undefined> => {
    if (options?.keyStore === undefined) return Promise.resolve(inner.keys);
    keyStore ??= import("../url.ts").then(async ({ openBackend }) => {
      const b = await openBackend(options.keyStore);
      if (!b.keys) {
        await b.close();
        throw new InvalidArgument(
          "encryption.keyStore names a backend that cannot keep data keys.",
          {
            field: "encryption.keyStore",
          },
        );
      }
      return b;
    });
    return keyStore.then((b) => b.keys);
  };
  if (options !== undefined && options.keyStore === undefined && !inner.keys) {
    throw new InvalidArgument(
      "This backend cannot keep data keys: give encryption.keyStore, a backend URL that can.",
      { field: "encryption" },
    );
  }
  if (options?.keyStore !== undefined && typeof options.keyStore !== "string") {
    throw new InvalidArgument("encryption.keyStore must be a backend URL.", {
      field: "encryption.keyStore",
    });
  }
  const ring = options === undefined ? null : KeyRing.from(options);
  // A ring that fails is reported by the first call that needs it.
  ring?.catch(() => {});
  const s = new Sealer(ring, keys);
  const close = async () => {
    await inner.close();
    if (keyStore) await (await keyStore.catch(() => null))?.close();
  };
  const vault: B.Backend = { ...coreOps(inner, s), ...groups(inner, s, close), close };
  MAINTENANCE.set(vault, maintenance(s, inner.maxEntryBytes));
  const max = s.on ? sealedEntryMax(inner.maxEntryBytes) : inner.maxEntryBytes;
  return Object.assign(vault, {
    ...(inner.reclaimsExpired === undefined ? {} : { reclaimsExpired: inner.reclaimsExpired }),
    ...(max === undefined ? {} : { maxEntryBytes: max }),
  });
}

/** How many times a copy or a key that keeps changing under its rewrite is tried. */
const TRIES = 32;

/**
 * How a stored copy of content stands: `sealed`, `clear` (a changelog entry
 * that carries no state content and may stay clear) or `plaintext`.
 */
export type CopyStatus = "sealed" | "clear" | "plaintext";

/**
 * What key maintenance needs of a store's seam (`mcpstate encrypt`, `keys
 * rotate`, `doctor`): its data keys, and each stored copy of content sealed,
 * or data key rewrapped, in place by compare-and-set.
 *
 * @internal
 */
export interface VaultMaintenance {
  /** Whether the store has keys. */
  readonly on: boolean;
  /** The key primitives that keep the data keys (the data backend's or the key store's). */
  keys(): Promise<B.KeyPrimitives | undefined>;
  /** The ids of the ring's keys, the current one first (none without keys). */
  ids(): Promise<string[]>;
  /** How a stored copy stands. */
  status(item: B.StoredContent): CopyStatus;
  /**
   * Seals a plaintext copy in place, under its user's data key (made on first
   * use): a compare-and-set against the copy as read, tried again on the copy
   * a concurrent write left (which wins). An entry that would no longer fit
   * the engine once sealed is kept as its `omitted` marker.
   */
  seal(
    content: B.ContentPrimitives,
    item: B.StoredContent,
  ): Promise<"sealed" | "current" | "gone" | "changing">;
  /** Rewraps a user's data key under the current key-encryption key, by compare-and-set. */
  rewrap(user: string, key: B.StoredKey): Promise<"rewrapped" | "current" | "gone" | "changing">;
}

/** The maintenance of each backend {@link vaultOf} made. */
const MAINTENANCE = new WeakMap<B.Backend, VaultMaintenance>();

/**
 * The key maintenance of a backend {@link vaultOf} made (`undefined` for any
 * other backend: a store with no data keys and no encryption).
 *
 * @param backend A store's backend.
 * @returns Its maintenance.
 * @internal
 */
export function maintenanceOf(backend: B.Backend): VaultMaintenance | undefined {
  return MAINTENANCE.get(backend);
}

/** How a stored copy stands (see {@link CopyStatus}). */
function statusOf(item: B.StoredContent): CopyStatus {
  if (item.texts.every(isSealed)) return "sealed";
  return item.kind === "entry" && clearAudit(item.texts[0]!) ? "clear" : "plaintext";
}

/**
 * An entry's text, or its `omitted` marker (as the store writes one for an
 * entry over its size) when the text would no longer fit `max` sealed.
 */
function fitted(text: string, max: number | undefined): string {
  const fits = sealedEntryMax(max);
  if (fits === undefined || utf8Length(text) <= fits) return text;
  let head: Record<string, unknown> = {};
  try {
    head = JSON.parse(text) as Record<string, unknown>;
  } catch { /* not JSON: the marker alone */ }
  const kept: Record<string, unknown> = {};
  for (const k of ["version", "at", "writer", "op", "via"]) if (k in head) kept[k] = head[k];
  return JSON.stringify({ ...kept, omitted: true });
}

/** The maintenance of the seam `s` over an engine whose entries hold at most `maxEntry` bytes. */
function maintenance(s: Sealer, maxEntry: number | undefined): VaultMaintenance {
  return {
    on: s.on,
    keys: () => s.keys(),
    ids: async () => {
      if (!s.on) return [];
      const ring = await s.ring();
      return [ring.current, ...ring.ids.filter((id) => id !== ring.current)];
    },
    status: statusOf,
    async seal(content, item) {
      for (let i = 0; i < TRIES; i++) {
        if (statusOf(item) !== "plaintext") return "current";
        const { user, handle } = item;
        const key = await s.writeKey(user);
        const texts = await Promise.all(
          item.texts.map((t) =>
            isSealed(t)
              ? t
              : s.seal(key, user, handle, item.kind === "entry" ? fitted(t, maxEntry) : t)
          ),
        );
        const out = await content.replace(item, texts);
        if (out.replaced) return "sealed";
        if (!out.current) return "gone";
        item = out.current;
      }
      return "changing";
    },
    async rewrap(user, stored) {
      const ring = await s.ring();
      const keys = (await s.keys())!;
      for (let i = 0; i < TRIES; i++) {
        const next = await ring.rewrap(user, stored);
        if (next === stored) return "current";
        if (await keys.rewrap(user, stored, next)) return "rewrapped";
        const now = await keys.get(user);
        if (!now) return "gone";
        stored = now;
      }
      return "changing";
    },
  };
}
