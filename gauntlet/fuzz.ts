/**
 * Fuzzing through a real MCP connection: a real `mcpstate serve --transport
 * http` process with bearer authentication, and
 *
 * - random tool arguments (fast-check, fixed seed) sent with the official
 *   client, speaking both protocol eras: every answer must be a success or a
 *   structured refusal (`isError` with `{ok: false, error: {code, message}}`
 *   as the JSON of its text block and a known code, or a JSON-RPC error for
 *   an unknown tool); every `structuredContent`, of a failure too, must match
 *   the tool's declared output schema as SDK 1.x clients check it (they throw
 *   otherwise, and the model never sees the error); nothing may
 *   leak internals (stack traces, file paths, error class names outside
 *   `internal_error`); a refused call must change nothing (the user's whole
 *   listing and the target's `state_load` are compared before and after);
 * - random bytes as HTTP bodies of `POST /mcp`: random bytes, mutations of
 *   the requests the official client really sends, JSON-RPC-shaped garbage
 *   and invalid UTF-8: no 5xx, JSON-RPC errors for protocol garbage, no
 *   leaks, a watched handle changes only when a call succeeded;
 * - and the server process is alive and healthy at the end;
 * - then, on a server with `--allow-anonymous`, anonymous callers minting
 *   with colliding idempotency keys (`_shared_bucket.ts`): no call gets
 *   another call's handle, and nobody learns that a key was used.
 *
 * @module
 */

import fc from "fast-check";
import {
  type Client,
  ProtocolError,
  SdkHttpError,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import {
  type Era,
  newClient,
  payloadOf,
  startIssuer,
  type TestIssuer,
} from "../tests/_server_harness.ts";
import { startServer } from "./_server.ts";
import { messageOf, randomSeed, Rng } from "./_util.ts";
import { fuzzSharedBucket, type SharedBucketReport } from "./_shared_bucket.ts";

/** Options of {@link runFuzz}. */
export interface FuzzOptions {
  /** Random tool calls. */
  toolCalls: number;
  /** Random HTTP bodies. */
  rawBodies: number;
  /** Anonymous mints with colliding idempotency keys. Default `toolCalls`, at most 1,000. */
  sharedBucketMints?: number;
  /** Seed of every generator. Default random. */
  seed?: number;
  /** Stop after this long. Default 20 minutes. */
  timeLimitMs?: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** What {@link runFuzz} found. */
export interface FuzzReport {
  /** The seed. */
  seed: number;
  /** Tool calls sent, and how they ended. */
  toolCalls: {
    total: number;
    succeeded: number;
    refused: Record<string, number>;
    protocolErrors: Record<string, number>;
  };
  /** Refused calls whose before/after comparison showed no change. */
  unchangedAfterRefusal: number;
  /** HTTP bodies sent, by response status. */
  rawBodies: { total: number; byStatus: Record<string, number> };
  /** The shared bucket's mints with colliding idempotency keys. */
  sharedBucket: SharedBucketReport;
  /** Users (each a fresh token and connection) the calls were spread over. */
  users: number;
  /** Whether the server was alive and healthy at the end. */
  serverHealthy: boolean;
  /** Wall time, ms. */
  durationMs: number;
  /** Every violation; empty when everything held. */
  failures: string[];
}

const KNOWN_CODES = new Set([
  "handle_not_found",
  "handle_expired",
  "stale_write",
  "patch_error",
  "state_too_large",
  "invalid_argument",
  "unauthenticated",
  "expect_version_required",
]);

const TOOLS = [
  "state_save",
  "state_load",
  "state_list",
  "state_patch",
  "state_touch",
  "state_delete",
  "state_changes",
  "state_restore",
  "state_lease",
];

/** Refusals that mean a bug when random arguments provoke them. */
const BUG_CODES = new Set(["internal_error", "backend_error"]);

const LEAKS: [string, RegExp][] = [
  ["a stack trace", /\n\s+at |\bat [\w$.<>]+ \(|\bat (file|ext|node):/],
  ["a file URL", /file:\/\//],
  ["a module path", /node_modules|\.[cm]?[jt]s:\d+|\/src\/|\/tests\/|\/gauntlet\//],
  ["a machine path", /\/(home|root|tmp|usr|var|etc|opt|proc)\//],
  [
    "an error class name",
    /\b(TypeError|RangeError|SyntaxError|ReferenceError|EvalError|URIError|AggregateError|ZodError|SqliteError|PostgresError|ReplyError|DOMException|DatabaseSync|ioredis)\b/,
  ],
];

/**
 * The first leak in `text` that is not already in `input` (a refusal may
 * quote what it refuses).
 */
export function leakIn(text: string, input: string, allowClassName = false): string | null {
  for (const [what, re] of LEAKS) {
    if (allowClassName && what === "an error class name") continue;
    const m = re.exec(text);
    if (m && !input.includes(m[0])) return `${what} (${JSON.stringify(m[0])})`;
  }
  return null;
}

// ------------------------------------------------------------------ arbitraries

const lone = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const oddChar = fc.oneof(
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
  lone,
  fc.constantFrom("\u0000", "\\", '"', "~", "/", ".", "\u2028", "\ufeff", "\u202e", "%00"),
);
const SPECIAL_STRINGS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "",
  " ",
  "a.b",
  "a..b",
  ".",
  "/",
  "/a/b",
  "/0",
  "/-",
  "~0~1",
  "~2",
  "-",
  "0",
  "00",
  "-1",
  "1e3",
  "null",
  "undefined",
  "NaN",
];
const str: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 16 }) },
  { weight: 2, arbitrary: fc.string({ unit: oddChar, maxLength: 16 }) },
  { weight: 2, arbitrary: fc.constantFrom(...SPECIAL_STRINGS) },
);
const num: fc.Arbitrary<number> = fc.oneof(
  fc.integer(),
  fc.integer({ min: -5, max: 5 }),
  fc.double(),
  fc.constantFrom(0, -0, 1e308, -1e308, 2 ** 53, 2 ** 53 + 2, 2 ** 31, 1e-300, 0.5, 36525, 36526),
);

/** JSON values with odd keys and strings, prototype names included. */
const json: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    num,
    str,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.array(fc.tuple(str, tie("value")), { maxLength: 4 }).map((entries) => {
      const o: Record<string, unknown> = {};
      for (const [k, v] of entries) {
        Object.defineProperty(o, k, {
          value: v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return o;
    }),
  ),
})).value;

