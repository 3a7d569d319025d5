/**
 * Builds the `mcpstate` binaries for every supported OS from one machine
 * (`deno compile --target …`), each with exactly the permissions the program
 * needs (the one list in `src/cli/permissions.ts`) and Deno KV enabled, and
 * packs each with README.md and LICENSE into `dist/`:
 *
 * - `mcpstate-x86_64-unknown-linux-gnu.tar.gz`
 * - `mcpstate-aarch64-unknown-linux-gnu.tar.gz`
 * - `mcpstate-x86_64-apple-darwin.tar.gz`
 * - `mcpstate-aarch64-apple-darwin.tar.gz`
 * - `mcpstate-x86_64-pc-windows-msvc.zip`
 * - `SHA256SUMS`
 *
 * The names carry no version, so that "the latest release's
 * `mcpstate-<target>.tar.gz`" is a stable download link; `mcpstate
 * --version` tells the version.
 *
 * ```sh
 * deno task compile                                   # all five
 * deno run -A scripts/compile.ts --target x86_64-unknown-linux-gnu --out /tmp/dist
 * ```
 *
 * `deno compile` downloads the runtime it embeds (`denort`) for each target
 * the first time; that needs internet access.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { join, resolve } from "node:path";
import { Buffer } from "node:buffer";
import zlib from "node:zlib";
import { createHash } from "node:crypto";
import { DENO_FLAGS } from "../src/cli/permissions.ts";
import { VERSION } from "../src/version.ts";

/** A build target: a `deno compile --target` triple and its archive format. */
export interface Target {
  /** The target triple. */
  target: string;
  /** `tar.gz` for Unix, `zip` for Windows. */
  archive: "tar.gz" | "zip";
}

/** Every target a release ships. */
export const TARGETS: readonly Target[] = Object.freeze([
  { target: "x86_64-unknown-linux-gnu", archive: "tar.gz" },
  { target: "aarch64-unknown-linux-gnu", archive: "tar.gz" },
  { target: "x86_64-apple-darwin", archive: "tar.gz" },
  { target: "aarch64-apple-darwin", archive: "tar.gz" },
  { target: "x86_64-pc-windows-msvc", archive: "zip" },
]);

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** One file inside an archive. */
export interface Entry {
  /** Path inside the archive. */
  name: string;
  /** Contents. */
  data: Uint8Array;
  /** Unix mode, e.g. `0o755`. */
  mode: number;
}

/**
 * The archive name of a target.
 *
 * @param t The target.
 * @returns e.g. `mcpstate-x86_64-apple-darwin.tar.gz`.
 */
export function archiveName(t: Target): string {
  return `mcpstate-${t.target}.${t.archive}`;
}

/**
 * Compiles `cli.ts` for one target.
 *
 * @param t The target.
 * @param output Path of the binary to write.
 */
export async function compile(t: Target, output: string): Promise<void> {
  const args = [
    "compile",
    "--target",
    t.target,
    "--output",
    output,
    // Only the npm packages the program imports (the lockfile also holds
    // test-only ones such as the MCP client).
    "--exclude-unused-npm",
    ...DENO_FLAGS,
    join(ROOT, "cli.ts"),
  ];
  const { code } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) throw new Error(`deno compile --target ${t.target} failed (exit ${code}).`);
}

/**
 * Packs entries into a gzip-compressed ustar archive.
 *
 * @param entries The files.
 * @param mtime Modification time, epoch seconds.
 * @returns The `.tar.gz` bytes.
 */
export function tarGz(entries: Entry[], mtime: number): Uint8Array {
  const blocks: Uint8Array[] = [];
  const enc = new TextEncoder();
  for (const e of entries) {
    const h = new Uint8Array(512);
    const put = (text: string, off: number, len: number) =>
      h.set(enc.encode(text).subarray(0, len), off);
    const field = (n: number, off: number, len: number) =>
      put(n.toString(8).padStart(len - 1, "0") + "\0", off, len);
    put(e.name, 0, 100);
    field(e.mode, 100, 8);
    field(0, 108, 8); // uid
    field(0, 116, 8); // gid
    field(e.data.length, 124, 12);
    field(Math.floor(mtime), 136, 12);
    put("        ", 148, 8); // checksum placeholder
    put("0", 156, 1); // regular file
    put("ustar\0", 257, 6);
    put("00", 263, 2);
    put("root", 265, 32);
    put("root", 297, 32);
    const sum = h.reduce((a, b) => a + b, 0);
    put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
    blocks.push(h, e.data);
    const pad = (512 - (e.data.length % 512)) % 512;
    if (pad) blocks.push(new Uint8Array(pad));
  }
  blocks.push(new Uint8Array(1024));
  return new Uint8Array(zlib.gzipSync(Buffer.concat(blocks), { level: 6 }));
}

