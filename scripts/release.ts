/**
 * The release's MCP Bundles and its `server.json`: packs one `.mcpb` per OS
 * from the compiled binaries (`deno task compile`), each with
 * `mcpb/manifest.json` narrowed to that OS, and writes the `server.json` the
 * release publishes to the MCP Registry: the checked-in one plus an `mcpb`
 * package per bundle, with its download URL on the GitHub release and its
 * `fileSha256`.
 *
 * - `mcpstate-linux.mcpb`, `mcpstate-darwin.mcpb`: both CPUs' binaries
 *   (`server/mcpstate-x86_64`, `server/mcpstate-aarch64`) and
 *   `mcpb/mcpstate.sh` as `server/mcpstate`, which runs the one for the
 *   machine's CPU.
 * - `mcpstate-win32.mcpb`: `server/mcpstate.exe`.
 *
 * The binaries are read from `--binaries DIR`, one folder per target triple
 * holding the binary: `DIR/x86_64-unknown-linux-gnu/mcpstate`, …,
 * `DIR/x86_64-pc-windows-msvc/mcpstate.exe` (the release workflow unpacks
 * the archives of `deno task compile` there).
 *
 * ```sh
 * deno task release --binaries dist/bin --out dist
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { join, resolve } from "node:path";
import { createHash } from "node:crypto";
import { type Entry, zip } from "./compile.ts";
import { REPOSITORY } from "./npm.ts";
import { VERSION } from "../src/version.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** One bundle: an OS as MCPB names it, and the target triple per CPU. */
export interface Bundle {
  /** `darwin`, `linux` or `win32`. */
  os: "darwin" | "linux" | "win32";
  /** CPU (`x86_64`, `aarch64`) to target triple. */
  targets: Readonly<Record<string, string>>;
}

/** The bundles a release ships. */
export const BUNDLES: readonly Bundle[] = Object.freeze([
  {
    os: "linux",
    targets: { x86_64: "x86_64-unknown-linux-gnu", aarch64: "aarch64-unknown-linux-gnu" },
  },
  { os: "darwin", targets: { x86_64: "x86_64-apple-darwin", aarch64: "aarch64-apple-darwin" } },
  { os: "win32", targets: { x86_64: "x86_64-pc-windows-msvc" } },
]);

/** A packed bundle. */
export interface PackedBundle {
  /** Its OS. */
  os: Bundle["os"];
  /** Path of the `.mcpb` file. */
  path: string;
  /** File name, e.g. `mcpstate-linux.mcpb`. */
  file: string;
  /** SHA-256 of the file, lowercase hex. */
  sha256: string;
}

/**
 * The file name of an OS's bundle.
 *
 * @param os The OS.
 * @returns e.g. `mcpstate-darwin.mcpb`.
 */
export function bundleName(os: Bundle["os"]): string {
  return `mcpstate-${os}.mcpb`;
}

/**
 * Where a release file is downloaded from.
 *
 * @param version The release's version (without `v`).
 * @param file The asset's file name.
 * @returns The GitHub release download URL.
 */
export function releaseUrl(version: string, file: string): string {
  return `${REPOSITORY}/releases/download/v${version}/${file}`;
}

/**
 * `mcpb/manifest.json` narrowed to one OS: only that platform, and on
 * Windows the `.exe` as entry point.
 *
 * @param manifest The checked-in manifest.
 * @param os The bundle's OS.
 * @returns A new manifest.
 */
export function manifestFor(
  manifest: Record<string, unknown>,
  os: Bundle["os"],
): Record<string, unknown> {
  const m = structuredClone(manifest) as {
    server: {
      entry_point: string;
      mcp_config: { command: string; platform_overrides?: Record<string, { command?: string }> };
    };
    compatibility?: Record<string, unknown>;
  } & Record<string, unknown>;
  const override = m.server.mcp_config.platform_overrides?.[os]?.command;
  if (override) {
    m.server.mcp_config.command = override;
    m.server.entry_point = override.replace("${__dirname}/", "");
  }
  delete m.server.mcp_config.platform_overrides;
  m.compatibility = { ...m.compatibility, platforms: [os] };
  return m;
}

/**
 * Packs one OS's bundle.
 *
 * @param bundle The OS and its targets.
 * @param binaries The folder with one folder per target triple.
 * @param manifest The checked-in manifest.
 * @param mtime Modification time of the entries, epoch seconds.
 * @returns The `.mcpb` (zip) bytes.
 */
