/**
 * Sharing: grants, their aliases, and the routing of a call that names an
 * alias handle. A routed call runs the feature's own function on the
 * owner's handle with the grant passed as `via`; it never goes back through
 * a public method.
 *
 * @module
 */

import type { Backend, GrantRecord } from "../backend.ts";
import { GrantEnded, grantGone, grantOf, random130 } from "../grants.ts";
import type { Grant, ShareOptions } from "../grants.ts";
import { checkRights, covers } from "../grants.ts";
import {
  HandleNotFound,
  InvalidArgument,
  McpStateError,
  PermissionDenied,
  type Rights,
} from "../errors.ts";
import type { HandleInfo, UserOption } from "../types.ts";
import {
  checkGrantee,
  checkHandle,
  checkOptions,
  checkTtl,
  checkUser,
  checkUserHandle,
} from "./_check.ts";
import { alive, auditStep, type Call, call, type Core, missing } from "./_core.ts";

/**
 * Runs a call that may name an alias handle: the direct call first (the
 * caller's own handle, no extra round trip); when it finds no such handle
 * and `handle` is an alias the caller holds, `run` runs again on the
 * owner's handle, as the owner, with the grant as `via` (the backend checks
 * it inside the write), and `map` names the result by the alias. A backend
 * without grants, or options that are no object, run directly.
 *
 * @param core The store's core.
 * @param handle The handle or alias the caller named.
 * @param options The call's options.
 * @param needed The rights the call needs (`"owner"`: never through a grant).
 * @param run The feature's function, given each {@link Call} it makes.
 * @param map Names a routed result by the alias.
 * @returns The result.
 */
export function routed<T, O extends UserOption>(
  core: Core,
  handle: string,
  options: O,
  needed: Rights | "owner" | (() => Rights),
  run: (call: Call<O>) => Promise<T>,
  map: (result: T, g: GrantRecord) => T,
): Promise<T> {
  if (typeof options !== "object" || options === null || grantBackend(core) === undefined) {
    return run({ core, handle, options, via: undefined });
  }
  let direct: Promise<T>;
  try {
    direct = run({ core, handle, options: { ...options }, via: null });
  } catch (e) {
    direct = Promise.reject(e);
  }
  // A handler on the direct call's promise: no frame of its own on the way of every call.
  return direct.catch(async (e) => {
    if (!(e instanceof HandleNotFound) || e instanceof GrantEnded) throw e;
    const g = typeof handle === "string" ? await alias(core, options.user, handle) : null;
    if (!g) {
      throw e.details.handle === handle ? await missing(core, options.user, handle) : e;
    }
    const reason = grantGone(g, core.clock());
    if (reason) throw new GrantEnded(handle, reason);
    const rights = g.rights as Rights;
    const need = typeof needed === "function" ? needed() : needed;
    if (need === "owner" || !covers(rights, need)) {
      throw new PermissionDenied(rights, need, { handle });
    }
    try {
      return map(
        await run({ core, handle: g.handle, options: { ...options, user: g.owner }, via: g }),
        g,
      );
    } catch (e2) {
      throw aliasError(e2, g);
    }
  });
}

/**
 * Shares a handle (see {@link HandleStore.share}): a grant of `rights` to
 * `to` under a new alias; a grantee re-shares its alias within its own grant.
 */
export async function share(core: Core, handle: string, options: ShareOptions): Promise<Grant> {
  checkOptions(options, "share");
  const user = checkUserHandle(options, handle);
  const rights = checkRights(options.rights);
  const to = checkGrantee(options.to, user);
  const ttl = checkTtl(options.ttlDays, false);
  const b = needGrants(core);
  const now = core.clock();
  let owner = user, target = handle, parent: GrantRecord | null = null;
  let record = await call(core, () => b.read(user, handle));
  if (!record) {
    const g = await alias(core, user, handle);
    if (!g) throw new HandleNotFound(handle);
    const reason = grantGone(g, now);
    if (reason) throw new GrantEnded(handle, reason);
    const held = g.rights as Rights;
    if (!covers(held, rights)) throw new PermissionDenied(held, rights, { handle });
    if (to === g.owner) {
      throw new InvalidArgument("The owner already has the handle: share it with someone else.", {
        field: "to",
      });
    }
    owner = g.owner;
    target = g.handle;
    parent = g;
    record = await call(core, () => b.read(owner, target));
    if (!record) throw new HandleNotFound(handle);
  }
  const live = alive(record, handle, now);
  const expiresAt = ttl == null ? (parent?.expiresAt ?? null) : now + ttl;
  if (
    parent && parent.expiresAt !== null && (expiresAt === null || expiresAt > parent.expiresAt)
  ) {
    throw new PermissionDenied(parent.rights as Rights, "expires_at", {
      handle,
      expires_at: new Date(parent.expiresAt).toISOString(),
    });
  }
  const grant: GrantRecord = {
    grant: `grant_${random130()}`,
    alias: `${live.kind}_${random130()}`,
    owner,
    handle: target,
    to,
    rights,
    by: user,
    parent: parent?.grant ?? null,
    createdAt: now,
    expiresAt,
    endedAt: null,
  };
  const audit = auditStep(core, now, user, "share", {
    grant: grant.grant,
    to,
    rights,
    expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    ...(parent ? { via: parent.grant } : {}),
  });
  const res = await call(core, () => b.grants.put(grant, now, audit)).catch((e) => {
    throw e instanceof GrantEnded ? new GrantEnded(handle, e.details.reason as never) : e;
  });
  if (res === "absent") throw new HandleNotFound(handle);
  return grantOf(grant);
}

