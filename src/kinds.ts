/**
 * Typed kinds: a {@link Kind} ties a kind name to a Standard Schema (zod 4,
 * Valibot, ArkType, …), so that every write of that kind is validated after
 * its ops apply, reads are typed by the schema's output, and states written
 * under an older schema version are upcast when they are read.
 *
 * @example A typed view of one kind
 * ```ts
 * import { z } from "zod";
 * import { Append, HandleStore, InvalidState } from "@mcpstate/core";
 *
 * await using store = await HandleStore.fromUrl("memory://");
 * const research = store.kind("research", z.object({
 *   sources: z.array(z.string()),
 *   notes: z.string().default(""),
 * }));
 * const handle = await research.mint({ sources: [] }, { user: "alice" });
 * const snap = await research.patch(handle, [Append("sources", "https://arxiv.org")], {
 *   user: "alice",
 * });
 * snap.state.sources; // string[]: ["https://arxiv.org"]
 * await research.patch(handle, [Append("sources", 42)], { user: "alice" })
 *   .catch((e) => e instanceof InvalidState); // true: nothing written
 * ```
 *
 * @module
 */

import { InvalidArgument, InvalidState, McpStateError } from "./errors.ts";
import type { JsonObject } from "./json.ts";
import type { PatchOp } from "./ops.ts";
import {
  type InferInput,
  type InferOutput,
  isStandardSchema,
  issuesOf,
  type StandardResult,
  type StandardSchemaV1,
} from "./standard_schema.ts";
import type {
  KindStore,
  MintOptions,
  PatchOptions,
  PathsReadResult,
  ReadOptions,
  ReadResult,
  SaveOptions,
  SaveResult,
  Snapshot,
  StateRead,
  UserOption,
} from "./types.ts";

const KIND_RE = /^[a-z][a-z0-9-]{0,31}$/;
/** The JSON Schema dialect asked of a schema's converter. */
const JSON_SCHEMA_TARGET = "draft-2020-12";

/**
 * A function that brings a state written under one schema version to the
 * next (`upcast[1]` turns a version-1 state into a version-2 one).
 */
// deno-lint-ignore no-explicit-any
export type Upcast = (state: any) => object;

/**
 * Options of {@link HandleStore.kind} and {@link defineKind}.
 *
 * @since 0.5.0
 */
export interface KindOptions {
  /** The schema version, a whole number of at least 1. Default 1. */
  version?: number;
  /**
   * Steps from older versions: `upcast[n]` turns a state of version `n` into
   * one of version `n + 1`. A state written under version `v` is read through
   * `upcast[v]`, `upcast[v + 1]`, … up to `version`; a missing step leaves
   * the state as it is for that version. States written without a kind count
   * as version 1. Each step runs synchronously.
   */
  upcast?: { readonly [fromVersion: number]: Upcast };
  /**
   * The JSON Schema offered to a model for this kind. Default: the schema's
   * own Standard JSON Schema converter (zod 4 has one), of its input; none
   * when it has none.
   */
  jsonSchema?: Record<string, unknown>;
}

/** What the store applies to the records of one kind (internal). */
export interface KindRule {
  /** The kind. */
  readonly name: string;
  /** The schema version written with each state. */
  readonly version: number;
  /** Whether reads validate too (typed views do; the server only upcasts). */
  readonly checkOnRead: boolean;
  /** Brings a stored state written under `from` to `version`. */
  upcast(state: JsonObject, from: number): JsonObject;
  /** Validates: the schema's output, or `InvalidState`; async schemas answer a promise. */
  check(state: unknown): unknown;
}

/** The rule for a record's kind, or `undefined` when it has none (internal). */
export type KindRules = (kind: string) => KindRule | undefined;

/** Where store options carry kind rules (internal: never in the public option types). */
export const KIND_RULES: unique symbol = Symbol("mcpstate.kindRules");

/**
 * The kind rules carried by a store call's options, if any.
 *
 * @param options Options of a store call.
 * @returns The rules, or `undefined`.
 */
export function rulesIn(options: unknown): KindRules | undefined {
  if (typeof options !== "object" || options === null) return undefined;
  return (options as { [KIND_RULES]?: KindRules })[KIND_RULES];
}

/**
 * Options with kind rules added.
 *
 * @param options A store call's options.
 * @param rules The rules (absent: `options` unchanged).
 * @returns New options.
 */
export function withRules<T extends object>(options: T, rules: KindRules | undefined): T {
  if (rules === undefined) return options;
  return { ...options, [KIND_RULES]: rules };
}