/**
 * Packs entries into a zip archive (deflate; Unix modes kept).
 *
 * @param entries The files.
 * @param mtime Modification time, epoch seconds.
 * @returns The `.zip` bytes.
 */
export function zip(entries: Entry[], mtime: number): Uint8Array {
  const d = new Date(mtime * 1000);
  const dosTime = (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) |
    Math.floor(d.getUTCSeconds() / 2);
  const dosDate = ((Math.max(1980, d.getUTCFullYear()) - 1980) << 9) |
    ((d.getUTCMonth() + 1) << 5) |
    d.getUTCDate();
  const locals: Uint8Array[] = [];
  const centrals: Uint8Array[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, "utf8");
    const data = zlib.deflateRawSync(e.data, { level: 6 });
    const crc = zlib.crc32(e.data) >>> 0;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt16LE(dosTime, 10);
    local.writeUInt16LE(dosDate, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(e.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4); // made by Unix, spec 2.0
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt16LE(dosTime, 12);
    central.writeUInt16LE(dosDate, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(e.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(((0o100000 | e.mode) << 16) >>> 0, 38); // external attributes
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    centrals.push(central, name);
    offset += local.length + name.length + data.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return new Uint8Array(Buffer.concat([...locals, cd, end]));
}

/**
 * Builds and packs the given targets into `outDir`, and writes `SHA256SUMS`.
 *
 * @param targets The targets.
 * @param outDir Where the archives go.
 * @returns The archive paths.
 */
export async function build(targets: readonly Target[], outDir: string): Promise<string[]> {
  const readme = await readRequired(join(ROOT, "README.md"));
  const license = await readRequired(join(ROOT, "LICENSE"));
  const epoch = Deno.env.get("SOURCE_DATE_EPOCH");
  const mtime = epoch && /^\d+$/.test(epoch) ? Number(epoch) : Math.floor(Date.now() / 1000);
  await Deno.mkdir(outDir, { recursive: true });
  const work = await Deno.makeTempDir({ prefix: "mcpstate-compile-" });
  const written: string[] = [];
  try {
    for (const t of targets) {
      const exe = t.target.includes("windows") ? "mcpstate.exe" : "mcpstate";
      const bin = join(work, t.target, exe);
      await compile(t, bin);
      const entries: Entry[] = [
        { name: exe, data: await Deno.readFile(bin), mode: 0o755 },
        { name: "README.md", data: readme, mode: 0o644 },
        { name: "LICENSE", data: license, mode: 0o644 },
      ];
      const path = join(outDir, archiveName(t));
      await Deno.writeFile(path, t.archive === "zip" ? zip(entries, mtime) : tarGz(entries, mtime));
      written.push(path);
      console.error(`packed ${path} (mcpstate ${VERSION})`);
    }
    const sums = await Promise.all(written.map(async (p) => {
      const hash = createHash("sha256").update(await Deno.readFile(p)).digest("hex");
      return `${hash}  ${p.slice(outDir.length + 1)}\n`;
    }));
    await Deno.writeTextFile(join(outDir, "SHA256SUMS"), sums.join(""));
    return written;
  } finally {
    await Deno.remove(work, { recursive: true });
  }
}

async function readRequired(path: string): Promise<Uint8Array> {
  try {
    return await Deno.readFile(path);
  } catch {
    throw new Error(`${path} is missing: every archive ships it. Add it and run again.`);
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      target: { type: "string", multiple: true },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      `Usage: deno task compile [--target TRIPLE]... [--out DIR]\n\nTargets: ${
        TARGETS.map((t) => t.target).join(", ")
      }\nDefault: all of them, into dist/.`,
    );
    Deno.exit(0);
  }
  const wanted = values.target ?? TARGETS.map((t) => t.target);
  const targets = wanted.map((w) => {
    const t = TARGETS.find((x) => x.target === w);
    if (!t) {
      console.error(`Unknown target ${w}. Known: ${TARGETS.map((x) => x.target).join(", ")}.`);
      Deno.exit(2);
    }
    return t;
  });
  try {
    await build(targets, resolve(values.out ?? join(ROOT, "dist")));
  } catch (e) {
    console.error(`compile: ${e instanceof Error ? e.message : String(e)}`);
    Deno.exit(1);
  }
}