/** Ends a grant and its re-shares (see {@link HandleStore.unshare}); how many ended. */
export async function unshare(
  core: Core,
  grantOrAlias: string,
  options: UserOption,
): Promise<number> {
  const user = checkUser(options);
  checkHandle(grantOrAlias);
  const b = needGrants(core);
  const g = await call(core, () => b.grants.read(grantOrAlias));
  if (!g || (g.grant !== grantOrAlias && g.alias !== grantOrAlias)) {
    throw new HandleNotFound(grantOrAlias);
  }
  let allowed = g.owner === user || g.by === user;
  for (let p = g.parent; !allowed && p !== null;) {
    const up = await call(core, () => b.grants.read(p!));
    if (!up) break;
    allowed = up.by === user;
    p = up.parent;
  }
  if (!allowed) {
    if (g.to === user || g.to === "*") {
      throw new PermissionDenied(g.rights as Rights, "owner", { handle: grantOrAlias });
    }
    throw new HandleNotFound(grantOrAlias);
  }
  if (g.endedAt !== null) return 0;
  const now = core.clock();
  const audit = auditStep(core, now, user, "unshare", { grant: g.grant });
  return (await call(core, () => b.grants.end(g.grant, now, audit))).length;
}

/** The grants in force on a handle, for its owner or a grantee (see {@link HandleStore.grants}). */
export async function grants(core: Core, handle: string, options: UserOption): Promise<Grant[]> {
  const user = checkUserHandle(options, handle);
  const b = needGrants(core);
  const now = core.clock();
  const own = await call(core, () => b.read(user, handle));
  if (own) {
    alive(own, handle, now);
    const all = await call(core, () => b.grants.of(user, handle));
    return all.filter((g) => grantGone(g, now) === null).map(grantOf);
  }
  const mine = await alias(core, user, handle);
  if (!mine) throw new HandleNotFound(handle);
  const reason = grantGone(mine, now);
  if (reason) throw new GrantEnded(handle, reason);
  const all = await call(core, () => b.grants.of(mine.owner, mine.handle));
  const under = new Set([mine.grant]);
  const out: Grant[] = [];
  for (const g of all) {
    if (g.parent === null || !under.has(g.parent)) continue;
    under.add(g.grant);
    if (grantGone(g, now) === null) out.push(grantOf(g));
  }
  return out;
}

/** The backend when it keeps grants. */
export function grantBackend(core: Core): GrantBackend | undefined {
  const b = core.backend;
  return b.grants ? b as GrantBackend : undefined;
}

/** The backend, refused when it keeps no grants. */
export function needGrants(core: Core): GrantBackend {
  const b = grantBackend(core);
  if (!b) {
    throw new InvalidArgument("This backend keeps no grants: sharing is not available on it.", {
      field: "backend",
    });
  }
  return b;
}

/** The grant whose alias is `alias` and that `user` may use (ended ones too), or `null`. */
export async function alias(
  core: Core,
  user: unknown,
  alias: string,
): Promise<GrantRecord | null> {
  const b = grantBackend(core);
  if (!b || typeof user !== "string") return null;
  const g = await call(core, () => b.grants.read(alias));
  if (!g || g.alias !== alias || (g.to !== "*" && g.to !== user)) return null;
  return g;
}

/** The backend primitives sharing needs. */
export type GrantBackend =
  & Backend
  & Required<Pick<Backend, "grants">>;

/** A result through a grant: named by the alias, with who shared it and the rights. */
export function asAlias<T extends HandleInfo>(r: T, g: GrantRecord): T {
  return { ...r, handle: g.alias, sharedBy: g.owner, rights: g.rights as Rights };
}

/** An error of a call through a grant, naming the alias instead of the owner's handle. */
function aliasError(e: unknown, g: GrantRecord): unknown {
  // A grant that ended inside the write is already named by its alias.
  if (!(e instanceof McpStateError) || e instanceof GrantEnded) return e;
  if (e instanceof HandleNotFound) return new HandleNotFound(g.alias);
  e.message = e.message.replaceAll(g.handle, g.alias);
  if (e.details.handle === g.handle) e.details.handle = g.alias;
  const current = e.details.current as Record<string, unknown> | undefined;
  if (current && typeof current === "object" && current.handle === g.handle) {
    e.details.current = { ...current, handle: g.alias };
  }
  return e;
}
