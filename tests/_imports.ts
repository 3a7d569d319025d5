/**
 * Reads the imports of TypeScript files as text: the reader the layer and
 * house tests share. It blanks comments, strings, template literals and
 * regular expressions out of the code (keeping module specifiers), then
 * finds static, side-effect and dynamic imports.
 *
 * @module
 */

import { join } from "node:path";

const KEYWORDS_BEFORE_REGEX = new Set([
  "return",
  "typeof",
  "instanceof",
  "in",
  "of",
  "new",
  "delete",
  "void",
  "throw",
  "case",
  "do",
  "else",
  "yield",
  "await",
]);

/**
 * The code of a TypeScript file with its comments, and the text of its
 * strings, template literals and regular expressions, blanked out — except
 * the strings that name a module (after `from`, `import` or `import(`).
 * Every line break is kept. (JSDoc examples hold `import` lines that are not
 * imports, and so may a string.)
 */
export function stripComments(src: string): string {
  const out: string[] = [];
  const templates: number[] = []; // open `${` of template literals: the `{` depth inside each
  let last = ""; // the last significant character of code
  let word = ""; // the identifier ending at `last`, if any
  let callee = ""; // the identifier before the last `(`
  let i = 0;
  const blank = (s: string) => s.replace(/[^\n]/g, " ");
  const skipTemplate = (from: number): number => {
    // From inside a template literal to past its closing backquote or its next `${`.
    let k = from;
    while (k < src.length) {
      const c = src[k];
      if (c === "\\") k += 2;
      else if (c === "`") return k + 1;
      else if (c === "$" && src[k + 1] === "{") {
        templates.push(0);
        return k + 2;
      } else k++;
    }
    return k;
  };
  while (i < src.length) {
    const c = src[i]!;
    const d = src[i + 1];
    let j: number;
    if (c === "/" && d === "/") {
      j = src.indexOf("\n", i);
      if (j < 0) j = src.length;
      out.push(blank(src.slice(i, j)));
    } else if (c === "/" && d === "*") {
      j = src.indexOf("*/", i + 2);
      j = j < 0 ? src.length : j + 2;
      out.push(blank(src.slice(i, j)));
    } else if (c === '"' || c === "'") {
      j = i + 1;
      while (j < src.length && src[j] !== c && src[j] !== "\n") j += src[j] === "\\" ? 2 : 1;
      j++;
      const names = word === "from" || word === "import" || (last === "(" && callee === "import");
      out.push(names ? src.slice(i, j) : c + blank(src.slice(i + 1, j - 1)) + c);
      [last, word] = [c, ""];
    } else if (c === "`" || (c === "}" && templates.length > 0 && templates.at(-1) === 0)) {
      if (c === "}") templates.pop();
      j = skipTemplate(i + 1);
      out.push(c + blank(src.slice(i + 1, j)));
      [last, word] = ["`", ""];
    } else if (
      c === "/" &&
      (last === "" || "(,=:[!&|?{};+-*%<>~^".includes(last) ||
        (/[\w$]/.test(last) && KEYWORDS_BEFORE_REGEX.has(word)))
    ) {
      // A regular expression literal: up to its closing slash, outside a class.
      j = i + 1;
      let inClass = false;
      while (j < src.length && src[j] !== "\n") {
        const r = src[j];
        if (r === "\\") j++;
        else if (r === "[") inClass = true;
        else if (r === "]") inClass = false;
        else if (r === "/" && !inClass) break;
        j++;
      }
      j++;
      while (j < src.length && /[a-z]/.test(src[j]!)) j++;
      out.push(blank(src.slice(i, j)));
      [last, word] = [")", ""];
    } else if (/[\w$]/.test(c)) {
      j = i;
      while (j < src.length && /[\w$]/.test(src[j]!)) j++;
      word = src.slice(i, j);
      last = word.at(-1)!;
      out.push(word);
    } else {
      j = i + 1;
      if (templates.length > 0 && c === "{") templates[templates.length - 1]!++;
      if (templates.length > 0 && c === "}") templates[templates.length - 1]!--;
      if (c === "(") callee = word;
      if (!/\s/.test(c)) [last, word] = [c, ""];
      out.push(c);
    }
    i = j;
  }
  return out.join("");
}

const STATIC_FROM =
  /(?:^|[\s;])(import|export)\s+(type\s+)?([\w\s{},*$]*?)\s*from\s*(["'])([^"'\n]+)\4/g;
const SIDE_EFFECT = /(?:^|[\s;])import\s*(["'])([^"'\n]+)\1/g;
const DYNAMIC = /(?<![\w$.])import\s*\(\s*(["'])([^"'\n]+)\1\s*[,)]/g;
const DYNAMIC_ANY = /(?<![\w$.])import\s*\(/g;

/**
 * The imports of one file's code (comments stripped).
 *
 * @returns The specifiers, and how many dynamic imports had no literal.
 */
export function importsOf(code: string): {
  specifiers: { specifier: string; typeOnly: boolean; dynamic: boolean }[];
  unreadable: number;
} {
  const specifiers: { specifier: string; typeOnly: boolean; dynamic: boolean }[] = [];
  for (const m of code.matchAll(STATIC_FROM)) {
    specifiers.push({ specifier: m[5]!, typeOnly: m[2] !== undefined, dynamic: false });
  }
  for (const m of code.matchAll(SIDE_EFFECT)) {
    specifiers.push({ specifier: m[2]!, typeOnly: false, dynamic: false });
  }
  let dynamic = 0;
  for (const m of code.matchAll(DYNAMIC)) {
    specifiers.push({ specifier: m[2]!, typeOnly: false, dynamic: true });
    dynamic++;
  }
  return { specifiers, unreadable: [...code.matchAll(DYNAMIC_ANY)].length - dynamic };
}

/** Every source file under `dir`, recursively, sorted. */
export async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...await sourceFiles(path));
    else if (entry.isFile && /\.(ts|tsx|js|mjs)$/.test(entry.name)) out.push(path);
  }
  return out.sort();
}

/**
 * The import cycles of a graph: its strongly connected components of more
 * than one file, and files that import themselves (Tarjan's algorithm).
 *
 * @param next Each file's imports.
 * @param files Every file of the graph.
 * @returns Each cycle's files, sorted.
 */
export function cyclesOf(next: Map<string, string[]>, files: Iterable<string>): string[][] {
  const index = new Map<string, number>(), low = new Map<string, number>();
  const stack: string[] = [], onStack = new Set<string>(), cycles: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (next.get(v) ?? []).includes(v)) cycles.push(component.sort());
  };
  for (const v of files) if (!index.has(v)) visit(v);
  return cycles;
}
