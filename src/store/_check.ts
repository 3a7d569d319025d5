/**
 * The argument checks of the store: users, handles, writers, TTLs,
 * versions, leases, quotas, records and grants from outside. Each throws
 * `InvalidArgument` naming the field in its wire form.
 *
 * @module
 */

import type {
  Backend,
  ForkPoint,
  GrantRecord,
  HandleRecord,
  LeaseRecord,
  QuotaLimits,
} from "../backend.ts";
import { InvalidArgument, StateTooLarge } from "../errors.ts";
import { checkRights } from "../grants.ts";
import { assertJson, isPlainObject, utf8Length } from "../json.ts";
import type { QuotaOptions, UserOption, WriteLeaseOption } from "../types.ts";

/** A day in ms. */
export const DAY_MS = 86_400_000;
/** A kind: lowercase letters, digits and `-`, starting with a letter. */
export const KIND_RE = /^[a-z][a-z0-9-]{0,31}$/;
/** The longest delay `setInterval` keeps (longer ones run every millisecond). */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** The longest lease, in seconds: a day. */
const MAX_LEASE_SECONDS = 86_400;

/** A version argument: a whole number of at least `min`; `field` names it in the error. */
export function checkVersion(
  version: unknown,
  field: string,
  min: number,
): asserts version is number {
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < min) {
    throw new InvalidArgument(`${field} must be a whole version number, ${min} or more.`, {
      field,
    });
  }
}

/** The `onConflict` option of a save: `"fail"` unless it says `"merge"`. */
export function checkOnConflict(x: unknown): "fail" | "merge" {
  if (x === undefined || x === "fail" || x === "merge") return x ?? "fail";
  throw new InvalidArgument(
    'on_conflict must be "fail" (a stale save is refused) or "merge" (disjoint edits are merged).',
    { field: "on_conflict" },
  );
}

/** The refusal of a lease call on a backend that keeps no leases. */
export function noLeases(): InvalidArgument {
  return new InvalidArgument(
    "This store's backend keeps no leases; use a backend that does (every built-in one does).",
  );
}

/** A lease's length in seconds: more than 0, at most a day. */
export function checkLeaseSeconds(seconds: unknown): number {
  if (
    typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0 ||
    seconds > MAX_LEASE_SECONDS
  ) {
    throw new InvalidArgument(
      `seconds must be a number greater than 0 and at most ${MAX_LEASE_SECONDS} (one day).`,
      { field: "seconds" },
    );
  }
  return seconds;
}

/** The lease a write asks for (`undefined`: none), checked before anything is written. */
export function writeLease(
  option: WriteLeaseOption | undefined,
  writer: string | null,
  now: number,
): LeaseRecord | undefined {
  if (option === undefined) return undefined;
  if (typeof option !== "object" || option === null) {
    throw new InvalidArgument("lease must be an object: { seconds, holder? }.", { field: "lease" });
  }
  const holder = checkHolder(option.holder ?? writer);
  const seconds = checkLeaseSeconds(option.seconds);
  return { holder, expiresAt: now + Math.max(1, Math.round(seconds * 1000)) };
}

/** Validates a call's user, then its handle (the order of their errors); answers the user. */
export function checkUserHandle(options: unknown, handle: unknown): string {
  const user = checkUser(options);
  checkHandle(handle);
  return user;
}

/** Validates a lease holder: a writer label, never empty. */
export function checkHolder(writer: unknown): string {
  const holder = checkWriter(writer);
  if (holder === null || holder.length === 0) {
    throw new InvalidArgument(
      'A lease needs a holder: pass writer, the label others will see (e.g. "laptop/claude-code").',
      { field: "writer" },
    );
  }
  return holder;
}

/** Validates the user of an options object (`field` names it in the error). */
export function checkUser(options: unknown, field = "user"): string {
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgument('Pass an options object with the user, e.g. { user: "alice" }.');
  }
  const user = (options as UserOption).user;
  if (
    typeof user !== "string" || user.length === 0 || user.length > 1024 || !isIdentifier(user)
  ) {
    throw new InvalidArgument(
      `${field} must be a non-empty, well-formed Unicode string of at most 1024 characters, without U+0000: the identity the state belongs to.`,
      { field },
    );
  }
  return user;
}

