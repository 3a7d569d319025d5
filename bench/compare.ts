/**
 * Runs benchmark files and turns each `group` into a table of mean time,
 * ops/s and the ratio to the group's `baseline: true` bench; prints the
 * tables and writes them into `docs/dev/bench-results.md`, each bench file in its
 * own section between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`, so
 * that the results of other files (and the prose around them) stay as they
 * are.
 *
 * ```sh
 * deno run --allow-all bench/compare.ts                      # every bench/*_bench.ts
 * deno run --allow-all bench/compare.ts --runs=3 bench/sqlite_bench.ts
 * ```
 *
 * Options: `--runs=N` runs `deno bench` N times and keeps each bench's
 * median mean (writes on a shared disk are noisy); `--out=FILE` (default
 * `docs/dev/bench-results.md`); `--print` prints without writing; `--no-check` is
 * passed on to `deno bench`.
 *
 * @module
 */

/** One bench of `deno bench --json`. */
interface BenchJson {
  origin: string;
  group: string | null;
  name: string;
  baseline: boolean;
  results: ({ ok: { n: number; avg: number; p75: number } } | { failed: unknown })[];
}

/** One measured bench, after the runs are combined. */
interface Measured {
  origin: string;
  group: string | null;
  name: string;
  baseline: boolean;
  /** Mean time per iteration in ns (median over runs), or `null` when it failed. */
  avg: number | null;
}

const root = new URL("../", import.meta.url);

function parseArgs(args: string[]) {
  let runs = 1;
  let out = new URL("docs/dev/bench-results.md", root).pathname;
  let print = false;
  const benchFlags: string[] = [];
  const files: string[] = [];
  for (const a of args) {
    if (a.startsWith("--runs=")) runs = Number(a.slice(7));
    else if (a.startsWith("--out=")) out = a.slice(6);
    else if (a === "--print") print = true;
    else if (a === "--no-check") benchFlags.push(a);
    else if (a.startsWith("--")) throw new Error(`Unknown option ${a}.`);
    else files.push(a);
  }
  if (!Number.isInteger(runs) || runs < 1) {
    throw new Error("--runs must be a whole number, 1 or more.");
  }
  return { runs, out, print, benchFlags, files };
}

async function defaultFiles(): Promise<string[]> {
  const dir = new URL("bench/", root);
  const found: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && /_bench\.(ts|js|mts|mjs)$/.test(e.name)) found.push(`bench/${e.name}`);
  }
  return found.sort();
}

/** What `deno bench --json` prints. */
interface BenchReport {
  runtime: string;
  cpu: string;
  benches: BenchJson[];
}

async function runBench(files: string[], flags: string[]): Promise<BenchReport> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bench", "--allow-all", "--unstable-kv", "--json", ...flags, ...files],
    cwd: root.pathname,
    stdout: "piped",
    stderr: "inherit",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success && !text.trim().startsWith("{")) {
    throw new Error(`deno bench failed (exit code ${out.code}).`);
  }
  return JSON.parse(text) as BenchReport;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function combine(runs: BenchJson[][]): Measured[] {
  const byKey = new Map<string, { bench: BenchJson; avgs: number[] }>();
  for (const run of runs) {
    for (const b of run) {
      const key = JSON.stringify([b.origin, b.group, b.name]);
      const entry = byKey.get(key) ?? { bench: b, avgs: [] };
      byKey.set(key, entry);
      const r = b.results[0];
      if (r && "ok" in r) entry.avgs.push(r.ok.avg);
    }
  }
  return [...byKey.values()].map(({ bench, avgs }) => ({
    origin: bench.origin,
    group: bench.group,
    name: bench.name,
    baseline: bench.baseline,
    avg: avgs.length ? median(avgs) : null,
  }));
}

