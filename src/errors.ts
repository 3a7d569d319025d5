/**
 * The error classes of mcpstate. Every failure a caller can act on is an
 * {@link McpStateError} with a stable string `code`, a `details` record and a
 * {@link McpStateError.toPayload} form written for a model to read.
 *
 * @module
 */

/** Every error code mcpstate produces, as listed in the contract. */
export type ErrorCode =
  | "handle_not_found"
  | "handle_expired"
  | "stale_write"
  | "patch_error"
  | "state_too_large"
  | "invalid_argument"
  | "expect_version_required"
  | "unauthenticated"
  | "backend_error"
  | "internal_error"
  | "invalid_state"
  | "quota_exceeded"
  | "permission_denied"
  | "encryption_error";

/** The payload form of an error: `{ code, message, ...details }`. */
export type ErrorPayload = { code: string; message: string } & Record<string, unknown>;

/**
 * Base class of every mcpstate error.
 *
 * @example Reading the payload
 * ```ts
 * import { InvalidArgument } from "@mcpstate/core";
 * const e = new InvalidArgument("Pass a kind such as \"research\".", { field: "kind" });
 * e.toPayload(); // { code: "invalid_argument", message: "...", field: "kind" }
 * ```
 */
export class McpStateError extends Error {
  /** The stable machine-readable code. */
  readonly code: ErrorCode;
  /** Extra facts for the caller, snake_case keys, JSON-safe values. */
  readonly details: Record<string, unknown>;

  /**
   * Creates an error.
   *
   * @param code The stable code.
   * @param message A sentence that tells the reader what to do next.
   * @param details JSON-safe facts, merged into the payload.
   * @param options The underlying cause, if any.
   */
  constructor(
    code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }

  /**
   * The error as a dict for a model: `{ code, message, ...details }`.
   *
   * @returns A fresh plain object.
   */
  toPayload(): ErrorPayload {
    return { ...this.details, code: this.code, message: this.message };
  }
}

/**
 * The handle does not exist for this user (or belongs to someone else). When
 * it is in the caller's own trash (revoked, still restorable), `details`
 * carry `in_trash: true` and `restorable_until` (ISO time), and the message
 * says to restore it; another user's handle never says so.
 */
export class HandleNotFound extends McpStateError {
  /**
   * Until when `restore` brings the handle back, when it is in the caller's
   * trash; absent otherwise.
   *
   * @since 0.5.0
   */
  readonly restorableUntil?: Date;

  /**
   * Creates the error for a handle that does not exist for the caller.
   *
   * @param handle The handle that was asked for.
   * @param trash When the handle is in the caller's trash: until when it can
   * be restored (since 0.5.0).
   */
  constructor(handle: string, trash?: { restorableUntil: Date }) {
    const until = trash?.restorableUntil.toISOString();
    super(
      "handle_not_found",
      until === undefined
        ? `No state exists for handle "${handle}". Check the handle, or call state_list to see the handles you have; start over with a new handle if it is gone.`
        : `Handle "${handle}" was revoked and is in your trash. Call state_restore with it to bring it back exactly as it was (possible until ${until}), then use it again.`,
      until === undefined ? { handle } : { handle, in_trash: true, restorable_until: until },
    );
    if (trash) this.restorableUntil = trash.restorableUntil;
  }
}

/** The handle existed but its TTL has passed. */
export class HandleExpired extends McpStateError {
  /**
   * Creates the error for an expired handle.
   *
   * @param handle The expired handle.
   * @param expiredAt When it expired.
   * @param ttlDays Its lifetime in days, rounded to 3 decimals.
   */
  constructor(handle: string, expiredAt: Date, ttlDays: number) {
    super(
      "handle_expired",
      `Handle "${handle}" expired at ${expiredAt.toISOString()} and can no longer be read or renewed. Mint a new handle and rebuild the state if you still need it.`,
      { handle, expired_at: expiredAt.toISOString(), ttl_days: ttlDays },
    );
  }
}

