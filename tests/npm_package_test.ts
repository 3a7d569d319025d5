/**
 * The npm package `mcpstate`, installed the way MCP users install servers:
 * built by `deno task npm`, packed by `npm pack`, installed by npm into an
 * empty prefix with an empty HOME and npm cache, then an MCP session through
 * its bin with the official client (offline: every proxy points at a closed
 * port), and the client entry `npx -y mcpstate serve` itself (here with the
 * tarball as the package). Needs `npm` and the npm registry, for the `deno`
 * dependency.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { cleanEnv, ok } from "./_server_harness.ts";
import { build, DENO_NPM_VERSION, MCP_NAME, NPM_NAME } from "../scripts/npm.ts";
import { DENO_FLAGS } from "../src/cli/permissions.ts";
import { VERSION } from "../src/version.ts";

const WINDOWS = Deno.build.os === "windows";
const NPM = WINDOWS ? "npm.cmd" : "npm";
const NPX = WINDOWS ? "npx.cmd" : "npx";

/**
 * An environment with nothing of the caller's npm setup: a fresh HOME and
 * npm cache (the registry stays the caller's, for machines behind a mirror).
 */
function npmEnv(home: string, cache: string, extra: Record<string, string> = {}) {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(cleanEnv())) {
    if (/^npm_/i.test(k) && !/^npm_config_registry$/i.test(k)) continue;
    env[k] = v;
  }
  return {
    ...env,
    HOME: home,
    USERPROFILE: home,
    npm_config_cache: cache,
    npm_config_update_notifier: "false",
    npm_config_audit: "false",
    npm_config_fund: "false",
    ...extra,
  };
}

