/**
 * The mcpstate tools (`state_save`, `state_load`, `state_list`,
 * `state_patch`, `state_touch`, `state_delete`, `state_changes`,
 * `state_restore`, `state_lease`, `state_fork`, `state_merge`) on an `McpServer`, wire-compatible with the
 * original Python mcpstate 0.2 server.
 *
 * @module
 */

import {
  CLIENT_INFO_META_KEY,
  type ServerContext,
  type StandardSchemaWithJSON,
} from "@modelcontextprotocol/server";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/server";
import { z } from "zod";
import {
  type ErrorPayload,
  ExpectVersionRequired,
  HandleNotFound,
  InternalError,
  InvalidArgument,
  McpStateError,
  redact,
  StaleWrite,
  Unauthenticated,
} from "../errors.ts";
import type { JsonObject } from "../json.ts";
import { getPath, parsePath, type PatchOp } from "../ops.ts";
import { checkReadArgs, jsonSize, MIN_READ_BYTES, outline, toPointer } from "../outline.ts";
import {
  type ActiveLease,
  type HandleInfo,
  leasePayload,
  type Snapshot,
  toPayload,
  toReadPayload,
} from "../store.ts";
import { VERSION } from "../version.ts";
import { type Kind, kindRules, withRules } from "../kinds.ts";
import { grantPayload, type Rights } from "../grants.ts";
import { clientLabel } from "./identity.ts";
import type { AnyKind, HandleStore, McpServer } from "./types.ts";
import { sharedBucketMintKey } from "./_shared_bucket.ts";
import type { Telemetry, ToolOutcome } from "./telemetry.ts";

/** The version this server reports in its `serverInfo`. */
export const SERVER_VERSION: string = VERSION;

/** Random characters in handles minted for an anonymous (shared-bucket) caller: 130 bits. */
export const ANONYMOUS_RANDOM_CHARS = 26;

/**
 * A verified access token, as the HTTP layer hands it to the tools (the
 * shape of the MCP SDK's `AuthInfo`).
 */
export interface VerifiedToken {
  /** The raw access token. */
  token: string;
  /** The OAuth client the token was issued to (`azp` / `client_id`), or `""`. */
  clientId: string;
  /** The token's scopes. */
  scopes: string[];
  /** Expiry in seconds since the epoch. */
  expiresAt?: number;
  /** The resource (audience) the token was issued for. */
  resource?: URL;
  /** The RFC 9728 metadata URL of the server that accepted it. */
  resourceMetadataUrl?: string;
  /** More facts; mcpstate's verifier puts `user` (`"<iss>#<sub>"`), `iss` and `sub` here. */
  extra?: Record<string, unknown>;
}

/** What a tool call knows about its caller, handed to the identity resolvers. */
export interface ToolRequest {
  /**
   * The client's name: the request's `_meta` client info, the 2025 `initialize`, or an HTTP
   * request's `User-Agent` (control characters dropped, at most 100 characters).
   */
  clientName: string | undefined;
  /** The verified token of an HTTP request, when the transport authenticated one. */
  authInfo: VerifiedToken | undefined;
  /** The HTTP request of the call (HTTP transports only), e.g. to read a header. */
  httpRequest: Request | undefined;
}

/** Options of {@link registerStateTools}. */
export interface StateToolsOptions {
  /**
   * Resolves the user a call acts for; every read and write is scoped to it.
   * Throw an `Unauthenticated` error to refuse the call.
   */
  user: (request: ToolRequest) => string | Promise<string>;
  /** Resolves the writer label recorded on writes (`laptop/claude-code`); absent: none. */
  writer?: (request: ToolRequest) => string | null | undefined;
  /**
   * One shared bucket for every caller (unauthenticated HTTP): handles are the
   * only secret, so they are minted with 130 bits of randomness, shorter
   * handles are refused, and `state_list` answers an error instead of the
   * bucket's contents. Default `false`.
   */
  anonymous?: boolean;
  /**
   * The read budget, in bytes of compact JSON, of a call that passes no
   * `max_bytes`: the state (or `values`) of `state_load`, a `state_list`
   * page, and the `current` state inside a `stale_write`. What is over it
   * comes back as an outline with `truncated: true`. Default
   * {@link DEFAULT_MAX_READ_BYTES}; 0: no limit; otherwise at least 256.
   *
   * @since 0.5.0
   */
  maxReadBytes?: number;
  /**
   * The tools to offer, by name with or without the `state_` prefix
   * (`["save", "load", "patch", "list"]`). Default {@link DEFAULT_TOOLS}; a
   * tool outside it (see {@link STATE_TOOLS}) is offered only when named here.
   *
   * @since 0.5.0
   */
  tools?: readonly string[];
  /**
   * Called with every unexpected (non-mcpstate) error and every backend
   * failure, whose details the caller does not see. Default: a line on stderr
   * with URL credentials redacted.
   */
  onInternalError?: (error: unknown, tool: string) => void;
  /**
   * Seconds of the advisory lease a write takes for its writer (state_save,
   * state_patch, state_touch), so that other sessions see who is at work;
   * it never blocks anyone, and another holder's lease is left alone.
   * Default {@link DEFAULT_LEASE_SECONDS}; 0 turns it off.
   */
  leaseSeconds?: number;
  /**
   * Metrics and traces of every tool call (see `Telemetry`). Default none:
   * the handlers run uninstrumented.
   */
  telemetry?: Telemetry;
  /**
   * Typed kinds (from `defineKind` or `store.kind`; their own store, if any,
   * is not used). `state_save` offers each one's JSON Schema to the model; a
   * mint, save or patch of a handle of one of these kinds is validated by its
   * schema after its ops apply (`invalid_state` with the issues, nothing
   * written), and `state_load` reads states of older schema versions
   * upcast. Other kinds stay free-form. Default none.
   *
   * @since 0.5.0
   */
  kinds?: readonly AnyKind[];
}

