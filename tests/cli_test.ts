/**
 * End-to-end tests of the `mcpstate` CLI: every subcommand runs as a real
 * subprocess, `deno run` with exactly the permission flags the compiled
 * binary gets, against real SQLite files, a real redis-server and real Deno
 * KV files.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { Append, HandleStore } from "../mod.ts";
import type { Backend } from "../src/backend.ts";
import { openBackend } from "../src/url.ts";
import { DENO_FLAGS, PERMISSION_FLAGS } from "../src/cli/permissions.ts";
import { VERSION } from "../src/version.ts";
import { COMMANDS } from "../src/cli/main.ts";
import { inCache } from "../src/cli/config.ts";
import denoJson from "../deno.json" with { type: "json" };
import {
  assertOneLineError,
  CLI,
  cliEnv,
  denoDir,
  mcpstate,
  ROOT,
  type RunResult,
  spawnMcpstate,
  tempHome,
} from "./_cli_run.ts";
import {
  importContext as restoreContext,
  importContract as restoreContract,
  sampleRecord,
} from "./contract/import.ts";
import { startRedis } from "./_redis.ts";

const DAY = 86_400_000;

/** `sqlite:///` URL of an absolute path (also a Windows path). */
function sqliteUrl(path: string): string {
  return `sqlite:///${path}`;
}

function denokvUrl(path: string): string {
  return `denokv:///${path}`;
}

function ok(r: RunResult, what = "command"): void {
  assert.equal(r.code, 0, `${what} failed with exit ${r.code}:\n${r.stderr}\n${r.stdout}`);
}

/** Opens a store in this process on the same database the CLI uses. */
async function openStore(url: string, clock?: () => number): Promise<HandleStore> {
  return await HandleStore.fromUrl(url, { reclaimIntervalMs: 0, ...(clock ? { clock } : {}) });
}

/**
 * Seeds records that exercise every field: several users (one with non-ASCII
 * and one with the `iss#sub` form), versions above 1, writers and none,
 * TTLs and none, one expired record still in its grace period, states whose
 * bytes a re-encode would change (numeric keys first, `__proto__`, escapes,
 * a lone surrogate) and one state over Deno KV's 64 KiB value limit.
 */
async function seedVaried(url: string): Promise<void> {
  const now = Date.now();
  const store = await openStore(url);
  const past = await openStore(url, () => now - 2 * DAY);
  try {
    const users = ["alice", "bob", "ünï 😀", "https://issuer.example#sub-42"];
    for (const [i, user] of users.entries()) {
      const h1 = await store.mint("research", { sources: [], notes: "", "10": i }, {
        user,
        ttlDays: 7,
        writer: "laptop/claude-code",
      });
      await store.save(h1, { sources: ["a"], notes: "arm64 wins", __proto__x: 1 }, {
        user,
        expectVersion: 1,
        writer: "phone/claude",
      });
      await store.patch(h1, [{ op: "append", path: "sources", value: "b\u0000\ud800" }], { user });
      await store.mint("note", JSON.parse('{"__proto__":{"k":1},"9":"nine","é":"\\u2028"}'), {
        user,
      });
    }
    await store.mint("blob", { big: "x".repeat(100_000) }, { user: "alice", writer: "bulk" });
    await past.mint("old", { gone: "soon" }, { user: "bob", ttlDays: 1, writer: "past" });
  } finally {
    await past.close();
    await store.close();
  }
}

async function exportOf(home: string, url: string): Promise<string> {
  const r = await mcpstate(home, ["export", "--backend", url]);
  ok(r, `export from ${url}`);
  return r.stdout;
}

async function countAll(backend: Backend, users: string[]): Promise<number> {
  let n = 0;
  for (const user of users) n += (await backend.list(user, { limit: 100_000 })).length;
  return n;
}

