/**
 * Listed the way MCP users find servers: `server.json` (the MCP Registry)
 * against the registry schema's rules, `mcpb/manifest.json` through `mcpb
 * validate` (the pinned `@anthropic-ai/mcpb`), and the release's bundles
 * and `server.json` built by `scripts/release.ts` from stand-in binaries
 * (`deno compile` cannot fetch its runtime here).
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { isVersionRange, serverJsonProblems } from "./_registry_rules.ts";
import { DESCRIPTION, MCP_NAME, NPM_NAME, packageJson } from "../scripts/npm.ts";
import { bundleName, BUNDLES, release, releaseUrl } from "../scripts/release.ts";
import { VERSION } from "../src/version.ts";
import denoJson from "../deno.json" with { type: "json" };

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const readJson = async (path: string) => JSON.parse(await Deno.readTextFile(path));

/** Runs the pinned `mcpb` CLI (deno.json's `@anthropic-ai/mcpb`) under Deno. */
async function mcpb(...args: string[]) {
  const spec = (denoJson.imports as Record<string, string>)["@anthropic-ai/mcpb"];
  assert.match(spec ?? "", /^npm:@anthropic-ai\/mcpb@\d+\.\d+\.\d+$/, "mcpb is pinned");
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", spec!, ...args],
    cwd: ROOT,
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, output: text(out.stdout) + text(out.stderr) };
}

Deno.test("the registry rules reject what the schema rejects", () => {
  const good = {
    name: "io.github.user/weather",
    description: "Weather",
    version: "1.0.2",
    packages: [{
      registryType: "npm",
      identifier: "weather",
      version: "1.0.2",
      transport: { type: "stdio" },
    }],
  };
  assert.deepEqual(serverJsonProblems(good), []);
  const bad = (patch: Record<string, unknown>) => serverJsonProblems({ ...good, ...patch });
  const pkg = (patch: Record<string, unknown>) => ({
    packages: [{ ...good.packages[0], ...patch }],
  });
  assert.notDeepEqual(bad({ name: "no-slash" }), []);
  assert.notDeepEqual(bad({ name: undefined }), []);
  assert.notDeepEqual(bad({ description: "x".repeat(101) }), []);
  assert.deepEqual(bad({ description: "x".repeat(100) }), []);
  assert.notDeepEqual(bad({ version: "^1.0.0" }), []);
  assert.notDeepEqual(bad(pkg({ version: "latest" })), []);
  assert.notDeepEqual(bad(pkg({ version: "1.x" })), []);
  assert.notDeepEqual(bad(pkg({ transport: undefined })), []);
  assert.notDeepEqual(bad(pkg({ extra: true })), []);
  assert.notDeepEqual(bad(pkg({ registryType: "jsr" })), []);
  assert.notDeepEqual(bad(pkg({ registryBaseUrl: "https://npm.example.com" })), []);
  assert.notDeepEqual(bad(pkg({ packageArguments: [{ type: "positional" }] })), []);
  assert.notDeepEqual(bad(pkg({ environmentVariables: [{ description: "no name" }] })), []);
  const mcpbPackage = {
    registryType: "mcpb",
    identifier: "https://github.com/user/weather/releases/download/v1.0.2/weather.mcpb",
    version: "1.0.2",
    transport: { type: "stdio" },
  };
  assert.notDeepEqual(serverJsonProblems({ ...good, packages: [mcpbPackage] }), []);
  assert.deepEqual(
    serverJsonProblems({ ...good, packages: [{ ...mcpbPackage, fileSha256: "a".repeat(64) }] }),
    [],
  );
  assert.notDeepEqual(
    serverJsonProblems({ ...good, packages: [{ ...mcpbPackage, fileSha256: "A".repeat(64) }] }),
    [],
  );
  for (const v of ["1.0.2", "2.1.0-alpha", "0.4.0"]) assert.equal(isVersionRange(v), false, v);
  for (const v of ["^1.2.3", "~1.2.3", ">=1.2.3", "1.x", "1.*", "latest", "1 - 2"]) {
    assert.equal(isVersionRange(v), true, v);
  }
});

Deno.test("server.json: valid for the registry, the version of deno.json, the npm package on npx", async () => {
  const server = await readJson(join(ROOT, "server.json"));
  assert.deepEqual(serverJsonProblems(server), []);
  assert.equal(server.name, MCP_NAME);
  assert.equal(server.version, VERSION);
  assert.equal(server.description, DESCRIPTION);
  const npm = server.packages.filter((p: { registryType: string }) => p.registryType === "npm");
  assert.equal(npm.length, 1);
  assert.equal(npm[0].identifier, NPM_NAME);
  assert.equal(npm[0].version, VERSION);
  assert.equal(npm[0].runtimeHint, "npx");
  assert.deepEqual(npm[0].transport, { type: "stdio" });
  assert.deepEqual(npm[0].packageArguments.map((a: { value: string }) => a.value), ["serve"]);
  assert.deepEqual(
    npm[0].environmentVariables.map((e: { name: string }) => e.name),
    ["MCPSTATE_BACKEND", "MCPSTATE_USER", "MCPSTATE_WRITER"],
  );
  // The npm package proves ownership with mcpName, which must be this name.
  assert.equal(packageJson().mcpName, server.name);
  assert.equal(packageJson().version, server.version);
});

