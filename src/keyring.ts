/**
 * Encryption at rest, the cryptography alone: a ring of key-encryption keys
 * (KEKs) by id, per-user data keys (DEKs) wrapped by a KEK, and the sealing
 * of state content under a DEK with AES-256-GCM, bound to its `(user,
 * handle)` by the additional data. Everything goes through WebCrypto
 * (`crypto.subtle`); nothing here stores anything.
 *
 * The sealed form is text, so engines keep treating content as opaque text:
 * `mse1.` then the base64 of a 12-byte random IV followed by the ciphertext
 * and its 16-byte tag. A wrapped DEK is the base64 of an IV, the DEK
 * encrypted under the KEK and the tag, with the user's id as additional
 * data, stored beside the KEK's id.
 *
 * @module
 */

import type { StoredKey } from "./backend.ts";
import { EncryptionError, InvalidArgument } from "./errors.ts";

/** The prefix of every sealed text (version 1 of the format). */
export const SEALED_PREFIX = "mse1.";

/** The bytes of a sealed text's overhead beyond its plaintext's base64: prefix, IV and tag. */
const IV_BYTES = 12;
const KEY_BYTES = 32;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * The encryption options of a store (SPEC 9.2).
 *
 * @since 0.5.0
 */
export interface EncryptionOptions {
  /** Key-encryption keys of 256 bits, by key id: base64 text or raw bytes. */
  keys: Record<string, string | Uint8Array>;
  /** The id of the KEK that wraps new data keys (default: the first id). */
  current?: string;
  /**
   * A backend URL that keeps the wrapped data keys apart from the data
   * (absent: the data backend keeps them). With it, `erase` leaves a copy
   * of the data taken before it unreadable for the erased user.
   */
  keyStore?: string;
}

/** Whether `text` is in the sealed form (it may still fail to open). */
export function isSealed(text: string): boolean {
  return text.startsWith(SEALED_PREFIX);
}

/**
 * Parses a key list as `MCPSTATE_ENCRYPTION_KEYS` and key files give it:
 * `id:base64` entries separated by commas or line breaks (blank lines and
 * lines starting with `#` skipped); the first is current.
 *
 * @param text The list.
 * @returns The options' `keys` and `current`.
 * @throws {InvalidArgument} for an empty list, a malformed entry or a repeated id.
 */
export function parseKeyList(text: string): { keys: Record<string, string>; current: string } {
  const keys: Record<string, string> = {};
  let current: string | undefined;
  for (const raw of text.split(/[,\n]/)) {
    const entry = raw.trim();
    if (entry === "" || entry.startsWith("#")) continue;
    const colon = entry.indexOf(":");
    const id = colon < 0 ? "" : entry.slice(0, colon).trim();
    if (!KEY_ID.test(id)) {
      throw new InvalidArgument(
        "Each encryption key is id:base64, its id of letters, digits, '.', '_' or '-' (at most 64).",
        { field: "encryption.keys" },
      );
    }
    if (Object.hasOwn(keys, id)) {
      throw new InvalidArgument(`The encryption key id "${id}" is given twice.`, {
        field: "encryption.keys",
      });
    }
    keys[id] = entry.slice(colon + 1).trim();
    current ??= id;
  }
  if (current === undefined) {
    throw new InvalidArgument("The encryption key list is empty: give at least one id:base64.", {
      field: "encryption.keys",
    });
  }
  return { keys, current };
}

/** The 32 bytes of a KEK given as base64 text or bytes. */
function kekBytes(id: string, key: string | Uint8Array): Uint8Array<ArrayBuffer> {
  let bytes: Uint8Array<ArrayBuffer> | undefined;
  if (key instanceof Uint8Array) bytes = new Uint8Array(key);
  else if (typeof key === "string") {
    try {
      bytes = Uint8Array.fromBase64(key.trim().replace(/-/g, "+").replace(/_/g, "/"), {
        lastChunkHandling: "loose",
      });
    } catch {
      bytes = undefined;
    }
  }
  if (bytes?.length !== KEY_BYTES) {
    throw new InvalidArgument(
      `The encryption key "${id}" must be 256 bits: 32 bytes, or their base64 (44 characters). Make one with: openssl rand -base64 32`,
      { field: "encryption.keys", key_id: id },
    );
  }
  return bytes;
}

/** The additional data of a user's wrapped DEK. */
function dekAad(user: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`mcpstate/dek\u0000${user}`);
}

/** The additional data binding content to its `(user, handle)`. */
function contentAad(user: string, handle: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`mcpstate/content\u0000${user}\u0000${handle}`);
}

/** A ring of key-encryption keys: wraps new data keys, unwraps stored ones. */
export class KeyRing {
  readonly #keys: Map<string, CryptoKey>;
  /** The id of the KEK that wraps new data keys. */
  readonly current: string;

  private constructor(keys: Map<string, CryptoKey>, current: string) {
    this.#keys = keys;
    this.current = current;
  }

