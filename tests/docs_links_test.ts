/**
 * The README and the pages under `docs/` (every folder below it too) link to
 * each other, to their sections and to files of the repository: every
 * relative link must name a file or folder that exists, and every `#anchor`
 * a heading of its page by GitHub's slug rules, or an explicit `<a id>` /
 * `<a name>` there. Links inside code blocks and code spans are not links.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, extname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The Markdown pages: the README and every `.md` under `docs/`, sorted. */
function pages(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const path = join(dir, e.name);
      if (e.isDirectory) walk(path);
      else if (e.isFile && e.name.endsWith(".md")) found.push(path);
    }
  };
  walk(join(ROOT, "docs"));
  return [join(ROOT, "README.md"), ...found.sort()];
}

const FENCE = /^ {0,3}(`{3,}|~{3,})[^\n]*\n[\s\S]*?^ {0,3}\1[`~]*[ \t]*$/gm;

/** The text outside fenced code blocks, HTML comments and code spans. */
function prose(markdown: string): string {
  return markdown
    .replace(FENCE, "")
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/(`+)[^`][\s\S]*?\1/g, "");
}

/**
 * GitHub's slug of a heading's text: the text as rendered (links as their
 * text, code spans as their content, no emphasis marks or HTML tags),
 * lowercased, every character that is not a letter, digit, mark, space, `-`
 * or `_` removed, and each space turned into `-`.
 */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/`/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a page offers: its headings' slugs (`-1`, `-2` … for repeats) and `<a id|name>`. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const text = markdown.replace(FENCE, "");
  for (const [, heading] of text.matchAll(/^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const [, id] of text.matchAll(/<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']/gi)) {
    out.add(id!);
  }
  return out;
}

/** The link targets of a page: inline links and images, and reference definitions. */
export function links(markdown: string): string[] {
  const text = prose(markdown);
  const out: string[] = [];
  for (const [, target] of text.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+["'(][^)]*)?\)/g)) {
    out.push(target!);
  }
  for (const [, target] of text.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$/gm)) {
    out.push(target!);
  }
  for (
    const [, target] of text.matchAll(/<(?:a|img)\s[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']/gi)
  ) {
    out.push(target!);
  }
  return out;
}

/** Whether a target leaves the repository (`https:`, `mailto:`, `//host`). */
function external(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//");
}

/** What is wrong with one link of `page`, or `null` when it resolves. */
function check(page: string, target: string): string | null {
  const hash = target.indexOf("#");
  const path = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === "" ? page : join(dirname(page), decodeURIComponent(path));
  if (relative(ROOT, file).startsWith("..")) return "points outside the repository";
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(file);
  } catch {
    return "no such file or folder";
  }
  if (anchor === undefined) return null;
  if (!info.isFile) return "an anchor on a folder";
  if (extname(file) !== ".md") {
    return /^L\d+(-L\d+)?$/.test(anchor) ? null : "an anchor into a file that is not Markdown";
  }
  return anchors(Deno.readTextFileSync(file)).has(anchor) ? null : "no such heading or anchor";
}

Deno.test("docs: every relative link and anchor in README.md and docs/ resolves", async (t) => {
  await t.step("slugs follow GitHub's rules", () => {
    assert.equal(slug("1. Crash consistency"), "1-crash-consistency");
    assert.equal(
      slug("`get` as one plain command (issue #14)"),
      "get-as-one-plain-command-issue-14",
    );
    assert.equal(slug("Fork, merge back, transfer"), "fork-merge-back-transfer");
    assert.equal(slug("quota_bench"), "quota_bench");
    assert.equal(slug("The disk's floor — and 0.4.0"), "the-disks-floor--and-040");
    assert.equal(slug("See [the API](library.md)"), "see-the-api");
    const page = '# A\n\n## Same\n\n```md\n## Same\n```\n\n## Same\n\n<a id="here"></a>\n';
    assert.deepEqual([...anchors(page)].sort(), ["a", "here", "same", "same-1"]);
    assert.deepEqual(links("[x](a.md#b) `[y](c.md)` ![i](p.png)\n\n[r]: d.md\n"), [
      "a.md#b",
      "p.png",
      "d.md",
    ]);
  });

  let checked = 0;
  for (const page of pages()) {
    const name = relative(ROOT, page);
    await t.step(name, () => {
      const broken: string[] = [];
      for (const target of links(Deno.readTextFileSync(page))) {
        if (external(target)) continue;
        checked++;
        const wrong = check(page, target);
        if (wrong) broken.push(`${name} → ${target}: ${wrong}`);
      }
      assert.deepEqual(broken, []);
    });
  }

  await t.step("the pages hold links at all", () => {
    assert.ok(checked > 20, `only ${checked} links found: is the link pattern still right?`);
  });
});