/** Seconds of the lease a write takes implicitly (see {@link StateToolsOptions.leaseSeconds}). */
export const DEFAULT_LEASE_SECONDS = 60;

/**
 * The default read budget of a call without `max_bytes`, in bytes (see
 * {@link StateToolsOptions.maxReadBytes}).
 *
 * @since 0.5.0
 */
export const DEFAULT_MAX_READ_BYTES = 131_072;

/**
 * Every tool this server can offer, in the order `tools/list` shows them.
 *
 * @since 0.5.0
 */
export const STATE_TOOLS: readonly string[] = Object.freeze([
  "state_save",
  "state_load",
  "state_list",
  "state_patch",
  "state_touch",
  "state_delete",
  "state_changes",
  "state_restore",
  "state_lease",
  "state_fork",
  "state_merge",
  "state_share",
]);

/**
 * The tools offered when none are named: those whose descriptions together
 * keep the whole `tools/list` result within 8,192 bytes of JSON. A tool of
 * {@link STATE_TOOLS} outside this set is offered only when named.
 *
 * @since 0.5.0
 */
export const DEFAULT_TOOLS: readonly string[] = Object.freeze(
  STATE_TOOLS.filter((t) => t !== "state_share"),
);

/**
 * Checks the read budget and the tools of {@link StateToolsOptions} once,
 * before any request: what a serving entry calls up front, so that a bad
 * option fails at start and not per request.
 *
 * @param options The options.
 * @returns The budget (0: no limit) and the full names of the tools offered.
 * @throws {TypeError} For a budget that is not 0 or at least 256, or an unknown tool.
 * @since 0.5.0
 */
export function checkReadAndTools(
  options: Pick<StateToolsOptions, "maxReadBytes" | "tools">,
): { maxReadBytes: number; tools: string[] } {
  const maxReadBytes = options.maxReadBytes ?? DEFAULT_MAX_READ_BYTES;
  if (
    !Number.isSafeInteger(maxReadBytes) || maxReadBytes < 0 ||
    (maxReadBytes > 0 && maxReadBytes < MIN_READ_BYTES)
  ) {
    throw new TypeError(
      `maxReadBytes must be 0 (no limit) or a whole number of at least ${MIN_READ_BYTES}.`,
    );
  }
  return { maxReadBytes, tools: resolveToolNames(options.tools ?? DEFAULT_TOOLS) };
}

/**
 * Resolves tool names as `--tools` and {@link StateToolsOptions.tools} take
 * them: with or without the `state_` prefix, in any order, each once.
 *
 * @param names Tool names (`"save"`, `"state_load"`).
 * @returns The full names, in the order of {@link STATE_TOOLS}.
 * @throws {TypeError} For an unknown name, or none at all; the message names the valid ones.
 * @since 0.5.0
 *
 * @example
 * ```ts
 * import { resolveToolNames } from "@mcpstate/core/server";
 * resolveToolNames(["load", "state_save"]); // ["state_save", "state_load"]
 * ```
 */
export function resolveToolNames(names: readonly string[]): string[] {
  const valid = STATE_TOOLS.map((t) => t.slice("state_".length)).join(", ");
  if (!Array.isArray(names) || names.length === 0) {
    throw new TypeError(`Name at least one tool: ${valid}.`);
  }
  const wanted = new Set<string>();
  for (const raw of names) {
    const name = typeof raw === "string" ? raw.trim() : "";
    const full = name.startsWith("state_") ? name : `state_${name}`;
    if (!STATE_TOOLS.includes(full)) {
      throw new TypeError(`Unknown tool ${JSON.stringify(raw)}; the tools are ${valid}.`);
    }
    wanted.add(full);
  }
  return STATE_TOOLS.filter((t) => wanted.has(t));
}

const RETENTION =
  "State saved without ttl_days is kept until it is deleted; with ttl_days it expires that many days after it was created or last renewed, and expired state can't be read or revived.";

/**
 * The server instructions: how a model should use the tools, in a few lines.
 *
 * @param anonymous Whether the server runs in shared-bucket mode (no `state_list`).
 * @returns The instructions text.
 */
export function stateInstructions(anonymous = false): string {
  const start = anonymous
    ? "- This server is shared and unauthenticated: a handle is a secret that grants access to its state. state_list is disabled; to resume earlier work, ask the user for the handle."
    : "- At the start of a conversation call state_list and offer to resume relevant earlier work.";
  return [
    "mcpstate is durable memory that outlives this conversation and is shared across the user's clients and devices.",
    start,
    "- To start tracking something, call state_save without a handle (kind + state); keep the returned handle, tell the user, and pass it back in later calls.",
    "- Read with state_load. For additive edits use state_patch (never conflicts); to rewrite the whole state use state_save with handle and expect_version = the version you read.",
    '- On a stale_write error nothing was saved: error.changes lists what others changed since your version; take error.current.state, re-apply your change, and save again with expect_version = error.current.version. Saving with on_conflict: "merge" does that for you when your edits and theirs touch different paths; error.conflicts then names the paths you both changed.',
    "- Large state: state_load answers an outline (keys, sizes, previews and the path of each part) when the state is over max_bytes; read the parts you need with paths.",
    "- Resuming after time away: state_changes(handle, since_version) shows what happened since the version you remember. state_delete can be undone with state_restore for a few days.",
    "- active_lease on a handle means a session (holder) is working on it right now: tell the user before taking over, and prefer state_patch. Writes take a short lease for you; state_lease takes a longer one or releases it.",
    `- ${RETENTION} state_touch renews or removes the expiry.`,
  ].join("\n");
}