/** Formats ns as the unit `deno bench` would pick. */
export function formatTime(ns: number): string {
  if (ns < 1e3) return `${ns.toFixed(1)} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(1)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(2)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

function formatOps(ns: number): string {
  const ops = 1e9 / ns;
  return ops >= 100
    ? Math.round(ops).toLocaleString("en-US")
    : ops.toLocaleString("en-US", { maximumSignificantDigits: 3 });
}

function escapeCell(s: string): string {
  return s.replaceAll("|", "\\|");
}

/** The markdown tables of one bench file's results. */
function tables(benches: Measured[]): string {
  const groups = new Map<string, Measured[]>();
  for (const b of benches) {
    const g = b.group ?? "(no group)";
    groups.set(g, [...(groups.get(g) ?? []), b]);
  }
  const parts: string[] = [];
  for (const [group, members] of groups) {
    const base = members.find((m) => m.baseline && m.avg !== null);
    parts.push(
      `#### ${group}\n\n| bench | mean | ops/s | × baseline |\n| --- | ---: | ---: | ---: |`,
    );
    for (const m of members) {
      const name = escapeCell(m.name) + (m === base ? " (baseline)" : "");
      if (m.avg === null) {
        parts.push(`| ${name} | failed | | |`);
        continue;
      }
      const ratio = base?.avg ? (m.avg / base.avg).toFixed(2) + "×" : "";
      parts.push(`| ${name} | ${formatTime(m.avg)} | ${formatOps(m.avg)} | ${ratio} |`);
    }
    parts.push("");
  }
  return parts.join("\n");
}

function sectionName(origin: string): string {
  const file = origin.split("/").pop() ?? origin;
  return file.replace(/\.(ts|js|mts|mjs)$/, "");
}

/**
 * Replaces (or appends) the section of `name` in `doc`.
 *
 * @param doc The current document.
 * @param name The section name (the bench file's base name).
 * @param body The new content between the markers.
 * @returns The updated document.
 */
export function replaceSection(doc: string, name: string, body: string): string {
  const open = `<!-- bench:${name} -->`;
  const close = `<!-- /bench:${name} -->`;
  const block = `${open}\n${body.trim()}\n${close}`;
  const start = doc.indexOf(open);
  const end = doc.indexOf(close);
  if (start >= 0 && end > start) return doc.slice(0, start) + block + doc.slice(end + close.length);
  return `${doc.trimEnd()}${doc.trim() ? "\n\n" : ""}${block}\n`;
}

if (import.meta.main) {
  const { runs, out, print, benchFlags, files: given } = parseArgs(Deno.args);
  const files = given.length ? given : await defaultFiles();
  if (files.length === 0) throw new Error("No bench files found.");
  const results: BenchJson[][] = [];
  let meta = { runtime: "", cpu: "" };
  for (let i = 0; i < runs; i++) {
    console.error(`deno bench, run ${i + 1} of ${runs}: ${files.join(" ")}`);
    const report = await runBench(files, benchFlags);
    results.push(report.benches);
    meta = { runtime: report.runtime, cpu: report.cpu };
  }
  const measured = combine(results);
  const byFile = new Map<string, Measured[]>();
  for (const m of measured) {
    const name = sectionName(m.origin);
    byFile.set(name, [...(byFile.get(name) ?? []), m]);
  }
  let doc = "";
  try {
    doc = await Deno.readTextFile(out);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    doc = "# Benchmarks\n";
  }
  const date = new Date().toISOString().slice(0, 10);
  for (const [name, benches] of byFile) {
    const body = `### ${name}\n\n` +
      `Measured ${date} with ${meta.runtime}, ${meta.cpu}, ` +
      `${navigator.hardwareConcurrency} cores; ` +
      `mean time per iteration, ${
        runs > 1 ? `median of ${runs} runs` : "one run"
      } of \`deno bench\`; ratios are to the group's baseline.\n\n` +
      tables(benches);
    console.log(`\n${body}`);
    doc = replaceSection(doc, name, body);
  }
  if (!print) {
    await Deno.writeTextFile(out, doc);
    // Keep the file as `deno fmt` wants it, so that `deno fmt --check` stays green.
    await new Deno.Command(Deno.execPath(), { args: ["fmt", "--quiet", out], cwd: root.pathname })
      .output();
    console.error(`Wrote ${[...byFile.keys()].join(", ")} to ${out}.`);
  }
}