export async function packBundle(
  bundle: Bundle,
  binaries: string,
  manifest: Record<string, unknown>,
  mtime: number,
): Promise<Uint8Array> {
  const m = manifestFor(manifest, bundle.os);
  const text = (s: string) => new TextEncoder().encode(s);
  const entries: Entry[] = [
    { name: "manifest.json", data: text(JSON.stringify(m, null, 2) + "\n"), mode: 0o644 },
    { name: "README.md", data: await Deno.readFile(join(ROOT, "README.md")), mode: 0o644 },
    { name: "LICENSE", data: await Deno.readFile(join(ROOT, "LICENSE")), mode: 0o644 },
  ];
  if (bundle.os === "win32") {
    const target = bundle.targets.x86_64!;
    entries.push({
      name: "server/mcpstate.exe",
      data: await readBinary(join(binaries, target, "mcpstate.exe")),
      mode: 0o755,
    });
  } else {
    entries.push({
      name: "server/mcpstate",
      data: await Deno.readFile(join(ROOT, "mcpb", "mcpstate.sh")),
      mode: 0o755,
    });
    for (const [cpu, target] of Object.entries(bundle.targets)) {
      entries.push({
        name: `server/mcpstate-${cpu}`,
        data: await readBinary(join(binaries, target, "mcpstate")),
        mode: 0o755,
      });
    }
  }
  return zip(entries, mtime);
}

async function readBinary(path: string): Promise<Uint8Array> {
  try {
    return await Deno.readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new Error(`${path} is missing: unpack the binaries of deno task compile there.`);
    }
    throw e;
  }
}

/**
 * The `server.json` a release publishes: the checked-in one, every package
 * at `version`, and one `mcpb` package per bundle with its hash.
 *
 * @param server The checked-in `server.json`.
 * @param bundles The packed bundles.
 * @param version The release's version.
 * @returns A new document.
 */
export function releaseServerJson(
  server: Record<string, unknown>,
  bundles: readonly PackedBundle[],
  version: string,
): Record<string, unknown> {
  const packages: Record<string, unknown>[] = (server.packages as Record<string, unknown>[] ?? [])
    .filter((p) => p.registryType !== "mcpb")
    .map((p) => ({ ...p, version }));
  for (const b of bundles) {
    packages.push({
      registryType: "mcpb",
      identifier: releaseUrl(version, b.file),
      version,
      fileSha256: b.sha256,
      transport: { type: "stdio" },
    });
  }
  return { ...server, version, packages };
}

/**
 * Packs every bundle into `outDir` and writes `outDir/server.json`.
 *
 * @param binaries The folder with one folder per target triple.
 * @param outDir Where the bundles and server.json go.
 * @returns The packed bundles.
 */
export async function release(binaries: string, outDir: string): Promise<PackedBundle[]> {
  const manifest = JSON.parse(await Deno.readTextFile(join(ROOT, "mcpb", "manifest.json")));
  const server = JSON.parse(await Deno.readTextFile(join(ROOT, "server.json")));
  for (
    const [file, v] of [["mcpb/manifest.json", manifest.version], ["server.json", server.version]]
  ) {
    if (v !== VERSION) {
      throw new Error(`${file} says version ${v}, deno.json ${VERSION}: make them equal.`);
    }
  }
  const epoch = Deno.env.get("SOURCE_DATE_EPOCH");
  const mtime = epoch && /^\d+$/.test(epoch) ? Number(epoch) : Math.floor(Date.now() / 1000);
  await Deno.mkdir(outDir, { recursive: true });
  const packed: PackedBundle[] = [];
  for (const bundle of BUNDLES) {
    const bytes = await packBundle(bundle, binaries, manifest, mtime);
    const file = bundleName(bundle.os);
    const path = join(outDir, file);
    await Deno.writeFile(path, bytes);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    packed.push({ os: bundle.os, path, file, sha256 });
    console.error(`packed ${path} (${sha256})`);
  }
  const doc = releaseServerJson(server, packed, VERSION);
  await Deno.writeTextFile(join(outDir, "server.json"), JSON.stringify(doc, null, 2) + "\n");
  return packed;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      binaries: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help || !values.binaries) {
    console.log(
      "Usage: deno task release --binaries DIR [--out DIR]\n\n" +
        "Packs mcpstate-{linux,darwin,win32}.mcpb from DIR/<target>/mcpstate[.exe]\n" +
        "and writes the release's server.json, into --out (default dist/).",
    );
    Deno.exit(values.help ? 0 : 2);
  }
  try {
    await release(resolve(values.binaries), resolve(values.out ?? join(ROOT, "dist")));
  } catch (e) {
    console.error(`release: ${e instanceof Error ? e.message : String(e)}`);
    Deno.exit(1);
  }
}