/**
 * Validates inside a read-modify-write step, which cannot wait.
 *
 * @param rule The kind's rule.
 * @param state The state after ops apply.
 * @returns The schema's output.
 * @throws {InvalidState} when the schema rejects it.
 * @throws {InvalidArgument} when the schema validates asynchronously.
 */
export function checkNow(rule: KindRule, state: unknown): JsonObject {
  const out = rule.check(state);
  if (out instanceof Promise) {
    out.catch(() => {});
    throw new InvalidArgument(
      `The schema of kind "${rule.name}" validates asynchronously; a patch or a merging save is validated inside one atomic step and needs a synchronous schema. Save the whole state instead.`,
      { field: "kind", kind: rule.name },
    );
  }
  return out as JsonObject;
}

/**
 * The kind of a handle: what comes before its `_`.
 *
 * @param handle A handle.
 * @returns Its kind.
 */
export function kindOfHandle(handle: string): string {
  const at = handle.indexOf("_");
  return at < 0 ? "" : handle.slice(0, at);
}

/**
 * The rules of a list of kinds, for a server that serves them all.
 *
 * @param kinds The kinds.
 * @param checkOnRead Whether reads validate.
 * @returns One lookup for every kind.
 * @throws {InvalidArgument} when two kinds share a name.
 */
export function kindRules(
  kinds: readonly Kind<unknown, unknown>[],
  checkOnRead: boolean,
): KindRules {
  const map = new Map<string, KindRule>();
  for (const item of kinds as readonly unknown[]) {
    const k = asKind(item);
    if (map.has(k.name)) {
      throw new InvalidArgument(`The kind "${k.name}" is registered twice; keep one of them.`, {
        field: "kinds",
      });
    }
    map.set(k.name, ruleOf(k, checkOnRead));
  }
  return (kind) => map.get(kind);
}

/**
 * A kind from this module, or one made by another copy of it (a kinds
 * module that imports the library from elsewhere), rebuilt here.
 */
function asKind(x: unknown): Kind<unknown, unknown> {
  if (x instanceof Kind) return x;
  const k = x as Partial<Kind<unknown, unknown>> | null;
  if (
    typeof k !== "object" || k === null || typeof k.name !== "string" ||
    typeof k.version !== "number" || !isStandardSchema(k.schema)
  ) {
    throw new InvalidArgument(
      "kinds must be a list of Kind objects (from defineKind or store.kind).",
      { field: "kinds" },
    );
  }
  const json = k.jsonSchema;
  return new Kind(k.name, k.schema, {
    version: k.version,
    upcast: k.upcast ?? {},
    ...(json ? { jsonSchema: json } : {}),
  });
}

/**
 * A typed view of one kind: `mint`, `get`, `save`, `patch`, `read` of the
 * store it is bound to, with the state typed as the schema's output `S`
 * (and written from its input `I`). Every write is validated after its ops
 * apply; a state the schema rejects is {@link InvalidState} and nothing is
 * written. Reads upcast states of older versions and validate them.
 *
 * Make one with {@link HandleStore.kind}, or unbound with {@link defineKind}
 * (for a module that `mcpstate serve --kinds` loads) and bind it with
 * {@link Kind.bind}.
 *
 * @typeParam S The schema's output: the state as read.
 * @typeParam I The schema's input: the state as written.
 * @since 0.5.0
 */
export class Kind<S = JsonObject, I = S> {
  /** The kind name, as in handles (`research_…`). */
  readonly name: string;
  /** The schema version written with each state. */
  readonly version: number;
  /** The Standard Schema every state of this kind must pass. */
  readonly schema: StandardSchemaV1<I, S>;
  /** The steps from older schema versions (see {@link KindOptions.upcast}). */
  readonly upcast: { readonly [fromVersion: number]: Upcast };
  readonly #jsonSchema: Record<string, unknown> | undefined;
  readonly #store: KindStore | undefined;
  readonly #rule: KindRule;
  readonly #rules: KindRules;

