/**
 * The README and the pages under `docs/` link to each other and to their
 * sections: every relative link must name a file that exists, and every
 * `#anchor` a heading of that file (GitHub's slugs).
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The Markdown pages: the README and every page under `docs/`. */
function pages(): string[] {
  const docs = [...Deno.readDirSync(join(ROOT, "docs"))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => join(ROOT, "docs", e.name));
  return [join(ROOT, "README.md"), ...docs.sort()];
}

/** The text outside fenced code blocks and inline code spans. */
function prose(markdown: string): string {
  return markdown.replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(
    /`[^`\n]*`/g,
    "",
  );
}

/** GitHub's anchors of a page's headings (`-1`, `-2` … for repeats). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const text = markdown.replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "");
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = heading!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

Deno.test("every relative link and anchor in README.md and docs/*.md resolves", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const page of pages()) {
    const markdown = Deno.readTextFileSync(page);
    for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto: …
      checked++;
      const [path = "", anchor] = target!.split("#");
      const file = path === "" ? page : join(dirname(page), decodeURIComponent(path));
      const where = `${relative(ROOT, page)} → ${target}`;
      let text: string;
      try {
        text = Deno.readTextFileSync(file);
      } catch {
        broken.push(`${where}: no such file`);
        continue;
      }
      if (anchor !== undefined && !anchors(text).has(anchor)) {
        broken.push(`${where}: no such heading`);
      }
    }
  }
  assert.ok(checked > 20, `only ${checked} links found: is the link pattern still right?`);
  assert.deepEqual(broken, []);
});
