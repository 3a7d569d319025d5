/**
 * Builds the npm package `mcpstate` into `dist/npm/`: the package a client
 * starts with `npx -y mcpstate serve`, on a machine that has only Node.js and
 * npm.
 *
 * - `lib/`: `cli.ts` bundled by `deno bundle` (every npm and local module
 *   inlined; the server, the inspector and each backend in chunks of their
 *   own, loaded when a command needs them, so `--version` or `list` start
 *   without parsing the server).
 * - `bin/mcpstate.cjs`: a small Node script that runs `lib/cli.js` on the
 *   Deno binary of the pinned `deno` dependency with exactly the program's
 *   permission flags (the one list in `src/cli/permissions.ts`), stdio
 *   inherited, exit code and signals passed through.
 * - `package.json` (the version of deno.json, `mcpName` for the MCP
 *   Registry), `README.md`, `LICENSE`.
 *
 * ```sh
 * deno task npm                      # into dist/npm/
 * deno run -A scripts/npm.ts --out /tmp/npm
 * (cd dist/npm && npm pack)          # mcpstate-<version>.tgz
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { join, resolve } from "node:path";
import { DENO_FLAGS } from "../src/cli/permissions.ts";
import { VERSION } from "../src/version.ts";
import denoJson from "../deno.json" with { type: "json" };

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The npm package's name. */
export const NPM_NAME = "mcpstate";

/** The server's name in the MCP Registry (`server.json`), also `mcpName` in package.json. */
export const MCP_NAME = "io.github.mcpstate/mcpstate";

/** The `deno` npm package the npm package runs on: the Deno the project pins. */
export const DENO_NPM_VERSION = "2.9.6";

/** The project's source repository. */
export const REPOSITORY = "https://github.com/mcpstate/mcpstate";

/** One line about the program, for package.json, server.json and the bundle manifest. */
export const DESCRIPTION =
  "Durable, user-keyed state for stateless MCP servers: handles, versions, TTLs, conflicts.";

/** The marker in `scripts/npm_bin.cjs` that the flags replace. */
const FLAGS_MARKER = "/* DENO_FLAGS */ []";

/**
 * The package.json of the npm package.
 *
 * @returns The manifest, ready for `JSON.stringify`.
 */
export function packageJson(): Record<string, unknown> {
  return {
    name: NPM_NAME,
    version: VERSION,
    description: DESCRIPTION,
    mcpName: MCP_NAME,
    license: denoJson.license,
    repository: { type: "git", url: `git+${REPOSITORY}.git` },
    homepage: `${REPOSITORY}#readme`,
    bugs: { url: `${REPOSITORY}/issues` },
    keywords: ["mcp", "model-context-protocol", "mcp-server", "state", "handles"],
    type: "module",
    bin: { mcpstate: "bin/mcpstate.cjs" },
    files: ["bin/", "lib/", "README.md", "LICENSE"],
    engines: { node: ">=20" },
    // The platforms the `deno` package ships a binary for.
    os: ["darwin", "linux", "win32"],
    cpu: ["x64", "arm64"],
    dependencies: { deno: DENO_NPM_VERSION },
  };
}

/**
 * The bin script with the program's permission flags written in.
 *
 * @returns The text of `bin/mcpstate.cjs`.
 */
export async function binScript(): Promise<string> {
  const template = await Deno.readTextFile(join(ROOT, "scripts", "npm_bin.cjs"));
  if (!template.includes(FLAGS_MARKER)) {
    throw new Error(`scripts/npm_bin.cjs lost its ${FLAGS_MARKER} marker: put it back.`);
  }
  return template.replace(FLAGS_MARKER, JSON.stringify(DENO_FLAGS));
}

/**
 * Bundles `cli.ts` into `outDir` (an entry `cli.js` and its chunks).
 *
 * @param outDir The folder to write.
 */
export async function bundle(outDir: string): Promise<void> {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--platform=deno",
      "--packages=bundle",
      "--code-splitting",
      "--outdir",
      outDir,
      join(ROOT, "cli.ts"),
    ],
    cwd: ROOT,
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  if (code !== 0) {
    throw new Error(
      `deno bundle cli.ts failed (exit ${code}):\n${new TextDecoder().decode(stderr)}`,
    );
  }
}

/**
 * Builds the whole package into `outDir` (emptied first).
 *
 * @param outDir The package folder, e.g. `dist/npm`.
 */
export async function build(outDir: string): Promise<void> {
  await Deno.remove(outDir, { recursive: true }).catch((e) => {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  });
  await Deno.mkdir(join(outDir, "bin"), { recursive: true });
  await bundle(join(outDir, "lib"));
  await Deno.writeTextFile(join(outDir, "bin", "mcpstate.cjs"), await binScript(), {
    mode: 0o755,
  });
  await Deno.writeTextFile(
    join(outDir, "package.json"),
    JSON.stringify(packageJson(), null, 2) + "\n",
  );
  for (const file of ["README.md", "LICENSE"]) {
    await Deno.copyFile(join(ROOT, file), join(outDir, file));
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { out: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    console.log("Usage: deno task npm [--out DIR]\n\nBuilds the npm package into DIR (dist/npm).");
    Deno.exit(0);
  }
  const out = resolve(values.out ?? join(ROOT, "dist", "npm"));
  try {
    await build(out);
    console.error(`built ${out} (${NPM_NAME} ${VERSION}); npm pack it from there`);
  } catch (e) {
    console.error(`npm: ${e instanceof Error ? e.message : String(e)}`);
    Deno.exit(1);
  }
}