  /**
   * Creates a kind; prefer {@link HandleStore.kind} or {@link defineKind}.
   *
   * @param name The kind, `^[a-z][a-z0-9-]{0,31}$`.
   * @param schema A Standard Schema of the state.
   * @param options Version, upcasts, JSON Schema.
   * @param store The store its methods use; absent: unbound.
   * @throws {InvalidArgument} for a malformed name, schema or option.
   */
  constructor(
    name: string,
    schema: StandardSchemaV1<I, S>,
    options: KindOptions = {},
    store?: KindStore,
  ) {
    if (typeof name !== "string" || !KIND_RE.test(name)) {
      throw new InvalidArgument(
        `The kind ${
          JSON.stringify(String(name)).slice(0, 80)
        } is not valid: use 1-32 characters of lowercase letters, digits and "-", starting with a letter.`,
        { field: "kind" },
      );
    }
    if (!isStandardSchema(schema)) {
      throw new InvalidArgument(
        `The schema of kind "${name}" is not a Standard Schema (an object with "~standard".validate, as zod 4 schemas are).`,
        { field: "schema" },
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new InvalidArgument("Kind options must be an object.", { field: "options" });
    }
    const version = options.version ?? 1;
    if (!Number.isSafeInteger(version) || version < 1) {
      throw new InvalidArgument(
        `The version of kind "${name}" must be a whole number, 1 or more.`,
        {
          field: "version",
        },
      );
    }
    const upcast = options.upcast ?? {};
    for (const [from, fn] of Object.entries(upcast)) {
      const n = Number(from);
      if (!Number.isSafeInteger(n) || n < 1 || n >= version || typeof fn !== "function") {
        throw new InvalidArgument(
          `upcast of kind "${name}" must map versions 1 to ${
            version - 1
          } to functions; "${from}" is not one of them.`,
          { field: "upcast" },
        );
      }
    }
    const json = options.jsonSchema;
    if (json !== undefined && (typeof json !== "object" || json === null)) {
      throw new InvalidArgument("jsonSchema must be a JSON Schema object.", {
        field: "jsonSchema",
      });
    }
    this.name = name;
    this.version = version;
    this.schema = schema;
    this.upcast = Object.freeze({ ...upcast });
    this.#jsonSchema = json;
    this.#store = store;
    this.#rule = ruleOf(this as Kind<unknown, unknown>, true);
    this.#rules = (kind) => {
      if (kind === name) return this.#rule;
      throw new InvalidArgument(
        `This handle is of kind "${kind}", not "${name}": use the view of its own kind.`,
        { field: "handle" },
      );
    };
  }

  /**
   * The same kind, bound to another store.
   *
   * @param store The store its methods use.
   * @returns A new view.
   */
  bind(store: KindStore): Kind<S, I> {
    return new Kind(this.name, this.schema, this.#options(), store);
  }

  /**
   * The JSON Schema offered to a model: the `jsonSchema` option, else the
   * schema's Standard JSON Schema of its input (draft 2020-12), else `null`.
   */
  get jsonSchema(): Record<string, unknown> | null {
    if (this.#jsonSchema !== undefined) return this.#jsonSchema;
    try {
      const convert = this.schema["~standard"].jsonSchema;
      return convert ? convert.input({ target: JSON_SCHEMA_TARGET }) : null;
    } catch {
      return null;
    }
  }

  /**
   * Validates a state against the schema.
   *
   * @param state Anything.
   * @returns The schema's output.
   * @throws {InvalidState} with the issues, paths as JSON Pointers.
   */
  async validate(state: unknown): Promise<S> {
    return await this.#rule.check(state) as S;
  }

  /**
   * Mints a handle of this kind holding `state`, once the schema accepts it
   * (its output, defaults filled in, is what is stored).
   *
   * @param state The state, as the schema's input.
   * @param options As {@link HandleStore.mint}.
   * @returns The new handle.
   * @throws {InvalidState} when the schema rejects the state; nothing is written.
   */
  mint(state: I, options: MintOptions): Promise<string> {
    return this.#bound().mint(this.name, state as JsonObject, withRules(options, this.#rules));
  }

  /**
   * Reads a handle of this kind: upcast to the current version, validated.
   *
   * @param handle A handle of this kind.
   * @param options As {@link HandleStore.get}.
   * @returns The snapshot, its state the schema's output.
   * @throws {InvalidState} when the stored state does not pass the schema
   *   (read it with {@link HandleStore.get} to repair it).
   */
  get(handle: string, options: UserOption): Promise<Snapshot<S>> {
    return this.#bound().get<S>(handle, withRules(options, this.#rules));
  }

  /**
   * Reads a handle of this kind within a budget (see {@link HandleStore.read}).
   *
   * @param handle A handle of this kind.
   * @param options The user, the budget, the paths.
   * @returns The values of the paths.
   */
  read(
    handle: string,
    options: ReadOptions & { paths: readonly string[] },
  ): Promise<PathsReadResult>;
  /**
   * Reads a handle of this kind, whole or as an outline.
   *
   * @param handle A handle of this kind.
   * @param options The user and the budget.
   * @returns The state or its outline.
   */
  read(handle: string, options: ReadOptions & { paths?: undefined }): Promise<StateRead<S>>;
  /**
   * Reads a handle of this kind within a budget.
   *
   * @param handle A handle of this kind.
   * @param options The user, the budget, the paths.
   * @returns The state, its outline, or the values of the paths.
   */
  read(handle: string, options: ReadOptions): Promise<ReadResult<S>>;
  read(handle: string, options: ReadOptions): Promise<ReadResult<S>> {
    return this.#bound().read<S>(handle, withRules(options, this.#rules));
  }

  /**
   * Replaces the state of a handle of this kind (see {@link HandleStore.save}),
   * once the schema accepts it; the record's schema version becomes this
   * kind's.
   *
   * @param handle A handle of this kind.
   * @param state The new state, as the schema's input.
   * @param options As {@link HandleStore.save}.
   * @returns The new snapshot.
   * @throws {InvalidState} when the schema rejects the state (or the merged
   *   one); nothing is written.
   */
  save(handle: string, state: I, options: SaveOptions): Promise<SaveResult<S>> {
    this.#own(handle);
    return this.#bound().save(
      handle,
      state as JsonObject,
      withRules(options, this.#rules),
    ) as Promise<SaveResult<S>>;
  }

  /**
   * Patches a handle of this kind (see {@link HandleStore.patch}): the ops
   * apply to the upcast state, and the result is validated inside the same
   * atomic step, so nothing is written when the schema rejects it.
   *
   * @param handle A handle of this kind.
   * @param ops The ops.
   * @param options As {@link HandleStore.patch}.
   * @returns The snapshot after the patch.
   * @throws {InvalidState} when the schema rejects the patched state.
   */
  patch(handle: string, ops: readonly PatchOp[], options: PatchOptions): Promise<Snapshot<S>> {
    this.#own(handle);
    return this.#bound().patch<S>(handle, ops, withRules(options, this.#rules));
  }

  #own(handle: string): void {
    if (typeof handle === "string" && kindOfHandle(handle) !== this.name) {
      this.#rules(kindOfHandle(handle));
    }
  }

  #bound(): KindStore {
    if (this.#store === undefined) {
      throw new InvalidArgument(
        `The kind "${this.name}" is not bound to a store: use store.kind(...) or kind.bind(store).`,
      );
    }
    return this.#store;
  }

