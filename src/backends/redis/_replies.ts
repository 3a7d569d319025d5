/**
 * The Redis backend's readings of its write scripts' replies (private to the
 * package): the lease argument a write sends, and the lease and grant
 * outcomes a reply carries.
 *
 * @module
 */

import type { LeaseOutcome, WriteContext } from "../../backend.ts";
import type { GrantEndReason } from "../../errors.ts";
import { grantEnded } from "../../grants.ts";
import { leaseOf, type Reply, wroteOne } from "./_codec.ts";

/** The lease argument of a write script: `expiresAt`, tab, holder; `""` for none. */
export function leaseArg(ctx: WriteContext): string {
  const l = ctx.lease;
  return l ? `${l.expiresAt}\t${l.holder}` : "";
}

/** The other holder's lease of a `{'L', …, lease}` reply; `undefined` for any other reply. */
export function heldOf(reply: unknown): string | undefined {
  return Array.isArray(reply) && reply[0] === "L" ? reply[reply.length - 1] as string : undefined;
}

/** Throws the grant's `handle_not_found` when a write script answered `{'G', reason}`. */
export function refuseGrant(reply: Reply, ctx: WriteContext): void {
  if (reply[0] === "G" && ctx.grant) throw grantEnded(ctx.grant, reply[1] as GrantEndReason);
}

/** Whether a write script wrote: `1`, or `{'L', …}` (written, another's lease kept). */
export const wroteLeased = (reply: unknown): boolean =>
  wroteOne(reply) || heldOf(reply) !== undefined;

/**
 * Adds the outcome of `ctx.lease` to a write's answer: taken (`held` is
 * `null` or `undefined`), or another holder's lease `held` in force.
 */
export function withLease<T extends object>(
  out: T,
  ctx: WriteContext,
  held: string | null | undefined,
): T & { lease?: LeaseOutcome } {
  const l = ctx.lease;
  if (!l) return out;
  return {
    ...out,
    lease: typeof held === "string"
      ? { acquired: false, lease: leaseOf(held) }
      : { acquired: true, lease: { ...l } },
  };
}
