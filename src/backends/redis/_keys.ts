/**
 * The Redis backend's key names (see the layout in `_scripts.ts`): every key
 * of one user starts with `P{T}:`, so all of them share one hash slot.
 *
 * @module
 */

import type { WriteContext } from "../../backend.ts";
import { decodeName, encodeHandle, encodeName } from "./_codec.ts";

/** The keys a write of one record touches. */
export interface Keys {
  /** `P{T}:` — the user's key prefix. */
  base: string;
  /** The record hash. */
  rec: string;
  /** The index sorted set. */
  idx: string;
  /** The expiry sorted set. */
  exp: string;
  /** The trashed record hash. */
  trash: string;
  /** The lease string. */
  lease: string;
  /** The encoded handle. */
  enc: string;
}

/** The key names under one prefix. */
export class KeySpace {
  readonly #prefix: string;
  readonly #bases = new Map<string, string>();

  /** @param prefix The key prefix (without `{` or `}`). */
  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /**
   * A pattern of key names: `^` + `body(P)` + `$`, where `P` is the key
   * prefix escaped for a regular expression (the user's `{T}:` follows it).
   */
  nameRegExp(body: (prefix: string) => string): RegExp {
    return new RegExp("^" + body(this.#prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")) + "$");
  }

  /** `P{T}:`, the prefix of every key of `user`. */
  base(user: string): string {
    let base = this.#bases.get(user);
    if (base === undefined) {
      if (this.#bases.size >= 1024) this.#bases.clear();
      base = `${this.#prefix}{${encodeName(user)}}:`;
      this.#bases.set(user, base);
    }
    return base;
  }

  /** The keys of `(user, handle)`. */
  of(user: string, handle: string): Keys {
    const base = this.base(user);
    const enc = encodeHandle(handle);
    return {
      base,
      rec: `${base}r:${enc}`,
      idx: `${base}i`,
      exp: `${base}x`,
      trash: `${base}t:${enc}`,
      lease: `${base}l:${enc}`,
      enc,
    };
  }

  /** The record key of `(user, handle)`. */
  record(user: string, handle: string): string {
    return `${this.base(user)}r:${encodeHandle(handle)}`;
  }

  /** The lease key of `(user, handle)`. */
  lease(user: string, handle: string): string {
    return `${this.base(user)}l:${encodeHandle(handle)}`;
  }

  /** The idempotency key of a write's claim, if it has one. */
  idem(k: Keys, ctx: WriteContext): string | undefined {
    const c = ctx.idempotency;
    return c && `${k.base}d:${encodeHandle(c.scope)}:${encodeName(c.key)}`;
  }

  /** `P{O}:g:G` — the hash of grant `grant` of owner `owner`, in the owner's slot. */
  grant(owner: string, grant: string): string {
    return `${this.base(owner)}g:${encodeHandle(grant)}`;
  }

  /** `P{O}:go:H` — the list of the grants of `(owner, handle)`, oldest first. */
  grantsOf(owner: string, handle: string): string {
    return `${this.base(owner)}go:${encodeHandle(handle)}`;
  }

  /** `P{O}:gc:G` — the list of the re-shares of grant `grant` of `owner`. */
  children(owner: string, grant: string): string {
    return `${this.base(owner)}gc:${encodeHandle(grant)}`;
  }

  /** `P{T}:gt` — the list of the grants to `to`, in the grantee's slot. */
  grantsTo(to: string): string {
    return `${this.base(to)}gt`;
  }

  /** `Pga:A` / `Pgi:G` — where the grant of an alias / of an id lives (its own slot). */
  grantName(kind: "ga" | "gi", name: string): string {
    return `${this.#prefix}${kind}:${encodeHandle(name)}`;
  }

  /** The change channel of `user`. */
  channel(user: string): string {
    return `${this.base(user)}c`;
  }

  /** The `SCAN` pattern of every user's key `P{T}:<suffix>`. */
  pattern(suffix: string): string {
    return this.#prefix.replace(/[*?[\]\\]/g, "\\$&") + "{*}:" + suffix;
  }

  /** The `SCAN` pattern of the trash keys `P{T}:t:H` of `user`. */
  trashPattern(user: string): string {
    return this.base(user).replace(/[*?[\]\\]/g, "\\$&") + "t:*";
  }

  /** The user of a key `P{T}:i` (an index key). */
  userOfIndex(key: string): string {
    return decodeName(key.slice(this.#prefix.length + 1, -3));
  }
}