const jsonObject = json.filter((v) => typeof v === "object" && v !== null && !Array.isArray(v));

/** Values that are rarely right: deep, large, or the wrong type. */
const nasty: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(JSON.parse(`{"a":${"[".repeat(70)}${"]".repeat(70)}}`)),
  fc.constant(JSON.parse('{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}}}')),
  fc.integer({ min: 1_048_000, max: 1_049_200 }).map((n) => ({ big: "x".repeat(n) })),
  fc.constant([]),
  fc.constant("state"),
  fc.constant(42),
  fc.constant(null),
  fc.constant(true),
);

interface Ctx {
  handles: string[];
  versions: Map<string, number>;
}

type Build = (ctx: Ctx) => unknown;

const handleArg: fc.Arbitrary<Build> = fc.oneof(
  { weight: 8, arbitrary: fc.nat().map((i) => (c: Ctx) => c.handles[i % c.handles.length]) },
  { weight: 1, arbitrary: str.map((s) => () => s) },
  {
    weight: 1,
    arbitrary: fc.nat().map((i) => (c: Ctx) => {
      const h = c.handles[i % c.handles.length] ?? "note_aaaaaaaa";
      return i % 3 === 0 ? h.toUpperCase() : i % 3 === 1 ? `${h} ` : h.slice(0, -1);
    }),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<unknown>(
      "note_aaaaaaaa",
      "x".repeat(300),
      0,
      null,
      {},
      [],
      true,
    ).map((v) => () => v),
  },
);

const versionArg: fc.Arbitrary<Build> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(fc.nat(), fc.integer({ min: -1, max: 1 })).map(([i, d]) => (c: Ctx) => {
      const h = c.handles[i % c.handles.length];
      return (h ? c.versions.get(h) ?? 1 : 1) + d;
    }),
  },
  { weight: 1, arbitrary: fc.oneof(num, str, fc.constant(null)).map((v) => () => v) },
);