  #options(): KindOptions {
    return {
      version: this.version,
      upcast: this.upcast,
      ...(this.#jsonSchema === undefined ? {} : { jsonSchema: this.#jsonSchema }),
    };
  }
}

/**
 * The rule the store applies to the records of a kind.
 *
 * @param kind The kind.
 * @param checkOnRead Whether reads validate.
 * @returns The rule.
 */
function ruleOf<S, I>(kind: Kind<S, I>, checkOnRead: boolean): KindRule {
  const { name, version, schema } = kind;
  const steps = kind.upcast;
  const done = (r: StandardResult<S>): S => {
    if (r.issues) throw new InvalidState(name, issuesOf(r.issues));
    return r.value;
  };
  return {
    name,
    version,
    checkOnRead,
    upcast(state: JsonObject, from: number): JsonObject {
      let out: JsonObject = state;
      for (let v = from; v < version; v++) {
        const step = steps[v];
        if (step === undefined) continue;
        try {
          out = step(out) as JsonObject;
        } catch (e) {
          if (e instanceof McpStateError) throw e;
          throw new InvalidState(name, [{
            path: "",
            message: `Upcasting from schema version ${v} failed: ${
              e instanceof Error ? e.message : String(e)
            }`,
          }]);
        }
      }
      return out;
    },
    check(state: unknown): unknown {
      const r = schema["~standard"].validate(state);
      return r instanceof Promise ? r.then(done) : done(r);
    },
  };
}

/**
 * Defines a kind without a store, for a module of kinds that a server
 * loads (`mcpstate serve --kinds ./kinds.ts` reads its `kinds` export) or
 * binds later with {@link Kind.bind}.
 *
 * @param name The kind, `^[a-z][a-z0-9-]{0,31}$`.
 * @param schema A Standard Schema of the state (zod 4 schemas are).
 * @param options Version, upcasts, JSON Schema.
 * @returns An unbound kind.
 * @since 0.5.0
 *
 * @example A module of kinds for `mcpstate serve --kinds`
 * ```ts
 * import { z } from "zod";
 * import { defineKind } from "@mcpstate/core";
 *
 * export const kinds = [
 *   defineKind("research", z.object({ sources: z.array(z.string()), notes: z.string() })),
 * ];
 * ```
 */
export function defineKind<T extends StandardSchemaV1>(
  name: string,
  schema: T,
  options: KindOptions = {},
): Kind<InferOutput<T>, InferInput<T>> {
  return new Kind(name, schema as StandardSchemaV1<InferInput<T>, InferOutput<T>>, options);
}
