/**
 * The mcpstate tools (`state_save`, `state_load`, `state_list`,
 * `state_patch`, `state_touch`, `state_delete`, `state_changes`,
 * `state_restore`, `state_lease`, `state_fork`, `state_merge`, and
 * `state_share` when named) on an `McpServer`, wire-compatible with the
 * original Python mcpstate 0.2 server.
 *
 * Each tool is defined once, in a file of its own under `tools/` (name,
 * title, description, annotations, arguments, output, handler), and listed
 * once in `tools/_table.ts`; {@link registerStateTools} registers the table
 * with one loop, and this module holds what every tool shares: the options,
 * the identity of a call, the check of its arguments and its result or
 * failure payload. The JSON Schema a tool advertises is derived from the
 * same argument list as the check of its handler (`tools/_schema.ts`).
 *
 * @module
 */

import { CLIENT_INFO_META_KEY, type ServerContext } from "@modelcontextprotocol/server";
import type { CallToolResult } from "@modelcontextprotocol/server";
import type { z } from "zod";
import {
  type ErrorPayload,
  HandleNotFound,
  InternalError,
  InvalidArgument,
  McpStateError,
  redact,
  Unauthenticated,
} from "../errors.ts";
import { MIN_READ_BYTES } from "../outline.ts";
import { VERSION } from "../version.ts";
import { type Kind, kindRules, withRules } from "../kinds.ts";
import { leasePayload } from "../wire.ts";
import { clientLabel, type ToolRequest } from "./identity.ts";
import type { AnyKind, HandleStore, McpServer } from "./types.ts";
import type { Telemetry, ToolOutcome } from "./telemetry.ts";
import { advertise } from "./tools/_schema.ts";
import { type Tool, type ToolContext, tooShortForSharedBucket } from "./tools/_tool.ts";
import { TOOLS } from "./tools/_table.ts";

export { ANONYMOUS_RANDOM_CHARS } from "./tools/_tool.ts";
export { payloadFor } from "./tools/_wire.ts";

/** The version this server reports in its `serverInfo`. */
export const SERVER_VERSION: string = VERSION;

export type { ToolRequest, VerifiedToken } from "./identity.ts";

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
 * Every tool this server can offer: the {@link DEFAULT_TOOLS}, then those
 * offered only when named.
 *
 * @since 0.5.0
 */
export const STATE_TOOLS: readonly string[] = Object.freeze([
  ...TOOLS.filter((t) => !t.optIn),
  ...TOOLS.filter((t) => t.optIn),
].map((t) => t.name));

/**
 * The tools offered when none are named: those whose descriptions together
 * keep the whole `tools/list` result within 8,192 bytes of JSON. A tool of
 * {@link STATE_TOOLS} outside this set is offered only when named.
 *
 * @since 0.5.0
 */