const ttlArg: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: 1, max: 30 }),
  num,
  fc.constantFrom(0, -1, 36526, "7", true, null, [], {}),
);

const secondsArg: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: 1, max: 600 }),
  num,
  fc.constantFrom(0, -1, 86_401, "60", true, null, [], {}),
);

const pathArg: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "",
      "tags",
      "stats",
      "profile.tags",
      "/list/0",
      "/list/2",
      "/profile/name",
      "list",
      "missing.deep",
    ),
  },
  { weight: 2, arbitrary: str },
  { weight: 1, arbitrary: fc.array(str, { maxLength: 6 }).map((a) => `/${a.join("/")}`) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(0, null, [], {}, "a".repeat(5000)) },
);

const OP_NAMES = ["append", "add_to_set", "set_key", "del_key", "merge", "increment"];
const opArg: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...OP_NAMES) }, {
        weight: 1,
        arbitrary: str,
      }),
      path: pathArg,
      key: fc.oneof(str, fc.constantFrom<unknown>("visits", "notes", 1, null)),
      value: fc.oneof(json, nasty),
      mapping: fc.oneof(jsonObject, json),
      by: fc.oneof(num, fc.constantFrom<unknown>("1", null, true)),
    }, { requiredKeys: ["op"] }),
  },
  { weight: 1, arbitrary: json },
);

const opsArg: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.array(opArg, { minLength: 1, maxLength: 4 }) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constant([]),
      json,
      // Many small ops (over the body limit only through their number).
      fc.array(
        fc.record({ op: fc.constantFrom(...OP_NAMES), path: pathArg, key: str, value: json }),
        { minLength: 1500, maxLength: 1500 },
      ),
    ),
  },
);

function optional(
  record: Record<string, fc.Arbitrary<unknown>>,
): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(record, { requiredKeys: [] }) as fc.Arbitrary<Record<string, unknown>>;
}

interface Call {
  tool: string;
  build: (ctx: Ctx) => Record<string, unknown>;
}

function resolve(parts: Record<string, unknown>, ctx: Ctx): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(parts)) {
    out[k] = typeof v === "function" ? (v as Build)(ctx) : v;
  }
  return out;
}

const extra = fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 2 });

const callArb: fc.Arbitrary<Call> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(
      optional({
        kind: fc.oneof(fc.constantFrom("note", "research", "a", "trip-plan"), str, num),
        state: fc.oneof(
          { weight: 20, arbitrary: jsonObject },
          { weight: 5, arbitrary: nasty },
          // Over the 4 MiB body limit: refused by the transport with 413.
          {
            weight: 1,
            arbitrary: fc.integer({ min: 4_200_000, max: 4_400_000 }).map((n) => ({
              big: "x".repeat(n),
            })),
          },
        ),
        handle: handleArg,
        expect_version: versionArg,
        ttl_days: ttlArg,
        idempotency_key: fc.oneof(str, fc.constantFrom<unknown>("k".repeat(300), 5)),
      }),
      extra,
    ).map(([p, x]) => ({ tool: "state_save", build: (c: Ctx) => ({ ...x, ...resolve(p, c) }) })),
  },
  {
    weight: 2,
    arbitrary: optional({ handle: handleArg, path: pathArg }).map((p) => ({
      tool: "state_load",
      build: (c: Ctx) => resolve(p, c),
    })),
  },
  {
    weight: 1,
    arbitrary: optional({
      kind: fc.oneof(fc.constantFrom("note"), str),
      limit: fc.oneof(fc.integer({ min: -2, max: 600 }), num, str),
      cursor: fc.oneof(
        str,
        fc.constantFrom("c1.", "c1.WzEsIngiXQ", "c1.W251bGwsbnVsbF0", "c1." + "A".repeat(700)),
      ),
    }).map((p) => ({ tool: "state_list", build: (c: Ctx) => resolve(p, c) })),
  },
  {
    weight: 5,
    arbitrary: fc.tuple(
      optional({ handle: handleArg, ops: opsArg, idempotency_key: str }),
      extra,
    ).map(([p, x]) => ({ tool: "state_patch", build: (c: Ctx) => ({ ...x, ...resolve(p, c) }) })),
  },
  {
    weight: 2,
    arbitrary: optional({ handle: handleArg, ttl_days: ttlArg, idempotency_key: str }).map((p) => ({
      tool: "state_touch",
      build: (c: Ctx) => resolve(p, c),
    })),
  },
  {
    weight: 1,
    arbitrary: optional({ handle: handleArg, idempotency_key: str }).map((p) => ({
      tool: "state_delete",
      build: (c: Ctx) => resolve(p, c),
    })),
  },
  {
    weight: 2,
    arbitrary: optional({ handle: handleArg, since_version: versionArg }).map((p) => ({
      tool: "state_changes",
      build: (c: Ctx) => resolve(p, c),
    })),
  },
  {
    weight: 1,
    arbitrary: optional({ handle: handleArg }).map((p) => ({
      tool: "state_restore",
      build: (c: Ctx) => resolve(p, c),
    })),
  },
  {
    weight: 1,
    arbitrary: optional({
      handle: handleArg,
      seconds: secondsArg,
      release: fc.oneof(fc.boolean(), fc.constantFrom(null, "yes", 1)),
    }).map((p) => ({ tool: "state_lease", build: (c: Ctx) => resolve(p, c) })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(
      fc.oneof(str, fc.constantFrom("state_drop", "STATE_LOAD", "state_load ")),
      extra,
    )
      .map(([tool, x]) => ({ tool, build: () => x })),
  },
);