/** Validates the `quotas` option: `undefined` when there are none. */
export function checkQuotas(
  quotas: QuotaOptions | undefined,
  backend: Backend,
): QuotaLimits | undefined {
  if (quotas === undefined) return undefined;
  checkOptions(quotas, "quotas");
  const out: QuotaLimits = {};
  for (const name of ["maxHandles", "maxBytes", "writesPerMinute"] as const) {
    const v = quotas[name];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
      throw new InvalidArgument(
        `quotas.${name} must be a whole number, at least 1 (omit it for no limit).`,
        {
          field: `quotas.${name}`,
        },
      );
    }
    out[name] = v;
  }
  if (Object.keys(out).length === 0) return undefined;
  if (backend.quotas === undefined) {
    throw new InvalidArgument(
      "This backend keeps no per-user usage, so it cannot enforce quotas; open the store without quotas.",
      { field: "quotas" },
    );
  }
  return out;
}

/** Refuses options that are not an object; `where` names the call. */
export function checkOptions(options: unknown, where: string): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    const message = `The options of ${where} must be an object; omit them for the defaults.`;
    throw new InvalidArgument(message, { field: "options" });
  }
}

/** `String(x)`, except that an object's own `toString`/`valueOf` are never called: it becomes its tag. */
export function safeString(x: unknown): string {
  return (typeof x === "object" && x !== null) || typeof x === "function"
    ? Object.prototype.toString.call(x)
    : String(x);
}

/**
 * Whether `s` is well-formed Unicode. Identities, writer labels and keys with
 * lone surrogates are refused: engines that keep UTF-8 would turn every lone
 * surrogate into U+FFFD, so two different names could meet as one.
 */
export function wellFormed(s: string): boolean {
  return s.isWellFormed();
}

/**
 * Whether `s` may name a user, handle, writer, lease holder or idempotency
 * key: well-formed, and without U+0000. PostgreSQL's text refuses U+0000 and
 * other engines would keep it, so it is refused everywhere alike (a state may
 * hold it: states travel as JSON text, where it is an escape).
 */
export function isIdentifier(s: string): boolean {
  return wellFormed(s) && !s.includes("\0");
}

/** Validates a grant from outside (an import): names, rights, times. */
export function checkGrantRecord(g: GrantRecord): void {
  if (typeof g !== "object" || g === null) {
    throw new InvalidArgument("A grant must be an object.", { field: "grant" });
  }
  checkUser({ user: g.owner }, "owner");
  checkUser({ user: g.by }, "by");
  for (const id of [g.grant, g.alias, g.handle]) checkHandle(id);
  if (g.parent !== null) checkHandle(g.parent);
  checkRights(g.rights);
  checkGrantee(g.to, g.owner);
  const time = (x: unknown, field: string) => {
    if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) {
      throw new InvalidArgument(`${field} must be a time in whole epoch milliseconds.`, { field });
    }
  };
  time(g.createdAt, "created_at");
  if (g.expiresAt !== null) time(g.expiresAt, "expires_at");
}

/** Validates the grantee of a share: a user id, or `"*"`; never the caller. */
export function checkGrantee(to: unknown, user: string): string {
  if (typeof to !== "string" || to.length === 0 || to.length > 1024 || !isIdentifier(to)) {
    throw new InvalidArgument(
      'to must be the user id to share with (1-1024 characters, without U+0000), or "*" for anyone who holds the alias handle.',
      { field: "to" },
    );
  }
  if (to === user) {
    throw new InvalidArgument("You already have this handle: share it with someone else.", {
      field: "to",
    });
  }
  return to;
}

/** Validates a handle argument. */
export function checkHandle(handle: unknown): asserts handle is string {
  if (
    typeof handle !== "string" || handle.length === 0 || handle.length > 256 ||
    !isIdentifier(handle)
  ) {
    throw new InvalidArgument(
      'handle must be the handle string a mint returned (e.g. "research_k3v9x2mq").',
      { field: "handle" },
    );
  }
}

/** Validates a writer label: `null` when absent. */
export function checkWriter(writer: unknown): string | null {
  if (writer === undefined || writer === null) return null;
  if (typeof writer !== "string" || writer.length > 256 || !isIdentifier(writer)) {
    throw new InvalidArgument(
      "writer must be a well-formed string of at most 256 characters, without U+0000.",
      { field: "writer" },
    );
  }
  return writer;
}

/** Validates a TTL in days and returns it in ms (`null`: never, `undefined`: absent). */
export function checkTtl(ttlDays: unknown, allowNull: boolean): number | null | undefined {
  if (ttlDays === undefined) return undefined;
  if (ttlDays === null && allowNull) return null;
  if (
    typeof ttlDays !== "number" || !Number.isFinite(ttlDays) || ttlDays <= 0 || ttlDays > 36525
  ) {
    throw new InvalidArgument(
      `ttl_days must be a number of days greater than 0 and at most 36525 (got ${
        safeString(ttlDays).slice(0, 40)
      }); omit it or pass null for no expiry.`,
      { field: "ttl_days" },
    );
  }
  // At least 1 ms: a TTL that rounds to 0 would land already expired.
  return Math.max(1, Math.round(ttlDays * DAY_MS));
}