/**
 * A save was based on an old version. `details.current` holds the full
 * current snapshot (payload form), `details.expected_version` the version the
 * writer read. A save with `onConflict: "merge"` that could not merge adds
 * `conflicts` (the JSON Pointers both sides changed) or `reason:
 * "history_unavailable"`.
 */
export class StaleWrite extends McpStateError {
  /**
   * Creates the error for a save based on an old version.
   *
   * @param handle The handle.
   * @param expectedVersion The version the writer based its state on.
   * @param current The current snapshot in payload form.
   * @param extra More details.
   */
  constructor(
    handle: string,
    expectedVersion: number,
    current: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ) {
    super(
      "stale_write",
      `Handle "${handle}" is at version ${
        String(current.version)
      }, not ${expectedVersion}: someone else wrote it since you read it. Nothing was saved. Re-read the current state (included here as "current"), re-apply your change to it, and save again with expect_version=${
        String(current.version)
      }; for additive edits prefer a patch, which never conflicts.${mergeNote(extra)}`,
      { handle, expected_version: expectedVersion, current, ...extra },
    );
  }
}

/** What a merging save that did not merge adds to the `StaleWrite` message. */
function mergeNote(extra: Record<string, unknown>): string {
  const conflicts = extra.conflicts;
  if (Array.isArray(conflicts) && conflicts.length > 0) {
    const shown = conflicts.slice(0, 5).join(", ") + (conflicts.length > 5 ? ", …" : "");
    return ` Your changes and theirs overlap at ${shown} ("conflicts"); only those need your attention, the rest of your changes would have merged.`;
  }
  if (extra.reason === "history_unavailable") {
    return ` It could not be merged: the changelog no longer reaches back to version ${
      String(extra.base_version)
    }.`;
  }
  return "";
}

/**
 * Why a patch was refused: the stable machine code in `PatchError.details.reason`.
 *
 * - `unknown_op`: the `op` field names no op.
 * - `missing_field`: a field the op needs is absent.
 * - `wrong_type`: a field or value has the wrong type.
 * - `bad_path`: a malformed path or pointer, or one with too many segments.
 * - `path_not_found`: a path that reads a part of the state (`getPath`) does not exist.
 * - `not_an_object` / `not_a_list`: the target is not the container the op needs.
 * - `not_a_number`: `increment` of a non-number.
 * - `out_of_range`: a list index past the end, or an operand or result of
 *   `increment` outside ±(2^53 − 1), which JSON numbers cannot carry exactly.
 * - `too_many_ops`: the patch holds more ops than allowed.
 *
 * A new reason may be added; an existing one never changes meaning.
 */
export type PatchReason = typeof PATCH_REASONS[number];

/**
 * Every {@link PatchReason}.
 *
 * @example Checking a payload's reason
 * ```ts
 * import { PATCH_REASONS } from "@mcpstate/core";
 * PATCH_REASONS.includes("too_many_ops"); // true
 * ```
 */
export const PATCH_REASONS = [
  "unknown_op",
  "missing_field",
  "wrong_type",
  "bad_path",
  "path_not_found",
  "not_an_object",
  "not_a_list",
  "not_a_number",
  "out_of_range",
  "too_many_ops",
] as const;

const NOTHING_APPLIED = "No op of this patch was applied; fix the op and send the patch again.";

/**
 * A patch op is malformed or cannot apply to the state. Nothing was applied.
 * `details.reason` is a {@link PatchReason}; the sentence is the `message`.
 *
 * @example Reading the reason
 * ```ts
 * import { PatchError } from "@mcpstate/core";
 * const e = new PatchError("not_a_list", 'append needs a list at path "tags".', { path: "tags" });
 * e.toPayload(); // { code: "patch_error", reason: "not_a_list", path: "tags", message: "..." }
 * ```
 */
export class PatchError extends McpStateError {
  /** Why the patch was refused (also `details.reason`). */
  readonly reason: PatchReason;