async function run(cmd: string, args: string[], env: Record<string, string>, cwd: string) {
  const out = await new Deno.Command(cmd, { args, env, cwd, clearEnv: true, stdin: "null" })
    .output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

/** Connects the official client to `command args` over stdio. */
async function connect(command: string, args: string[], env: Record<string, string>, cwd: string) {
  const transport = new StdioClientTransport({ command, args, env, cwd, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (c: Uint8Array | string) => {
    stderr += typeof c === "string" ? c : new TextDecoder().decode(c);
  });
  const client = new Client({ name: "npm-package-test", version: "1.0.0" });
  try {
    await client.connect(transport);
  } catch (e) {
    throw new Error(`${command} ${args.join(" ")} did not connect: ${e}\nstderr: ${stderr}`);
  }
  return client;
}

Deno.test("npm package: packed, installed into an empty prefix, serves MCP through its bin and npx", async (t) => {
  const tmp = await Deno.makeTempDir({ prefix: "mcpstate-npm-" });
  const home = join(tmp, "home");
  const cache = join(tmp, "npm-cache");
  const prefix = join(tmp, "prefix");
  const work = join(tmp, "work");
  for (const d of [home, cache, prefix, work]) await Deno.mkdir(d);
  const pkg = join(tmp, "package");
  const backend = `sqlite:///${join(tmp, "state.db").replaceAll("\\", "/")}`;
  let tgz = "";
  let handle = "";
  try {
    await t.step(
      "deno task npm: package.json, the bin with the program's flags, the bundle",
      async () => {
        await build(pkg);
        const manifest = JSON.parse(await Deno.readTextFile(join(pkg, "package.json")));
        assert.equal(manifest.name, NPM_NAME);
        assert.equal(manifest.version, VERSION);
        assert.equal(manifest.mcpName, MCP_NAME);
        assert.deepEqual(manifest.bin, { mcpstate: "bin/mcpstate.cjs" });
        assert.deepEqual(manifest.dependencies, { deno: DENO_NPM_VERSION });
        assert.equal(manifest.license, "MIT");
        assert.match(
          manifest.repository.url,
          /^git\+https:\/\/github\.com\/mcpstate\/mcpstate\.git$/,
        );
        assert.ok(manifest.engines.node);
        const bin = await Deno.readTextFile(join(pkg, "bin", "mcpstate.cjs"));
        assert.ok(bin.startsWith("#!/usr/bin/env node\n"));
        assert.ok(bin.includes(`const DENO_FLAGS = ${JSON.stringify(DENO_FLAGS)};`));
        const cli = await Deno.readTextFile(join(pkg, "lib", "cli.js"));
        // Everything is inlined: no npm:, jsr: or remote imports are left to fetch.
        assert.doesNotMatch(cli, /^import .* from "(npm:|jsr:|https?:)/m);
      },
    );

    await t.step("npm pack", async () => {
      const r = await run(NPM, ["pack", "--pack-destination", tmp, pkg], npmEnv(home, cache), tmp);
      assert.equal(r.code, 0, r.stderr);
      tgz = join(tmp, `${NPM_NAME}-${VERSION}.tgz`);
      assert.ok((await Deno.stat(tgz)).isFile);
    });

    const bin = join(prefix, "node_modules", ".bin", WINDOWS ? "mcpstate.cmd" : "mcpstate");
    await t.step(
      "npm install into an empty prefix; the bin passes the exit code through",
      async () => {
        const r = await run(
          NPM,
          ["install", "--prefix", prefix, "--no-package-lock", tgz],
          npmEnv(home, cache),
          work,
        );
        assert.equal(r.code, 0, r.stderr);
        const version = await run(bin, ["--version"], npmEnv(home, cache), work);
        assert.equal(version.code, 0, version.stderr);
        assert.equal(version.stdout.trim(), `mcpstate ${VERSION}`);
        const unknown = await run(bin, ["no-such-command"], npmEnv(home, cache), work);
        assert.equal(unknown.code, 2, unknown.stderr);
        assert.match(unknown.stderr, /Unknown command "no-such-command"/);
      },
    );

    await t.step(
      "an MCP session through the installed bin, offline: mint, load, list",
      async () => {
        const dead = "http://127.0.0.1:9";
        const env = npmEnv(home, cache, {
          MCPSTATE_BACKEND: backend,
          MCPSTATE_USER: "alice",
          MCPSTATE_WRITER: "npm-test",
          HTTP_PROXY: dead,
          HTTPS_PROXY: dead,
          ALL_PROXY: dead,
          NO_PROXY: "",
        });
        const client = await connect(bin, ["serve"], env, work);
        try {
          const minted = await ok(client, "state_save", { kind: "notes", state: { items: ["a"] } });
          handle = String(minted.handle);
          assert.match(handle, /^notes_/);
          const loaded = await ok(client, "state_load", { handle });
          assert.deepEqual(loaded.state, { items: ["a"] });
          assert.equal(loaded.last_writer, "npm-test");
          const listed = await ok(client, "state_list", {});
          assert.deepEqual((listed.handles as { handle: string }[]).map((h) => h.handle), [handle]);
        } finally {
          await client.close();
        }
      },
    );

    await t.step(
      "the client entry: npx -y mcpstate serve (the tarball as the package)",
      async () => {
        const env = npmEnv(home, cache, { MCPSTATE_BACKEND: backend, MCPSTATE_USER: "alice" });
        const client = await connect(
          NPX,
          ["-y", `--package=${tgz}`, "mcpstate", "serve"],
          env,
          work,
        );
        try {
          const listed = await ok(client, "state_list", {});
          assert.deepEqual((listed.handles as { handle: string }[]).map((h) => h.handle), [handle]);
          const saved = await ok(client, "state_save", {
            handle,
            state: { items: ["a", "b"] },
            expect_version: 1,
          });
          assert.equal(saved.version, 2);
        } finally {
          await client.close();
        }
      },
    );

    await t.step({
      name: "SIGTERM to the bin reaches the server, which ends cleanly",
      ignore: WINDOWS,
      fn: async () => {
        const child = new Deno.Command(bin, {
          args: ["serve"],
          env: npmEnv(home, cache, { MCPSTATE_BACKEND: backend }),
          clearEnv: true,
          cwd: work,
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        // A request answered means the server is up.
        const writer = child.stdin.getWriter();
        await writer.write(new TextEncoder().encode(
          JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) + "\n",
        ));
        const reader = child.stdout.getReader();
        const first = await reader.read();
        assert.ok(first.value && first.value.length > 0, "the server answered");
        reader.releaseLock();
        child.kill("SIGTERM");
        const status = await child.status;
        assert.equal(status.code, 0, `exit ${status.code} (signal ${status.signal})`);
        await writer.close().catch(() => {});
        await child.stdout.cancel();
        await child.stderr.cancel();
      },
    });
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});
