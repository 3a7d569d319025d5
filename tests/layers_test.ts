/**
 * The layers of `src/` hold: this test reads the imports of every file
 * under `src/` (static `import` / `export … from`, and dynamic `import("…")`
 * with a literal) and fails on every arrow that crosses a layer the wrong
 * way, on an impure module that must be pure, on a backend that imports
 * another, and on an import cycle.
 *
 * The rules are the table below; a new file either falls into a layer of the
 * table or fails the test until the table says where it belongs.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { cyclesOf, importsOf, sourceFiles, stripComments } from "./_imports.ts";
import { fileURLToPath } from "node:url";

// ---------------------------------------------------------------- the rules

/**
 * The layers, top first. A file may import files of its own layer and of
 * the layers below it, never of a layer above. Paths are relative to `src/`.
 */
const LAYERS: readonly { name: string; files: RegExp; what: string }[] = [
  { name: "cli", files: /^cli\//, what: "the mcpstate command: thin, over the store and server" },
  { name: "server", files: /^server\//, what: "the MCP server: a library over the store" },
  {
    name: "inspect",
    files: /^inspect\//,
    what: "the web inspector: a page over the store, beside the server, never importing it",
  },
  {
    name: "store",
    files: /^(store|url|kinds|types|wire)\.ts$|^store\//,
    what:
      "the store (store.ts, a façade over store/); its types (types.ts) and wire form (wire.ts); typed views over it (kinds.ts); url.ts, which the store loads lazily, opens backends",
  },
  {
    name: "backends",
    files: /^backends\//,
    what: "atomic primitives: <engine>.ts entries, <engine>/ folders, shared _*.ts helpers",
  },
  {
    name: "base",
    files:
      /^((backend|grants|keyring|ops|outline|preview|history|merge|json|errors|version|standard_schema)\.ts|(backend|ops|outline)\/.*)$/,
    what: "the backend interface, grants, the pure helpers, the errors, the version",
  },
];

/** Modules that must stay pure: no `Deno.*` API, and no import but of each other. */
const PURE =
  /^((ops|json|errors|outline|preview|history|merge|standard_schema)\.ts|(ops|outline)\/.*)$/;

/** The library: it knows no protocol and no terminal. */
const LIBRARY = /^(store\.ts|store\/|types\.ts|wire\.ts|url\.ts|ops\.ts|ops\/|backends\/)/;
/** What the library never imports. */
const NOT_FOR_THE_LIBRARY = /^(server|cli)\//;

/**
 * The engine a backends file belongs to: `sqlite` for `backends/sqlite.ts`
 * and everything under `backends/sqlite/`; `null` for the shared helpers
 * `backends/_*.ts`, which any engine may import and which import no engine.
 */
function engineOf(path: string): string | null {
  const m = /^backends\/([^/_][^/]*?)(?:\.ts|\/.*)$/.exec(path);
  return m ? m[1]! : null;
}

/**
 * Files whose one dynamic `import()` without a literal loads a module the
 * user names (`mcpstate serve --kinds ./kinds.ts`), which is outside the
 * project and so outside every layer.
 */
const USER_MODULE_LOADERS = new Set(["cli/serve.ts"]);

/** The only file outside `src/` that a file in it may import. */
const OUTSIDE_ALLOWED = new Set(["../deno.json"]);

// ---------------------------------------------------------------- reading imports

const SRC = fileURLToPath(new URL("../src/", import.meta.url));

/** One arrow: `from` imports `to` (both relative to `src/`, or a bare specifier for `to`). */
interface Arrow {
  from: string;
  to: string;
  /** `import type` / `export type`: erased at run time. */
  typeOnly: boolean;
  dynamic: boolean;
  /** A relative specifier (a file), as opposed to a package or built-in. */
  local: boolean;
}

/** Every file of `src/` (relative paths) with its code, and every arrow between them. */
async function readSrc(): Promise<{
  files: Map<string, string>;
  arrows: Arrow[];
  unreadable: string[];
}> {
  const files = new Map<string, string>();
  const arrows: Arrow[] = [];
  const unreadable: string[] = [];
  for (const abs of await sourceFiles(SRC)) {
    const from = relative(SRC, abs).replaceAll("\\", "/");
    const code = stripComments(await Deno.readTextFile(abs));
    files.set(from, code);
    const found = importsOf(code);
    if (found.unreadable > 0) unreadable.push(from);
    for (const { specifier, typeOnly, dynamic } of found.specifiers) {
      const local = specifier.startsWith("./") || specifier.startsWith("../");
      const to = local
        ? normalize(join(dirname(from), specifier)).replaceAll("\\", "/")
        : specifier;
      arrows.push({ from, to, typeOnly, dynamic, local });
    }
  }
  return { files, arrows, unreadable };
}

const SOURCE = await readSrc();

function layerOf(path: string): number {
  return LAYERS.findIndex((l) => l.files.test(path));
}

function show(a: Arrow): string {
  return `${a.from} → ${a.to}${a.dynamic ? " (dynamic)" : ""}${a.typeOnly ? " (type)" : ""}`;
}

function assertNone(problems: string[], what: string): void {
  assert.equal(problems.length, 0, `${what}:\n  ${problems.join("\n  ")}`);
}

// ---------------------------------------------------------------- the tests

Deno.test("layers: the import reader sees imports, and not what only looks like one", () => {
  const code = stripComments(`/**
 * @example
 * import { main } from "./main.ts";
 */
import { a, type B } from "./a.ts"; // import { z } from "./z.ts"
import type { C } from "../c.ts";
export { d } from "./d.ts";
export * from "./e.ts";
import "./f.ts";
const re = /'(-[^' ]+)/; const s = "import { y } from './y.ts'";
const t = \`\${"}"} import("./t.ts") \${{ k: 1 }.k}\`;
const x = 4 / 2 / 1; const m = await import("./m.ts");
const n = await import(name);
`);
  const { specifiers, unreadable } = importsOf(code);
  assert.deepEqual(specifiers.map((s) => s.specifier), [
    "./a.ts",
    "../c.ts",
    "./d.ts",
    "./e.ts",
    "./f.ts",
    "./m.ts",
  ]);
  assert.deepEqual(specifiers.map((s) => s.typeOnly), [false, true, false, false, false, false]);
  assert.deepEqual(specifiers.map((s) => s.dynamic), [false, false, false, false, false, true]);
  assert.equal(unreadable, 1);
  assert.ok(SOURCE.files.size > 20, `only ${SOURCE.files.size} files read under src/`);
  assert.ok(SOURCE.arrows.some((a) => a.from === "store.ts" && a.to === "url.ts" && a.dynamic));
});

Deno.test("layers: every file of src/ is in exactly one layer of the table", () => {
  const problems: string[] = [];
  for (const path of SOURCE.files.keys()) {
    const n = LAYERS.filter((l) => l.files.test(path)).length;
    if (n !== 1) problems.push(`${path} is in ${n} layers: add it to the table in this test`);
  }
  assertNone(problems, "Files outside the layer table");
});

Deno.test("layers: no arrow points up (cli → server → inspect → store, url → backends → base)", () => {
  const problems: string[] = [];
  for (const a of SOURCE.arrows) {
    if (!a.local) continue;
    if (!SOURCE.files.has(a.to)) {
      if (!OUTSIDE_ALLOWED.has(a.to)) problems.push(`${show(a)}: not a file of src/`);
      continue;
    }
    const from = layerOf(a.from), to = layerOf(a.to);
    if (from >= 0 && to >= 0 && to < from) {
      problems.push(
        `${show(a)}: the ${LAYERS[from]!.name} layer imports the ${
          LAYERS[to]!.name
        } layer above it`,
      );
    }
  }
  for (const path of SOURCE.unreadable) {
    if (USER_MODULE_LOADERS.has(path)) continue;
    problems.push(`${path}: a dynamic import() without a string literal cannot be checked`);
  }
  assertNone(problems, "Arrows against the layers");
});

Deno.test("layers: the library (store, ops, backends) imports nothing from the server or the CLI", () => {
  const problems = SOURCE.arrows
    .filter((a) => a.local && LIBRARY.test(a.from) && NOT_FOR_THE_LIBRARY.test(a.to))
    .map(show);
  assertNone(problems, "The library imports protocol or terminal code");
});

Deno.test("layers: the server and the inspector never import each other", () => {
  const problems = SOURCE.arrows
    .filter((a) =>
      a.local &&
      ((a.from.startsWith("server/") && a.to.startsWith("inspect/")) ||
        (a.from.startsWith("inspect/") && a.to.startsWith("server/")))
    )
    .map(show);
  assertNone(problems, "The server and the inspector import each other");
});

Deno.test("layers: ops, json, errors and outline are pure (no Deno API, no package)", () => {
  const problems: string[] = [];
  for (const [path, code] of SOURCE.files) {
    if (!PURE.test(path)) continue;
    if (/(?<![\w$.])Deno\s*\./.test(code)) problems.push(`${path} uses the Deno namespace`);
    for (const a of SOURCE.arrows.filter((a) => a.from === path)) {
      if (!a.local) problems.push(`${show(a)}: a package or built-in module`);
      else if (!PURE.test(a.to)) problems.push(`${show(a)}: a module that is not pure`);
    }
  }
  assertNone(problems, "Impure pure modules");
});

Deno.test("layers: a backend imports no other backend (only the shared backends/_*.ts helpers)", () => {
  const problems: string[] = [];
  for (const a of SOURCE.arrows) {
    if (!a.local || !a.from.startsWith("backends/") || !a.to.startsWith("backends/")) continue;
    const from = engineOf(a.from), to = engineOf(a.to);
    if (to !== null && to !== from) {
      problems.push(
        `${show(a)}: ${from === null ? "a shared helper" : `the ${from} backend`} imports ${to}`,
      );
    }
  }
  assertNone(problems, "Backends importing each other");
});

Deno.test("layers: no import cycles among the files of src/", () => {
  // Every arrow that loads a module at run time, dynamic ones included;
  // `import type` is erased and loads nothing.
  const next = new Map<string, string[]>();
  for (const a of SOURCE.arrows) {
    if (!a.local || a.typeOnly || !SOURCE.files.has(a.to)) continue;
    next.set(a.from, [...(next.get(a.from) ?? []), a.to]);
  }
  const cycles = cyclesOf(next, SOURCE.files.keys());
  assertNone(cycles.map((c) => c.join(" ⇄ ")), "Import cycles");
});
