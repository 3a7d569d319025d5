/**
 * The one place that says what the `mcpstate` program may do. `deno task
 * compile` bakes these flags into every binary, `mcpstate config` writes them
 * into the `deno run` entry, and the CLI tests run `cli.ts` with exactly
 * these flags, so a missing permission fails a test before it fails a user.
 *
 * Why each one:
 * - `--allow-read`, `--allow-write`: the SQLite or Deno KV file wherever the
 *   backend URL points (default `~/.mcpstate/`), and the files `export --out`
 *   and `import FILE` name.
 * - `--allow-net`: Redis, PostgreSQL and remote Deno KV at whatever host the
 *   URL names; `serve --transport http` and `inspect` (127.0.0.1 by default,
 *   or `--host`) listening; `serve --metrics-port` listening for Prometheus
 *   scrapes; fetching the JWKS of the configured issuer. (OpenTelemetry export
 *   under `OTEL_DENO=true` is done by the runtime itself and needs no
 *   permission.)
 * - `--allow-env`: `MCPSTATE_*` settings, `HOME`/`USERPROFILE` for `~`,
 *   `DENO_KV_ACCESS_TOKEN`, and the variables the Redis and PostgreSQL drivers
 *   consult (`PGHOST`, `DEBUG`, …), which a fixed list would break.
 * - `--allow-sys=hostname`: the default writer label `<hostname>/<client>`,
 *   and `inspect/<hostname>`.
 * - `--unstable-kv`: the Deno KV backend; `--unstable-no-legacy-abort`: quiet
 *   `Deno.serve` request signals.
 * - `--no-prompt`: a missing permission is an error, never a question on the
 *   terminal (stdin belongs to the MCP client under `serve`).
 *
 * Not granted: running programs, FFI, and any other system information.
 *
 * @example Running the CLI the way the binary runs
 * ```ts ignore
 * import { DENO_FLAGS } from "./permissions.ts";
 * new Deno.Command(Deno.execPath(), { args: ["run", ...DENO_FLAGS, "cli.ts", "list"] });
 * ```
 *
 * @module
 */

/** The permission flags of the program, for `deno run` and `deno compile` alike. */
export const PERMISSION_FLAGS: readonly string[] = Object.freeze([
  "--allow-read",
  "--allow-write",
  "--allow-net",
  "--allow-env",
  "--allow-sys=hostname",
]);

/**
 * Unstable features the program uses: the Deno KV backend, and
 * `--unstable-no-legacy-abort` (`request.signal` aborts only when the client
 * disconnects, and `Deno.serve` stops warning about it).
 */
export const UNSTABLE_FLAGS: readonly string[] = Object.freeze([
  "--unstable-kv",
  "--unstable-no-legacy-abort",
]);

/**
 * Everything `deno run` and `deno compile` need to run `cli.ts` as the binary
 * does: {@link PERMISSION_FLAGS}, {@link UNSTABLE_FLAGS} and `--no-prompt`.
 */
export const DENO_FLAGS: readonly string[] = Object.freeze([
  ...PERMISSION_FLAGS,
  ...UNSTABLE_FLAGS,
  "--no-prompt",
]);
