/**
 * `mcpstate config`: the client entry for the way mcpstate was installed
 * (`npx`, a binary, Deno), in each client's form, never naming a path inside
 * an npm or Deno cache. The CLI runs as a real subprocess; the npm package is
 * stood for by the program's own files under `node_modules/mcpstate/`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DENO_FLAGS } from "../src/cli/permissions.ts";
import { VERSION } from "../src/version.ts";
import { inCache, type Install, serverEntry } from "../src/cli/config.ts";
import { CLI, cliEnv, mcpstate, ROOT, type RunResult, tempHome } from "./_cli_run.ts";

/** `deno` as the entry names it: its path, or its name when that path is in a cache. */
const DENO = inCache(Deno.execPath()) ? "deno" : Deno.execPath();

function ok(r: RunResult): void {
  assert.equal(r.code, 0, `exit ${r.code}:\n${r.stderr}\n${r.stdout}`);
}

Deno.test("cli config: --client vscode prints only VS Code's servers form on stdout", async () => {
  const home = await tempHome();
  try {
    const r = await mcpstate(home, ["config", "--client", "vscode", "--backend", "memory://"]);
    ok(r);
    assert.deepEqual(JSON.parse(r.stdout), {
      servers: {
        mcpstate: {
          type: "stdio",
          command: DENO,
          args: ["run", ...DENO_FLAGS, CLI, "serve"],
          env: { MCPSTATE_BACKEND: "memory://" },
        },
      },
    });
    assert.match(r.stderr, /\.vscode\/mcp\.json/);
    for (const client of ["claude-desktop", "cursor"]) {
      const c = await mcpstate(home, ["config", "--client", client, "--via", "npx"]);
      ok(c);
      assert.deepEqual(JSON.parse(c.stdout), {
        mcpServers: { mcpstate: { command: "npx", args: ["-y", "mcpstate", "serve"] } },
      });
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli config: --client claude-code prints the claude mcp add line", async () => {
  const home = await tempHome();
  try {
    const plain = await mcpstate(home, ["config", "--client", "claude-code", "--via", "npx"]);
    ok(plain);
    assert.equal(plain.stdout, "claude mcp add mcpstate -- npx -y mcpstate serve\n");
    const r = await mcpstate(home, [
      "config",
      "--client=claude-code",
      "--via=npx",
      "--backend=sqlite:///~/my state.db",
      "--user=ann",
    ]);
    ok(r);
    assert.equal(
      r.stdout,
      "claude mcp add mcpstate -e 'MCPSTATE_BACKEND=sqlite:///~/my state.db' " +
        "-e MCPSTATE_USER=ann -- npx -y mcpstate serve\n",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli config: --via and --client take only the ways and clients they know", async () => {
  const home = await tempHome();
  try {
    const r = await mcpstate(home, ["config", "--via", "pip"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--via must be one of npx, binary, deno/);
    const c = await mcpstate(home, ["config", "--client", "emacs"]);
    assert.equal(c.code, 2);
    assert.match(c.stderr, /--client must be one of claude-desktop, claude-code, cursor, vscode/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli config: run from the npm package (node_modules/mcpstate/), the entry is npx", async () => {
  const home = await tempHome();
  try {
    const pkg = join(home, "prefix", "node_modules", "mcpstate");
    await Deno.mkdir(pkg, { recursive: true });
    for (const f of ["cli.ts", "deno.json", "deno.lock", "src"]) {
      const cp = await new Deno.Command("cp", { args: ["-R", join(ROOT, f), pkg] }).output();
      assert.equal(cp.code, 0);
    }
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        ...DENO_FLAGS,
        "--config",
        join(pkg, "deno.json"),
        join(pkg, "cli.ts"),
        "config",
      ],
      cwd: home,
      env: await cliEnv(home, { MCPSTATE_BACKEND: "memory://" }),
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.deepEqual(JSON.parse(stdout), {
      mcpServers: {
        mcpstate: {
          command: "npx",
          args: ["-y", "mcpstate", "serve"],
          env: { MCPSTATE_BACKEND: "memory://" },
        },
      },
    });
    assert.ok(!stdout.includes(home), "no path of the install in the entry");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli config: never a path inside an npm or Deno cache", () => {
  const denoDir = Deno.env.get("DENO_DIR") ?? "/home/u/.cache/deno";
  const cached: Install[] = [
    {
      moduleUrl: "https://jsr.io/@mcpstate/core/0.4.0/src/cli/config.ts",
      execPath: "/home/u/.deno/bin/deno",
      compiled: false,
    },
    {
      moduleUrl: `file://${denoDir}/npm/registry.npmjs.org/mcpstate/0.4.0/src/cli/config.ts`,
      execPath: "/home/u/.npm/_npx/1a2b/node_modules/deno/bin/deno",
      compiled: false,
    },
  ];
  for (const install of cached) {
    const entry = serverEntry({}, undefined, install);
    assert.deepEqual(entry, {
      command: inCache(install.execPath) ? "deno" : install.execPath,
      args: ["run", ...DENO_FLAGS, `jsr:@mcpstate/core@${VERSION}/cli`, "serve"],
    });
  }
  const npx: Install = {
    moduleUrl: "file:///home/u/.npm/_npx/1a2b/node_modules/mcpstate/lib/cli.js",
    execPath: "/home/u/.npm/_npx/1a2b/node_modules/deno/bin/deno",
    compiled: false,
  };
  assert.deepEqual(serverEntry({}, undefined, npx), {
    command: "npx",
    args: ["-y", "mcpstate", "serve"],
  });
  assert.deepEqual(serverEntry({}, "binary", npx), { command: "mcpstate", args: ["serve"] });
  assert.equal(serverEntry({}, "deno", npx).command, "deno");
  const binary: Install = {
    moduleUrl: "file:///tmp/deno-compile-mcpstate/src/cli/config.ts",
    execPath: "/opt/mcpstate/mcpstate",
    compiled: true,
  };
  assert.deepEqual(serverEntry({}, undefined, binary), {
    command: "/opt/mcpstate/mcpstate",
    args: ["serve"],
  });
  const checkout = fileURLToPath(new URL("../src/cli/config.ts", import.meta.url));
  assert.ok(!inCache(checkout));
  assert.ok(inCache(join(denoDir, "remote", "x.ts")));
  assert.ok(!inCache("/home/u/.deno/bin/deno"));
  assert.ok(inCache("/root/.npm/_npx/7a40be787520bede/node_modules/@deno/linux-x64-glibc/deno"));
});
