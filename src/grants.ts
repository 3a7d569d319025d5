/**
 * Sharing a handle: grants, their rights and the rules that only narrow them.
 *
 * A grant gives a user (or anyone holding its alias handle, for `"*"`) the
 * rights `read` < `append` < `patch` < `write` on one handle of its owner.
 * The grantee calls the store with the alias handle; the store resolves it to
 * the owner's handle and runs the call as a write of the owner's record that
 * the backend checks against the grant in the same atomic step.
 *
 * @module
 */

import type { GrantCheck, GrantRecord } from "./backend.ts";
import { GrantEnded, type GrantEndReason, InvalidArgument, type Rights } from "./errors.ts";
import type { PatchOp } from "./ops.ts";

export { GrantEnded } from "./errors.ts";
export type { GrantEndReason, Rights } from "./errors.ts";

/** The rights, narrowest first. */
export const RIGHTS: readonly Rights[] = ["read", "append", "patch", "write"];

/** Patch ops an `append` grant may apply: they only add. */
const ADDITIVE = new Set(["append", "add_to_set", "increment"]);

/**
 * A grant in force, as {@link HandleStore.share} and {@link HandleStore.grants}
 * answer it.
 *
 * @since 0.5.0
 */
export interface Grant {
  /** The grant id (pass it, or the alias, to `unshare`). */
  grant: string;
  /** The alias handle the grantee uses. */
  handle: string;
  /** What the grantee may do. */
  rights: Rights;
  /** The grantee: a user id, or `"*"` for anyone holding `handle`. */
  to: string;
  /** When the grant lapses, or `null` for never (until `unshare`). */
  expiresAt: Date | null;
}

/**
 * Options of {@link HandleStore.share}.
 *
 * @since 0.5.0
 */
export interface ShareOptions {
  /** The owner, or a grantee re-sharing its alias. */
  user: string;
  /** A user id, or `"*"` for anyone holding the returned alias handle. */
  to: string;
  /** `"read"`, `"append"`, `"patch"` or `"write"`. */
  rights: Rights;
  /** Days until the grant lapses; absent: never (a re-share: its grant's expiry). */
  ttlDays?: number;
}

/**
 * The error a backend throws when the grant of a write is not in force.
 *
 * @param check The grant the write goes through.
 * @param reason Why it is not in force.
 * @returns The error to throw.
 */
export function grantEnded(check: GrantCheck, reason: GrantEndReason): GrantEnded {
  return new GrantEnded(check.alias, reason);
}

/**
 * Whether a grant holds at `now`: `null` when it does, else why not.
 *
 * @param g The grant, or `null` when there is none.
 * @param now Epoch ms.
 * @returns `null`, or the reason it does not hold.
 */
export function grantGone(g: GrantRecord | null, now: number): GrantEndReason | null {
  if (!g || g.endedAt !== null) return "grant_revoked";
  if (g.expiresAt !== null && g.expiresAt <= now) return "grant_expired";
  return null;
}

/**
 * Whether a grant ended or expired at or before `before`, so that
 * `grants.sweep(before)` deletes it.
 *
 * @param g The grant.
 * @param before Epoch ms.
 * @returns Whether it goes.
 */
export function grantStale(g: GrantRecord, before: number): boolean {
  return (g.endedAt !== null && g.endedAt <= before) ||
    (g.expiresAt !== null && g.expiresAt <= before);
}

/**
 * Validates a rights string.
 *
 * @param rights The value passed.
 * @param field The argument's name, for the error.
 * @returns It, typed.
 */
export function checkRights(rights: unknown, field = "rights"): Rights {
  if (typeof rights !== "string" || !(RIGHTS as readonly string[]).includes(rights)) {
    throw new InvalidArgument(
      `${field} must be one of "read", "append", "patch", "write".`,
      { field },
    );
  }
  return rights as Rights;
}

/**
 * Whether `held` covers `needed`.
 *
 * @param held The rights a grant gives.
 * @param needed The rights a call needs.
 * @returns `true` when `held` is at least `needed`.
 */
export function covers(held: Rights, needed: Rights): boolean {
  return RIGHTS.indexOf(held) >= RIGHTS.indexOf(needed);
}

/**
 * The rights a patch needs: `append` when every op only adds, else `patch`.
 *
 * @param ops Parsed ops.
 * @returns The rights needed.
 */
export function rightsForOps(ops: readonly PatchOp[]): Rights {
  return ops.every((op) => ADDITIVE.has(op.op)) ? "append" : "patch";
}

/**
 * The public form of a grant record.
 *
 * @param g The record.
 * @returns The grant.
 */
export function grantOf(g: GrantRecord): Grant {
  return {
    grant: g.grant,
    handle: g.alias,
    rights: g.rights as Rights,
    to: g.to,
    expiresAt: g.expiresAt === null ? null : new Date(g.expiresAt),
  };
}

/**
 * The wire form of a grant: snake_case, ISO-8601 times.
 *
 * @param g A grant.
 * @returns `{ grant, handle, rights, to, expires_at }`.
 */
export function grantPayload(g: Grant): Record<string, unknown> {
  return {
    grant: g.grant,
    handle: g.handle,
    rights: g.rights,
    to: g.to,
    expires_at: g.expiresAt ? g.expiresAt.toISOString() : null,
  };
}

const ALPHABET = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * 26 characters of `[a-z2-7]` from the CSPRNG: 130 bits.
 *
 * @returns The characters.
 */
export function random130(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(26));
  let s = "";
  for (const b of bytes) s += ALPHABET[b & 31];
  return s;
}