// ---------------------------------------------------------------------------
// Schemas. Each tool has two: zod checks the arguments inside the handler
// (where a failure becomes an mcpstate `invalid_argument` result) and a
// success before it is sent; a hand-written JSON Schema is what `tools/list`
// advertises, kept small because every conversation pays for it. The
// advertised output schemas admit every success the strict zod ones admit
// (no `additionalProperties: false`, fewer `required` keys): SDK 1.x clients
// check results against them. `state` and `ops` are `z.unknown()`: their
// values are taken from the raw arguments, never rebuilt, so keys such as
// `__proto__` survive; the store validates them.

const str = z.string().nullish();
const int = z.number().int().nullish();

const saveInput = z.object({
  kind: str,
  state: z.unknown(),
  handle: str,
  expect_version: int,
  ttl_days: z.number().nullish(),
  on_conflict: z.enum(["fail", "merge"]).nullish(),
  idempotency_key: str,
});
const loadInput = z.object({
  handle: z.string(),
  path: str,
  max_bytes: int,
  paths: z.array(z.string()).nullish(),
});
const listInput = z.object({
  kind: str,
  limit: int,
  cursor: str,
  previews: z.boolean().nullish(),
});
const patchInput = z.object({ handle: z.string(), ops: z.unknown(), idempotency_key: str });
const touchInput = z.object({
  handle: z.string(),
  ttl_days: z.number().nullish(),
  idempotency_key: str,
});
const deleteInput = z.object({ handle: z.string(), idempotency_key: str });
const changesInput = z.object({ handle: z.string(), since_version: z.number().int() });
const restoreInput = z.object({ handle: z.string() });
const forkInput = z.object({ handle: z.string() });
const mergeInput = z.object({ handle: z.string() });
const leaseInput = z.object({
  handle: z.string(),
  seconds: z.number().nullish(),
  release: z.boolean().nullish(),
});

const shareInput = z.object({
  handle: z.string(),
  to: z.string(),
  rights: z.string(),
  ttl_days: z.number().nullish(),
});

const metaShape = {
  handle: z.string(),
  kind: z.string(),
  version: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
  expires_at: z.string().nullable(),
  last_writer: z.string().nullable(),
  // Present for a state written by a typed kind (see StateToolsOptions.kinds).
  schema_version: z.number().int().optional(),
  // Present for a fork (state_fork): the origin and its version at the fork.
  forked_from: z.strictObject({ handle: z.string(), version: z.number().int() }).optional(),
  active_lease: z.strictObject({ holder: z.string(), expires_at: z.string() }).optional(),
  // Present on a handle shared with the caller (an alias handle, see HandleStore.share).
  shared_by: z.string().optional(),
  rights: z.enum(["read", "append", "patch", "write"]).optional(),
  // state_list with previews: true (a line describing the state).
  preview: z.string().optional(),
};
const ok = z.literal(true);
const shareOutput = z.strictObject({
  ok,
  grant: z.string(),
  handle: z.string(),
  rights: z.string(),
  to: z.string(),
  expires_at: z.string().nullable(),
});

const saveOutput = z.strictObject({
  ok,
  handle: z.string(),
  version: z.number().int(),
  merged: z.literal(true).optional(),
  base_version: z.number().int().optional(),
  active_lease: metaShape.active_lease,
});
const loadOutput = z.strictObject({
  ok,
  ...metaShape,
  state: z.unknown().optional(),
  outline: z.unknown().optional(),
  values: z.record(z.string(), z.unknown()).optional(),
  missing: z.array(z.string()).optional(),
  path: z.string().optional(),
  truncated: z.boolean().optional(),
  size_bytes: z.number().int().optional(),
});
const listOutput = z.strictObject({
  ok,
  handles: z.array(z.strictObject(metaShape)),
  next_cursor: z.string().nullable(),
});
const patchOutput = z.strictObject({ ok, ...metaShape, state: z.unknown() });
const touchOutput = z.strictObject({ ok, ...metaShape });
const deleteOutput = z.strictObject({ ok, handle: z.string(), deleted: z.literal(true) });
const changesOutput = z.strictObject({
  ok,
  handle: z.string(),
  since_version: z.number().int(),
  truncated: z.boolean(),
  version: z.number().int(),
  changes: z.array(z.record(z.string(), z.unknown())).optional(),
  current: z.unknown().optional(),
});
const restoreOutput = z.strictObject({
  ok,
  ...metaShape,
  state: z.unknown(),
  restored: z.literal(true),
});
const forkOutput = z.strictObject({ ok, ...metaShape });
const mergeOutput = z.strictObject({
  ok,
  ...metaShape,
  merged_from: z.strictObject({ handle: z.string(), version: z.number().int() }),
});
const leaseOutput = z.strictObject({
  ok,
  handle: z.string(),
  acquired: z.boolean(),
  released: z.boolean().optional(),
  active_lease: z.strictObject({ holder: z.string(), expires_at: z.string() }).nullable(),
});

// The advertised JSON Schemas, built from a few pieces.
type Json = Record<string, unknown>;
const S: Json = { type: "string" };
const I: Json = { type: "integer" };
const N: Json = { type: "number" };
const B: Json = { type: "boolean" };
const O: Json = { type: "object" };
/** An object schema; `required` lists the keys always present. */
const obj = (properties: Json, required: string[] = []): Json => ({
  type: "object",
  properties,
  ...(required.length > 0 ? { required } : {}),
});
/** `schema` with a description. */
const says = (schema: Json, description: string): Json => ({ ...schema, description });
const meta = { handle: S, version: I };

