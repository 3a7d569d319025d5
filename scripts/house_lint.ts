/**
 * The house's size rules as a `deno lint` plugin, so `deno lint` (and with it
 * `deno task ok`) refuses a change that lets the code grow back into one big
 * file or function. `tests/house_test.ts` runs the same rules over every file
 * of `src/` and names each offender.
 *
 * The rules apply to files under `src/` only, and count lines of code: lines
 * that hold something besides white space and comments.
 *
 * - `house/file-size`: a file holds at most {@link MAX_FILE_LINES} lines.
 * - `house/function-size`: a function, method or closure holds at most
 *   {@link MAX_FUNCTION_LOC} lines of code.
 * - `house/facade-size`: the body of `HandleStore` holds at most
 *   {@link MAX_FACADE_LOC} lines of code: it delegates, the feature modules
 *   hold the rules.
 * - `house/entry-size`: a backend's entry file (`src/backends/<engine>.ts`)
 *   holds at most {@link MAX_ENTRY_LOC} lines of code: it re-exports what
 *   its folder holds.
 *
 * ```sh
 * deno lint src/
 * ```
 *
 * @module
 */

/** The most lines a file under `src/` may have (all lines, blank and comment included). */
export const MAX_FILE_LINES = 800;
/** The most lines of code of a function, method or closure under `src/`. */
export const MAX_FUNCTION_LOC = 120;
/** The most lines of code of `HandleStore`'s class body. */
export const MAX_FACADE_LOC = 500;
/** The most lines of code of a backend's entry file. */
export const MAX_ENTRY_LOC = 60;

/** Whether the rules apply to a file: those under `src/`. */
function inSrc(filename: string): boolean {
  return /(^|[\\/])src[\\/]/.test(filename);
}

/**
 * For each line of a file (0-based), whether it holds code: something
 * besides white space once every comment is blanked out.
 */
function codeLines(source: Deno.lint.SourceCode): boolean[] {
  const chars = source.text.split("");
  for (const c of source.getAllComments()) {
    for (let i = c.range[0]; i < c.range[1]; i++) if (chars[i] !== "\n") chars[i] = " ";
  }
  return chars.join("").split("\n").map((line) => line.trim() !== "");
}

/** A counter of lines of code between two offsets of one file, made once per file. */
function locCounter(source: Deno.lint.SourceCode): (range: Deno.lint.Range) => number {
  const text = source.text;
  const code = codeLines(source);
  // The line of every offset: the number of line breaks before it.
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") starts.push(i + 1);
  const lineOf = (offset: number): number => {
    let lo = 0, hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  return ([from, to]) => {
    let n = 0;
    for (let line = lineOf(from), last = lineOf(Math.max(from, to - 1)); line <= last; line++) {
      if (code[line]) n++;
    }
    return n;
  };
}

const functionSize: Deno.lint.Rule = {
  create(ctx) {
    if (!inSrc(ctx.filename)) return {};
    const loc = locCounter(ctx.sourceCode);
    const check = (
      node:
        | Deno.lint.FunctionDeclaration
        | Deno.lint.FunctionExpression
        | Deno.lint.ArrowFunctionExpression,
    ): void => {
      const n = loc(node.range);
      if (n > MAX_FUNCTION_LOC) {
        ctx.report({
          node,
          message: `This function has ${n} lines of code; the house allows ${MAX_FUNCTION_LOC}.`,
          hint: "Split it into named functions that each hold one step.",
        });
      }
    };
    return {
      FunctionDeclaration: check,
      FunctionExpression: check,
      ArrowFunctionExpression: check,
    };
  },
};

const fileSize: Deno.lint.Rule = {
  create(ctx) {
    if (!inSrc(ctx.filename)) return {};
    return {
      Program(node) {
        const lines = ctx.sourceCode.text.replace(/\n$/, "").split("\n").length;
        if (lines > MAX_FILE_LINES) {
          ctx.report({
            node,
            range: [0, 0],
            message: `This file has ${lines} lines; the house allows ${MAX_FILE_LINES}.`,
            hint: "Move one concern into a module of its own.",
          });
        }
      },
    };
  },
};

const facadeSize: Deno.lint.Rule = {
  create(ctx) {
    if (!inSrc(ctx.filename)) return {};
    const loc = locCounter(ctx.sourceCode);
    return {
      ClassDeclaration(node) {
        if (node.id?.name !== "HandleStore") return;
        // The body without its braces.
        const n = loc(node.body.range) - 2;
        if (n > MAX_FACADE_LOC) {
          ctx.report({
            node: node.id,
            message:
              `HandleStore's body has ${n} lines of code; the house allows ${MAX_FACADE_LOC}.`,
            hint: "Move the rule into a feature module under src/store/ and delegate to it.",
          });
        }
      },
    };
  },
};

const entrySize: Deno.lint.Rule = {
  create(ctx) {
    if (!/(^|[\\/])src[\\/]backends[\\/][a-z]+\.ts$/.test(ctx.filename)) return {};
    const loc = locCounter(ctx.sourceCode);
    return {
      Program(node) {
        const n = loc([0, ctx.sourceCode.text.length]);
        if (n > MAX_ENTRY_LOC) {
          ctx.report({
            node,
            range: [0, 0],
            message:
              `This backend entry has ${n} lines of code; the house allows ${MAX_ENTRY_LOC}.`,
            hint: "Keep the engine in its folder; the entry file only re-exports.",
          });
        }
      },
    };
  },
};

/** The plugin: `deno.json` names this file under `lint.plugins`. */
const plugin: Deno.lint.Plugin = {
  name: "house",
  rules: {
    "file-size": fileSize,
    "function-size": functionSize,
    "facade-size": facadeSize,
    "entry-size": entrySize,
  },
};
export default plugin;