/** The record is not an object, or its times are not epoch ms. */
export function checkRecordTimes(record: unknown): asserts record is HandleRecord {
  if (typeof record !== "object" || record === null) {
    throw new InvalidArgument(
      "A record is an object with handle, kind, state, version, createdAt, updatedAt, expiresAt and lastWriter.",
      { field: "record" },
    );
  }
  const r = record as unknown as Record<string, unknown>;
  for (const [field, key] of [["created_at", "createdAt"], ["updated_at", "updatedAt"]]) {
    if (!Number.isSafeInteger(r[key!])) {
      throw new InvalidArgument(`"${field}" must be a time in whole epoch milliseconds.`, {
        field,
      });
    }
  }
  if (r.expiresAt !== null && !Number.isSafeInteger(r.expiresAt)) {
    throw new InvalidArgument(
      `"expires_at" must be null or a time in whole epoch milliseconds.`,
      { field: "expires_at" },
    );
  }
}

/** Why a name fails {@link isIdentifier}, after the field's name. */
export const NOT_AN_IDENTIFIER =
  "holds U+0000 or a lone surrogate, which mcpstate never stores in a name";

/** Everything {@link checkRecordTimes} leaves: the names, the version, the state. */
export function checkRecordRest(user: unknown, r: HandleRecord, maxBytes: number): void {
  const name = (field: string, value: unknown, max: number): string => {
    if (typeof value !== "string" || value.length === 0 || value.length > max) {
      throw new InvalidArgument(
        `"${field}" must be a non-empty string of at most ${max} characters.`,
        { field },
      );
    }
    if (!isIdentifier(value)) {
      throw new InvalidArgument(`"${field}" ${NOT_AN_IDENTIFIER}.`, { field });
    }
    return value;
  };
  name("user", user, 1024);
  name("handle", r.handle, 256);
  const kind = name("kind", r.kind, 32);
  if (!KIND_RE.test(kind)) {
    throw new InvalidArgument(`"kind" ${JSON.stringify(kind)} is not a valid kind.`, {
      field: "kind",
    });
  }
  if (!Number.isSafeInteger(r.version) || r.version < 1) {
    throw new InvalidArgument(`"version" must be a whole number, 1 or more.`, {
      field: "version",
    });
  }
  const writer: unknown = r.lastWriter;
  if (writer !== null && (typeof writer !== "string" || writer.length > 256)) {
    throw new InvalidArgument(
      `"last_writer" must be null or a string of at most 256 characters.`,
      { field: "last_writer" },
    );
  }
  if (writer !== null && !isIdentifier(writer)) {
    throw new InvalidArgument(`"last_writer" ${NOT_AN_IDENTIFIER}.`, { field: "last_writer" });
  }
  const sv: unknown = r.schemaVersion;
  if (sv != null && (!Number.isSafeInteger(sv) || (sv as number) < 1)) {
    throw new InvalidArgument(`"schema_version" must be null or a whole number, 1 or more.`, {
      field: "schema_version",
    });
  }
  const ff: unknown = r.forkedFrom;
  if (ff != null) {
    const f = ff as Partial<ForkPoint>;
    const keys = typeof ff === "object" && !Array.isArray(ff) ? Object.keys(ff).sort() : [];
    if (
      keys.join(",") !== "handle,version" || typeof f.handle !== "string" ||
      f.handle.length > 200 || !isIdentifier(f.handle) || !Number.isSafeInteger(f.version) ||
      (f.version as number) < 1
    ) {
      throw new InvalidArgument(
        `"forked_from" must be null or {"handle": a handle, "version": a whole number, 1 or more}.`,
        { field: "forked_from" },
      );
    }
  }
  let state: unknown;
  try {
    state = typeof r.state === "string" ? JSON.parse(r.state) : undefined;
  } catch { /* not JSON: refused below */ }
  if (!isPlainObject(state)) {
    throw new InvalidArgument(`"state" must be a JSON object.`, { field: "state" });
  }
  assertJson(state);
  const size = utf8Length(r.state);
  if (size > maxBytes) throw new StateTooLarge(size, maxBytes);
}

/** A user as `users` lists it: any non-empty string the backend holds. */
export function checkListedUser(user: unknown): void {
  if (typeof user !== "string" || user.length === 0) {
    throw new InvalidArgument("user must be a non-empty string: a user that users() lists.", {
      field: "user",
    });
  }
}

/** The refusal of a call the backend has no primitive for. */
export function unsupported(what: string): InvalidArgument {
  return new InvalidArgument(
    `This store's backend cannot ${what}; use a backend that can (every built-in one does).`,
  );
}