const ADVERTISED: Record<string, { input: Json; output: Json }> = {
  save: {
    input: obj({
      kind: says(S, 'Create: a label such as "research"'),
      state: O,
      handle: says(S, "Update: the handle"),
      expect_version: says(I, "Update: the version you read"),
      ttl_days: says(N, "Days to live; omit: forever (update: keep)"),
      on_conflict: { enum: ["fail", "merge"] },
      idempotency_key: S,
    }, ["state"]),
    output: obj(meta),
  },
  load: {
    input: obj({
      handle: S,
      path: says(S, 'One part: "/sources/0" or "notes.draft"'),
      max_bytes: { type: "integer", minimum: 256 },
      paths: { type: "array", items: S, maxItems: 32 },
    }, ["handle"]),
    output: obj({ ...meta, state: {}, outline: O, values: O }),
  },
  list: {
    input: obj({ kind: S, limit: { type: "integer", maximum: 500 }, cursor: S, previews: B }),
    output: obj({ handles: { type: "array", items: obj(meta) } }),
  },
  patch: {
    input: obj({ handle: S, ops: { type: "array", items: O }, idempotency_key: S }, [
      "handle",
      "ops",
    ]),
    output: obj({ ...meta, state: O }),
  },
  touch: {
    input: obj({ handle: S, ttl_days: N, idempotency_key: S }, ["handle"]),
    output: obj(meta),
  },
  delete: {
    input: obj({ handle: S, idempotency_key: S }, ["handle"]),
    output: obj({ handle: S }),
  },
  changes: {
    input: obj({ handle: S, since_version: I }, ["handle", "since_version"]),
    output: obj({ version: I, changes: { type: "array", items: O } }),
  },
  restore: {
    input: obj({ handle: S }, ["handle"]),
    output: obj({ ...meta, state: O }),
  },
  lease: {
    input: obj({ handle: S, seconds: N, release: B }, ["handle"]),
    output: obj({ acquired: B }),
  },
  fork: {
    input: obj({ handle: S }, ["handle"]),
    output: obj({ ...meta, forked_from: O }),
  },
  merge: {
    input: obj({ handle: says(S, "The fork") }, ["handle"]),
    output: obj({ ...meta, merged_from: O }),
  },
  share: {
    input: obj({
      handle: S,
      to: says(S, 'A user id, or "*" for anyone holding the new handle'),
      rights: { enum: ["read", "append", "patch", "write"] },
      ttl_days: N,
    }, ["handle", "to", "rights"]),
    output: obj({ grant: S, handle: S }),
  },
};

/**
 * A Standard Schema that advertises `json` (whatever JSON Schema target is
 * asked for) and validates with `validate`.
 */
function advertise(
  json: Json,
  validate: StandardSchemaWithJSON<unknown, unknown>["~standard"]["validate"],
): StandardSchemaWithJSON<unknown, unknown> {
  const frozen = deepFreeze(json);
  const serve = () => frozen;
  return {
    "~standard": {
      version: 1,
      vendor: "mcpstate",
      validate,
      jsonSchema: { input: serve, output: serve },
    },
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** One tool's argument schema (checked in the handler) and its advertised forms. */
interface ToolSchemas<S extends z.ZodType> {
  input: S;
  advertisedInput: StandardSchemaWithJSON<unknown, unknown>;
  output: StandardSchemaWithJSON<unknown, unknown>;
}

/**
 * The schemas of tool `name`: `input` checks the arguments in the handler
 * (the advertised one accepts them untouched, so that a bad argument is an
 * mcpstate `invalid_argument` result rather than an SDK message, and `state`
 * is never rebuilt); `output` checks a success before it is sent.
 */
function schemas<S extends z.ZodType>(
  name: string,
  input: S,
  output: z.ZodType,
): ToolSchemas<S> {
  const advertised = ADVERTISED[name]!;
  return {
    input,
    advertisedInput: advertise(advertised.input, (value: unknown) => ({ value })),
    output: advertise(advertised.output, output["~standard"].validate),
  };
}

const SCHEMAS = {
  save: schemas("save", saveInput, saveOutput),
  load: schemas("load", loadInput, loadOutput),
  list: schemas("list", listInput, listOutput),
  patch: schemas("patch", patchInput, patchOutput),
  touch: schemas("touch", touchInput, touchOutput),
  delete: schemas("delete", deleteInput, deleteOutput),
  changes: schemas("changes", changesInput, changesOutput),
  restore: schemas("restore", restoreInput, restoreOutput),
  lease: schemas("lease", leaseInput, leaseOutput),
  fork: schemas("fork", forkInput, forkOutput),
  merge: schemas("merge", mergeInput, mergeOutput),
  share: schemas("share", shareInput, shareOutput),
};

// ---------------------------------------------------------------------------
// Results.

/**
 * Builds the tool result for a payload. A success is `structuredContent` and
 * the same JSON as its text block. A failure is the text block alone (the
 * whole `{ok: false, error}` payload) with `isError`: the declared output
 * schemas describe successes only, and clients on SDK 1.x check any
 * `structuredContent` against them even when `isError` is set, then throw
 * instead of showing the model the error.
 */
function result(payload: Record<string, unknown>, isError = false): CallToolResult {
  const content: CallToolResult["content"] = [{ type: "text", text: JSON.stringify(payload) }];
  return isError ? { content, isError: true } : { content, structuredContent: payload };
}

/**
 * The failure payload of an error: `{ ok: false, error: { code, message, … } }`.
 * Anything that is not an mcpstate error becomes `internal_error` naming only
 * the error's class, and a `backend_error` keeps its code but not the driver's
 * text.
 *
 * @param error What was thrown.
 * @returns The payload.
 */
export function failurePayload(error: unknown): Record<string, unknown> {
  if (error instanceof McpStateError && error.code === "backend_error") {
    // The driver's text (hosts, ports, database names) is for the operator's
    // log, not for the caller.
    return {
      ok: false,
      error: {
        code: "backend_error",
        message:
          "The storage backend failed or is unreachable right now; this call may not have been applied. Try again in a moment; if it keeps failing, tell the user that their state server's storage is unavailable.",
      },
    };
  }
  const e = error instanceof McpStateError ? error : new InternalError(error);
  return { ok: false, error: e.toPayload() };
}

function invalidArguments(tool: string, error: z.ZodError): InvalidArgument {
  const issue = error.issues[0];
  const field = issue?.path.map(String).join(".") || "arguments";
  const what = issue?.message.replace(/^Invalid input: /, "") ?? "invalid";
  return new InvalidArgument(
    `The argument "${field}" of ${tool} is not valid (${what}). Fix it and call ${tool} again.`,
    { field },
  );
}

/**
 * What a request handler's context says about the caller, for the identity
 * resolvers.
 *
 * @param server The server handling the request.
 * @param ctx The handler context.
 * @returns The client name, verified token and HTTP request.
 */
export function toolRequestOf(server: McpServer, ctx: ServerContext): ToolRequest {
  return {
    clientName: clientNameOf(server, ctx),
    authInfo: ctx.http?.authInfo,
    httpRequest: ctx.http?.req,
  };
}

/**
 * The client a request says it comes from: a 2026-07-28 request's client
 * info, the 2025 `initialize` of a stdio session, else (a 2025-era HTTP
 * request, which carries no client info after `initialize`) its
 * `User-Agent`, so that two different clients of one user are two writers.
 */
function clientNameOf(server: McpServer, ctx: ServerContext): string | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const info = envelope?.[CLIENT_INFO_META_KEY] ?? server.server.getClientVersion();
  return clientLabel((info as { name?: unknown } | undefined)?.name) ??
    clientLabel(ctx.http?.req?.headers.get("user-agent"));
}

function infoOnly(s: Snapshot): HandleInfo {
  const { state: _state, ...info } = s;
  return info;
}

function defaultInternalErrorLog(error: unknown, tool: string): void {
  const text = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(
    error,
  );
  console.error(`mcpstate: ${tool} failed: ${redact(text)}`);
}

/** Parsed arguments with `null` dropped: for every optional argument, null means absent. */
type Present<A> = { [K in keyof A]: Exclude<A[K], null> };

function dropNulls<A extends object>(args: A): Present<A> {
  return Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null)) as Present<A>;
}

