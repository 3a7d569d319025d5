/**
 * The parts of Standard Schema v1 (https://standardschema.dev) that typed
 * kinds use: the `~standard` interface every conforming library (zod 4,
 * Valibot, ArkType, …) implements, and its optional JSON Schema converter.
 * mcpstate calls `~standard.validate` only, never a library's own API.
 *
 * @module
 */

import type { StateIssue } from "./errors.ts";

/**
 * A Standard Schema v1: any object with a `~standard` property whose
 * `validate` checks an unknown value.
 *
 * @typeParam Input What the schema accepts.
 * @typeParam Output What it produces (defaults filled in, values transformed).
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  /** The Standard Schema properties. */
  readonly "~standard": StandardSchemaProps<Input, Output>;
}

/** The `~standard` property of a {@link StandardSchemaV1}. */
export interface StandardSchemaProps<Input = unknown, Output = Input> {
  /** The version of the standard: 1. */
  readonly version: 1;
  /** The library that made the schema. */
  readonly vendor: string;
  /** Validates a value; may answer at once or through a promise. */
  readonly validate: (
    value: unknown,
  ) => StandardResult<Output> | Promise<StandardResult<Output>>;
  /** The input and output types, for inference only. */
  readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  /**
   * The Standard JSON Schema converter, where the library offers one (zod 4
   * does): JSON Schema of what the schema accepts or produces.
   */
  readonly jsonSchema?: {
    readonly input: (options: { readonly target: string }) => Record<string, unknown>;
    readonly output: (options: { readonly target: string }) => Record<string, unknown>;
  } | undefined;
}

/** What `validate` answers: the output value, or the issues. */
export type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<StandardIssue> };

/** One issue a schema reports. */
export interface StandardIssue {
  /** What is wrong. */
  readonly message: string;
  /** Where: keys, or `{ key }` segments. */
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** The input type of a Standard Schema. */
export type InferInput<T extends StandardSchemaV1> = NonNullable<
  T["~standard"]["types"]
>["input"];

/** The output type of a Standard Schema. */
export type InferOutput<T extends StandardSchemaV1> = NonNullable<
  T["~standard"]["types"]
>["output"];

/**
 * Whether `x` looks like a Standard Schema v1.
 *
 * @param x Anything.
 * @returns `true` when it has `~standard.version === 1` and a `validate` function.
 */
export function isStandardSchema(x: unknown): x is StandardSchemaV1 {
  if ((typeof x !== "object" && typeof x !== "function") || x === null) return false;
  const props = (x as Record<string, unknown>)["~standard"] as
    | Record<string, unknown>
    | undefined;
  return typeof props === "object" && props !== null && props.version === 1 &&
    typeof props.validate === "function";
}

/**
 * A schema's issues as `{ path, message }`, the path a JSON Pointer.
 *
 * @param issues The issues `validate` reported.
 * @returns The issues in mcpstate's form (at least one).
 */
export function issuesOf(issues: ReadonlyArray<StandardIssue>): StateIssue[] {
  const out = issues.map((i) => ({
    path: pointerOf(i.path ?? []),
    message: typeof i.message === "string" && i.message !== "" ? i.message : "Invalid value",
  }));
  return out.length > 0 ? out : [{ path: "", message: "Invalid value" }];
}

function pointerOf(path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>): string {
  let out = "";
  for (const seg of path) {
    const key = typeof seg === "object" && seg !== null ? seg.key : seg;
    out += "/" + String(typeof key === "symbol" ? key.description ?? "" : key)
      .replaceAll("~", "~0").replaceAll("/", "~1");
  }
  return out;
}
