/**
 * What a tool call must look like to a client, checked on every call the
 * tests make: one text block holding the whole payload as JSON, `ok` the
 * opposite of `isError`, a success also as `structuredContent`.
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * What the tool helpers need of a client: the v2 `Client` and SDK 1.x's
 * `Client` (`@modelcontextprotocol/sdk`) alike.
 */
export interface ToolCaller {
  /** `tools/call`. */
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>;
}

/** One tool call's outcome. */
export interface Outcome {
  /** The payload the model sees: the text block's JSON (for a success, also `structuredContent`). */
  payload: Record<string, unknown>;
  /** `isError`. */
  isError: boolean;
}

/**
 * The payload a tool result carries for the model: its first text block,
 * parsed; `undefined` when there is none or it is not a JSON object.
 *
 * @param res A `tools/call` result.
 * @returns The payload.
 */
export function payloadOf(res: unknown): Record<string, unknown> | undefined {
  const content = (res as { content?: { type?: string; text?: unknown }[] } | undefined)?.content;
  const text = Array.isArray(content) ? content[0]?.text : undefined;
  if (typeof text !== "string") return undefined;
  try {
    const payload = JSON.parse(text);
    return typeof payload === "object" && payload !== null && !Array.isArray(payload)
      ? payload
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks the shape every tool result must have and returns what the model
 * sees: one text block holding the whole payload as JSON, `ok` the opposite
 * of `isError`; a success also as `structuredContent` (the same object), a
 * failure never as `structuredContent` (the output schemas describe
 * successes, and SDK 1.x clients check it even on errors), its `error` with
 * a `code` and a `message`.
 *
 * @param name The tool, for messages.
 * @param res The `tools/call` result.
 * @returns The payload and `isError`.
 */
export function outcomeOf(name: string, res: unknown): Outcome {
  const r = res as { content?: unknown; structuredContent?: unknown; isError?: unknown };
  const content = r.content as { type: string; text?: string }[];
  assert.equal(content?.length, 1, `${name}: exactly one content block`);
  assert.equal(content[0]?.type, "text");
  const payload = payloadOf(res);
  assert.ok(payload, `${name}: the text block is a JSON object: ${content[0]?.text}`);
  const isError = r.isError === true;
  assert.equal(payload.ok, !isError, `${name}: ok is the opposite of isError`);
  if (isError) {
    assert.equal(r.structuredContent, undefined, `${name}: a failure has no structuredContent`);
    const error = payload.error as Record<string, unknown>;
    assert.equal(typeof error?.code, "string", `${name}: error.code`);
    assert.equal(typeof error?.message, "string", `${name}: error.message`);
  } else {
    assert.deepEqual(r.structuredContent, payload, `${name}: text equals structuredContent`);
  }
  return { payload, isError };
}

/**
 * Calls a tool and checks its result's shape (see {@link outcomeOf}).
 *
 * @param client A connected client.
 * @param name The tool.
 * @param args Its arguments.
 */
export async function call(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown>,
): Promise<Outcome> {
  return outcomeOf(name, await client.callTool({ name, arguments: args }));
}

/** Calls a tool that must succeed and returns its payload. */
export async function ok(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const r = await call(client, name, args);
  assert.equal(r.isError, false, `${name} failed: ${JSON.stringify(r.payload)}`);
  return r.payload;
}

/** Calls a tool that must fail and returns its `error` object. */
export async function fails(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown>,
  code?: string,
): Promise<Record<string, unknown>> {
  const r = await call(client, name, args);
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.payload)}`);
  const error = r.payload.error as Record<string, unknown>;
  assert.equal(typeof error.message, "string");
  if (code) assert.equal(error.code, code, JSON.stringify(error));
  return error;
}