  /**
   * Creates the error for a malformed or inapplicable op.
   *
   * @param reason The stable machine code.
   * @param message What is wrong and what to do, in a sentence; the note that
   * nothing was applied is added unless the sentence already ends with it.
   * @param details More facts (`op_index`, `path`, `field`, …).
   */
  constructor(reason: PatchReason, message: string, details: Record<string, unknown> = {}) {
    super(
      "patch_error",
      message.endsWith(NOTHING_APPLIED) ? message : `${message} ${NOTHING_APPLIED}`,
      { ...details, reason },
    );
    this.reason = reason;
  }
}

/** The state is over the configured size cap. */
export class StateTooLarge extends McpStateError {
  /**
   * Creates the error for a state over the size cap.
   *
   * @param sizeBytes UTF-8 length of the compact JSON.
   * @param limitBytes The cap.
   */
  constructor(sizeBytes: number, limitBytes: number) {
    super(
      "state_too_large",
      `The state is ${sizeBytes} bytes of JSON, over the limit of ${limitBytes}. Nothing was saved. Store less (summaries, references instead of contents) or split it across several handles.`,
      { size_bytes: sizeBytes, limit_bytes: limitBytes },
    );
  }
}

/** Which per-user quota a write would break: see {@link QuotaExceeded}. */
export type QuotaName = "handles" | "bytes" | "writes_per_minute";

/**
 * A write would take the user over a quota (handles, bytes of state, or
 * writes per minute). Nothing was written.
 *
 * @since 0.5.0
 *
 * @example
 * ```ts
 * import { QuotaExceeded } from "@mcpstate/core";
 * const e = new QuotaExceeded("writes_per_minute", 60, 60, 12);
 * e.toPayload().retry_after_seconds; // 12
 * ```
 */
export class QuotaExceeded extends McpStateError {
  /**
   * Creates the error for a write over a quota.
   *
   * @param quota Which quota.
   * @param limit The configured limit.
   * @param usage The user's usage before the refused write.
   * @param retryAfterSeconds For the rate: whole seconds until the next minute starts.
   */
  constructor(quota: QuotaName, limit: number, usage: number, retryAfterSeconds?: number) {
    const what = quota === "handles"
      ? `You have ${usage} handles, the most allowed is ${limit}. Nothing was saved. Delete handles you no longer need (state_delete), or keep this in an existing handle instead of minting a new one.`
      : quota === "bytes"
      ? `Your handles hold ${usage} bytes of state and this write would bring them over the limit of ${limit}. Nothing was saved. Shrink states (summaries, references instead of contents) or delete handles you no longer need, then try again.`
      : `You made ${usage} writes this minute, the most allowed is ${limit}. Nothing was saved. Wait ${
        retryAfterSeconds ?? 60
      } seconds, then try again; combine several changes into one patch.`;
    super("quota_exceeded", what, {
      quota,
      limit,
      usage,
      ...(retryAfterSeconds === undefined ? {} : { retry_after_seconds: retryAfterSeconds }),
    });
  }
}

/**
 * The rights of a grant, narrowest first: `read` (get, read, list, changes,
 * watch), `append` (read + patches of only `append`, `add_to_set`,
 * `increment`), `patch` (read + any patch op), `write` (patch + save and
 * touch).
 *
 * @since 0.5.0
 */
export type Rights = "read" | "append" | "patch" | "write";

/**
 * A call through a shared handle needs more than the grant's rights (or a
 * re-share would widen them). Nothing was changed.
 *
 * @since 0.5.0
 *
 * @example
 * ```ts
 * import { PermissionDenied } from "@mcpstate/core";
 * const e = new PermissionDenied("read", "append");
 * e.toPayload(); // { code: "permission_denied", rights: "read", needed: "append", message: "…" }
 * ```
 */