type ToolRun<A> = (
  args: Present<A>,
  raw: Record<string, unknown>,
  who: { user: string; writer: string | undefined; request: ToolRequest },
) => Promise<Record<string, unknown>>;

/**
 * Registers the mcpstate tools on `server`, backed by `store`. Identity is
 * resolved per call from the handler context, so one server instance (or one
 * per request) can serve many users.
 *
 * @param server The MCP server to add the tools to (created with the `tools` capability, or none yet registered).
 * @param store The open store; the caller keeps ownership and closes it.
 * @param options How to resolve the user and writer of a call; shared-bucket mode.
 *
 * @example Adding mcpstate's tools to your own server
 * ```ts
 * import { McpServer } from "@modelcontextprotocol/server";
 * import { HandleStore } from "@mcpstate/core";
 * import { registerStateTools } from "@mcpstate/core/server";
 *
 * const store = await HandleStore.fromUrl("memory://");
 * const server = new McpServer({ name: "my-server", version: "1.0.0" });
 * registerStateTools(server, store, {
 *   // e.g. the verified token's subject on HTTP; a fixed user on stdio
 *   user: ({ authInfo }) => String(authInfo?.extra?.sub ?? "local"),
 *   writer: ({ clientName }) => clientName ? `my-server/${clientName}` : "my-server",
 * });
 * await store.close();
 * ```
 */
