/**
 * Key maintenance (SPEC 9.2), over the seam of `_vault.ts`, which does every
 * piece of cryptography: `mcpstate encrypt` seals every stored copy of a
 * store's plaintext in place, `mcpstate keys rotate` rewraps every data key
 * under the current key-encryption key, and `mcpstate doctor` counts the
 * key ids in use and the plaintext left.
 *
 * Both rewrites run while servers keep writing and may be stopped at any
 * point: each copy or key is rewritten by one compare-and-set against what
 * was read, so a concurrent write wins and is never undone, and a run that
 * is killed leaves every copy either as it was or rewritten whole; the next
 * run skips what is done. `encrypt` makes passes until one finds no
 * plaintext (a copy that moved while a pass ran is found by the next).
 *
 * @module
 */

import type { KeyPrimitives, StoredContent } from "../backend.ts";
import { EncryptionError, InvalidArgument } from "../errors.ts";
import { unsupported } from "./_check.ts";
import { call, type Core } from "./_core.ts";
import { maintenanceOf, type VaultMaintenance } from "./_vault.ts";

/** Copies read per page of the content scan, and data keys per page of the key list. */
const PAGE = 256;
/** Copies sealed at once. */
const AT_ONCE = 8;
/** Passes an encrypt makes at most while each still finds plaintext. */
export const MAX_PASSES = 4;

/** The kinds of stored copies, in the order reports name them. */
export const COPY_KINDS = ["record", "trash", "entry", "result"] as const;

/** How many copies of each kind. */
export type CopyCounts = Record<StoredContent["kind"], number>;

/** Options of a maintenance run. */
export interface MaintenanceOptions {
  /** Told how many copies or keys are done so far, after each one. */
  onProgress?: (done: number) => void;
  /** At most this many copies sealed, or keys rewrapped, per second. */
  rate?: number;
}

/** What an encrypt did. */
export interface EncryptCounts {
  /** Copies sealed, by kind. */
  sealed: CopyCounts;
  /** Copies that were sealed already when the first pass came to them. */
  already: number;
  /** `share`, `unshare` and `transfer` entries, which may stay clear (SPEC 9.2). */
  clear: number;
  /** Copies removed before they could be sealed (swept, erased, replaced). */
  gone: number;
  /**
   * Copies that could not be sealed, by why: their user's data key is under
   * a key not in the ring (its id), or does not open (`tampered`).
   */
  failed: Record<string, number>;
  /** Plaintext copies the last pass left or found (0: the store holds no plaintext). */
  left: number;
  /** Passes made. */
  passes: number;
}

/** What a rotation did. */
export interface RotateCounts {
  /** The key-encryption key every data key is under now. */
  current: string;
  /** Data keys rewrapped under it. */
  rewrapped: number;
  /** Data keys that were under it already. */
  already: number;
  /** Data keys deleted meanwhile (an erase). */
  gone: number;
  /** Data keys left under another key: by the id of a key not in the ring, or `tampered`, or `changing`. */
  failed: Record<string, number>;
}

/** The key ids in use, and (with keys) the plaintext left. */
export interface KeyCensus {
  /** Users with a data key, by the id of the key-encryption key that wraps it. */
  keyIds: Record<string, number>;
  /** The ring's key ids, the current one first (none without keys). */
  ring: string[];
  /** With keys: the plaintext copies, by kind. */
  plaintext?: CopyCounts;
  /** With keys: the copies sealed. */
  sealed?: number;
}

/** A page walk that waits to keep `rate` items per second. */
class Pacer {
  readonly #rate: number | undefined;
  readonly #start = Date.now();
  #done = 0;

  constructor(readonly options: MaintenanceOptions) {
    this.#rate = options.rate;
  }