export class PermissionDenied extends McpStateError {
  /**
   * Creates the error for a call beyond a grant's rights.
   *
   * @param rights The rights the caller holds.
   * @param needed What the call needs: a right, or the name of an owner-only
   * operation (`"owner"`), or `"expires_at"` for a re-share that outlives
   * its grant.
   * @param details More facts (`handle`, `expires_at`, …).
   */
  constructor(rights: Rights, needed: string, details: Record<string, unknown> = {}) {
    const what = needed === "owner"
      ? "Only the owner of a handle can do this; you hold a shared handle."
      : needed === "expires_at"
      ? "A re-share cannot outlive the grant you hold: pass a shorter ttl_days (or none)."
      : `This needs "${needed}" rights; the grant you hold gives "${rights}". Nothing was changed. Ask the owner for a wider share, or do only what "${rights}" allows.`;
    super("permission_denied", what, { ...details, rights, needed });
  }
}

/** Why an alias no longer reaches its handle. */
export type GrantEndReason = "grant_revoked" | "grant_expired";

/**
 * An alias handle whose grant was ended by `unshare` or lapsed: code
 * `handle_not_found`, details `reason`.
 *
 * @since 0.5.0
 */
export class GrantEnded extends HandleNotFound {
  /**
   * Creates the error for an alias whose grant ended.
   *
   * @param alias The alias handle.
   * @param reason `grant_revoked` or `grant_expired`.
   */
  constructor(alias: string, reason: GrantEndReason) {
    super(alias);
    this.details.reason = reason;
    this.message = reason === "grant_revoked"
      ? `The share behind handle "${alias}" was revoked by its owner. Ask the owner to share it again, or start over with a handle of your own.`
      : `The share behind handle "${alias}" expired. Ask the owner to share it again, or start over with a handle of your own.`;
  }
}

/** Why encrypted content could not be read or written (SPEC 9.2). */
export type EncryptionFailure = "no_key" | "unknown_key" | "tampered" | "plaintext";

/**
 * Encrypted content could not be opened, or content was not encrypted where
 * it must be: code `encryption_error`, details `reason` (and `key_id` for
 * `unknown_key`). Nothing was changed by the call that failed so.
 *
 * @since 0.5.0
 *
 * @example
 * ```ts
 * import { EncryptionError } from "@mcpstate/core";
 * const e = EncryptionError.unknownKey("k2024");
 * e.toPayload(); // { code: "encryption_error", reason: "unknown_key", key_id: "k2024", message: "…" }
 * ```
 */
export class EncryptionError extends McpStateError {
  /**
   * Creates the error.
   *
   * @param reason Why: `no_key`, `unknown_key`, `tampered` or `plaintext`.
   * @param message What to do next.
   * @param details More facts (`key_id`).
   */
  constructor(reason: EncryptionFailure, message: string, details: Record<string, unknown> = {}) {
    super("encryption_error", message, { ...details, reason });
  }

  /**
   * Encrypted data, and no keys to open it (or the user's data key was erased).
   *
   * @returns The error.
   */
  static noKey(): EncryptionError {
    return new EncryptionError(
      "no_key",
      "This state is encrypted and the server has no key for it. The operator must start mcpstate with its encryption keys (MCPSTATE_ENCRYPTION_KEYS or --encryption-keys-file); nothing was changed.",
    );
  }

  /**
   * The key-encryption key that wrapped the user's data key is not in the ring.
   *
   * @param keyId The missing key's id.
   * @returns The error.
   */
  static unknownKey(keyId: string): EncryptionError {
    return new EncryptionError(
      "unknown_key",
      `This state's data key is wrapped by the encryption key "${keyId}", which the server was not given. The operator must add it to the key ring; nothing was changed.`,
      { key_id: keyId },
    );
  }

  /**
   * Stored content does not open: changed, or moved from another handle or user.
   *
   * @returns The error.
   */
  static tampered(): EncryptionError {
    return new EncryptionError(
      "tampered",
      "This state's stored ciphertext does not open: it was changed or moved from another handle. The operator must restore it from a backup; nothing was changed.",
    );
  }

  /**
   * Plaintext content in a store that encrypts.
   *
   * @returns The error.
   */
  static plaintext(): EncryptionError {
    return new EncryptionError(
      "plaintext",
      "This state is stored unencrypted while encryption is on. The operator must run `mcpstate encrypt` once; nothing was changed.",
    );
  }
}