// ------------------------------------------------------------------ the run

const SEED_STATES: Record<string, unknown>[] = [
  {
    notes: "seed",
    tags: ["a"],
    stats: { visits: 1 },
    profile: { name: "x", tags: [] },
    list: [1, 2, { a: 1 }],
  },
  { big: "y".repeat(20_000), list: [] },
  JSON.parse(
    '{"__proto__":{"x":1},"constructor":"c","nested":{"deep":{"deeper":[true,null,"é"]}}}',
  ),
];

interface Snap {
  list: string;
  /** The handle argument the target was read for. */
  of: unknown;
  target: string;
}

/** A tool's output check, as SDK 1.x builds it from `tools/list`. */
type OutputCheck = (value: unknown) => { valid: boolean; errorMessage?: string | undefined };

/** The output checks of every tool, compiled from `tools/list` the way SDK 1.x clients do. */
async function outputChecks(client: Client): Promise<Map<string, OutputCheck>> {
  const ajv = new AjvJsonSchemaValidator();
  const checks = new Map<string, OutputCheck>();
  for (const tool of (await client.listTools()).tools) {
    type Schema = Parameters<typeof ajv.getValidator>[0];
    if (tool.outputSchema) checks.set(tool.name, ajv.getValidator(tool.outputSchema as Schema));
  }
  return checks;
}

/**
 * What is wrong with a tool result as a client reads it, or `null`. Any
 * `structuredContent`, of a failure too, must pass the tool's output check
 * (SDK 1.x clients throw otherwise) and equal the text block; the text block
 * holds the whole payload: `ok` the opposite of `isError`, and a failure's
 * `error` with a `code` and a `message`.
 *
 * @param res A `tools/call` result.
 * @param check The tool's output check, if it declares an output schema.
 * @returns The violation.
 */
export function resultViolation(
  res: Record<string, unknown>,
  check: OutputCheck | undefined,
): string | null {
  const content = res.content as { type?: string; text?: unknown }[] | undefined;
  const text = Array.isArray(content) ? content[0]?.text : undefined;
  const payload = payloadOf(res);
  const isError = res.isError === true;
  if (typeof text !== "string" || !payload) return "the text block is not a JSON object";
  if (payload.ok !== !isError) return `ok=${payload.ok} but isError=${isError}`;
  const structured = res.structuredContent;
  if (structured !== undefined) {
    const verdict = check?.(structured);
    if (verdict && !verdict.valid) {
      return `structuredContent fails the declared outputSchema (SDK 1.x clients throw): ${verdict.errorMessage}`;
    }
    if (JSON.stringify(structured) !== text) return "the text block differs from structuredContent";
  } else if (!isError && check) {
    return "a success without structuredContent";
  }
  const error = payload.error as Record<string, unknown> | undefined;
  if (isError && (typeof error?.code !== "string" || typeof error.message !== "string")) {
    return "a failure whose text block lacks error.code or error.message";
  }
  return null;
}

