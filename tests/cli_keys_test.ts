/**
 * End-to-end tests of the CLI's encryption keys (SPEC 9.2):
 * `MCPSTATE_ENCRYPTION_KEYS`, `--encryption-keys-file` and `--key-store`,
 * through the real `mcpstate` process and `mcpstate serve`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { recordLine } from "../src/cli/records.ts";
import { mcpstate, type RunResult, tempHome } from "./_cli_run.ts";
import { sampleRecord } from "./contract/import.ts";
import { cleanEnv, closeAndStop, httpClient, SERVE, startHttpServer } from "./_server_harness.ts";
import { ok as toolOk } from "./_tool_calls.ts";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const KEY = `k1:${btoa(String.fromCharCode(...new Uint8Array(32).fill(7)))}`;
const POSIX = Deno.build.os !== "windows";

function ok(r: RunResult, what: string): void {
  assert.equal(r.code, 0, `${what} failed with exit ${r.code}:\n${r.stderr}\n${r.stdout}`);
}

/** Writes one handle of user `u1` through `import`, keys from the environment. */
async function seed(home: string, url: string, args: string[] = []): Promise<void> {
  const line = recordLine("u1", sampleRecord("note_keys", 1));
  const r = await mcpstate(home, ["import", "--backend", url, ...args], {
    stdin: line + "\n",
    env: { MCPSTATE_ENCRYPTION_KEYS: KEY },
  });
  ok(r, "import");
}

async function keyFile(home: string, mode: number): Promise<string> {
  const path = join(home, "keys.txt");
  await Deno.writeTextFile(path, `# the current key first\n${KEY}\n`);
  await Deno.chmod(path, mode);
  return path;
}

Deno.test("cli keys: written with env keys, read back with a 0600 key file given before the command", async () => {
  const home = await tempHome();
  const url = `sqlite:///${join(home, "state.db")}`;
  await seed(home, url);
  const file = await keyFile(home, 0o600);
  const get = ["get", "note_keys", "--user", "u1", "--backend", url];
  for (
    const args of [["--encryption-keys-file", file, ...get], [
      ...get,
      `--encryption-keys-file=${file}`,
    ]]
  ) {
    const r = await mcpstate(home, args);
    ok(r, args.join(" "));
    assert.match(r.stdout, /"v": 1/);
  }
  const raw = new DatabaseSync(join(home, "state.db"));
  try {
    const rows = raw.prepare("SELECT count(*) AS n FROM data_keys").get() as { n: number };
    assert.equal(rows.n, 1);
  } finally {
    raw.close();
  }
});

Deno.test("cli keys: without keys, get fails with encryption_error no_key (exit 1)", async () => {
  const home = await tempHome();
  const url = `sqlite:///${join(home, "state.db")}`;
  await seed(home, url);
  const r = await mcpstate(home, ["get", "note_keys", "--user", "u1", "--backend", url]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /encryption_error/);
  assert.match(r.stderr, /no_key/);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
});

Deno.test({
  name: "cli keys: a key file readable by group or others is refused (exit 2)",
  ignore: !POSIX,
  async fn() {
    const home = await tempHome();
    const file = await keyFile(home, 0o644);
    const r = await mcpstate(home, [
      "list",
      "--backend",
      "memory://",
      "--encryption-keys-file",
      file,
    ]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /chmod 600/);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  },
});

Deno.test("cli keys: malformed keys are a usage error (exit 2, one line)", async () => {
  const home = await tempHome();
  for (const keys of ["k1", "k1:short"]) {
    const r = await mcpstate(home, ["list", "--backend", "memory://"], {
      env: { MCPSTATE_ENCRYPTION_KEYS: keys },
    });
    assert.equal(r.code, 2, `${keys}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});

Deno.test("cli keys: --key-store keeps the data keys in another file", async () => {
  const home = await tempHome();
  const url = `sqlite:///${join(home, "state.db")}`;
  const keys = `sqlite:///${join(home, "keys.db")}`;
  await seed(home, url, ["--key-store", keys]);
  const r = await mcpstate(home, ["get", "note_keys", "--user", "u1", "--backend", url], {
    env: { MCPSTATE_ENCRYPTION_KEYS: KEY, MCPSTATE_KEY_STORE: keys },
  });
  ok(r, "get");
  const count = (file: string) => {
    const db = new DatabaseSync(join(home, file));
    try {
      return (db.prepare("SELECT count(*) AS n FROM data_keys").get() as { n: number }).n;
    } finally {
      db.close();
    }
  };
  assert.equal(count("state.db"), 0);
  assert.equal(count("keys.db"), 1);
  const exported = await mcpstate(home, ["export", "--backend", url, "--key-store", keys], {
    env: { MCPSTATE_ENCRYPTION_KEYS: KEY },
  });
  ok(exported, "export");
  assert.match(exported.stderr, /plaintext/);
  assert.match(exported.stdout, /note_keys/);
});

Deno.test("cli keys: serve over stdio with MCPSTATE_ENCRYPTION_KEYS saves and loads", async () => {
  const home = await tempHome();
  const url = `sqlite:///${join(home, "state.db")}`;
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: [...SERVE],
    env: cleanEnv({ MCPSTATE_BACKEND: url, MCPSTATE_ENCRYPTION_KEYS: KEY }),
    stderr: "pipe",
  });
  const client = new Client({ name: "keys-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    const saved = await toolOk(client, "state_save", { kind: "note", state: { secret: "s3cret" } });
    const loaded = await toolOk(client, "state_load", { handle: saved.handle });
    assert.deepEqual(loaded.state, { secret: "s3cret" });
  } finally {
    await client.close();
  }
  const raw = await Deno.readFile(join(home, "state.db"));
  assert.equal(new TextDecoder("latin1").decode(raw).includes("s3cret"), false);
});

Deno.test("cli keys: serve over HTTP with --encryption-keys-file saves and loads; the file holds no plaintext", async () => {
  const home = await tempHome();
  const url = `sqlite:///${join(home, "state.db")}`;
  const file = await keyFile(home, 0o600);
  await using server = await startHttpServer([
    "--backend",
    url,
    "--allow-anonymous",
    "--encryption-keys-file",
    file,
  ]);
  const client = await httpClient(server.url, "2026-07-28");
  const saved = await toolOk(client, "state_save", { kind: "note", state: { secret: "h77p" } });
  assert.deepEqual((await toolOk(client, "state_load", { handle: saved.handle })).state, {
    secret: "h77p",
  });
  await closeAndStop([client], server);
  for await (const f of Deno.readDir(home)) {
    if (!f.name.startsWith("state.db")) continue;
    const raw = await Deno.readFile(join(home, f.name));
    assert.equal(new TextDecoder("latin1").decode(raw).includes("h77p"), false, f.name);
  }
  // The same file without keys: the state is there, and it does not open.
  const r = await mcpstate(home, [
    "get",
    "--backend",
    url,
    "--user",
    "anonymous",
    String(saved.handle),
  ]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /no_key/);
});