  /** Counts `n` items done, tells the progress, and waits as the rate asks. */
  async tick(n: number): Promise<void> {
    this.#done += n;
    this.options.onProgress?.(this.#done);
    if (this.#rate === undefined) return;
    const due = this.#start + (this.#done / this.#rate) * 1000 - Date.now();
    if (due > 0) await new Promise((r) => setTimeout(r, due));
  }
}

/** A zero count of every kind. */
function zero(): CopyCounts {
  return { record: 0, trash: 0, entry: 0, result: 0 };
}

/** The seam of a store with keys, or the refusal of `what`. */
function keyed(core: Core, what: string): VaultMaintenance {
  const m = maintenanceOf(core.backend);
  if (!m?.on) {
    throw new InvalidArgument(
      `${what} needs a store opened with encryption keys (the encryption option; MCPSTATE_ENCRYPTION_KEYS for the CLI).`,
      { field: "encryption" },
    );
  }
  return m;
}

/**
 * Pages through `fetch` from the start until `next` says a page was the
 * last (`null`), each page handed to `visit` before the next is asked.
 */
async function paged<P>(
  core: Core,
  fetch: (query: { after?: string; limit: number }) => Promise<P>,
  next: (page: P) => string | null,
  visit: (page: P) => Promise<void> | void,
): Promise<void> {
  let after: string | undefined;
  for (;;) {
    const query = after === undefined ? { limit: PAGE } : { after, limit: PAGE };
    const page = await call(core, () => fetch(query));
    await visit(page);
    const then = next(page);
    if (then === null) return;
    after = then;
  }
}

/** Every copy of content, a page at a time, until `visit` has seen the last page. */
function eachPage(
  core: Core,
  visit: (items: StoredContent[]) => Promise<void> | void,
): Promise<void> {
  const content = core.backend.content;
  if (!content) throw unsupported("rewrite its stored content in place");
  return paged(core, (q) => content.scan(q), (p) => p.next, (p) => visit(p.items));
}

/**
 * Why a copy or a key could not be rewritten: the id of its user's
 * key-encryption key when the ring lacks it, or `tampered`; rethrows
 * anything else.
 */
function failure(e: unknown): { failed: string } {
  if (e instanceof EncryptionError) {
    if (e.details.reason === "unknown_key") return { failed: String(e.details.key_id) };
    if (e.details.reason === "tampered") return { failed: "tampered" };
  }
  throw e;
}

/** One pass of {@link encrypt}: counts of what it sealed and found. */
async function pass(core: Core, m: VaultMaintenance, pacer: Pacer) {
  const content = core.backend.content!;
  const out = {
    sealed: zero(),
    already: 0,
    clear: 0,
    gone: 0,
    changing: 0,
    failed: {} as Record<string, number>,
  };
  await eachPage(core, async (items) => {
    const todo = items.filter((item) => {
      const status = m.status(item);
      if (status === "sealed") out.already++;
      else if (status === "clear") out.clear++;
      return status === "plaintext";
    });
    for (let i = 0; i < todo.length; i += AT_ONCE) {
      const batch = todo.slice(i, i + AT_ONCE);
      const done = await call(
        core,
        () => Promise.all(batch.map((item) => m.seal(content, item).catch(failure))),
      );
      done.forEach((d, j) => {
        if (d === "sealed") out.sealed[batch[j]!.kind]++;
        else if (d === "current") out.already++;
        else if (d === "gone") out.gone++;
        else if (d === "changing") out.changing++;
        else out.failed[d.failed] = (out.failed[d.failed] ?? 0) + 1;
      });
      await pacer.tick(batch.length);
    }
  });
  return out;
}

/**
 * Seals every plaintext copy of content in the store (`mcpstate encrypt`),
 * in passes until one finds none, at most {@link MAX_PASSES}.
 *
 * @param core The store's core (with keys).
 * @param options Progress and rate.
 * @returns The counts.
 * @throws {InvalidArgument} without keys, or on a backend without the content group.
 */
export async function encrypt(
  core: Core,
  options: MaintenanceOptions = {},
): Promise<EncryptCounts> {
  const m = keyed(core, "encrypt");
  const pacer = new Pacer(options);
  const total: EncryptCounts = {
    sealed: zero(),
    already: 0,
    clear: 0,
    gone: 0,
    failed: {},
    left: 0,
    passes: 0,
  };
  for (let n = 1; n <= MAX_PASSES; n++) {
    const p = await pass(core, m, pacer);
    total.passes = n;
    for (const k of COPY_KINDS) total.sealed[k] += p.sealed[k];
    if (n === 1) {
      total.already = p.already;
      total.clear = p.clear;
    }
    total.gone += p.gone;
    total.failed = p.failed;
    // A pass that sealed nothing found the store as the last one left it.
    const found = COPY_KINDS.reduce((a, k) => a + p.sealed[k], 0) + p.changing;
    const failed = Object.values(p.failed).reduce((a, x) => a + x, 0);
    total.left = failed + (found > 0 && n === MAX_PASSES ? found : 0);
    if (found === 0) break;
  }
  return total;
}

/** Every stored data key, a page at a time. */
function eachKey(
  core: Core,
  keys: KeyPrimitives,
  visit: (
    page: { user: string; key: { keyId: string; wrapped: string } }[],
  ) => Promise<void> | void,
): Promise<void> {
  return paged(
    core,
    (q) => keys.list(q),
    (page) => page.length < PAGE ? null : page[page.length - 1]!.user,
    visit,
  );
}

/**
 * Rewraps every data key under the ring's current key-encryption key
 * (`mcpstate keys rotate`); afterwards the other keys can leave the ring.
 *
 * @param core The store's core (with keys).
 * @param options Progress and rate.
 * @returns The counts.
 * @throws {InvalidArgument} without keys.
 */
export async function rotate(core: Core, options: MaintenanceOptions = {}): Promise<RotateCounts> {
  const m = keyed(core, "keys rotate");
  const keys = await m.keys();
  const [current = ""] = await m.ids();
  const out: RotateCounts = { current, rewrapped: 0, already: 0, gone: 0, failed: {} };
  if (!keys) return out;
  const pacer = new Pacer(options);
  const fail = (why: string) => (out.failed[why] = (out.failed[why] ?? 0) + 1);
  await eachKey(core, keys, async (page) => {
    for (const { user, key } of page) {
      const done = await call(core, () => m.rewrap(user, key)).catch(failure);
      if (done === "rewrapped") out.rewrapped++;
      else if (done === "current") out.already++;
      else if (done === "gone") out.gone++;
      else fail(typeof done === "string" ? done : done.failed);
      await pacer.tick(1);
    }
  });
  return out;
}

/**
 * The key ids in use and, when the store has keys, the plaintext left
 * (`mcpstate doctor`). Reads only.
 *
 * @param core The store's core.
 * @returns The census; without the key group, no key ids.
 */
export async function census(core: Core): Promise<KeyCensus> {
  const m = maintenanceOf(core.backend);
  const out: KeyCensus = { keyIds: {}, ring: m ? await m.ids() : [] };
  const keys = m ? await m.keys() : core.backend.keys;
  if (keys) {
    await eachKey(core, keys, (page) => {
      for (const { key } of page) out.keyIds[key.keyId] = (out.keyIds[key.keyId] ?? 0) + 1;
    });
  }
  if (m?.on && core.backend.content) {
    const plaintext = zero();
    let sealed = 0;
    await eachPage(core, (items) => {
      for (const item of items) {
        const status = m.status(item);
        if (status === "plaintext") plaintext[item.kind]++;
        else if (status === "sealed") sealed++;
      }
    });
    Object.assign(out, { plaintext, sealed });
  }
  return out;
}

/**
 * Key maintenance of one store: what `HandleStore.maintenance` hands out.
 *
 * @internal
 */
export interface Maintenance {
  /** Seals every plaintext copy of content in place (`mcpstate encrypt`). */
  encrypt(options?: MaintenanceOptions): Promise<EncryptCounts>;
  /** Rewraps every data key under the current key-encryption key (`mcpstate keys rotate`). */
  rotateKeys(options?: MaintenanceOptions): Promise<RotateCounts>;
  /** The key ids in use and the plaintext left (`mcpstate doctor`). */
  census(): Promise<KeyCensus>;
}

/**
 * The key maintenance of a store's core.
 *
 * @param core The store's core.
 * @returns Its maintenance.
 */
export function maintenance(core: Core): Maintenance {
  return {
    encrypt: (options) => encrypt(core, options),
    rotateKeys: (options) => rotate(core, options),
    census: () => census(core),
  };
}