/** An argument is malformed. Nothing was changed. */
export class InvalidArgument extends McpStateError {
  /**
   * Creates the error for a malformed argument.
   *
   * @param message What is wrong and what to pass instead.
   * @param details More facts (`field`, …).
   */
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("invalid_argument", message, details);
  }
}

/** One problem a kind's schema found in a state: where (a JSON Pointer) and what. */
export interface StateIssue {
  /** JSON Pointer (RFC 6901) of the offending value; `""` is the whole state. */
  path: string;
  /** What the schema says is wrong there. */
  message: string;
}

/**
 * A state that the schema of its kind rejects (see `HandleStore.kind`).
 * Nothing was written.
 *
 * @since 0.5.0
 *
 * @example
 * ```ts
 * import { InvalidState } from "@mcpstate/core";
 * const e = new InvalidState("research", [{ path: "/sources/0", message: "Expected string" }]);
 * e.toPayload(); // { code: "invalid_state", kind: "research", issues: [...], message: "..." }
 * ```
 */
export class InvalidState extends McpStateError {
  /**
   * Creates the error for a state its kind's schema rejects.
   *
   * @param kind The kind whose schema was applied.
   * @param issues What is wrong, and where.
   */
  constructor(kind: string, issues: StateIssue[]) {
    const shown = issues.slice(0, 5).map((i) => `${i.path || "(root)"}: ${i.message}`);
    const more = issues.length > 5 ? ` (and ${issues.length - 5} more)` : "";
    super(
      "invalid_state",
      `The state does not match the schema of kind "${kind}": ${
        shown.join("; ")
      }${more}. Nothing was written. Fix the values at these paths and send the write again.`,
      { kind, issues },
    );
  }
}

/**
 * A save names a handle but no expected version: updating an existing handle
 * needs the version the caller last read.
 */
export class ExpectVersionRequired extends McpStateError {
  /**
   * Creates the error for an update without `expect_version`.
   *
   * @param handle The handle the caller tried to update.
   */
  constructor(handle: string) {
    super(
      "expect_version_required",
      "Updating an existing handle requires expect_version: pass the version from your last state_load, state_patch or state_save (call state_load to read it). For additive edits use state_patch, which needs no version.",
      { handle, field: "expect_version" },
    );
  }
}

/** The caller is not authenticated. */
export class Unauthenticated extends McpStateError {
  /**
   * Creates the error for a missing or invalid credential.
   *
   * @param message What is missing.
   */
  constructor(message = "Authentication is required: send a valid bearer token.") {
    super("unauthenticated", message);
  }
}

/** The storage engine failed (unreachable, refused, corrupt). */
export class BackendError extends McpStateError {
  /**
   * Creates the error for a failing storage engine. URL credentials in the message are redacted.
   *
   * @param message What failed.
   * @param options The underlying cause.
   */
  constructor(message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(
      "backend_error",
      redact(message),
      options?.details ?? {},
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
  }
}

/** An unexpected failure; only the class name of the cause is exposed. */
export class InternalError extends McpStateError {
  /**
   * Wraps an unexpected exception, exposing only its class name.
   *
   * @param cause The unexpected exception.
   */
  constructor(cause: unknown) {
    const name = cause instanceof Error ? cause.constructor.name : typeof cause;
    super(
      "internal_error",
      `An unexpected ${name} occurred inside mcpstate. Nothing is known to have been saved by this call; try again, and report it if it persists.`,
      { error_class: name },
      { cause },
    );
  }
}

/**
 * Replaces the credentials of every URL in `text` with `***`.
 *
 * @param text Any text that may contain URLs.
 * @returns The text with `scheme://user:pass@` turned into `scheme://***@`.
 *
 * @example
 * ```ts
 * import { redact } from "@mcpstate/core";
 * redact("redis://u:secret@h:6379/0"); // "redis://***@h:6379/0"
 * ```
 */
export function redact(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@/gi, "$1***@");
}
