/**
 * `mcpstate serve` configuration: defaults, `MCPSTATE_*` twins, flags over
 * variables, and the fail-closed rules.
 */

import assert from "node:assert/strict";
import { DEFAULT_URL } from "../mod.ts";
import { ConfigError, parseServeArgs, type ServeConfig } from "../src/cli/serve_config.ts";

function parse(args: string[], env: Record<string, string> = {}): ServeConfig {
  const c = parseServeArgs(args, (name) => env[name]);
  assert.notEqual(c, "help");
  return c as ServeConfig;
}

Deno.test("serve defaults: stdio, the SQLite default, user local, port 8787 on loopback", () => {
  const c = parse([]);
  assert.equal(c.transport, "stdio");
  assert.equal(c.backend, DEFAULT_URL);
  assert.equal(c.user, "local");
  assert.equal(c.writer, undefined);
  assert.equal(c.host, "127.0.0.1");
  assert.equal(c.port, 8787);
  assert.equal(c.publicUrl.href, "http://127.0.0.1:8787/mcp");
  assert.equal(c.maxBodyBytes, 4 * 1024 * 1024);
  assert.equal(c.maxStateBytes, undefined);
  assert.equal(c.auth, undefined);
  assert.equal(c.allowAnonymous, false);
  assert.equal(parseServeArgs(["--help"], () => undefined), "help");
  assert.equal(parseServeArgs(["-h"], () => undefined), "help");
});

Deno.test("every variable has its effect, and a flag wins over its variable", () => {
  const env = {
    MCPSTATE_BACKEND: "memory://",
    MCPSTATE_TRANSPORT: "http",
    MCPSTATE_HOST: "0.0.0.0",
    MCPSTATE_PORT: "9000",
    MCPSTATE_USER: "ada",
    MCPSTATE_WRITER: "desk/ada",
    MCPSTATE_MAX_STATE_BYTES: "4000000",
    MCPSTATE_AUTH_ISSUER: "https://idp.example.com/",
    MCPSTATE_AUTH_JWKS_URL: "https://idp.example.com/jwks",
    MCPSTATE_AUTH_JWKS_COOLDOWN_MS: "5000",
    MCPSTATE_ALLOWED_HOSTS: "a.example, b.example",
    MCPSTATE_ALLOWED_ORIGINS: "app.example",
    MCPSTATE_PUBLIC_URL: "https://state.example.com/mcp",
  };
  const c = parse([], env);
  assert.equal(c.backend, "memory://");
  assert.equal(c.transport, "http");
  assert.equal(c.host, "0.0.0.0");
  assert.equal(c.port, 9000);
  assert.equal(c.user, "ada");
  assert.equal(c.writer, "desk/ada");
  assert.equal(c.maxStateBytes, 4_000_000);
  assert.equal(c.maxBodyBytes, 2 * 4_000_000 + 65536, "the body limit grows with the state cap");
  assert.deepEqual(c.auth, {
    issuer: "https://idp.example.com/",
    audience: "https://state.example.com/mcp",
    jwksUrl: "https://idp.example.com/jwks",
    jwksCooldownMs: 5000,
  });
  assert.deepEqual(c.allowedHosts, ["a.example", "b.example"]);
  assert.deepEqual(c.allowedOrigins, ["app.example"]);

  const f = parse([
    "--backend",
    "sqlite:///:memory:",
    "--port",
    "9001",
    "--user",
    "bob",
    "--writer",
    "w",
    "--auth-audience",
    "api://mcpstate",
    "--max-body-bytes",
    "2048",
  ], env);
  assert.equal(f.backend, "sqlite:///:memory:");
  assert.equal(f.port, 9001);
  assert.equal(f.user, "bob");
  assert.equal(f.writer, "w");
  assert.equal(f.auth?.audience, "api://mcpstate");
  assert.equal(f.maxBodyBytes, 2048);
});

Deno.test("HTTP fails closed; anonymous is an explicit opt-in", () => {
  assert.throws(() => parse(["--transport", "http"]), ConfigError);
  assert.throws(
    () => parse(["--transport", "http"], { MCPSTATE_ALLOW_ANONYMOUS: "0" }),
    /Refusing/,
  );
  assert.equal(parse(["--transport", "http", "--allow-anonymous"]).allowAnonymous, true);
  assert.equal(
    parse(["--transport", "http"], { MCPSTATE_ALLOW_ANONYMOUS: "true" }).allowAnonymous,
    true,
  );
  // The default audience is the public URL, or the listening address.
  const c = parse([
    "--transport",
    "http",
    "--auth-issuer",
    "http://127.0.0.1:9/",
    "--port",
    "1234",
  ]);
  assert.equal(c.auth?.audience, "http://127.0.0.1:1234/mcp");
  assert.equal(c.auth?.jwksUrl, undefined, "discovered from the issuer");
  assert.throws(
    () =>
      parse([
        "--transport",
        "http",
        "--auth-issuer",
        "https://i.example",
        "--auth-jwks-url",
        "http://i.example/jwks",
      ]),
    /https/,
  );
  assert.throws(() => parse(["--public-url", "ftp://x"]), /http/);
  assert.equal(parse(["--host", "::1", "--port", "1"]).publicUrl.href, "http://[::1]:1/mcp");
});

Deno.test("listen limits: defaults, MCPSTATE_* twins, flags over variables, bad values refused", () => {
  const d = parse([]);
  assert.deepEqual(
    [d.maxListenStreams, d.maxListenStreamsPerUser, d.maxWatchesPerUser],
    [1000, 16, 256],
  );
  const env = {
    MCPSTATE_MAX_LISTEN_STREAMS: "50",
    MCPSTATE_MAX_LISTEN_STREAMS_PER_USER: "4",
    MCPSTATE_MAX_WATCHES_PER_USER: "64",
  };
  const e = parse([], env);
  assert.deepEqual([e.maxListenStreams, e.maxListenStreamsPerUser, e.maxWatchesPerUser], [
    50,
    4,
    64,
  ]);
  const f = parse([
    "--max-listen-streams",
    "7",
    "--max-listen-streams-per-user",
    "2",
    "--max-watches-per-user",
    "9",
  ], env);
  assert.deepEqual([f.maxListenStreams, f.maxListenStreamsPerUser, f.maxWatchesPerUser], [7, 2, 9]);
  for (
    const [flag, name] of [
      ["max-listen-streams", "MCPSTATE_MAX_LISTEN_STREAMS"],
      ["max-listen-streams-per-user", "MCPSTATE_MAX_LISTEN_STREAMS_PER_USER"],
      ["max-watches-per-user", "MCPSTATE_MAX_WATCHES_PER_USER"],
    ] as const
  ) {
    for (const bad of ["0", "-1", "1.5", "lots", "99999999999"]) {
      assert.throws(() => parse([`--${flag}=${bad}`]), (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, new RegExp(`--${flag} \\(${name}\\)`));
        return true;
      });
      assert.throws(() => parse([], { [name]: bad }), ConfigError);
    }
  }
});