Deno.test("docs: the openings of README.md and docs/server.md name every tool; the README leads clients to npx, shows two inspector views and stays within 12,000 bytes", async () => {
  const { STATE_TOOLS } = await import("../src/server/tools.ts");
  const readme = await Deno.readTextFile(join(ROOT, "README.md"));
  const server = await Deno.readTextFile(join(ROOT, "docs", "server.md"));
  const opening = server.slice(0, server.indexOf("\n- "));
  const clients = readme.slice(
    readme.indexOf("## Use it from an MCP client"),
    readme.indexOf("## Use it as a library"),
  );
  for (const tool of STATE_TOOLS) {
    assert.ok(opening.includes(`\`${tool}\``), `docs/server.md's opening leaves out ${tool}`);
    assert.ok(clients.includes(`\`${tool}\``), `README's client section leaves out ${tool}`);
  }
  assert.ok(new TextEncoder().encode(readme).length <= 12_000, "README.md is over 12,000 bytes");
  // npx first, then the bundle and binary, then Deno, then a checkout.
  const at = (what: string) => {
    const i = clients.indexOf(what);
    assert.ok(i >= 0, `README's client section does not mention ${what}`);
    return i;
  };
  const order = [
    '"npx", "args": ["-y", "mcpstate", "serve"]',
    ".mcpb",
    "binary",
    "Deno",
    "checkout",
  ];
  const positions = order.map(at);
  assert.deepEqual([...positions].sort((a, b) => a - b), positions, `order: ${order.join(", ")}`);
  for (const view of ["inspect-list.png", "inspect-timeline.png"]) {
    assert.ok(readme.includes(`](docs/inspect/${view})`), `README does not show ${view}`);
  }
  // The two fresh-machine commands stay as they are.
  assert.match(readme, /^npx --yes deno@[\d.]+ task serve {3}# /m);
  assert.match(readme, /^npx --yes deno@[\d.]+ task test {4}# /m);
});

Deno.test("docs: every docs/…md#anchor the source's JSDoc names resolves", () => {
  const problems: string[] = [];
  const walk = (dir: string): void => {
    for (const e of Deno.readDirSync(dir)) {
      const path = join(dir, e.name);
      if (e.isDirectory) walk(path);
      else if (e.isFile && e.name.endsWith(".ts")) {
        const text = Deno.readTextFileSync(path);
        for (const m of text.matchAll(/\bdocs\/[\w/-]+\.md(?:#[\w-]+)?/g)) {
          const wrong = check(join(ROOT, "README.md"), m[0]);
          if (wrong) problems.push(`${relative(ROOT, path)} → ${m[0]}: ${wrong}`);
        }
      }
    }
  };
  walk(join(ROOT, "src"));
  assert.deepEqual(problems, []);
});

Deno.test("docs: the pages stay readable: README at most 12,000 bytes, benchmarks 30,000, no page of docs/ over 50,000", () => {
  const size = (path: string) => Deno.statSync(join(ROOT, path)).size;
  assert.ok(size("README.md") <= 12_000, `README.md: ${size("README.md")} bytes`);
  assert.ok(size("docs/benchmarks.md") <= 30_000, `benchmarks.md: ${size("docs/benchmarks.md")}`);
  for (const e of Deno.readDirSync(join(ROOT, "docs"))) {
    if (!e.isFile || !e.name.endsWith(".md")) continue;
    assert.ok(size(`docs/${e.name}`) <= 50_000, `docs/${e.name}: ${size(`docs/${e.name}`)} bytes`);
  }
});