  /**
   * Imports a ring from the store's options.
   *
   * @param options The keys and the current id.
   * @returns The ring.
   * @throws {InvalidArgument} for no keys, a key that is not 256 bits, a
   *   malformed id, or a `current` that is not in `keys`.
   */
  static async from(options: Pick<EncryptionOptions, "keys" | "current">): Promise<KeyRing> {
    if (typeof options !== "object" || options === null || typeof options.keys !== "object") {
      throw new InvalidArgument("encryption.keys must map key ids to 256-bit keys.", {
        field: "encryption.keys",
      });
    }
    const ids = Object.keys(options.keys);
    if (ids.length === 0) {
      throw new InvalidArgument("encryption.keys is empty: give at least one key.", {
        field: "encryption.keys",
      });
    }
    const keys = new Map<string, CryptoKey>();
    for (const id of ids) {
      if (!KEY_ID.test(id)) {
        throw new InvalidArgument(
          `The encryption key id "${id}" must be letters, digits, '.', '_' or '-' (at most 64).`,
          { field: "encryption.keys" },
        );
      }
      const raw = kekBytes(id, options.keys[id]!);
      keys.set(
        id,
        await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]),
      );
    }
    const current = options.current ?? ids[0]!;
    if (!keys.has(current)) {
      throw new InvalidArgument(`encryption.current "${current}" is not one of the keys' ids.`, {
        field: "encryption.current",
      });
    }
    return new KeyRing(keys, current);
  }

  /** The ids of the ring's keys. */
  get ids(): string[] {
    return [...this.#keys.keys()];
  }

  /**
   * Makes a new random data key for `user`, wrapped under the current KEK.
   *
   * @param user The user it belongs to.
   * @returns The key to use, and its stored form.
   */
  async newDataKey(user: string): Promise<{ key: CryptoKey; stored: StoredKey }> {
    const raw = crypto.getRandomValues(new Uint8Array(KEY_BYTES));
    const stored = await this.#wrap(user, raw);
    const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
    raw.fill(0);
    return { key, stored };
  }

  /**
   * Opens a stored data key of `user`.
   *
   * @param user The user it belongs to.
   * @param stored Its stored form.
   * @returns The key.
   * @throws {EncryptionError} `unknown_key` when its KEK is not in the ring,
   *   `tampered` when it does not open (another user's key, changed bytes).
   */
  async openDataKey(user: string, stored: StoredKey): Promise<CryptoKey> {
    const raw = await this.#unwrap(user, stored);
    const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
    raw.fill(0);
    return key;
  }

  /**
   * Wraps a stored data key of `user` anew under the current KEK (`keys
   * rotate`); a key already under it comes back as it is.
   *
   * @param user The user it belongs to.
   * @param stored Its stored form.
   * @returns The stored form under the current KEK.
   */
  async rewrap(user: string, stored: StoredKey): Promise<StoredKey> {
    if (stored.keyId === this.current) return stored;
    const raw = await this.#unwrap(user, stored);
    try {
      return await this.#wrap(user, raw);
    } finally {
      raw.fill(0);
    }
  }

  async #wrap(user: string, raw: Uint8Array<ArrayBuffer>): Promise<StoredKey> {
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const kek = this.#keys.get(this.current)!;
    const ct = new Uint8Array(
      await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: dekAad(user) }, kek, raw),
    );
    return { keyId: this.current, wrapped: concat(iv, ct).toBase64() };
  }

  async #unwrap(user: string, stored: StoredKey): Promise<Uint8Array<ArrayBuffer>> {
    const kek = this.#keys.get(stored.keyId);
    if (!kek) throw EncryptionError.unknownKey(stored.keyId);
    const bytes = fromBase64(stored.wrapped);
    if (!bytes || bytes.length !== IV_BYTES + KEY_BYTES + 16) throw EncryptionError.tampered();
    try {
      return new Uint8Array(
        await crypto.subtle.decrypt(
          { name: "AES-GCM", iv: bytes.subarray(0, IV_BYTES), additionalData: dekAad(user) },
          kek,
          bytes.subarray(IV_BYTES),
        ),
      );
    } catch {
      throw EncryptionError.tampered();
    }
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> | null {
  try {
    return Uint8Array.fromBase64(text);
  } catch {
    return null;
  }
}

/**
 * Seals content of `(user, handle)` under the user's data key.
 *
 * @param key The user's data key.
 * @param user The user.
 * @param handle The handle the content belongs to.
 * @param plain The content.
 * @returns The sealed text.
 */
export async function seal(
  key: CryptoKey,
  user: string,
  handle: string,
  plain: string,
): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: contentAad(user, handle) },
      key,
      encoder.encode(plain),
    ),
  );
  return SEALED_PREFIX + concat(iv, ct).toBase64();
}

/**
 * Opens sealed content of `(user, handle)`.
 *
 * @param key The user's data key.
 * @param user The user.
 * @param handle The handle the content belongs to.
 * @param sealed The sealed text.
 * @returns The content.
 * @throws {EncryptionError} `tampered` when it does not open: changed bytes,
 *   or sealed for another user or handle.
 */
export async function open(
  key: CryptoKey,
  user: string,
  handle: string,
  sealed: string,
): Promise<string> {
  const bytes = isSealed(sealed) ? fromBase64(sealed.slice(SEALED_PREFIX.length)) : null;
  if (!bytes || bytes.length < IV_BYTES + 16) throw EncryptionError.tampered();
  try {
    const plain = await crypto.subtle.decrypt(
      {
        name: "AES-GCM",
        iv: bytes.subarray(0, IV_BYTES),
        additionalData: contentAad(user, handle),
      },
      key,
      bytes.subarray(IV_BYTES),
    );
    return decoder.decode(plain);
  } catch {
    throw EncryptionError.tampered();
  }
}