Deno.test("mcpb/manifest.json: mcpb validate accepts it; binary, the version, backend_url and writer", async () => {
  const path = join(ROOT, "mcpb", "manifest.json");
  const m = await readJson(path);
  assert.equal(m.version, VERSION);
  assert.equal(m.name, NPM_NAME);
  assert.equal(m.description, DESCRIPTION);
  assert.equal(m.server.type, "binary");
  assert.deepEqual(m.server.mcp_config.args, ["serve"]);
  assert.deepEqual(Object.keys(m.user_config).sort(), ["backend_url", "writer"]);
  assert.equal(m.server.mcp_config.env.MCPSTATE_BACKEND, "${user_config.backend_url}");
  assert.equal(m.server.mcp_config.env.MCPSTATE_WRITER, "${user_config.writer}");
  assert.deepEqual(m.compatibility.platforms.sort(), ["darwin", "linux", "win32"]);
  const r = await mcpb("validate", path);
  assert.equal(r.code, 0, r.output);
  assert.match(r.output, /validation passes/i);
});

Deno.test("release: one .mcpb per OS from the binaries, and the server.json it publishes", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "mcpstate-release-" });
  try {
    // Stand-in binaries that say which target they are.
    const binaries = join(tmp, "bin");
    for (const b of BUNDLES) {
      for (const target of Object.values(b.targets)) {
        await Deno.mkdir(join(binaries, target), { recursive: true });
        const exe = target.includes("windows") ? "mcpstate.exe" : "mcpstate";
        await Deno.writeTextFile(join(binaries, target, exe), `#!/bin/sh\necho ${target}\n`);
      }
    }
    const out = join(tmp, "out");
    const packed = await release(binaries, out);
    assert.deepEqual(packed.map((p) => p.file).sort(), [
      "mcpstate-darwin.mcpb",
      "mcpstate-linux.mcpb",
      "mcpstate-win32.mcpb",
    ]);

    const server = await readJson(join(out, "server.json"));
    assert.deepEqual(serverJsonProblems(server), []);
    assert.equal(server.version, VERSION);
    const bundles = server.packages.filter((p: { registryType: string }) =>
      p.registryType === "mcpb"
    );
    assert.equal(bundles.length, BUNDLES.length);
    for (const b of BUNDLES) {
      const bytes = await Deno.readFile(join(out, bundleName(b.os)));
      const entry = bundles.find((p: { identifier: string }) =>
        p.identifier === releaseUrl(VERSION, bundleName(b.os))
      );
      assert.ok(entry, `server.json lists ${bundleName(b.os)}`);
      assert.equal(entry.fileSha256, createHash("sha256").update(bytes).digest("hex"));
      assert.equal(entry.version, VERSION);
    }
    // Everything else is the checked-in server.json.
    const checkedIn = await readJson(join(ROOT, "server.json"));
    assert.deepEqual(
      server.packages.filter((p: { registryType: string }) => p.registryType !== "mcpb"),
      checkedIn.packages,
    );
    assert.deepEqual({ ...server, packages: [] }, { ...checkedIn, packages: [] });

    // Each bundle unpacks, its manifest passes mcpb validate and names its OS's binary.
    for (const b of BUNDLES) {
      const dir = join(tmp, "unpacked", b.os);
      const unpacked = await mcpb("unpack", join(out, bundleName(b.os)), dir);
      assert.equal(unpacked.code, 0, unpacked.output);
      const validated = await mcpb("validate", join(dir, "manifest.json"));
      assert.equal(validated.code, 0, validated.output);
      const m = await readJson(join(dir, "manifest.json"));
      assert.deepEqual(m.compatibility.platforms, [b.os]);
      assert.equal(m.server.mcp_config.platform_overrides, undefined);
      assert.ok((await Deno.stat(join(dir, m.server.entry_point))).isFile, m.server.entry_point);
      assert.equal(m.server.mcp_config.command, "${__dirname}/" + m.server.entry_point);
      for (const [cpu, target] of Object.entries(b.targets)) {
        const file = b.os === "win32" ? "mcpstate.exe" : `mcpstate-${cpu}`;
        const text = await Deno.readTextFile(join(dir, "server", file));
        assert.match(text, new RegExp(`echo ${target}\\n`));
      }
    }

    // On Unix the launcher runs the binary of this machine's CPU.
    if (Deno.build.os === "linux" || Deno.build.os === "darwin") {
      const dir = join(tmp, "unpacked", Deno.build.os);
      const { code, stdout } = await new Deno.Command(join(dir, "server", "mcpstate"), {
        args: ["--version"],
      }).output();
      assert.equal(code, 0);
      const cpu = Deno.build.arch === "aarch64" ? "aarch64" : "x86_64";
      const bundle = BUNDLES.find((b) => b.os === Deno.build.os)!;
      assert.equal(new TextDecoder().decode(stdout).trim(), bundle.targets[cpu]);
    }
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});
