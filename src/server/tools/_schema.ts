/**
 * A tool's arguments, defined once: each argument is built from a small
 * vocabulary ({@link text}, {@link whole}, {@link num}, {@link flag},
 * {@link list}, {@link oneOf}, {@link named}, {@link object},
 * {@link opsList}, each maybe {@link optional}), and {@link input} derives
 * from that one definition both forms a tool needs:
 *
 * - the JSON Schema `tools/list` advertises, small because every
 *   conversation pays for it: `{type: "object", properties, required}`, each
 *   property exactly as its builder writes it (a description, and the bounds
 *   a model should respect, such as `minimum` or `maxItems`);
 * - the zod schema the handler checks the arguments with, where a failure
 *   becomes an mcpstate `invalid_argument` result. It checks the type only;
 *   the advertised bounds and {@link named} values are checked by the handler
 *   or the store, with messages of their own. An optional argument is
 *   `.nullish()`: null means absent. `state` and `ops` ({@link object},
 *   {@link opsList}) are `z.unknown()`: their values are taken from the raw
 *   arguments, never rebuilt, so keys such as `__proto__` survive; the store
 *   validates them.
 *
 * The derivation writes the JSON Schema mcpstate has always advertised, byte
 * for byte (`tests/server_tool_schemas_test.ts` pins a digest of it), so the
 * builders are written for it rather than `z.toJSONSchema`, which writes
 * nullish arguments as `anyOf` and integers with safe-integer bounds.
 *
 * Outputs are two schemas written side by side in each tool's file: a strict
 * zod schema that checks a success before it is sent, and the advertised
 * JSON Schema, which admits every success the strict one admits (no
 * `additionalProperties: false`, no `required`): SDK 1.x clients check
 * results against it. `tests/server_tool_schemas_test.ts` proves the two
 * agree for every tool.
 *
 * @module
 */

import type { StandardSchemaWithJSON } from "@modelcontextprotocol/server";
import { z } from "zod";

/** A JSON Schema (or a piece of one). */
export type Json = Record<string, unknown>;

/** One argument of a tool: its advertised JSON Schema and its zod check. */
export interface Arg<C extends z.ZodType = z.ZodType> {
  /** What `tools/list` advertises for it. */
  json: Json;
  /** What the handler checks it with. */
  check: C;
  /** Whether the advertised schema lists it as `required`. */
  required: boolean;
}

const arg = <C extends z.ZodType>(json: Json, check: C): Arg<C> => ({
  json,
  check,
  required: true,
});
const described = (json: Json, description: string | undefined): Json =>
  description === undefined ? json : { ...json, description };

/** A string. */
export const text = (description?: string): Arg<z.ZodString> =>
  arg(described({ type: "string" }, description), z.string());
/** A whole number; `bounds` (`minimum`, `maximum`) are advertised and checked by the handler. */
export const whole = (description?: string, bounds: Json = {}): Arg<z.ZodNumber> =>
  arg({ ...described({ type: "integer" }, description), ...bounds }, z.number().int());
/** A number. */
export const num = (description?: string): Arg<z.ZodNumber> =>
  arg(described({ type: "number" }, description), z.number());
/** A boolean. */
export const flag = (): Arg<z.ZodBoolean> => arg({ type: "boolean" }, z.boolean());
/** A list of `items`; `bounds` (`maxItems`) are advertised and checked by the handler. */
export const list = <C extends z.ZodType>(
  items: Arg<C>,
  bounds: Json = {},
): Arg<z.ZodArray<C>> => arg({ type: "array", items: items.json, ...bounds }, z.array(items.check));
/** One of `values`, checked here. */
export const oneOf = <const V extends readonly [string, ...string[]]>(
  values: V,
): Arg<z.ZodEnum<{ [K in V[number]]: K }>> => arg({ enum: values }, z.enum(values));
/** One of `values`, advertised; checked as a string here and by the store against the values. */
export const named = (values: readonly string[]): Arg<z.ZodString> =>
  arg({ enum: values }, z.string());
/** A JSON object taken as it was sent (the store validates it). */
export const object = (): Arg<z.ZodUnknown> => arg({ type: "object" }, z.unknown());
/** A list of patch ops taken as it was sent (the store validates it). */
export const opsList = (): Arg<z.ZodUnknown> =>
  arg({ type: "array", items: { type: "object" } }, z.unknown());

/** `a`, optional: absent or null. */
export const optional = <C extends z.ZodType>(
  a: Arg<C>,
): Arg<z.ZodOptional<z.ZodNullable<C>>> => ({
  json: a.json,
  check: a.check.nullish(),
  required: false,
});

/** The arguments of a tool, by name, in the order they are advertised and checked. */
export type Args = Record<string, Arg>;

/** What {@link input} derives from a tool's arguments. */
export interface Input<A extends Args> {
  /** The advertised JSON Schema. */
  json: Json;
  /** The zod check of the arguments (unknown keys are dropped). */
  check: z.ZodObject<{ [K in keyof A]: A[K]["check"] }>;
}

/**
 * Derives a tool's advertised input schema and its zod check from its one
 * definition.
 *
 * @param args The arguments, in order.
 * @returns Both forms.
 */
export function input<A extends Args>(args: A): Input<A> {
  const properties: Json = {};
  const required: string[] = [];
  const shape: Record<string, z.ZodType> = {};
  for (const [name, a] of Object.entries(args)) {
    properties[name] = a.json;
    shape[name] = a.check;
    if (a.required) required.push(name);
  }
  return {
    json: jsonObject(properties, required),
    check: z.object(shape) as Input<A>["check"],
  };
}

/**
 * An object schema as mcpstate advertises one: `required` only when some key
 * is.
 *
 * @param properties The properties' schemas.
 * @param required The keys always present.
 * @returns The schema.
 */
export function jsonObject(properties: Json, required: string[] = []): Json {
  return { type: "object", properties, ...(required.length > 0 ? { required } : {}) };
}

/**
 * A Standard Schema that advertises `json` (whatever JSON Schema target is
 * asked for) and validates with `validate`.
 *
 * @param json The schema to advertise; it is frozen.
 * @param validate The check.
 * @returns The Standard Schema.
 */
export function advertise(
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

// ---------------------------------------------------------------- outputs

const S: Json = { type: "string" };
const I: Json = { type: "integer" };

/** Advertised output pieces: a string, a whole number, a boolean, any object, any value. */
export const OUT = {
  string: S,
  integer: I,
  boolean: { type: "boolean" } as Json,
  object: { type: "object" } as Json,
  any: {} as Json,
  /** `handle` and `version`, the keys of a handle's meta that every client needs. */
  meta: { handle: S, version: I } as Json,
} as const;

/** `ok: true`, the first key of every success. */
export const ok: z.ZodLiteral<true> = z.literal(true);

/** The wire form of an active lease. */
export const leaseShape = z.strictObject({ holder: z.string(), expires_at: z.string() });

/** The keys of a handle's wire form (`toPayload`), strictly. */
export const metaShape = {
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
  active_lease: leaseShape.optional(),
  // Present on a handle shared with the caller (an alias handle, see HandleStore.share).
  shared_by: z.string().optional(),
  rights: z.enum(["read", "append", "patch", "write"]).optional(),
  // state_list with previews: true (a line describing the state).
  preview: z.string().optional(),
};