export const DEFAULT_TOOLS: readonly string[] = Object.freeze(
  TOOLS.filter((t) => !t.optIn).map((t) => t.name),
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
  const fieldOf = (i: z.core.$ZodIssue) => i.path.map(String).join(".") || "arguments";
  // A required argument left out: zod says "expected nonoptional, received undefined".
  const missing = error.issues.filter((i) =>
    i.code === "invalid_type" && i.path.length > 0 && /received undefined$/.test(i.message)
  ).map(fieldOf);
  if (missing.length > 0) {
    const names = missing.map((m) => `"${m}"`).join(" and ");
    return new InvalidArgument(
      `${tool} needs the argument${missing.length > 1 ? "s" : ""} ${names}, which ${
        missing.length > 1 ? "are" : "is"
      } missing. Pass ${missing.length > 1 ? "them" : "it"} and call ${tool} again.`,
      { field: missing[0]! },
    );
  }
  const issue = error.issues[0];
  const field = issue === undefined ? "arguments" : fieldOf(issue);
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

function defaultInternalErrorLog(error: unknown, tool: string): void {
  const text = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(
    error,
  );
  console.error(`mcpstate: ${tool} failed: ${redact(text)}`);
}

/**
 * The advertised schemas of each tool, built once: the input one accepts the
 * arguments untouched (the handler checks them, so that a bad argument is an
 * mcpstate `invalid_argument` result rather than an SDK message, and `state`
 * is never rebuilt); the output one checks a success before it is sent.
 */
const ADVERTISED = new Map(TOOLS.map((t) => [t.name, {
  input: advertise(t.input.json, (value: unknown) => ({ value })),
  output: advertise(t.output.json, t.output.check["~standard"].validate),
}]));

/** What the handler of every tool of one server shares beyond its {@link ToolContext}. */
interface Calls {
  options: StateToolsOptions;
  onInternal: (error: unknown, tool: string) => void;
  observe: Telemetry["observeTool"];
}

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
 */ export function registerStateTools(
  server: McpServer,
  store: HandleStore,
  options: StateToolsOptions,
): void {
  const anonymous = options.anonymous ?? false;
  const context = toolContext(store, options);
  const calls: Calls = {
    options,
    onInternal: options.onInternalError ?? defaultInternalErrorLog,
    // Instrumented when asked for; else each handler runs directly.
    observe: options.telemetry
      ? options.telemetry.observeTool.bind(options.telemetry)
      : (_tool, _id, run) => run({}),
  };
  const offered = new Set(checkReadAndTools(options).tools);
  for (const tool of TOOLS) {
    // With --allow-anonymous every caller is one user: nobody to share with.
    if (offered.has(tool.name) && !(anonymous && tool.notAnonymous)) {
      registerTool(server, tool, context, calls);
    }
  }
}

/** The context every handler of one server runs with. */
function toolContext(store: HandleStore, options: StateToolsOptions): ToolContext {
  const anonymous = options.anonymous ?? false;
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  if (typeof leaseSeconds !== "number" || !(leaseSeconds >= 0 && leaseSeconds <= 86_400)) {
    throw new TypeError("leaseSeconds must be a number of seconds from 0 (off) to 86400.");
  }
  const { maxReadBytes } = checkReadAndTools(options);
  const kinds = options.kinds ?? [];
  const rules = kinds.length > 0
    ? kindRules(kinds as readonly Kind<unknown, unknown>[], false)
    : undefined;
  return {
    store,
    anonymous,
    readBudget: maxReadBytes === 0 ? undefined : maxReadBytes,
    kinds,
    typed: (o) => withRules(o, rules),
    writeLease: (writer) =>
      leaseSeconds === 0 || !writer ? {} : { lease: { seconds: leaseSeconds } },
    otherLease: (info, writer) =>
      info.activeLease && info.activeLease.holder !== writer
        ? { active_lease: leasePayload(info.activeLease) }
        : {},
    checkHandle: (handle) => {
      if (anonymous && tooShortForSharedBucket(handle)) {
        throw forSharedBucket(new HandleNotFound(handle));
      }
    },
  };
}

/** Registers one tool: its advertised schemas, and a handler that checks, runs and answers. */
function registerTool(server: McpServer, tool: Tool, context: ToolContext, calls: Calls): void {
  const { name, title } = tool;
  const advertised = ADVERTISED.get(name)!;
  server.registerTool(name, {
    title,
    description: typeof tool.description === "string"
      ? tool.description
      : tool.description(context),
    inputSchema: advertised.input,
    outputSchema: advertised.output,
    annotations: { title, ...tool.annotations },
  }, (args, ctx) => calls.observe(name, ctx.mcpReq.id, (outcome) => handler(args, ctx, outcome)));

  async function handler(
    args: unknown,
    ctx: ServerContext,
    outcome: ToolOutcome,
  ): Promise<CallToolResult> {
    try {
      const raw: Record<string, unknown> =
        typeof args === "object" && args !== null && !Array.isArray(args)
          ? args as Record<string, unknown>
          : {};
      const parsed = tool.input.check.safeParse(raw);
      if (!parsed.success) throw invalidArguments(name, parsed.error);
      const request = toolRequestOf(server, ctx);
      const user = await calls.options.user(request);
      if (typeof user !== "string" || user.length === 0) throw new Unauthenticated();
      const writer = calls.options.writer?.(request) ?? undefined;
      const payload = await tool.run(context, dropNulls(parsed.data), raw, { user, writer });
      if (payload.merged === true) outcome.merged = true;
      return result({ ok: true, ...payload });
    } catch (e) {
      if (!(e instanceof McpStateError) || e.code === "backend_error") calls.onInternal(e, name);
      const failure = failurePayload(context.anonymous ? forSharedBucket(e) : e);
      outcome.error = failure.error as ErrorPayload;
      return result(failure, true);
    }
  }
}

/** Parsed arguments with `null` dropped: for every optional argument, null means absent. */
function dropNulls<A extends object>(args: A): { [K in keyof A]: Exclude<A[K], null> } {
  return Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null)) as {
    [K in keyof A]: Exclude<A[K], null>;
  };
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