Deno.test("cli: --help, --version and --help of every subcommand", async () => {
  const home = await tempHome();
  try {
    const help = await mcpstate(home, ["--help"]);
    ok(help);
    for (const c of COMMANDS) assert.match(help.stdout, new RegExp(`^  ${c.name} `, "m"));
    assert.match(help.stdout, /Exit codes: 0 success; 1 .*; 2 usage error/s);
    const version = await mcpstate(home, ["--version"]);
    ok(version);
    assert.equal(version.stdout.trim(), `mcpstate ${denoJson.version}`);
    assert.equal(VERSION, denoJson.version);
    const results = await Promise.all(COMMANDS.map((c) => mcpstate(home, [c.name, "--help"])));
    for (const [i, r] of results.entries()) {
      const name = COMMANDS[i]!.name;
      ok(r, `${name} --help`);
      assert.equal(r.stderr, "", `${name} --help wrote to stderr`);
      assert.match(r.stdout, /Usage: mcpstate/i, `${name} --help`);
    }
    const bare = await mcpstate(home, []);
    assert.equal(bare.code, 2);
    assert.match(bare.stderr, /Usage: mcpstate <command>/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: bad command lines exit 2 with one clear line", async () => {
  const home = await tempHome();
  try {
    const cases: [string[], RegExp][] = [
      [["frobnicate"], /Unknown command "frobnicate"/],
      [["list", "--bogus"], /Unknown option --bogus.*mcpstate list --help/],
      [["export", "--out"], /--out needs a value/],
      [["get"], /Missing argument.*mcpstate get --help/],
      [["get", "a_aaaaaaaa", "extra"], /Unexpected argument "extra"/],
      [["list", "--json=yes"], /--json takes no value/],
      [["migrate", "--from", "memory://"], /needs both --from URL and --to URL/],
      [["migrate", "--from", "memory://", "--to", "memory://"], /same backend/],
      [["import", "--rate", "0", "x.jsonl"], /--rate must be a whole number/],
      [
        ["list", "--backend", "ftp://admin:hunter2@db.example/x"],
        /Unsupported backend URL.*sqlite:/,
      ],
      [["list", "--backend", "sqlite:"], /Unsupported backend URL|Malformed/],
      [["list", "--backend", "sqlite://x.db"], /Malformed sqlite URL|sqlite:\/\/\//],
      [["list", "--user", "alice", "--all-users"], /either --user or --all-users/],
    ];
    const results = await Promise.all(cases.map(([args]) => mcpstate(home, args)));
    for (const [i, r] of results.entries()) {
      const [args, pattern] = cases[i]!;
      assertOneLineError(r, 2, pattern);
      assert.ok(!r.stderr.includes("hunter2"), `credentials leaked by ${args.join(" ")}`);
      assert.equal(r.stdout, "", `${args.join(" ")} wrote to stdout`);
    }
    // MCPSTATE_BACKEND is read too, and reported the same way.
    const env = await mcpstate(home, ["list"], {
      env: { MCPSTATE_BACKEND: "mysql://root:s3cret@h/db" },
    });
    assertOneLineError(env, 2, /Unsupported backend URL "mysql:\/\/\*\*\*@h\/db"/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: list, get, delete and sweep on a SQLite file", async (t) => {
  const home = await tempHome();
  const url = sqliteUrl(join(home, "state.db"));
  const now = Date.now();
  const store = await openStore(url);
  const past = await openStore(url, () => now - 2 * DAY);
  let research: string, note: string, expired: string, bobs: string;
  try {
    research = await store.mint("research", { sources: ["a"], profile: { tags: ["x", "y"] } }, {
      user: "alice",
      ttlDays: 7,
      writer: "laptop/claude-code",
    });
    note = await store.mint("note", { text: "hi" }, { user: "alice" });
    expired = await past.mint("note", { text: "old" }, { user: "alice", ttlDays: 1 });
    bobs = await store.mint("note", { text: "bob's" }, { user: "bob" });
  } finally {
    await past.close();
    await store.close();
  }
  const as = { env: { MCPSTATE_BACKEND: url, MCPSTATE_USER: "alice" } };
  try {
    await t.step("list prints a table for people", async () => {
      const r = await mcpstate(home, ["list"], as);
      ok(r);
      const lines = r.stdout.trimEnd().split("\n");
      assert.match(lines[0]!, /^HANDLE\s+KIND\s+VERSION\s+UPDATED\s+EXPIRES\s+WRITER$/);
      assert.equal(lines.length, 4, "two live handles (the expired one is hidden), then the usage");
      // The expired handle still counts: it is not reclaimed yet.
      assert.match(lines[3]!, /^Usage: 3 handles, [\d,]+ bytes, 0 writes this minute$/);
      assert.ok(r.stdout.includes(research) && r.stdout.includes(note));
      assert.ok(!r.stdout.includes(expired) && !r.stdout.includes(bobs));
      assert.match(r.stdout, /laptop\/claude-code/);
      assert.match(r.stdout, /never/);
    });

    await t.step("list --json, --kind, --include-expired and --user", async () => {
      const r = await mcpstate(home, ["list", "--json", "--kind", "research"], as);
      ok(r);
      const rows = JSON.parse(r.stdout) as Record<string, unknown>[];
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.handle, research);
      assert.equal(rows[0]!.kind, "research");
      assert.equal(rows[0]!.version, 1);
      assert.equal(rows[0]!.last_writer, "laptop/claude-code");
      assert.match(String(rows[0]!.created_at), /^\d{4}-\d\d-\d\dT.*Z$/);
      assert.ok(!("state" in rows[0]!), "listing never carries states");
      const all = JSON.parse(
        (await mcpstate(home, ["list", "--json", "--include-expired"], as)).stdout,
      );
      assert.deepEqual(
        new Set(all.map((x: { handle: string }) => x.handle)),
        new Set([research, note, expired]),
      );
      const table = await mcpstate(home, ["list", "--include-expired"], as);
      assert.match(table.stdout, /\(expired\)/);
      const bob = JSON.parse(
        (await mcpstate(home, ["list", "--json", "--user", "bob", "--backend", url])).stdout,
      );
      assert.deepEqual(bob.map((x: { handle: string }) => x.handle), [bobs]);
      const everyone = JSON.parse(
        (await mcpstate(home, ["list", "--all-users", "--json"], as)).stdout,
      );
      assert.deepEqual(
        everyone.map((x: { user: string; handle: string }) => [x.user, x.handle]).sort(),
        [["alice", note], ["alice", research], ["bob", bobs]].sort(),
      );
      const wide = await mcpstate(home, ["list", "--all-users"], as);
      assert.match(wide.stdout, /^USER\s+HANDLE\s+KIND/);
      const nobody = await mcpstate(home, ["list", "--user", "nobody"], as);
      ok(nobody);
      assert.match(nobody.stdout, /No handles for user "nobody"/);
    });

    await t.step("get prints the snapshot, --path a part of it", async () => {
      const r = await mcpstate(home, ["get", research], as);
      ok(r);
      const snap = JSON.parse(r.stdout);
      assert.equal(snap.handle, research);
      assert.equal(snap.version, 1);
      assert.deepEqual(snap.state, { sources: ["a"], profile: { tags: ["x", "y"] } });
      const dotted = JSON.parse(
        (await mcpstate(home, ["get", research, "--path", "profile.tags"], as)).stdout,
      );
      assert.deepEqual(dotted.state, ["x", "y"]);
      assert.equal(dotted.path, "profile.tags");
      const pointer = JSON.parse(
        (await mcpstate(home, ["get", research, "--path", "/profile/tags/1"], as)).stdout,
      );
      assert.equal(pointer.state, "y");
    });

    await t.step(
      "a missing handle, another user's handle, an expired one: exit 1, one line",
      async () => {
        assertOneLineError(
          await mcpstate(home, ["get", "note_zzzzzzzz"], as),
          1,
          /No handle "note_zzzzzzzz"/,
        );
        assertOneLineError(await mcpstate(home, ["get", bobs], as), 1, /No handle/);
        assertOneLineError(await mcpstate(home, ["get", expired], as), 1, /expired at/);
        assertOneLineError(
          await mcpstate(home, ["get", research, "--path", "nope"], as),
          1,
          /path "nope" does not exist/,
        );
        assertOneLineError(await mcpstate(home, ["delete", "note_zzzzzzzz"], as), 1, /No handle/);
      },
    );

    await t.step("delete removes one handle", async () => {
      const r = await mcpstate(home, ["delete", note, "--json"], as);
      ok(r);
      assert.deepEqual(JSON.parse(r.stdout), { ok: true, handle: note, deleted: true });
      assertOneLineError(await mcpstate(home, ["get", note], as), 1, /No handle/);
      const bob = await mcpstate(home, ["get", bobs, "--user", "bob"], as);
      ok(bob);
    });

    await t.step("sweep removes expired records (one user, or all)", async () => {
      const none = await mcpstate(home, ["sweep", "--user", "bob", "--json"], as);
      ok(none);
      assert.deepEqual(JSON.parse(none.stdout), { removed: 0 });
      const r = await mcpstate(home, ["sweep"], as);
      ok(r);
      assert.equal(r.stdout.trim(), "Removed 1 expired record.");
      const left = JSON.parse(
        (await mcpstate(home, ["list", "--json", "--include-expired"], as)).stdout,
      );
      assert.deepEqual(left.map((x: { handle: string }) => x.handle), [research]);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: config prints an mcpServers entry that starts a working server", async () => {
  const home = await tempHome();
  try {
    const r = await mcpstate(home, [
      "config",
      "--backend",
      sqliteUrl(join(home, "c.db")),
      "--user",
      "carol",
    ]);
    ok(r);
    const entry = JSON.parse(r.stdout).mcpServers.mcpstate;
    // deno by its path, or by its name when that path lies in a cache (npx's, here).
    assert.equal(entry.command, inCache(Deno.execPath()) ? "deno" : Deno.execPath());
    assert.deepEqual(entry.args, ["run", ...DENO_FLAGS, CLI, "serve"]);
    assert.deepEqual(entry.env, {
      MCPSTATE_BACKEND: sqliteUrl(join(home, "c.db")),
      MCPSTATE_USER: "carol",
    });
    const named = JSON.parse((await mcpstate(home, ["config", "--name", "memory"])).stdout);
    assert.deepEqual(Object.keys(named.mcpServers), ["memory"]);
    assert.equal(named.mcpServers.memory.env, undefined);

    // The entry, run as a client would run it, serves the tools.
    const { Client } = await import("@modelcontextprotocol/client");
    const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
    const client = new Client({ name: "cli-test", version: "1.0.0" });
    await client.connect(
      new StdioClientTransport({
        command: entry.command,
        args: entry.args,
        env: { ...await cliEnv(home), ...entry.env },
        stderr: "pipe",
      }),
    );
    try {
      const saved = await client.callTool({
        name: "state_save",
        arguments: { kind: "note", state: { via: "config" } },
      });
      assert.ok(!saved.isError, JSON.stringify(saved));
    } finally {
      await client.close();
    }
    const list = JSON.parse(
      (await mcpstate(home, [
        "list",
        "--json",
        "--backend",
        entry.env.MCPSTATE_BACKEND,
        "--user",
        "carol",
      ])).stdout,
    );
    assert.equal(list.length, 1);
    assert.equal(list[0].kind, "note");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: doctor says what works and what to fix", async (t) => {
  const home = await tempHome();
  try {
    await t.step("a healthy SQLite setup passes", async () => {
      // The database exists (doctor only reads: it creates none).
      await (await openStore(sqliteUrl(join(home, "d", "state.db")))).close();
      const r = await mcpstate(home, [
        "doctor",
        "--backend",
        sqliteUrl(join(home, "d", "state.db")),
      ]);
      ok(r);
      assert.match(r.stdout, /^ok {4}runtime: mcpstate .*Deno \d/m);
      assert.match(r.stdout, /^ok {4}permissions: all granted/m);
      assert.match(r.stdout, /^ok {4}backend: opens and answers/m);
      assert.match(r.stdout, /All checks passed/);
    });
    await t.step("a database path under a file fails, with a fix", async () => {
      await Deno.writeTextFile(join(home, "afile"), "");
      const r = await mcpstate(home, [
        "doctor",
        "--json",
        "--backend",
        sqliteUrl(join(home, "afile", "state.db")),
      ]);
      assert.equal(r.code, 1);
      const report = JSON.parse(r.stdout);
      assert.equal(report.ok, false);
      const dir = report.checks.find((c: { check: string }) => c.check === "directory");
      assert.equal(dir.status, "fail");
      assert.match(dir.message, /not a directory/);
      assert.ok(dir.fix);
    });
    await t.step("Deno KV without --unstable-kv fails and names the flag", async () => {
      const r = await mcpstate(home, ["doctor", "--backend", denokvUrl(join(home, "s.kv"))], {
        denoFlags: [...PERMISSION_FLAGS, "--no-prompt"],
      });
      assert.equal(r.code, 1);
      assert.match(r.stdout, /^FAIL {2}deno kv: not enabled/m);
      assert.match(r.stdout, /fix: Add --unstable-kv/);
    });
    await t.step("missing permissions are named, with the flags to add", async () => {
      const r = await mcpstate(home, [
        "doctor",
        "--backend",
        "redis://127.0.0.1:1/0",
        "--timeout",
        "2",
      ], {
        denoFlags: ["--allow-read", "--allow-env", "--unstable-kv", "--no-prompt"],
      });
      assert.equal(r.code, 1);
      assert.match(r.stdout, /^FAIL {2}permissions: not granted: write .*net/m);
      assert.ok(r.stdout.includes(DENO_FLAGS.join(" ")));
    });
    await t.step(
      "without --unstable-kv, a backend that needs no KV is not warned about",
      async () => {
        const r = await mcpstate(home, [
          "doctor",
          "--backend",
          sqliteUrl(join(home, "d", "state.db")),
        ], {
          denoFlags: [...PERMISSION_FLAGS, "--no-prompt"],
        });
        ok(r);
        assert.match(r.stdout, /^ok {4}deno kv: not enabled; only denokv:\/\/ backends need it$/m);
        assert.doesNotMatch(r.stdout, /^warn/m);
      },
    );
    await t.step("a closed Redis port: the message once, its advice as the fix", async () => {
      const r = await mcpstate(home, [
        "doctor",
        "--backend",
        "redis://127.0.0.1:1/0",
        "--timeout",
        "2",
      ]);
      assert.equal(r.code, 1);
      const line = r.stdout.split("\n").find((l) => l.startsWith("FAIL  backend:")) ?? "";
      assert.match(line, /Could not connect to Redis at redis:\/\/127\.0\.0\.1:1/);
      assert.doesNotMatch(line, /\.\./, "a doubled period");
      assert.doesNotMatch(line, /Check that/, "the message carries the fix");
      const fix = r.stdout.split("\n")[r.stdout.split("\n").indexOf(line) + 1] ?? "";
      assert.match(fix, /^ {6}fix: Check that Redis/);
      assert.equal(r.stdout.split("Check that Redis").length, 2, "the advice is said once");
    });
    await t.step("with no permission flags, every check is still reported", async () => {
      const r = await mcpstate(home, ["doctor"], { denoFlags: ["--no-prompt"] });
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stderr, "");
      for (const check of ["runtime", "permissions", "settings", "backend url", "backend"]) {
        assert.match(r.stdout, new RegExp(`^(ok|warn|FAIL) +${check}: `, "m"), check);
      }
      assert.match(r.stdout, /^FAIL {2}permissions: not granted: read .*env/m);
      assert.match(r.stdout, /Some checks failed/);
    });
    await t.step("an unsupported URL fails the URL check", async () => {
      const r = await mcpstate(home, ["doctor", "--backend", "mongodb://u:pw@h/db"]);
      assert.equal(r.code, 1);
      assert.match(r.stdout, /^FAIL {2}backend url: Unsupported backend URL/m);
      assert.ok(!r.stdout.includes(":pw@"));
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: restore contract (listUsers and restore) of every backend", async (t) => {
  const home = await tempHome();
  await using redis = await startRedis();
  const urls: [string, string][] = [
    ["memory", "memory://"],
    ["sqlite", sqliteUrl(join(home, "rc.db"))],
    ["redis", redis.url],
    ["denokv", denokvUrl(join(home, "rc.kv"))],
  ];
  try {
    for (const [name, url] of urls) {
      const backend = await openBackend(url);
      try {
        await t.step(name, (t) => restoreContract(t, backend));
      } finally {
        await backend.close();
      }
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: export | import round trip SQLite → Redis → Deno KV → SQLite (and PostgreSQL) keeps every record identical", async () => {
  const home = await tempHome();
  await using redis = await startRedis();
  const first = sqliteUrl(join(home, "first.db"));
  const kv = denokvUrl(join(home, "mid.kv"));
  const last = sqliteUrl(join(home, "last.db"));
  try {
    await seedVaried(first);
    const out = join(home, "first.jsonl");
    const exp = await mcpstate(home, ["export", "--backend", first, "--out", out]);
    ok(exp);
    assert.match(exp.stdout, /^Exported 10 records of 4 users to /);
    const e1 = await Deno.readTextFile(out);
    const lines = e1.trimEnd().split("\n");
    assert.equal(lines.length, 10);
    const recs = lines.map((l) => JSON.parse(l));
    assert.deepEqual(Object.keys(recs[0]), [
      "user",
      "handle",
      "kind",
      "version",
      "created_at",
      "updated_at",
      "expires_at",
      "last_writer",
      "state",
    ]);
    assert.ok(recs.some((r) => r.version === 3 && r.last_writer === null));
    assert.ok(recs.some((r) => r.kind === "old" && Date.parse(r.expires_at) < Date.now()));
    assert.ok(e1.includes('"state":{"9":"nine","__proto__":{"k":1},"é":"\u2028"}'));

    const alice = await mcpstate(home, ["export", "--backend", first, "--user", "alice"]);
    ok(alice);
    assert.deepEqual(
      alice.stdout.trimEnd().split("\n"),
      lines.filter((l) => JSON.parse(l).user === "alice"),
    );

    // SQLite → Redis, from a file.
    const toRedis = await mcpstate(home, ["import", out, "--backend", redis.url]);
    ok(toRedis);
    assert.match(toRedis.stdout, /Imported 10 records of 4 users: 10 inserted.*Verified 10/);
    const e2 = await exportOf(home, redis.url);
    assert.equal(e2, e1);

    // Redis → Deno KV, through a pipe.
    const toKv = await mcpstate(home, ["import", "-", "--backend", kv, "--json"], { stdin: e2 });
    ok(toKv);
    assert.equal(JSON.parse(toKv.stdout).inserted, 10);
    const e3 = await exportOf(home, kv);
    assert.equal(e3, e1);

    // Deno KV → PostgreSQL, by migrate (its own schema, dropped afterwards).
    const pg = new URL(
      Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ?? "postgres://postgres@127.0.0.1:5432/test",
    );
    const schema = `mcpstate_test_cli_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    pg.searchParams.set("schema", schema);
    try {
      const toPg = await mcpstate(home, ["migrate", "--from", kv, "--to", pg.toString(), "--json"]);
      ok(toPg);
      assert.equal(JSON.parse(toPg.stdout).inserted, 10);
      assert.equal(await exportOf(home, pg.toString()), e1);
    } finally {
      const { default: postgres } = await import("postgres");
      const sql = postgres(pg.toString().split("?")[0]!, { max: 1, onnotice: () => {} });
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    }

    // Deno KV → SQLite.
    const toLast = await mcpstate(home, ["import", "--backend", last], { stdin: e3 });
    ok(toLast);
    const e4 = await exportOf(home, last);
    assert.equal(e4, e1);

    // The copies behave as the original: versions go on from where they were.
    const store = await openStore(last);
    try {
      const r = recs.find((x) => x.version === 3)!;
      const s = await store.save(r.handle, { after: "import" }, { user: r.user, expectVersion: 3 });
      assert.equal(s.version, 4);
      assert.equal(s.createdAt.toISOString(), r.created_at);
    } finally {
      await store.close();
    }

    // Importing again changes nothing; --check agrees.
    const again = await mcpstate(home, ["import", out, "--backend", redis.url, "--json"]);
    ok(again);
    const summary = JSON.parse(again.stdout);
    assert.equal(summary.identical, 10);
    assert.equal(summary.inserted + summary.replaced, 0);
    ok(await mcpstate(home, ["import", out, "--backend", kv, "--check"]));
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: export, import and migrate carry a typed record's schema version", async () => {
  const home = await tempHome();
  const first = sqliteUrl(join(home, "typed.db"));
  const kv = denokvUrl(join(home, "typed.kv"));
  try {
    const store = await openStore(first);
    try {
      const { z } = await import("zod");
      const notes = store.kind("notes", z.object({ lines: z.array(z.string()) }), {
        version: 2,
      });
      await notes.mint({ lines: ["a"] }, { user: "alice" });
      await store.mint("plain", { x: 1 }, { user: "alice" });
    } finally {
      await store.close();
    }
    const e1 = await exportOf(home, first);
    const [typed, plain] = e1.trimEnd().split("\n").map((l) => JSON.parse(l)).sort((a, b) =>
      a.kind.localeCompare(b.kind)
    );
    assert.deepEqual(Object.keys(typed).slice(-2), ["schema_version", "state"]);
    assert.equal(typed.schema_version, 2);
    assert.ok(!("schema_version" in plain), "a record written without a kind has none");
    ok(await mcpstate(home, ["migrate", "--from", first, "--to", kv]));
    assert.equal(await exportOf(home, kv), e1);
    const copy = await openStore(kv);
    try {
      assert.equal((await copy.get(typed.handle, { user: "alice" })).schemaVersion, 2);
    } finally {
      await copy.close();
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: export, import and migrate carry grants in force and a fork's lineage", async () => {
  const home = await tempHome();
  const first = sqliteUrl(join(home, "shared.db"));
  const kv = denokvUrl(join(home, "shared.kv"));
  const second = sqliteUrl(join(home, "second.db"));
  try {
    const store = await openStore(first);
    let h: string, fork: string, toBob: string, toAny: string, toCarol: string;
    try {
      h = await store.mint("doc", { log: [] }, { user: "alice" });
      fork = await store.fork(h, { user: "alice" });
      toBob = (await store.share(h, { user: "alice", to: "bob", rights: "patch" })).handle;
      toAny = (await store.share(h, { user: "alice", to: "*", rights: "read", ttlDays: 30 }))
        .handle;
      toCarol = (await store.share(toBob, { user: "bob", to: "carol", rights: "append" })).handle;
      const ended = await store.share(h, { user: "alice", to: "dave", rights: "read" });
      await store.unshare(ended.grant, { user: "alice" });
    } finally {
      await store.close();
    }
    const e1 = await exportOf(home, first);
    const lines = e1.trimEnd().split("\n").map((l) => JSON.parse(l));
    const grants = lines.filter((l) => "grant" in l);
    assert.deepEqual(grants.map((g) => [g.to, g.rights, g.alias]).sort(), [
      ["*", "read", toAny],
      ["bob", "patch", toBob],
      ["carol", "append", toCarol],
    ], "the grants in force; the ended one stays behind");
    const at = (alias: string) => lines.findIndex((l) => l.alias === alias);
    assert.ok(at(toBob) < at(toCarol), "a re-share comes after the grant it re-shares");
    assert.ok(lines.findIndex((l) => l.handle === h && !("grant" in l)) < at(toBob));
    assert.equal(lines.find((l) => l.handle === fork)?.forked_from?.handle, h);
    ok(await mcpstate(home, ["migrate", "--from", first, "--to", kv]));
    const sorted = (text: string) => text.trimEnd().split("\n").sort();
    assert.deepEqual(sorted(await exportOf(home, kv)), sorted(e1));
    const check = await mcpstate(home, ["import", "--backend", second, "--check", "--json"], {
      stdin: e1,
    });
    assert.equal(check.code, 1, "a check against an empty target finds grants missing");
    const r = await mcpstate(home, ["import", "--backend", second, "--json"], { stdin: e1 });
    ok(r);
    const s = JSON.parse(r.stdout);
    assert.deepEqual([s.grants, s.grants_verified, s.mismatched], [3, 3, 0]);
    const again = JSON.parse(
      (await mcpstate(home, ["import", "--backend", second, "--json"], {
        stdin: e1,
      })).stdout,
    );
    assert.deepEqual([again.grants, again.grants_verified, again.identical], [3, 3, 2]);
    for (const url of [kv, second]) {
      const copy = await openStore(url);
      try {
        assert.equal((await copy.get(toCarol, { user: "carol" })).sharedBy, "alice");
        assert.equal((await copy.get(toAny, { user: "someone" })).rights, "read");
        await copy.patch(toBob, [Append("log", "bob")], { user: "bob" });
        assert.equal((await copy.get(fork, { user: "alice" })).forkedFrom?.handle, h);
      } finally {
        await copy.close();
      }
    }
    // A corrupt grant line stops the import before anything is written.
    const bad = e1.replace('"rights":"read"', '"rights":"admin"');
    assertOneLineError(
      await mcpstate(home, ["import", "--backend", sqliteUrl(join(home, "third.db"))], {
        stdin: bad,
      }),
      1,
      /Line \d+ is not a valid mcpstate record: rights must be one of/,
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: import never overwrites newer data and skips long-expired records", async () => {
  const home = await tempHome();
  const url = sqliteUrl(join(home, "t.db"));
  try {
    const target = await openBackend(url);
    try {
      await target.records!.import("u1", sampleRecord("doc_aaaaaaaa", 5), restoreContext());
      await target.records!.import("u1", sampleRecord("doc_bbbbbbbb", 1), restoreContext());
    } finally {
      await target.close();
    }
    const src = await openBackend("memory://");
    const lines: string[] = [];
    const { recordLine } = await import("../src/cli/records.ts");
    lines.push(recordLine("u1", sampleRecord("doc_aaaaaaaa", 4))); // older than the target's 5
    lines.push(recordLine("u1", sampleRecord("doc_bbbbbbbb", 2))); // newer than the target's 1
    lines.push(
      recordLine("u2", sampleRecord("doc_cccccccc", 1, { expiresAt: Date.now() - 30 * DAY })),
    );
    await src.close();
    const r = await mcpstate(home, ["import", "--backend", url, "--json"], {
      stdin: lines.join("\n") + "\n",
    });
    ok(r);
    const s = JSON.parse(r.stdout);
    assert.deepEqual(
      [s.records, s.inserted, s.replaced, s.newer_in_target, s.skipped_expired, s.mismatched],
      [3, 0, 1, 1, 1, 0],
    );
    const back = await openBackend(url);
    try {
      assert.equal((await back.read("u1", "doc_aaaaaaaa"))?.version, 5);
      // Written as exported, plus the preview that import computes from the state.
      const { preview, ...read } = (await back.read("u1", "doc_bbbbbbbb"))!;
      assert.deepEqual(read, sampleRecord("doc_bbbbbbbb", 2));
      assert.equal(typeof preview, "string");
      assert.equal(await back.read("u2", "doc_cccccccc"), null);
    } finally {
      await back.close();
    }
    // A different record at the same version is a conflict: kept, reported, exit 1.
    const clash = recordLine("u1", sampleRecord("doc_aaaaaaaa", 5, { lastWriter: "someone else" }));
    const c = await mcpstate(home, ["import", "--backend", url], { stdin: clash + "\n" });
    assert.equal(c.code, 1);
    assert.match(
      c.stderr,
      /did not verify; first: user "u1", handle "doc_aaaaaaaa": the target holds a different record at the same version 5/,
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: a corrupt JSON Lines line stops import with its line number and nothing written", async (t) => {
  const home = await tempHome();
  const { recordLine } = await import("../src/cli/records.ts");
  const good = (i: number) => recordLine(`user${i}`, sampleRecord(`note_aaaaaaa${i}`, 1));
  const line2 = JSON.parse(good(2));
  const variants: [string, string | Uint8Array, RegExp][] = [
    ["not JSON", '{"user": "u", oops', /not valid JSON/],
    ["not an object", "[1,2,3]", /not a JSON object/],
    ["a missing field", JSON.stringify({ ...line2, state: undefined }), /"state" is missing/],
    ["an unknown field", JSON.stringify({ ...line2, extra: 1 }), /unknown field "extra"/],
    [
      "a duplicate field",
      good(2).replace('"version":1', '"version":1,"version":2'),
      /more than once/,
    ],
    ["a bad version", JSON.stringify({ ...line2, version: 0 }), /"version" must be a whole number/],
    [
      "a bad time",
      JSON.stringify({ ...line2, updated_at: "yesterday" }),
      /"updated_at" must be an ISO-8601/,
    ],
    [
      "a bad kind",
      JSON.stringify({ ...line2, kind: "Bad Kind" }),
      /"kind" "Bad Kind" is not a valid kind/,
    ],
    [
      "a state that is not an object",
      JSON.stringify({ ...line2, state: [1] }),
      /"state" must be a JSON object/,
    ],
    ["invalid UTF-8", new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), /not valid UTF-8/],
  ];
  const encoder = new TextEncoder();
  try {
    for (const [name, bad, pattern] of variants) {
      await t.step(`${name} → exit 1, "Line 2", nothing imported`, async () => {
        const url = sqliteUrl(join(home, `${name.replaceAll(" ", "-")}.db`));
        const file = join(home, `${name.replaceAll(" ", "-")}.jsonl`);
        const parts = [
          encoder.encode(good(1) + "\n"),
          typeof bad === "string" ? encoder.encode(bad) : bad,
          encoder.encode("\n" + good(3) + "\n"),
        ];
        await Deno.writeFile(file, new Uint8Array(parts.flatMap((p) => [...p])));
        const r = await mcpstate(home, ["import", file, "--backend", url]);
        assertOneLineError(r, 1, /Line 2 is not a valid mcpstate record/);
        assert.match(r.stderr, pattern);
        assert.match(r.stderr, /Nothing was imported/);
        const back = await openBackend(url);
        try {
          assert.equal(await countAll(back, ["user1", "user2", "user3"]), 0, "line 1 was written");
        } finally {
          await back.close();
        }
      });
    }
    await t.step("a state over --max-state-bytes is refused before writing", async () => {
      const r = await mcpstate(home, [
        "import",
        "--max-state-bytes",
        "20",
        "--backend",
        "memory://",
      ], {
        stdin: good(1) + "\n",
      });
      assertOneLineError(r, 1, /Line 1 .*over the limit of 20/);
    });
    await t.step(
      "a missing file, an unwritable --out: exit 1, one line, no partial file",
      async () => {
        assertOneLineError(
          await mcpstate(home, ["import", join(home, "nope.jsonl"), "--backend", "memory://"]),
          1,
          /Cannot read/,
        );
        const out = join(home, "no-such-dir", "x.jsonl");
        assertOneLineError(
          await mcpstate(home, ["export", "--backend", "memory://", "--out", out]),
          1,
          /Cannot write in/,
        );
      },
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: a record whose user, handle, kind or writer holds U+0000 is refused by its line, on SQLite and PostgreSQL alike; migrate reports one", async (t) => {
  const home = await tempHome();
  const { recordLine } = await import("../src/cli/records.ts");
  const good = (i: number) => recordLine(`user${i}`, sampleRecord(`note_aaaaaaa${i}`, 1));
  const line2 = JSON.parse(good(2));
  const pg = new URL(
    Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ?? "postgres://postgres@127.0.0.1:5432/test",
  );
  const schema = `mcpstate_test_nul_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  pg.searchParams.set("schema", schema);
  const count = async (url: string, users: string[]) => {
    const back = await openBackend(url);
    try {
      return await countAll(back, users);
    } finally {
      await back.close();
    }
  };
  try {
    const fields = [
      ["user", "user2\u0000x"],
      ["handle", "note_aaaa\u0000"],
      ["kind", "note\u0000"],
      ["last_writer", "laptop/\u0000"],
    ];
    for (const [field, value] of fields) {
      for (
        const [name, url] of [["SQLite", sqliteUrl(join(home, `${field}.db`))], [
          "PostgreSQL",
          pg.toString(),
        ]] as const
      ) {
        await t.step(`${field} on ${name} → exit 1, "Line 2", nothing imported`, async () => {
          const lines = [good(1), JSON.stringify({ ...line2, [field!]: value }), good(3)];
          const r = await mcpstate(home, ["import", "--backend", url], {
            stdin: lines.join("\n") + "\n",
          });
          assertOneLineError(
            r,
            1,
            new RegExp(`Line 2 is not a valid mcpstate record: "${field}" holds U\\+0000`),
          );
          assert.match(r.stderr, /Nothing was imported/);
          assert.equal(await count(url, ["user1", "user2", "user3"]), 0);
        });
      }
    }
    await t.step(
      "migrate from a database that kept one: reported, not written; the rest copied",
      async () => {
        // Deno KV keeps such a name whole (node:sqlite reads text only up to a U+0000).
        const source = denokvUrl(join(home, "kept.kv"));
        const back = await openBackend(source);
        try {
          await back.records!.import(
            "old\u0000user",
            sampleRecord("note_aaaaaaa1", 1),
            restoreContext(),
          );
          await back.records!.import("fine", sampleRecord("note_aaaaaaa2", 1), restoreContext());
        } finally {
          await back.close();
        }
        const r = await mcpstate(home, [
          "migrate",
          "--from",
          source,
          "--to",
          pg.toString(),
          "--json",
        ]);
        assert.equal(r.code, 1, r.stderr);
        assert.match(r.stderr, /did not verify; first: user "old\\u0000user".*holds U\+0000/);
        const summary = JSON.parse(r.stdout);
        assert.deepEqual([summary.inserted, summary.mismatched], [1, 1]);
        assert.equal(await count(pg.toString(), ["fine"]), 1);
      },
    );
  } finally {
    const { default: postgres } = await import("postgres");
    const sql = postgres(pg.toString().split("?")[0]!, { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: migrate killed halfway (SIGKILL) and run again ends identical to an uninterrupted run", async () => {
  const home = await tempHome();
  const source = sqliteUrl(join(home, "source.db"));
  // synchronous=normal: still durable across a kill -9 (WAL), and fast enough
  // here; the kill is what this test is about, not the disk's fsync rate.
  const straight = `${sqliteUrl(join(home, "straight.db"))}?synchronous=normal`;
  const resumed = `${sqliteUrl(join(home, "resumed.db"))}?synchronous=normal`;
  const users = ["u0", "u1", "u2", "u3", "u4"];
  const N = 5000;
  try {
    const seed = await openBackend(`${source}?synchronous=normal`);
    try {
      const ctx = restoreContext();
      for (let i = 0; i < N; i++) {
        const rec = sampleRecord(`note_${String(i).padStart(8, "0")}`, 1 + (i % 4), {
          state: `{"i":${i}}`,
          expiresAt: i % 3 === 0 ? null : Date.now() + DAY + i,
        });
        await seed.records!.import(users[i % users.length]!, rec, ctx);
      }
    } finally {
      await seed.close();
    }

    const full = await mcpstate(home, ["migrate", "--from", source, "--to", straight, "--json"]);
    ok(full, "uninterrupted migrate");
    assert.equal(JSON.parse(full.stdout).inserted, N);

    // Throttled so that it is surely mid-way when killed.
    const child = await spawnMcpstate(home, [
      "migrate",
      "--from",
      source,
      "--to",
      resumed,
      "--rate",
      "2500",
    ]);
    const watch = await openBackend(resumed);
    let atKill = 0;
    try {
      const deadline = Date.now() + 30_000;
      while ((atKill = await countAll(watch, users)) < N / 5) {
        assert.ok(Date.now() < deadline, "migrate made no progress");
        await new Promise((r) => setTimeout(r, 25));
      }
      child.kill("SIGKILL");
      const status = await child.status;
      assert.equal(status.success, false);
      atKill = await countAll(watch, users);
    } finally {
      await child.stdout.cancel();
      await child.stderr.cancel();
      await watch.close();
    }
    assert.ok(atKill > 0 && atKill < N, `killed at ${atKill} of ${N}`);

    const again = await mcpstate(home, ["migrate", "--from", source, "--to", resumed, "--json"]);
    ok(again, "resumed migrate");
    const s = JSON.parse(again.stdout);
    assert.equal(s.records, N);
    assert.equal(s.identical, atKill, "what was copied before the kill is found identical");
    assert.equal(s.inserted, N - atKill);
    assert.equal(s.mismatched, 0);

    const [a, b, c] = await Promise.all([
      exportOf(home, source),
      exportOf(home, straight),
      exportOf(home, resumed),
    ]);
    assert.equal(a.split("\n").length - 1, N);
    assert.equal(b, a);
    assert.equal(c, b);
    ok(
      await mcpstate(home, ["migrate", "--from", source, "--to", resumed, "--check"]),
      "check after resume",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: release archives are valid tar.gz and zip with every file and its mode", async () => {
  const { tarGz, zip } = await import("../scripts/compile.ts");
  const { gunzipSync, inflateRawSync, crc32 } = await import("node:zlib");
  const entries = [
    { name: "mcpstate", data: crypto.getRandomValues(new Uint8Array(65_536)), mode: 0o755 },
    { name: "README.md", data: new TextEncoder().encode("# mcpstate\n"), mode: 0o644 },
    { name: "LICENSE", data: new Uint8Array(0), mode: 0o644 },
  ];
  // tar.gz: read back by the system's tar.
  const dir = await Deno.makeTempDir({ prefix: "mcpstate-pack-" });
  try {
    const file = join(dir, "a.tar.gz");
    await Deno.writeFile(file, tarGz(entries, 1_700_000_000));
    assert.ok(gunzipSync(await Deno.readFile(file)).length % 512 === 0);
    const x = await new Deno.Command("tar", { args: ["-xzf", file, "-C", dir] }).output();
    assert.equal(x.code, 0, new TextDecoder().decode(x.stderr));
    for (const e of entries) {
      assert.deepEqual(await Deno.readFile(join(dir, e.name)), e.data);
      if (Deno.build.os !== "windows") {
        assert.equal((await Deno.stat(join(dir, e.name))).mode! & 0o777, e.mode);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // zip: walk the central directory and inflate every member.
  const z = zip(entries, 1_700_000_000);
  const view = new DataView(z.buffer, z.byteOffset, z.byteLength);
  const eocd = z.length - 22;
  assert.equal(view.getUint32(eocd, true), 0x06054b50);
  assert.equal(view.getUint16(eocd + 10, true), entries.length);
  let at = view.getUint32(eocd + 16, true);
  for (const e of entries) {
    assert.equal(view.getUint32(at, true), 0x02014b50);
    const size = view.getUint32(at + 20, true);
    const nameLen = view.getUint16(at + 28, true);
    const name = new TextDecoder().decode(z.subarray(at + 46, at + 46 + nameLen));
    assert.equal(name, e.name);
    assert.equal((view.getUint32(at + 38, true) >>> 16) & 0o777, e.mode);
    const local = view.getUint32(at + 42, true);
    assert.equal(view.getUint32(local, true), 0x04034b50);
    const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
    const data = new Uint8Array(inflateRawSync(z.subarray(start, start + size)));
    assert.deepEqual(data, e.data);
    assert.equal(view.getUint32(at + 16, true), crc32(e.data) >>> 0);
    at += 46 + nameLen;
  }
});

/** Why the compile test cannot run here (`deno compile` cannot get its base runtime), or `null`. */
async function compileUnavailable(): Promise<string | null> {
  const { TARGETS } = await import("../scripts/compile.ts");
  const target = Deno.build.target;
  if (!TARGETS.some((t) => t.target === target)) return `no release binary is built for ${target}`;
  const version = `v${Deno.version.deno}`;
  if (await cachedRuntime(join(await denoDir(), "dl"), version, `denort-${target}.zip`, 5)) {
    return null;
  }
  const url = `https://dl.deno.land/release/${version}/denort-${target}.zip`;
  try {
    const r = await fetch(url, { method: "HEAD", signal: AbortSignal.timeout(5000) });
    await r.body?.cancel();
    return r.ok ? null : `${url} answered HTTP ${r.status}`;
  } catch (e) {
    return `deno compile cannot download its base runtime (${url}: ${
      e instanceof Error ? e.message : String(e)
    })`;
  }
}

/** Whether Deno's cache already holds the base runtime (`…/<version>/…/<file>`). */
async function cachedRuntime(
  dir: string,
  version: string,
  file: string,
  depth: number,
): Promise<boolean> {
  if (depth === 0) return false;
  try {
    for await (const e of Deno.readDir(dir)) {
      const path = join(dir, e.name);
      if (e.isFile && e.name === file && path.includes(version)) return true;
      if (e.isDirectory && await cachedRuntime(path, version, file, depth - 1)) return true;
    }
  } catch { /* no such directory */ }
  return false;
}

const compileSkip = await compileUnavailable();
if (compileSkip) console.error(`cli: the compile test is skipped: ${compileSkip}.`);

Deno.test({
  name: `cli: deno task compile builds a binary with exactly the needed permissions${
    compileSkip ? ` (skipped: ${compileSkip})` : ""
  }`,
  ignore: compileSkip !== null,
  async fn() {
    const { archiveName, TARGETS } = await import("../scripts/compile.ts");
    const home = await tempHome();
    try {
      const target = TARGETS.find((t) => t.target === Deno.build.target)!;
      const dist = join(home, "dist");
      const built = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          join(ROOT, "scripts", "compile.ts"),
          "--target",
          target.target,
          "--out",
          dist,
        ],
        cwd: ROOT,
        env: await cliEnv(home),
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(built.code, 0, new TextDecoder().decode(built.stderr));
      const archive = join(dist, archiveName(target));
      const sums = await Deno.readTextFile(join(dist, "SHA256SUMS"));
      assert.match(
        sums,
        new RegExp(`^[0-9a-f]{64}  ${archiveName(target).replaceAll(".", "\\.")}$`, "m"),
      );
      const listed = await new Deno.Command("tar", { args: ["-tf", archive], stdout: "piped" })
        .output();
      const names = new TextDecoder().decode(listed.stdout).trim().split(/\r?\n/).sort();
      const exe = Deno.build.os === "windows" ? "mcpstate.exe" : "mcpstate";
      assert.deepEqual(names, ["LICENSE", "README.md", exe].sort());
      const bin = join(home, "bin");
      await Deno.mkdir(bin);
      const x = await new Deno.Command("tar", { args: ["-xf", archive, "-C", bin] }).output();
      assert.equal(x.code, 0);
      const mcpstateBin = join(bin, exe);
      const run = async (args: string[]) => {
        const out = await new Deno.Command(mcpstateBin, {
          args,
          env: await cliEnv(home),
          clearEnv: true,
          stdout: "piped",
          stderr: "piped",
        }).output();
        const dec = new TextDecoder();
        return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
      };
      const v = await run(["--version"]);
      assert.equal(v.stdout.trim(), `mcpstate ${VERSION}`);
      const cfg = JSON.parse((await run(["config"])).stdout).mcpServers.mcpstate;
      assert.deepEqual(cfg.args, ["serve"]);
      assert.equal(await Deno.realPath(cfg.command), await Deno.realPath(mcpstateBin));
      const doc = await run(["doctor", "--backend", denokvUrl(join(home, "s.kv"))]);
      assert.equal(doc.code, 0, doc.stdout + doc.stderr);
      assert.match(doc.stdout, /compiled binary/);
      assert.match(doc.stdout, /^ok {4}deno kv: enabled/m);
      assert.match(doc.stdout, /^ok {4}permissions: all granted/m);
      // The binary serves over stdio, with its baked-in permissions only.
      const { Client } = await import("@modelcontextprotocol/client");
      const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
      const client = new Client({ name: "compile-test", version: "1.0.0" });
      await client.connect(
        new StdioClientTransport({
          command: mcpstateBin,
          args: ["serve"],
          env: await cliEnv(home, { MCPSTATE_BACKEND: sqliteUrl(join(home, "b.db")) }),
          stderr: "pipe",
        }),
      );
      try {
        const saved = await client.callTool({
          name: "state_save",
          arguments: { kind: "note", state: { a: 1 } },
        });
        assert.ok(!saved.isError, JSON.stringify(saved));
      } finally {
        await client.close();
      }
      const listed2 = await run(["list", "--json", "--backend", sqliteUrl(join(home, "b.db"))]);
      assert.equal(JSON.parse(listed2.stdout).length, 1);
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});

Deno.test("cli: list and doctor show a user's usage beside the MCPSTATE_QUOTA_* quotas", async () => {
  const home = await tempHome();
  try {
    const url = sqliteUrl(join(home, "q", "state.db"));
    {
      await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
      await store.mint("note", { text: "hi" }, { user: "alice" }); // 13 bytes
      await store.mint("note", { text: "there" }, { user: "alice" }); // 16 bytes
    }
    const env = { MCPSTATE_QUOTA_HANDLES: "2", MCPSTATE_QUOTA_BYTES: "1000" };
    const list = await mcpstate(home, ["list", "--backend", url, "--user", "alice"], { env });
    ok(list);
    assert.match(
      list.stdout,
      /^Usage: 2 of 2 handles, 29 of 1,000 bytes, 0 writes this minute$/m,
    );
    const doctor = await mcpstate(home, ["doctor", "--json", "--backend", url, "--user", "alice"], {
      env,
    });
    const usage = JSON.parse(doctor.stdout).checks.find((c: { check: string }) =>
      c.check === "usage"
    );
    assert.equal(usage.status, "warn");
    assert.match(usage.message, /"alice": 2 of 2 handles/);
    assert.match(usage.fix, /handles quota/);
    const bad = await mcpstate(home, ["doctor", "--json", "--backend", url], {
      env: { MCPSTATE_QUOTA_WRITES_PER_MINUTE: "lots" },
    });
    assert.equal(bad.code, 1);
    assert.ok(
      JSON.parse(bad.stdout).checks.some((c: { status: string; message: string }) =>
        c.status === "fail" && c.message.startsWith("MCPSTATE_QUOTA_WRITES_PER_MINUTE=")
      ),
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: transfer hands a handle to another user; the old owner loses it", async () => {
  const home = await tempHome();
  const url = sqliteUrl(join(home, "state.db"));
  const store = await openStore(url);
  let task: string, taken: string;
  try {
    task = await store.mint("task", { todo: ["ship"] }, { user: "alice" });
    await store.patch(task, [Append("todo", "test")], { user: "alice" });
    taken = await store.mint("task", { a: 1 }, { user: "alice" });
    for await (const r of store.exportRecords("alice")) {
      if (r.handle === taken) await store.importRecord("carol", r);
    }
  } finally {
    await store.close();
  }
  const as = { env: { MCPSTATE_BACKEND: url, MCPSTATE_USER: "alice" } };
  assertOneLineError(await mcpstate(home, ["transfer", task], as), 2, /--to USER/);
  const r = await mcpstate(home, ["transfer", task, "--to", "bob", "--json"], as);
  ok(r);
  assert.deepEqual(JSON.parse(r.stdout), { ok: true, handle: task, from: "alice", to: "bob" });
  assertOneLineError(await mcpstate(home, ["get", task], as), 1, /No handle/);
  const bob = await mcpstate(home, ["get", task, "--user", "bob"], as);
  ok(bob);
  const snap = JSON.parse(bob.stdout);
  assert.equal(snap.version, 3, "mint, patch, and the transfer's own entry");
  assert.deepEqual(snap.state, { todo: ["ship", "test"] });
  // Carol already has a handle of that name: refused, nothing moves.
  assertOneLineError(
    await mcpstate(home, ["transfer", taken, "--to", "carol"], as),
    2,
    /already has a handle named/,
  );
  ok(await mcpstate(home, ["get", taken], as));
  // --keep: the old owner keeps a grant, printed with its alias.
  assertOneLineError(
    await mcpstate(home, ["transfer", taken, "--to", "dave", "--keep", "admin"], as),
    2,
    /keep must be one of/,
  );
  const kept = await mcpstate(home, ["transfer", taken, "--to", "dave", "--keep", "read"], as);
  ok(kept);
  assert.match(kept.stdout, /"alice" keeps read access through task_[a-z2-7]{26}\./);
  const alias = /through (task_[a-z2-7]{26})/.exec(kept.stdout)![1]!;
  const read = await mcpstate(home, ["get", alias], as);
  ok(read);
  assert.deepEqual(JSON.parse(read.stdout).state, { a: 1 });
  assertOneLineError(await mcpstate(home, ["get", taken], as), 1, /No handle/);
});

Deno.test("cli: share and unshare a handle on a SQLite file", async () => {
  const home = await tempHome();
  const url = sqliteUrl(join(home, "state.db"));
  const store = await openStore(url);
  let handle: string;
  try {
    handle = await store.mint("research", { notes: ["a"] }, { user: "alice" });
  } finally {
    await store.close();
  }
  const env = (user: string) => ({ env: { MCPSTATE_BACKEND: url, MCPSTATE_USER: user } });
  const shared = await mcpstate(
    home,
    ["share", handle, "--to", "bob", "--rights", "read", "--ttl-days", "7", "--json"],
    env("alice"),
  );
  ok(shared);
  const g = JSON.parse(shared.stdout) as Record<string, string>;
  assert.equal(g.ok, true as never);
  assert.equal(g.rights, "read");
  assert.equal(g.to, "bob");
  assert.match(g.handle!, /^research_[a-z2-7]{26}$/);
  assert.match(g.expires_at!, /Z$/);
  const read = await mcpstate(home, ["get", g.handle!], env("bob"));
  ok(read);
  const snap = JSON.parse(read.stdout);
  assert.deepEqual(snap.state, { notes: ["a"] });
  assert.equal(snap.handle, g.handle);
  assert.equal(snap.shared_by, "alice");
  assert.equal(snap.rights, "read");
  const people = await mcpstate(
    home,
    ["share", handle, "--to", "*", "--rights", "append"],
    env("alice"),
  );
  ok(people);
  assert.match(people.stdout, /Alias handle: research_[a-z2-7]{26}\nGrant: grant_/);
  const bad = await mcpstate(
    home,
    ["share", handle, "--to", "bob", "--rights", "admin"],
    env("alice"),
  );
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /rights/);
  const ended = await mcpstate(home, ["unshare", g.grant!, "--json"], env("alice"));
  ok(ended);
  assert.equal(JSON.parse(ended.stdout).ended, 1);
  const gone = await mcpstate(home, ["get", g.handle!], env("bob"));
  assert.notEqual(gone.code, 0);
  assert.match(gone.stderr, /No handle/);
});

Deno.test("cli: commands that only read create no file or folder (a missing file reads as an empty store)", async () => {
  const home = await tempHome();
  try {
    const missing = join(home, "missing", "dir");
    for (const url of [sqliteUrl(join(missing, "x.db")), denokvUrl(join(missing, "x.kv"))]) {
      const as = { env: { MCPSTATE_BACKEND: url } };
      const listed = await mcpstate(home, ["list"], as);
      ok(listed, "list");
      assert.match(listed.stdout, /^No handles for user "local"\./);
      const json = await mcpstate(home, ["list", "--json", "--all-users"], as);
      ok(json, "list --json --all-users");
      assert.deepEqual(JSON.parse(json.stdout), []);
      const got = await mcpstate(home, ["get", "research_0123456789abcdef"], as);
      assert.equal(got.code, 1);
      assert.match(got.stderr, /No handle "research_0123456789abcdef" exists/);
      const exported = await mcpstate(home, ["export"], as);
      ok(exported, "export");
      assert.equal(exported.stdout, "");
      const doc = await mcpstate(home, ["doctor"], as);
      assert.match(doc.stdout, /backend: no database file yet/);
      const inspect = await mcpstate(home, ["inspect"], as);
      assertOneLineError(inspect, 1, /No state at .*x\.(db|kv) yet/);
      await mcpstate(home, ["config", "--client", "cursor"], as);
      await assert.rejects(Deno.stat(join(home, "missing")), Deno.errors.NotFound, url);
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("cli: usage lines count one handle, byte and write in the singular", async () => {
  const { describeUsage } = await import("../src/cli/_usage.ts");
  assert.equal(
    describeUsage({ handles: 1, bytes: 1, writesThisMinute: 1 }, {}),
    "1 handle, 1 byte, 1 write this minute",
  );
  assert.equal(
    describeUsage({ handles: 1, bytes: 2_000, writesThisMinute: 0 }, { maxHandles: 5 }),
    "1 of 5 handles, 2,000 bytes, 0 writes this minute",
  );
  const home = await tempHome();
  try {
    const url = sqliteUrl(join(home, "one.db"));
    const store = await openStore(url);
    await store.mint("note", { a: 1 }, { user: "ann" });
    await store.close();
    const r = await mcpstate(home, ["list", "--backend", url, "--user", "ann"]);
    ok(r);
    assert.match(r.stdout, /^Usage: 1 handle, [\d,]+ bytes, \d+ writes? this minute$/m);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
