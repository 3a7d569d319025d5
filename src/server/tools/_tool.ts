/**
 * What one mcpstate tool is: its name, title, description, annotations,
 * arguments, output and handler, in one {@link Tool} value (each tool in a
 * file of its own beside this one), and the {@link ToolContext} a handler
 * runs with. `registerStateTools` registers every tool of its table with one
 * loop.
 *
 * @module
 */

import type { ToolAnnotations } from "@modelcontextprotocol/server";
import type { z } from "zod";
import type { ActiveLease } from "../../types.ts";
import type { AnyKind, HandleStore } from "../types.ts";
import type { Args, Input, Json } from "./_schema.ts";

/** Random characters in handles minted for an anonymous (shared-bucket) caller: 130 bits. */
export const ANONYMOUS_RANDOM_CHARS = 26;

/**
 * Whether `handle` is shorter than any handle the shared bucket mints: in
 * the shared bucket only long handles exist, and a short guess is never
 * confirmed.
 *
 * @param handle A handle.
 * @returns Whether its random part is too short.
 */
export function tooShortForSharedBucket(handle: string): boolean {
  return handle.length - handle.lastIndexOf("_") - 1 < ANONYMOUS_RANDOM_CHARS;
}

/** What every handler of one server shares: the store and the server's options, resolved. */
export interface ToolContext {
  /** The open store. */
  store: HandleStore;
  /** One shared bucket for every caller (see `StateToolsOptions.anonymous`). */
  anonymous: boolean;
  /** The budget of a read that names none; `undefined`: no limit. */
  readBudget: number | undefined;
  /** The typed kinds the server validates. */
  kinds: readonly AnyKind[];
  /** Store options with the kinds' rules. */
  typed<T extends object>(options: T): T;
  /**
   * The writer's short lease, taken by the write itself (in the same step on
   * every built-in backend); none without a writer or with leases off.
   */
  writeLease(writer: string | undefined): { lease?: { seconds: number } };
  /**
   * After a write: when another holder's lease is in force, answers it as
   * `{ active_lease }` so the model learns that someone else is at work.
   */
  otherLease(info: { activeLease?: ActiveLease }, writer: string | undefined): Json;
  /** Refuses a handle that cannot exist in the shared bucket (too short to guess). */
  checkHandle(handle: string): void;
}

/** Parsed arguments with `null` dropped: for every optional argument, null means absent. */
export type Present<A> = { [K in keyof A]: Exclude<A[K], null> };

/** Who a call acts for. */
export interface Caller {
  /** The user every read and write is scoped to. */
  user: string;
  /** The writer label recorded on writes, if any. */
  writer: string | undefined;
}

/** One tool, defined once. */
export interface Tool<A extends Args = Args> {
  /** Its name in `tools/list` (`state_save`). */
  name: string;
  /** Its title (also the annotations' title). */
  title: string;
  /** Its description; a function for one that depends on the server's options. */
  description: string | ((context: ToolContext) => string);
  /** Its annotations, but the title. */
  annotations: ToolAnnotations;
  /** Its arguments (see `input`). */
  input: Input<A>;
  /** Its output: the strict check of a success, and the advertised schema. */
  output: { check: z.ZodType; json: Json };
  /** Offered only when named (`StateToolsOptions.tools`), not by default. */
  optIn?: boolean;
  /** Never offered in the shared bucket. */
  notAnonymous?: boolean;
  /**
   * Runs a call whose arguments passed the check.
   *
   * @param context The server's context.
   * @param args The checked arguments, nulls dropped.
   * @param raw The arguments as sent (`state` and `ops` are taken from here).
   * @param caller Who the call acts for.
   * @returns The success payload, without `ok`.
   */
  run(
    context: ToolContext,
    args: Present<z.infer<Input<A>["check"]>>,
    raw: Record<string, unknown>,
    caller: Caller,
  ): Promise<Json>;
}

/**
 * Defines a tool (an identity function that infers its argument types).
 *
 * @param tool The tool.
 * @returns The same tool.
 */
export function defineTool<A extends Args>(tool: Tool<A>): Tool<A> {
  return tool;
}

/**
 * `{ [key]: value }`, or `{}` when `value` is undefined: an optional store
 * option passed only when the call has one.
 *
 * @param key The option's name.
 * @param value Its value, if any.
 * @returns The option, or nothing.
 */
export function given<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
