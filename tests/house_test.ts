/**
 * The house's measurable rules, beside the layer table of
 * `tests/layers_test.ts`: sizes (the lint rules of `scripts/house_lint.ts`,
 * run over every file of `src/`), no import cycle among `mod.ts`, `cli.ts`
 * and `src/**` even through `import type`, the CLI that opens no backend,
 * the pure core that imports only itself, the exported names of every
 * export-map entry, and one child program for cross-process tests.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import plugin from "../scripts/house_lint.ts";
import denoJson from "../deno.json" with { type: "json" };
import { cyclesOf, importsOf, sourceFiles, stripComments } from "./_imports.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Every project file the import graph covers (relative to the root), with its code. */
async function readTree(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const paths = [
    join(ROOT, "mod.ts"),
    join(ROOT, "cli.ts"),
    ...await sourceFiles(join(ROOT, "src")),
  ];
  for (const abs of paths) {
    files.set(relative(ROOT, abs).replaceAll("\\", "/"), await Deno.readTextFile(abs));
  }
  return files;
}

const TREE = await readTree();

/** The local imports of each file, `import type` included, as root-relative paths. */
function arrows(): Map<string, string[]> {
  const next = new Map<string, string[]>();
  for (const [from, text] of TREE) {
    const to = importsOf(stripComments(text)).specifiers
      .map((s) => s.specifier)
      .filter((s) => s.startsWith("./") || s.startsWith("../"))
      .map((s) => normalize(join(dirname(from), s)).replaceAll("\\", "/"))
      .filter((p) => TREE.has(p));
    next.set(from, to);
  }
  return next;
}

function assertNone(problems: string[], what: string): void {
  assert.equal(problems.length, 0, `${what}:\n  ${problems.join("\n  ")}`);
}

Deno.test("house: every file of src/ keeps the size rules (files, functions, HandleStore, backend entries)", () => {
  const problems: string[] = [];
  for (const [path, text] of TREE) {
    if (!path.startsWith("src/")) continue;
    for (const d of Deno.lint.runPlugin(plugin, join(ROOT, path), text)) {
      const line = text.slice(0, d.range[0]).split("\n").length;
      problems.push(`${path}:${line}: ${d.message}`);
    }
  }
  assertNone(problems, "Over the house's sizes");
});

Deno.test("house: the size rules see what they measure", () => {
  const body = (n: number) =>
    Array.from({ length: n }, (_, i) => `  const a${i} = ${i};`).join("\n");
  const fn = (n: number) => `function f() {\n${body(n - 2)}\n  // a comment\n\n}\n`;
  const run = (name: string, text: string) =>
    Deno.lint.runPlugin(plugin, join(ROOT, name), text).map((d) => d.id);
  assert.deepEqual(run("src/x.ts", fn(120)), []);
  assert.deepEqual(run("src/x.ts", fn(121)), ["house/function-size"]);
  assert.deepEqual(run("tests/x.ts", fn(121)), [], "the rules apply to src/ only");
  assert.deepEqual(run("src/x.ts", "\n".repeat(800)), []);
  assert.deepEqual(run("src/x.ts", "\n".repeat(801)), ["house/file-size"]);
  const facade = (n: number) =>
    `export class HandleStore {\n${body(n).replaceAll("const ", "")}\n}\n`;
  assert.deepEqual(run("src/store.ts", facade(500)), []);
  assert.deepEqual(run("src/store.ts", facade(501)), ["house/facade-size"]);
  const entry = (n: number) =>
    `/** Doc.\n * @module\n */\n${body(n).replaceAll("  const", "export const")}\n`;
  assert.deepEqual(run("src/backends/x.ts", entry(60)), []);
  assert.deepEqual(run("src/backends/x.ts", entry(61)), ["house/entry-size"]);
});

Deno.test("house: no import cycle among mod.ts, cli.ts and src/, type-only imports included", () => {
  const next = arrows();
  const cycles = cyclesOf(next, TREE.keys()).map((c) => c.join(" ⇄ "));
  assertNone(cycles, "Import cycles");
});

Deno.test("house: the CLI opens no backend: it imports no backend module and calls no openBackend", () => {
  const next = arrows();
  const problems: string[] = [];
  for (const [from, to] of next) {
    if (!from.startsWith("src/cli/") && from !== "cli.ts") continue;
    for (const t of to) {
      if (t.startsWith("src/backends/")) problems.push(`${from} → ${t}`);
    }
    if (/\bopenBackend\b/.test(stripComments(TREE.get(from)!))) {
      problems.push(`${from} calls openBackend`);
    }
  }
  assertNone(problems, "The CLI opens backends itself");
});

Deno.test("house: ops.ts, json.ts, errors.ts (and src/ops/) import only one another", () => {
  const core = /^src\/(ops|json|errors)\.ts$|^src\/ops\//;
  const problems: string[] = [];
  for (const [from, text] of TREE) {
    if (!core.test(from)) continue;
    for (const s of importsOf(stripComments(text)).specifiers) {
      const local = s.specifier.startsWith("./") || s.specifier.startsWith("../");
      const to = local ? normalize(join(dirname(from), s.specifier)) : s.specifier;
      if (!core.test(to)) problems.push(`${from} → ${to}`);
    }
  }
  assertNone(problems, "The pure core imports beyond itself");
});

Deno.test("house: cross-process tests share one child program", async () => {
  const children: string[] = [];
  for await (const e of Deno.readDir(join(ROOT, "tests"))) {
    if (e.isFile && /child.*\.ts$/.test(e.name)) children.push(e.name);
  }
  assert.equal(children.length, 1, `child programs under tests/: ${children.join(", ")}`);
});

Deno.test("house: every export-map entry exports exactly the names tests/_exports.json lists (a new name is added there on purpose)", async (t) => {
  const expected: Record<string, string[]> = JSON.parse(
    await Deno.readTextFile(join(ROOT, "tests", "_exports.json")),
  );
  assert.deepEqual(Object.keys(denoJson.exports).sort(), Object.keys(expected).sort());
  for (const [name, path] of Object.entries(denoJson.exports)) {
    await t.step(name, async () => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["doc", "--json", path],
        cwd: ROOT,
        stdout: "piped",
        stderr: "null",
      }).output();
      assert.ok(out.success, `deno doc --json ${path} failed`);
      const doc = JSON.parse(new TextDecoder().decode(out.stdout));
      const nodes = Object.values(doc.nodes) as { symbols?: { name: string }[] }[];
      const names = [...new Set(nodes[0]?.symbols?.map((s) => s.name) ?? [])].sort();
      assert.deepEqual(names, expected[name]);
    });
  }
});