export function registerStateTools(
  server: McpServer,
  store: HandleStore,
  options: StateToolsOptions,
): void {
  const anonymous = options.anonymous ?? false;
  const onInternal = options.onInternalError ?? defaultInternalErrorLog;
  // Instrumented when asked for; else each handler runs directly.
  const observe: Telemetry["observeTool"] = options.telemetry
    ? options.telemetry.observeTool.bind(options.telemetry)
    : (_tool, _id, run) => run({});
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  if (typeof leaseSeconds !== "number" || !(leaseSeconds >= 0 && leaseSeconds <= 86_400)) {
    throw new TypeError("leaseSeconds must be a number of seconds from 0 (off) to 86400.");
  }
  const { maxReadBytes: maxRead, tools } = checkReadAndTools(options);
  /** The budget of a read that names none; `undefined`: no limit. */
  const readBudget = maxRead === 0 ? undefined : maxRead;
  const offered = new Set(tools);
  const kinds = options.kinds ?? [];
  const rules = kinds.length > 0
    ? kindRules(kinds as readonly Kind<unknown, unknown>[], false)
    : undefined;
  /** Store options with the kinds' rules. */
  const typed = <T extends object>(o: T): T => withRules(o, rules);

  /**
   * The writer's short lease, taken by the write itself (in the same step on
   * every built-in backend); none without a writer or with leases off.
   */
  const writeLease = (writer: string | undefined): { lease?: { seconds: number } } =>
    leaseSeconds === 0 || !writer ? {} : { lease: { seconds: leaseSeconds } };
  /**
   * After a write: when another holder's lease is in force, answers it as
   * `{ active_lease }` so the model learns that someone else is at work.
   */
  const otherLease = (
    info: { activeLease?: ActiveLease },
    writer: string | undefined,
  ): Record<string, unknown> =>
    info.activeLease && info.activeLease.holder !== writer
      ? { active_lease: leasePayload(info.activeLease) }
      : {};

  const checkHandle = (handle: string): void => {
    // In the shared bucket only long handles exist; never confirm a short guess.
    if (anonymous && handle.length - handle.lastIndexOf("_") - 1 < ANONYMOUS_RANDOM_CHARS) {
      throw forSharedBucket(new HandleNotFound(handle));
    }
  };

  /** Registers a tool when it is one of the tools offered. */
  const offer: typeof register = (name, config, run) => {
    if (offered.has(name)) register(name, config, run);
  };

  const register = <S extends z.ZodType>(
    name: string,
    config: {
      title: string;
      description: string;
      schemas: ToolSchemas<S>;
      annotations: ToolAnnotations;
    },
    run: ToolRun<z.infer<S>>,
  ): void => {
    server.registerTool(name, {
      title: config.title,
      description: config.description,
      inputSchema: config.schemas.advertisedInput,
      outputSchema: config.schemas.output,
      annotations: { title: config.title, ...config.annotations },
    }, (args, ctx) => observe(name, ctx.mcpReq.id, (outcome) => handler(args, ctx, outcome)));

    async function handler(
      args: unknown,
      ctx: ServerContext,
      outcome: ToolOutcome,
    ): Promise<CallToolResult> {
      try {
        const raw: Record<string, unknown> = typeof args === "object" && args !== null &&
            !Array.isArray(args)
          ? args as Record<string, unknown>
          : {};
        const parsed = config.schemas.input.safeParse(raw);
        if (!parsed.success) throw invalidArguments(name, parsed.error);
        const request = toolRequestOf(server, ctx);
        const user = await options.user(request);
        if (typeof user !== "string" || user.length === 0) throw new Unauthenticated();
        const writer = options.writer?.(request) ?? undefined;
        const payload = await run(dropNulls(parsed.data as object) as Present<z.infer<S>>, raw, {
          user,
          writer,
          request,
        });
        if (payload.merged === true) outcome.merged = true;
        return result({ ok: true, ...payload });
      } catch (e) {
        if (!(e instanceof McpStateError) || e.code === "backend_error") onInternal(e, name);
        const failure = failurePayload(anonymous ? forSharedBucket(e) : e);
        outcome.error = failure.error as ErrorPayload;
        return result(failure, true);
      }
    }
  };

  offer("state_save", {
    title: "Save state",
    description: [
      "Save state that outlives this conversation.",
      "Create: omit handle; pass kind and state. Keep the handle, tell the user, pass it back later (also in new conversations).",
      "Update: handle + expect_version (the version you read); state replaces the whole state.",
      'stale_write error: someone else wrote since; nothing saved. With on_conflict:"merge" your edits merge when they touch other paths than theirs; else error.conflicts lists the clashing paths: re-apply your change to error.current.state, save with expect_version=error.current.version.',
      "For small edits prefer state_patch: no version, no conflicts.",
      ...kindsDescription(kinds),
    ].join("\n"),
    schemas: SCHEMAS.save,
    annotations: { openWorldHint: false },
  }, async (args, raw, { user, writer }) => {
    const state = raw.state as JsonObject;
    const idem = args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key };
    const w = writer === undefined ? {} : { writer };
    if (args.handle === undefined) {
      if (args.kind === undefined) {
        throw new InvalidArgument(
          'Creating new state needs a kind, a short lowercase label such as "research". Pass kind, or pass the handle of existing state to update it.',
          { field: "kind" },
        );
      }
      // The shared bucket scopes a mint's key by the whole call (_shared_bucket.ts).
      const key = anonymous && args.idempotency_key !== undefined
        ? await sharedBucketMintKey(args.idempotency_key, [args.kind, state, args.ttl_days, writer])
        : args.idempotency_key;
      const handle = await store.mint(
        args.kind,
        state,
        typed({
          user,
          ...w,
          ...(key === undefined ? {} : { idempotencyKey: key }),
          ...(args.ttl_days === undefined ? {} : { ttlDays: args.ttl_days }),
          ...(anonymous ? { randomChars: ANONYMOUS_RANDOM_CHARS } : {}),
          ...writeLease(writer),
        }),
      );
      // A new handle has no other holder: the writer's lease was taken.
      return { handle, version: 1 };
    }
    checkHandle(args.handle);
    if (args.expect_version === undefined) throw new ExpectVersionRequired(args.handle);
    const snap = await store.save(
      args.handle,
      state,
      typed({
        user,
        expectVersion: args.expect_version,
        ...w,
        ...idem,
        // null and absent both keep the expiry; state_touch removes it.
        ...(args.ttl_days === undefined ? {} : { ttlDays: args.ttl_days }),
        ...(args.on_conflict === undefined ? {} : { onConflict: args.on_conflict }),
        ...writeLease(writer),
      }),
    ).catch((e) => {
      if (e instanceof StaleWrite && readBudget !== undefined) withinBudget(e, readBudget);
      throw e;
    });
    return {
      handle: snap.handle,
      version: snap.version,
      ...(snap.merged ? { merged: true, base_version: snap.baseVersion } : {}),
      ...otherLease(snap, writer),
    };
  });

  offer("state_load", {
    title: "Load state",
    description: [
      "Read state and its version (for state_save).",
      `Over max_bytes${
        readBudget === undefined ? "" : ` (default ${readBudget})`
      } you get outline, not state (truncated:true): keys, sizes, previews, and the JSON Pointer path of each part left out; pass those in paths to read them (values).`,
    ].join("\n"),
    schemas: SCHEMAS.load,
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, _raw, { user, writer }) => {
    checkHandle(args.handle);
    checkReadArgs(args.max_bytes, args.paths);
    const budget = args.max_bytes ?? readBudget;
    if (args.paths !== undefined) {
      if (args.path) {
        throw new InvalidArgument(
          "Pass path (one part) or paths (several parts), not both.",
          { field: "paths" },
        );
      }
      const r = await store.read(
        args.handle,
        typed({
          user,
          paths: args.paths,
          ...(budget === undefined ? {} : { maxBytes: budget }),
        }),
      );
      return withoutOwnLease(toReadPayload(r), r, writer);
    }
    const snap = await store.get(args.handle, typed({ user }));
    const { state: _, ...payload } = payloadFor(snap, writer);
    const path = args.path || undefined;
    const value = path === undefined ? snap.state : getPath(snap.state, path);
    const read = budget === undefined
      ? { truncated: false as const, value, sizeBytes: -1 }
      : outline(value, budget, { pointer: path === undefined ? "" : toPointer(parsePath(path)) });
    if (read.truncated) payload.outline = read.outline;
    else payload.state = value;
    if (path !== undefined) payload.path = path;
    // A call that asks for a budget (or whose state is cut) learns whether anything was left
    // out; any other keeps the keys of mcpstate 0.2.
    if (read.truncated || args.max_bytes !== undefined) {
      payload.truncated = read.truncated;
      payload.size_bytes = read.sizeBytes < 0 ? jsonSize(value) : read.sizeBytes;
    }
    return payload;
  });

  offer("state_list", {
    title: "List state",
    description: [
      "List your handles (kind, version, updated_at; no state), newest first. Call it at the start of a conversation to offer resuming earlier work; previews: true adds a line about each state. next_cursor set: pass it as cursor for more.",
    ].join("\n"),
    schemas: SCHEMAS.list,
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, _raw, { user, writer }) => {
    if (anonymous) {
      throw new Unauthenticated(
        "state_list is disabled on this server: it runs without authentication, so every caller shares one bucket and a list would reveal everyone's handles. Keep the handles you mint and pass them back; to resume earlier work, ask the user for its handle.",
      );
    }
    const page = await store.listPage(user, {
      ...(args.kind === undefined ? {} : { kind: args.kind }),
      ...(args.limit === undefined ? {} : { limit: args.limit }),
      ...(args.cursor === undefined ? {} : { cursor: args.cursor }),
      ...(args.previews ? { previews: true } : {}),
      // The result adds `"ok":true,` to the page's own JSON.
      ...(readBudget === undefined ? {} : { maxBytes: Math.max(1, readBudget - 10) }),
    });
    return {
      handles: page.handles.map((h) => payloadFor(h, writer)),
      next_cursor: page.nextCursor,
    };
  });

  offer("state_patch", {
    title: "Patch state",
    description: [
      "Edit state in place; no version, never conflicts: prefer it for additive edits. ops apply in order, all or nothing:",
      '{"op":"append"|"add_to_set","path":P,"value":V} {"op":"set_key","path":P,"key":K,"value":V} {"op":"increment","path":P,"key":K,"by":N} {"op":"del_key","path":P,"key":K} {"op":"merge","path":P,"mapping":{}}',
      'P: "" (top), "a.b" or "/items/0". Returns the new state.',
    ].join("\n"),
    schemas: SCHEMAS.patch,
    annotations: { openWorldHint: false },
  }, async (args, raw, { user, writer }) => {
    checkHandle(args.handle);
    const snap = await store.patch(
      args.handle,
      raw.ops as PatchOp[],
      typed({
        user,
        ...(writer === undefined ? {} : { writer }),
        ...(args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key }),
        ...writeLease(writer),
      }),
    );
    const { activeLease: _, ...rest } = snap;
    return { ...toPayload(rest), ...otherLease(snap, writer) };
  });

  offer("state_touch", {
    title: "Renew state",
    description: [
      "Make a handle expire ttl_days from now, or never (omit ttl_days).",
    ].join("\n"),
    schemas: SCHEMAS.touch,
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, async (args, _raw, { user, writer }) => {
    checkHandle(args.handle);
    const snap = await store.touch(args.handle, {
      user,
      ttlDays: args.ttl_days ?? null,
      ...(writer === undefined ? {} : { writer }),
      ...(args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key }),
      ...writeLease(writer),
    });
    const { activeLease: _, ...rest } = infoOnly(snap);
    return { ...toPayload(rest), ...otherLease(snap, writer) };
  });

  // With --allow-anonymous every caller is one user: nobody to share with.
  if (!anonymous) {
    offer("state_share", {
      title: "Share state",
      description: [
        'Share a handle with another user (to: their id) or anyone holding the returned handle (to: "*"), only when the user asks.',
        "rights: read < append (add only) < patch < write. Give the returned handle to the grantee.",
      ].join("\n"),
      schemas: SCHEMAS.share,
      annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
    }, async (args, _raw, { user }) => {
      const g = await store.share(args.handle, {
        user,
        to: args.to,
        rights: args.rights as Rights,
        ...(args.ttl_days == null ? {} : { ttlDays: args.ttl_days }),
      });
      return grantPayload(g);
    });
  }

  offer("state_delete", {
    title: "Delete state",
    description: [
      "Delete a handle, only when the user agrees. state_restore undoes it for 7 days.",
    ].join("\n"),
    schemas: SCHEMAS.delete,
    annotations: { idempotentHint: true, openWorldHint: false },
  }, async (args, _raw, { user }) => {
    checkHandle(args.handle);
    await store.revoke(args.handle, {
      user,
      ...(args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key }),
    });
    return { handle: args.handle, deleted: true };
  });

  offer("state_changes", {
    title: "State changes",
    description: [
      "Changes after since_version, oldest first (version, writer, op, ops or patch): when resuming, or after a stale_write. truncated:true: read current instead.",
    ].join("\n"),
    schemas: SCHEMAS.changes,
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, _raw, { user }) => {
    checkHandle(args.handle);
    const r = await store.changesSince(args.handle, args.since_version, { user });
    const head = { handle: args.handle, since_version: args.since_version };
    return r.truncated
      ? { ...head, truncated: true, version: r.current.version, current: toPayload(r.current) }
      : { ...head, truncated: false, version: r.version, changes: r.changes };
  });

  offer("state_restore", {
    title: "Restore state",
    description: [
      "Undo a state_delete (within 7 days).",
    ].join("\n"),
    schemas: SCHEMAS.restore,
    annotations: { destructiveHint: false, openWorldHint: false },
  }, async (args, _raw, { user }) => {
    checkHandle(args.handle);
    const snap = await store.restore(args.handle, { user });
    return { ...toPayload(snap), restored: true };
  });

  offer("state_lease", {
    title: "Lease state",
    description: [
      "Tell other sessions you are at work on a handle (they see active_lease); blocks nothing. release:true when done. acquired:false: someone else is; tell the user.",
    ].join("\n"),
    schemas: SCHEMAS.lease,
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, async (args, _raw, { user, writer }) => {
    checkHandle(args.handle);
    const holder = writer || "unknown";
    if (args.release) {
      const released = await store.release(args.handle, { user, writer: holder });
      const snap = await store.get(args.handle, { user });
      return {
        handle: args.handle,
        acquired: false,
        released,
        active_lease: snap.activeLease ? leasePayload(snap.activeLease) : null,
      };
    }
    const l = await store.lease(args.handle, {
      user,
      writer: holder,
      seconds: args.seconds ?? 300,
    });
    return { handle: args.handle, acquired: l.acquired, active_lease: leasePayload(l) };
  });

  offer("state_fork", {
    title: "Fork state",
    description: [
      "Copy a handle into a new one (forked_from names the origin), e.g. for a sub-agent to work on; state_merge brings its changes back.",
    ].join("\n"),
    schemas: SCHEMAS.fork,
    annotations: { destructiveHint: false, openWorldHint: false },
  }, async (args, _raw, { user, writer }) => {
    checkHandle(args.handle);
    const fork = await store.fork(args.handle, {
      user,
      ...(writer === undefined ? {} : { writer }),
    });
    const { activeLease: _, ...rest } = infoOnly(await store.get(fork, { user }));
    return toPayload(rest);
  });

  offer("state_merge", {
    title: "Merge a fork",
    description: [
      "Apply a fork's changes to its origin. stale_write: both changed error.conflicts; nothing merged.",
    ].join("\n"),
    schemas: SCHEMAS.merge,
    annotations: { destructiveHint: false, openWorldHint: false },
  }, async (args, _raw, { user, writer }) => {
    checkHandle(args.handle);
    const snap = await store.mergeBack(args.handle, {
      user,
      ...(writer === undefined ? {} : { writer }),
    });
    const { activeLease: _, ...rest } = infoOnly(snap);
    return { ...toPayload(rest), merged_from: snap.mergedFrom };
  });
}

