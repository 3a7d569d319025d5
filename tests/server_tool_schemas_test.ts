/**
 * Each tool is defined once (`src/server/tools/_*.ts`), and what it
 * advertises agrees with what it checks: the input schema `tools/list` shows
 * is derived from the same arguments as the zod check, the advertised output
 * schema names only keys of the strict one with the same types, the table
 * gives the tools' order and the default set, and `tools/list` is, byte for
 * byte, the list mcpstate has always served (a SHA-256 of its `tools`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createMcpHandler } from "@modelcontextprotocol/server";
import { z } from "zod";
import { HandleStore } from "../mod.ts";
import {
  createHttpHandler,
  createStateServer,
  DEFAULT_TOOLS,
  STATE_TOOLS,
  type StateServerOptions,
} from "../src/server/mod.ts";
import { TOOLS } from "../src/server/tools/_table.ts";
import { rawRequest } from "./_raw_mcp.ts";

type Json = Record<string, unknown>;

/** The `tools` of a 2026-07-28 `tools/list`, as the server writes them on the wire. */
async function listedTools(
  anonymous: boolean,
  options: Partial<StateServerOptions> = {},
): Promise<Json[]> {
  await using store = await HandleStore.fromUrl("memory://");
  const app = anonymous
    ? createHttpHandler(store, {
      publicUrl: new URL("http://127.0.0.1/mcp"),
      anonymous: true,
      ...options,
    })
    : createMcpHandler(() => createStateServer(store, { user: () => "u", ...options }));
  try {
    const res = await rawRequest((r) => app.fetch(r), "tools/list");
    assert.equal(res.status, 200);
    return JSON.parse(res.text).result.tools;
  } finally {
    await app.close?.();
  }
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The JSON types a (zod-written) schema admits, but null; none for "anything". */
function typesOf(schema: Json): Set<string> {
  const types = new Set<string>();
  const t = schema.type;
  for (const x of Array.isArray(t) ? t : t === undefined ? [] : [t]) {
    if (x !== "null") types.add(String(x));
  }
  for (const member of (schema.anyOf ?? []) as Json[]) {
    for (const x of typesOf(member)) types.add(x);
  }
  return types;
}

/** The member of a (zod-written) schema that is not null. */
function nonNull(schema: Json): Json {
  const members = ((schema.anyOf ?? []) as Json[]).filter((m) => m.type !== "null");
  return members.length === 1 ? members[0]! : schema;
}

/**
 * Fails unless `advertised` agrees with `checked` (the JSON Schema zod writes
 * for the strict check) at `where`: the same type where both name one, the
 * same values where both list them, and every advertised property or item
 * agreeing in turn.
 */
function agree(advertised: Json, checked: Json, where: string): void {
  const types = typesOf(checked);
  if (advertised.type !== undefined && types.size > 0) {
    assert.ok(types.has(String(advertised.type)), `${where}: ${advertised.type} vs ${[...types]}`);
  }
  const inner = nonNull(checked);
  if (advertised.enum !== undefined && inner.enum !== undefined) {
    assert.deepEqual(advertised.enum, inner.enum, where);
  }
  if (advertised.items !== undefined && inner.items !== undefined) {
    agree(advertised.items as Json, inner.items as Json, `${where}[]`);
  }
  if (advertised.properties !== undefined) {
    const props = (inner.properties ?? {}) as Record<string, Json>;
    for (const [key, schema] of Object.entries(advertised.properties as Record<string, Json>)) {
      assert.ok(key in props, `${where}.${key}: advertised, not checked`);
      agree(schema, props[key]!, `${where}.${key}`);
    }
  }
}

const zodJson = (schema: z.ZodType): Json =>
  z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Json;

Deno.test("each tool's advertised input is derived from the arguments its handler checks", () => {
  for (const tool of TOOLS) {
    const { json, check } = tool.input;
    const shape = check.shape as Record<string, z.ZodType>;
    const properties = json.properties as Record<string, Json>;
    // The same arguments, in the same order (zod reports the first bad one).
    assert.deepEqual(Object.keys(properties), Object.keys(shape), tool.name);
    const required = (json.required ?? []) as string[];
    const missing = check.safeParse({});
    const missed = missing.success ? [] : missing.error.issues.map((i) => String(i.path[0]));
    for (const [key, schema] of Object.entries(shape)) {
      if (required.includes(key)) {
        assert.ok(missed.includes(key), `${tool.name}.${key}: advertised required, not checked`);
      } else {
        // Optional: absent and null both mean absent.
        assert.ok(schema.safeParse(undefined).success, `${tool.name}.${key}`);
        assert.ok(schema.safeParse(null).success, `${tool.name}.${key}`);
        assert.ok(!missed.includes(key), `${tool.name}.${key}: checked required, not advertised`);
      }
      agree(properties[key]!, zodJson(schema), `${tool.name}.${key}`);
    }
    assert.deepEqual(
      Object.keys(json),
      required.length > 0 ? ["type", "properties", "required"] : ["type", "properties"],
    );
  }
});

Deno.test("each tool's advertised output admits what its strict check admits", () => {
  for (const tool of TOOLS) {
    const { json, check } = tool.output;
    // No key is promised and none refused: SDK 1.x clients check results against it.
    assert.deepEqual(Object.keys(json), ["type", "properties"], tool.name);
    assert.equal(json.type, "object");
    const checked = zodJson(check);
    assert.equal(checked.additionalProperties, false, `${tool.name}: the check is strict`);
    agree(json, checked, tool.name);
  }
});

Deno.test("the table orders the tools: registration, STATE_TOOLS and DEFAULT_TOOLS", async () => {
  const names = TOOLS.map((t) => t.name);
  assert.equal(new Set(names).size, names.length);
  assert.deepEqual(DEFAULT_TOOLS, names.filter((n) => n !== "state_share"));
  assert.deepEqual(STATE_TOOLS, [...DEFAULT_TOOLS, "state_share"]);
  const listed = await listedTools(false, { tools: STATE_TOOLS });
  assert.deepEqual(listed.map((t) => t.name), names);
  for (const tool of TOOLS) {
    const t = listed.find((x) => x.name === tool.name)!;
    assert.deepEqual(t.inputSchema, tool.input.json, tool.name);
    assert.deepEqual(t.outputSchema, tool.output.json, tool.name);
    assert.deepEqual(t.annotations, { title: tool.title, ...tool.annotations }, tool.name);
  }
  // The shared bucket has one user: nobody to share with.
  const anonymous = await listedTools(true, { tools: STATE_TOOLS });
  assert.deepEqual(anonymous.map((t) => t.name), DEFAULT_TOOLS);
});

Deno.test("tools/list is, byte for byte, the list mcpstate serves (a digest of its tools)", async () => {
  // Change these only with a deliberate change of what the tools advertise.
  const cases: [string, Promise<Json[]>, string][] = [
    [
      "default",
      listedTools(true),
      "5c3a7af7495fd2c5ba450f35357b81c6567b1d48319710569f84dc4c4c9d7c11",
    ],
    [
      "every tool, no read budget",
      listedTools(false, { tools: STATE_TOOLS, maxReadBytes: 0 }),
      "d50a6af403d00416f85efc6dd09022df7ccd39d6642fbd1a00ff9ff065f28f1a",
    ],
  ];
  for (const [what, tools, digest] of cases) {
    assert.equal(await sha256(JSON.stringify(await tools)), digest, what);
  }
});