async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<{
  res: Record<string, unknown>;
  payload: Record<string, unknown>;
  isError: boolean;
  text: string;
}> {
  const res = await client.callTool({ name, arguments: args });
  const content = res.content as { type: string; text?: string }[];
  const text = content?.[0]?.text ?? "";
  return { res, payload: payloadOf(res) ?? {}, isError: res.isError === true, text };
}

/** The JSON-RPC messages of an answer: its JSON body, or the `data:` lines of its event stream. */
function messagesIn(contentType: string, text: string): unknown[] {
  const chunks = contentType.includes("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5))
    : [text];
  return chunks.flatMap((c) => {
    try {
      return [JSON.parse(c)];
    } catch {
      return [];
    }
  });
}

async function snapshot(client: Client, target: unknown): Promise<Snap> {
  const rows: unknown[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 20; page++) {
    const r = await callTool(client, "state_list", { limit: 500, ...(cursor ? { cursor } : {}) });
    if (r.isError) throw new Error(`state_list failed: ${r.text}`);
    const soon = Date.now() + 600_000;
    for (const h of r.payload.handles as Record<string, unknown>[]) {
      // Handles about to expire may vanish between two looks without any write.
      // Leases are advisory and lapse on their own: they are not state.
      if (h.expires_at === null || Date.parse(String(h.expires_at)) > soon) {
        rows.push({ ...h, active_lease: undefined });
      }
    }
    cursor = r.payload.next_cursor as string | null;
    if (!cursor) break;
  }
  let t = "";
  if (typeof target === "string" && target.length > 0 && target.length <= 256) {
    const r = await callTool(client, "state_load", { handle: target });
    t = r.isError
      ? String((r.payload.error as Record<string, unknown>).code)
      : JSON.stringify({ ...r.payload, active_lease: undefined });
  }
  return { list: JSON.stringify(rows), of: target, target: t };
}

/** The requests the official client sends, captured as seeds for mutation. */
function recordingFetch(seeds: { headers: Record<string, string>; body: string }[]) {
  return (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (typeof init?.body === "string" && seeds.length < 64) {
      seeds.push({
        headers: Object.fromEntries(new Headers(init.headers).entries()),
        body: init.body,
      });
    }
    return fetch(input, init);
  };
}

function mutate(rng: Rng, bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = [...bytes];
  const n = rng.int(1, 6);
  for (let i = 0; i < n; i++) {
    const at = rng.int(0, Math.max(0, out.length - 1));
    switch (rng.int(0, 5)) {
      case 0:
        out[at] = rng.int(0, 255);
        break;
      case 1:
        out.splice(at, rng.int(1, 8));
        break;
      case 2:
        out.splice(
          at,
          0,
          ...Array.from(
            { length: rng.int(1, 8) },
            () =>
              rng.pick([0x22, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x5c, 0xff, 0xc3, 0x00, 0x30]),
          ),
        );
        break;
      case 3:
        out.length = at;
        break;
      case 4:
        out.splice(at, 0, ...out.slice(at, at + rng.int(1, 40)));
        break;
      default:
        out[at] = (out[at] ?? 0) ^ (1 << rng.int(0, 7));
    }
  }
  return new Uint8Array(out);
}

/**
 * Runs the MCP fuzzer against a fresh server process.
 *
 * @param options Call and body counts, seed, time limit.
 * @returns The report; `failures` is empty when everything held.
 */
export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const seed = options.seed ?? randomSeed();
  const timeLimit = options.timeLimitMs ?? 20 * 60_000;
  const log = options.log ?? (() => {});
  const started = performance.now();
  const failures: string[] = [];
  const report: FuzzReport = {
    seed,
    toolCalls: { total: 0, succeeded: 0, refused: {}, protocolErrors: {} },
    unchangedAfterRefusal: 0,
    rawBodies: { total: 0, byStatus: {} },
    sharedBucket: { calls: 0, newHandles: 0, replays: 0, refusedKeys: 0 },
    users: 0,
    serverHealthy: false,
    durationMs: 0,
    failures,
  };
  const fail = (msg: string) => {
    if (failures.length < 200) failures.push(msg);
  };
  const dir = await Deno.makeTempDir({ prefix: "mcpstate-fuzz-" });
  const issuer: TestIssuer = await startIssuer();
  const server = await startServer([
    "--backend",
    `sqlite:///${dir}/state.db`,
    ...issuer.serveArgs,
  ]);
  const aud = server.url.href;
  const seeds: { headers: Record<string, string>; body: string }[] = [];
  const clients: Client[] = [];
  let checks = new Map<string, OutputCheck>();
  try {
    const connect = async (era: Era, user: string): Promise<{ client: Client; token: string }> => {
      const token = await issuer.token({ sub: user, aud });
      const client = newClient(era, "gauntlet-fuzz");
      await client.connect(
        new StreamableHTTPClientTransport(server.url, {
          requestInit: { headers: { Authorization: `Bearer ${token}` } },
          fetch: recordingFetch(seeds),
        }),
      );
      clients.push(client);
      // Listed first, as a client does: SDK 1.x checks results only against a cached listing.
      if (checks.size === 0) checks = await outputChecks(client);
      return { client, token };
    };

    // ---------------------------------------------------------- tool calls
    // Generated in batches, so that at most one batch of arguments is held at once.
    const batch = 100;
    let calls: Call[] = [];
    const callAt = (i: number): Call => {
      if (i % batch === 0) {
        calls = fc.sample(callArb, {
          seed: seed + i / batch,
          numRuns: Math.min(batch, options.toolCalls - i),
        });
      }
      return calls[i % batch]!;
    };
    const perUser = 150;
    let client!: Client;
    let ctx: Ctx = { handles: [], versions: new Map() };
    let current: Snap | undefined;
    for (let i = 0; i < options.toolCalls; i++) {
      if (performance.now() - started > timeLimit) {
        fail(`time limit reached after ${i} of ${options.toolCalls} tool calls`);
        break;
      }
      if (i % perUser === 0) {
        const era: Era = report.users % 2 === 0 ? "2026-07-28" : "2025-11-25";
        ({ client } = await connect(era, `fuzz-${report.users}`));
        report.users++;
        ctx = { handles: [], versions: new Map() };
        for (const state of SEED_STATES) {
          const r = await callTool(client, "state_save", { kind: "note", state });
          if (r.isError) throw new Error(`setup mint failed: ${r.text}`);
          ctx.handles.push(String(r.payload.handle));
          ctx.versions.set(String(r.payload.handle), 1);
        }
        current = undefined;
      }
      const call = callAt(i);
      const args = call.build(ctx);
      const target = args.handle;
      if (!current || current.of !== target) current = await snapshot(client, target);
      const input = JSON.stringify(args) ?? "";
      const where = `call #${i} ${call.tool}(${input.slice(0, 300)})`;
      report.toolCalls.total++;
      let refused = false;
      try {
        const r = await callTool(client, call.tool, args);
        const p = r.payload;
        const violation = resultViolation(r.res, checks.get(call.tool));
        if (violation) fail(`${where}: ${violation}`);
        if (r.isError) {
          refused = true;
          const error = p.error as Record<string, unknown> | undefined;
          const code = String(error?.code);
          report.toolCalls.refused[code] = (report.toolCalls.refused[code] ?? 0) + 1;
          if (typeof error?.message !== "string" || error.message.length === 0) {
            fail(`${where}: a refusal without a message`);
          }
          if (BUG_CODES.has(code)) fail(`${where}: ${code}: ${String(error?.message)}`);
          else if (!KNOWN_CODES.has(code)) fail(`${where}: unknown error code ${code}`);
        } else {
          report.toolCalls.succeeded++;
          if (call.tool === "state_save" && typeof p.handle === "string") {
            if (!ctx.handles.includes(p.handle)) ctx.handles.push(p.handle);
            ctx.versions.set(p.handle, Number(p.version));
          } else if (typeof p.handle === "string" && typeof p.version === "number") {
            ctx.versions.set(p.handle, p.version);
          }
          // Deleted handles stay in the pool: state_restore may bring them back.
        }
        const leak = leakIn(
          r.text,
          input,
          p.error !== undefined && (p.error as Record<string, unknown>).code === "internal_error",
        );
        if (leak) fail(`${where}: the answer leaks ${leak}: ${r.text.slice(0, 300)}`);
      } catch (e) {
        refused = true;
        // A JSON-RPC error is right for an unknown tool; HTTP 413 for arguments over the body limit.
        const status = e instanceof SdkHttpError ? e.status : undefined;
        const code = e instanceof ProtocolError
          ? `JSON-RPC ${e.code}`
          : status !== undefined
          ? `HTTP ${status}`
          : messageOf(e).slice(0, 40);
        report.toolCalls.protocolErrors[code] = (report.toolCalls.protocolErrors[code] ?? 0) + 1;
        const acceptable = (e instanceof ProtocolError && !TOOLS.includes(call.tool)) ||
          (status === 413 && /-32000/.test(messageOf(e)));
        if (!acceptable) fail(`${where}: threw ${messageOf(e).slice(0, 300)}`);
        const leak = leakIn(messageOf(e), input, true);
        if (leak) fail(`${where}: the protocol error leaks ${leak}`);
      }
      const after = await snapshot(client, target);
      if (refused) {
        if (after.list !== current.list || after.target !== current.target) {
          fail(`${where}: a refused call changed the state`);
        } else {
          report.unchangedAfterRefusal++;
        }
      }
      current = after;
      if ((i + 1) % 500 === 0) {
        log(`fuzz: ${i + 1}/${options.toolCalls} tool calls, ${failures.length} failures`);
      }
    }

    // ---------------------------------------------------------- raw bodies
    const { client: watcher, token } = await connect("2026-07-28", "fuzz-raw");
    report.users++;
    const made = await callTool(watcher, "state_save", { kind: "note", state: { n: 0, list: [] } });
    const watched = String(made.payload.handle);
    // Seeds the client just sent, aimed at the watched handle.
    await callTool(watcher, "state_patch", {
      handle: watched,
      ops: [{ op: "increment", path: "", key: "n", by: 1 }],
    });
    await callTool(watcher, "state_load", { handle: watched, path: "list" });
    const rng = new Rng(seed);
    const enc = new TextEncoder();
    const look = async () => (await callTool(watcher, "state_load", { handle: watched })).text;
    let before = await look();
    const shapes = fc.sample(
      fc.oneof(
        json,
        fc.record({
          jsonrpc: fc.oneof(fc.constant("2.0"), str),
          id: fc.oneof(fc.integer(), str, fc.constant(null), json),
          method: fc.oneof(
            fc.constantFrom(
              "tools/call",
              "tools/list",
              "server/discover",
              "initialize",
              "ping",
              "resources/list",
              "notifications/initialized",
            ),
            str,
            num,
          ),
          params: fc.oneof(
            json,
            fc.record({
              name: fc.oneof(fc.constantFrom("state_load", "state_patch"), str),
              arguments: json,
              _meta: json,
            }),
          ),
        }, { requiredKeys: [] }),
        fc.array(json, { maxLength: 5 }),
      ),
      { seed: seed + 1, numRuns: Math.max(1, options.rawBodies) },
    );
    for (let i = 0; i < options.rawBodies; i++) {
      if (performance.now() - started > timeLimit) {
        fail(`time limit reached after ${i} of ${options.rawBodies} raw bodies`);
        break;
      }
      const kind = rng.weighted(
        [[3, "bytes"], [4, "mutated"], [2, "shaped"], [1, "utf8"]] as const,
      );
      const seedReq = seeds.length > 0 ? rng.pick(seeds) : undefined;
      let bytes: Uint8Array<ArrayBuffer>;
      if (kind === "bytes" || !seedReq) {
        bytes = crypto.getRandomValues(new Uint8Array(rng.int(0, 2048)));
      } else if (kind === "mutated") {
        bytes = mutate(rng, enc.encode(seedReq.body));
      } else if (kind === "shaped") {
        bytes = enc.encode(JSON.stringify(shapes[i % shapes.length]) ?? "null");
      } else {
        const text = seedReq.body;
        const at = rng.int(0, text.length);
        bytes = new Uint8Array([
          ...enc.encode(text.slice(0, at)),
          ...rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [
            0xc0,
            0xaf,
          ]]),
          ...enc.encode(text.slice(at)),
        ]);
      }
      const headers: Record<string, string> = {
        ...(seedReq && rng.next() < 0.7 ? seedReq.headers : {}),
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${token}`,
      };
      if (rng.next() < 0.1) {
        headers["mcp-protocol-version"] = rng.pick([
          "2026-07-28",
          "2025-11-25",
          "1999-01-01",
          "garbage",
        ]);
      }
      if (rng.next() < 0.05) headers["mcp-method"] = rng.pick(["tools/call", "x", ""]);
      const where = `raw #${i} (${kind}, ${bytes.length} bytes)`;
      report.rawBodies.total++;
      let res: Response;
      try {
        res = await fetch(server.url, {
          method: "POST",
          headers,
          body: bytes,
          signal: AbortSignal.timeout(15_000),
        });
      } catch (e) {
        fail(`${where}: no answer: ${messageOf(e)}`);
        if (!await server.healthy()) break;
        continue;
      }
      const text = await res.text();
      report.rawBodies.byStatus[res.status] = (report.rawBodies.byStatus[res.status] ?? 0) + 1;
      if (res.status >= 500) fail(`${where}: status ${res.status}: ${text.slice(0, 300)}`);
      const input = new TextDecoder().decode(bytes);
      // A tools/call that got through is held to what every client reads.
      const sent = messagesIn("", input)[0] as
        | { method?: unknown; params?: { name?: unknown } }
        | undefined;
      if (sent?.method === "tools/call" && typeof sent.params?.name === "string") {
        const check = checks.get(sent.params.name);
        for (const m of messagesIn(res.headers.get("content-type") ?? "", text)) {
          const result = (m as { result?: Record<string, unknown> } | null)?.result;
          if (result && Array.isArray(result.content)) {
            const violation = resultViolation(result, check);
            if (violation) fail(`${where}: ${violation}`);
          }
        }
      }
      const leak = leakIn(text, input);
      if (leak) fail(`${where}: the answer leaks ${leak}: ${text.slice(0, 300)}`);
      if (res.status >= 400 && res.status !== 401) {
        const ct = res.headers.get("content-type") ?? "";
        try {
          const body = JSON.parse(text);
          const e = body?.error;
          if (
            ct.includes("json") && !(typeof e?.code === "number" && typeof e?.message === "string")
          ) {
            fail(`${where}: status ${res.status} without a JSON-RPC error: ${text.slice(0, 200)}`);
          }
        } catch {
          fail(
            `${where}: status ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
          );
        }
      }
      const now = await look();
      if (now !== before) {
        const ok = /"ok":true/.test(text);
        if (!ok) {
          fail(
            `${where}: the watched handle changed without a successful call: ${text.slice(0, 200)}`,
          );
        }
        before = now;
      }
      if ((i + 1) % 100 === 0 && !await server.healthy()) {
        fail(`${where}: /healthz failed`);
        break;
      }
      if ((i + 1) % 500 === 0) {
        log(`fuzz: ${i + 1}/${options.rawBodies} raw bodies, ${failures.length} failures`);
      }
    }
    report.serverHealthy = server.exited() === undefined && await server.healthy();
    if (!report.serverHealthy) fail(`the server is down: ${server.stderr().slice(-1000)}`);
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    const status = await server.stop();
    if (status.code !== 0 && status.signal !== "SIGTERM") {
      failures.push(`the server exited with ${status.code}: ${server.stderr().slice(-500)}`);
    }
    const err = server.stderr();
    if (/panicked|Uncaught|RUST_BACKTRACE/.test(err)) {
      failures.push(`the server's stderr shows a crash: ${err.slice(-500)}`);
    }
    await issuer.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  const mints = options.sharedBucketMints ?? Math.min(options.toolCalls, 1_000);
  report.sharedBucket = await fuzzSharedBucket(mints, seed + 2, fail, started + timeLimit);
  report.durationMs = Math.round(performance.now() - started);
  return report;
}