/**
 * The lines of `state_save`'s description that offer the typed kinds: each
 * one's JSON Schema, compact. None without kinds, so a default server's
 * tool list is unchanged.
 *
 * @param kinds The kinds the server validates.
 * @returns Lines for the description.
 */
function kindsDescription(kinds: readonly AnyKind[]): string[] {
  if (kinds.length === 0) return [];
  const lines = [
    "Kinds with a schema: a state of these kinds must match it (JSON Schema below), else invalid_state lists issues as {path (JSON Pointer), message}; fix those and retry.",
  ];
  for (const k of kinds) {
    const schema = k.jsonSchema;
    if (schema === null) {
      lines.push(`${k.name}: (validated; no JSON Schema available)`);
      continue;
    }
    const { $schema: _, ...rest } = schema;
    lines.push(`${k.name}: ${JSON.stringify(rest)}`);
  }
  return lines;
}

/**
 * The wire form of a snapshot or info for the caller `writer`: `active_lease`
 * only when someone else holds the lease — the caller's own is no news to
 * it, and leaving it out keeps results exactly the Python 0.2 keys for a
 * single writer.
 *
 * @param s A snapshot or info.
 * @param writer The caller's writer label.
 * @returns The payload.
 */
export function payloadFor(
  s: HandleInfo | Snapshot<unknown>,
  writer: string | null | undefined,
): Record<string, unknown> {
  return withoutOwnLease(toPayload(s), s, writer);
}

/**
 * Keeps a `stale_write` within the read budget: a `current` state over it
 * becomes its outline (`outline`, `truncated: true`, `size_bytes`), and
 * `changes` over it are left out (`changes: null`, `changes_truncated`).
 */
function withinBudget(e: StaleWrite, budget: number): void {
  const current = e.details.current as Record<string, unknown> | undefined;
  if (current && "state" in current) {
    const read = outline(current.state, budget);
    if (read.truncated) {
      const { state: _, ...meta } = current;
      e.details.current = {
        ...meta,
        outline: read.outline,
        truncated: true,
        size_bytes: read.sizeBytes,
      };
    }
  }
  if (Array.isArray(e.details.changes) && jsonSize(e.details.changes) > budget) {
    e.details.changes = null;
    e.details.changes_truncated = true;
  }
}

/** A read's wire form without the caller's own lease (as {@link payloadFor} does). */
function withoutOwnLease(
  payload: Record<string, unknown>,
  info: HandleInfo,
  writer: string | null | undefined,
): Record<string, unknown> {
  if (info.activeLease && info.activeLease.holder === (writer || "unknown")) {
    delete payload.active_lease;
  }
  return payload;
}

/** In the shared bucket there is no state_list to suggest: reword not-found. */
function forSharedBucket(e: unknown): unknown {
  if (!(e instanceof HandleNotFound)) return e;
  const handle = String(e.details.handle);
  return new McpStateError(
    "handle_not_found",
    `No state exists for handle "${handle}". Check that you passed the handle exactly as it was returned; if it was deleted or never existed, start over with a new handle.`,
    { handle },
  );
}
