/**
 * `mcpstate doctor`: checks the runtime, permissions, settings and backend,
 * and says what to fix.
 *
 * @module
 */

import { dirname, join, resolve } from "node:path";
import { McpStateError, redact } from "../errors.ts";
import type { HandleStore } from "../store.ts";
import type { QuotaOptions } from "../types.ts";
import { DEFAULT_URL, filePathOf } from "../url.ts";
import { type Command, defineCommand, EXIT_FAILURE, EXIT_OK, UsageError } from "./_command.ts";
import { strings } from "./_options.ts";
import { backendUrl, missingFile, openStore, USER_JSON_OPTIONS, userOf } from "./_store.ts";
import { oneLine, printJson, println } from "./_output.ts";
import { isCompiled } from "./config.ts";
import { DENO_FLAGS } from "./permissions.ts";
import { schemeOf } from "./transfer.ts";
import { VERSION } from "../version.ts";
import { describeUsage, quotasFromEnv, quotasReached } from "./_usage.ts";

const HELP = `Usage: mcpstate doctor [options]

Checks what mcpstate needs and says what to fix: the Deno version and flags
(--unstable-kv for Deno KV), the permissions granted, the MCPSTATE_* settings,
that the backend URL parses, that the database directory exists and is
writable, that the backend opens and answers, whether it supports
export/import/migrate, a user's usage beside the MCPSTATE_QUOTA_* quotas,
and encryption at rest: the users' data keys by key id and, with the
encryption keys given, the plaintext stored copies left (mcpstate encrypt
seals them; mcpstate keys rotate moves data keys to the current key). Exit
code 1 when a check fails.

Options:
  --backend URL    Backend to check (default: $MCPSTATE_BACKEND, else sqlite:///~/.mcpstate/state.db)
  --user USER      Whose usage to show (default: $MCPSTATE_USER, else "local")
  --timeout SECS   How long to wait for the backend to answer (default 10)
  --json           Print the checks as JSON
  -h, --help       Show this help
`;

/** One finding of the doctor. */
export interface Check {
  /** `ok`, `warn` (works, but note this) or `fail` (fix this). */
  status: "ok" | "warn" | "fail";
  /** What was checked, in a few words. */
  check: string;
  /** What was found. */
  message: string;
  /** What to do about it. */
  fix?: string;
  /** Figures behind the message, for `--json` (the encryption check's key ids and plaintext). */
  details?: Record<string, unknown>;
}

const FILE_SCHEMES = new Set(["sqlite", "denokv"]);
const NET_SCHEMES = new Set([
  "redis",
  "rediss",
  "redis+cluster",
  "rediss+cluster",
  "postgres",
  "postgresql",
  "denokv+https",
  "denokv+http",
]);
const KNOWN_SCHEMES = new Set([...FILE_SCHEMES, ...NET_SCHEMES, "memory"]);

/** The `doctor` subcommand. */
export const doctor: Command = defineCommand({
  name: "doctor",
  summary: "Check the runtime, permissions and backend, and say what to fix",
  help: HELP,
  options: { ...USER_JSON_OPTIONS, ...strings("timeout") },
  async run(values) {
    const timeout = values.timeout === undefined ? 10 : Number(values.timeout);
    if (!Number.isFinite(timeout) || timeout <= 0) {
      throw new UsageError(`--timeout must be a number of seconds greater than 0.`);
    }
    // Without --allow-env the defaults stand in; the permissions check says what is missing.
    const url = unlessDenied(() => backendUrl(values.backend), DEFAULT_URL);
    const checks = await diagnose(
      url,
      timeout * 1000,
      unlessDenied(() => userOf(values.user), "local"),
    );
    const failed = checks.some((c) => c.status === "fail");
    if (values.json) {
      await printJson({ ok: !failed, checks });
    } else {
      const lines: string[] = [];
      for (const c of checks) {
        lines.push(
          `${c.status === "fail" ? "FAIL" : c.status.padEnd(4)}  ${c.check}: ${c.message}`,
        );
        if (c.fix) lines.push(`      fix: ${c.fix}`);
      }
      lines.push(
        failed
          ? "Some checks failed; fix them as shown and run mcpstate doctor again."
          : "All checks passed.",
      );
      await println(lines.join("\n"));
    }
    return failed ? EXIT_FAILURE : EXIT_OK;
  },
});

/**
 * Runs every check against a backend URL.
 *
 * @param url The backend URL.
 * @param timeoutMs How long the backend may take to open and answer.
 * @returns The findings, in order.
 */
export async function diagnose(
  url: string,
  timeoutMs: number,
  user = "local",
): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (c: Check) => checks.push(c);
  const scheme = schemeOf(url);
  checkRuntime(scheme, add);
  const file = FILE_SCHEMES.has(scheme) ? filePath(url, scheme) : null;
  await checkPermissions(scheme, file, add);
  const quotas = unlessDenied(() => checkSettings(add), {}, (e) =>
    add({
      status: "fail",
      check: "settings",
      message: `cannot read the MCPSTATE_* settings: ${oneLine(messageOf(e))}`,
      fix: "Grant --allow-env (see permissions above).",
    }));
  if (!await checkBackendUrl(url, scheme, add)) return checks;
  if (file !== null && !await checkDirectory(file, add)) return checks;
  if (file !== null && missingFile(url) !== undefined) {
    // A command that only reads creates nothing: the file is checked once it exists.
    add({
      status: "ok",
      check: "backend",
      message: "no database file yet; mcpstate serve creates it at the first write",
    });
    return checks;
  }
  await checkBackend(url, scheme, { timeoutMs, user, quotas }, add);
  return checks;
}

/** The Deno version, and whether Deno KV is enabled. */
function checkRuntime(scheme: string, add: (c: Check) => void): void {
  const [major = 0, minor = 0] = Deno.version.deno.split(".").map(Number);
  const runtime = `mcpstate ${VERSION}, Deno ${Deno.version.deno} (${Deno.build.target}), ${
    isCompiled() ? "compiled binary" : "deno run"
  }`;
  if (major > 2 || (major === 2 && minor >= 2)) {
    add({ status: "ok", check: "runtime", message: runtime });
  } else {
    add({
      status: "fail",
      check: "runtime",
      message: `${runtime}; mcpstate needs Deno 2.2 or later (node:sqlite)`,
      fix: "Run deno upgrade, or use a compiled mcpstate binary.",
    });
  }
  const kv = typeof (Deno as { openKv?: unknown }).openKv === "function";
  const fix = isCompiled()
    ? "Use an official mcpstate binary, which is built with --unstable-kv."
    : "Add --unstable-kv to the deno run command.";
  if (kv) add({ status: "ok", check: "deno kv", message: "enabled (--unstable-kv)" });
  else if (scheme === "denokv" || scheme.startsWith("denokv+")) {
    add({
      status: "fail",
      check: "deno kv",
      message: "not enabled: this backend will not open",
      fix,
    });
  } else {
    // Only a denokv:// backend needs it: nothing to warn about for this one.
    add({
      status: "ok",
      check: "deno kv",
      message: "not enabled; only denokv:// backends need it",
    });
  }
}

/** One permission the doctor asks about: what it is for, and whether this backend needs it. */
interface Permission {
  desc: Deno.PermissionDescriptor;
  label: string;
  needed: boolean;
  why: string;
}

/** The permissions mcpstate uses, for a backend of `scheme` (its database `file`, if any). */
function permissionsFor(scheme: string, file: string | null): Permission[] {
  return [
    {
      desc: file ? { name: "read", path: file } : { name: "read" },
      label: "read",
      needed: file !== null,
      why: "the database file, import files",
    },
    {
      desc: file ? { name: "write", path: file } : { name: "write" },
      label: "write",
      needed: file !== null,
      why: "the database file, export --out",
    },
    {
      desc: { name: "net" },
      label: "net",
      needed: NET_SCHEMES.has(scheme),
      why: "Redis, PostgreSQL, remote Deno KV, serve --transport http",
    },
    { desc: { name: "env" }, label: "env", needed: true, why: "MCPSTATE_* settings, HOME" },
    {
      desc: { name: "sys", kind: "hostname" },
      label: "sys (hostname)",
      needed: false,
      why: "the default writer label",
    },
  ];
}

/** Which permissions are not granted: a failure when the backend needs one. */
async function checkPermissions(
  scheme: string,
  file: string | null,
  add: (c: Check) => void,
): Promise<void> {
  const missing: string[] = [];
  let missingNeeded = false;
  for (const p of permissionsFor(scheme, file)) {
    const state = (await Deno.permissions.query(p.desc)).state;
    if (state !== "granted") {
      missing.push(`${p.label} (${p.why})`);
      if (p.needed) missingNeeded = true;
    }
  }
  if (missing.length === 0) {
    add({ status: "ok", check: "permissions", message: "all granted" });
    return;
  }
  add({
    status: missingNeeded ? "fail" : "warn",
    check: "permissions",
    message: `not granted: ${missing.join("; ")}`,
    fix: isCompiled()
      ? "Use an official mcpstate binary (it is built with every permission it needs), or run it through deno with the flags mcpstate config prints."
      : `Run deno with ${DENO_FLAGS.join(" ")} (mcpstate config prints the whole command).`,
  });
}

/** The `MCPSTATE_*` settings that are malformed; answers the quotas that are set. */
function checkSettings(add: (c: Check) => void): QuotaOptions {
  const maxBytes = Deno.env.get("MCPSTATE_MAX_STATE_BYTES");
  if (maxBytes !== undefined && !(/^\d+$/.test(maxBytes) && Number(maxBytes) >= 2)) {
    add({
      status: "fail",
      check: "settings",
      message: `MCPSTATE_MAX_STATE_BYTES=${
        JSON.stringify(maxBytes)
      } is not a whole number of bytes`,
      fix: "Set it to a whole number such as 1048576, or unset it.",
    });
  }
  const { quotas, malformed } = quotasFromEnv();
  for (const name of malformed) {
    add({
      status: "fail",
      check: "settings",
      message: `${name}=${JSON.stringify(Deno.env.get(name))} is not a whole number, at least 1`,
      fix: "Set it to a whole number such as 1000, or unset it for no limit.",
    });
  }
  if (Deno.env.get("MCPSTATE_USER") === "") {
    add({
      status: "warn",
      check: "settings",
      message: 'MCPSTATE_USER is set but empty; "local" is used',
      fix: "Unset it or give it a user name.",
    });
  }
  return quotas;
}

/** Whether the backend URL parses (an unknown scheme is tried, for its message). */
async function checkBackendUrl(
  url: string,
  scheme: string,
  add: (c: Check) => void,
): Promise<boolean> {
  if (!KNOWN_SCHEMES.has(scheme)) {
    try {
      await (await openStore(url)).close();
    } catch (e) {
      add({
        status: "fail",
        check: "backend url",
        message: oneLine(messageOf(e)),
        fix: "Use one of the forms above.",
      });
      return false;
    }
  }
  add({ status: "ok", check: "backend url", message: redact(url) });
  if (scheme === "memory") {
    add({
      status: "warn",
      check: "backend",
      message: "memory:// keeps nothing once the process exits",
      fix: "Use sqlite:///~/.mcpstate/state.db (the default) for state that lasts.",
    });
  }
  return true;
}

/** Whether the backend opens and answers, what it supports, and the user's usage. */
async function checkBackend(
  url: string,
  scheme: string,
  { timeoutMs, user, quotas }: { timeoutMs: number; user: string; quotas: QuotaOptions },
  add: (c: Check) => void,
): Promise<void> {
  let store: HandleStore | null = null;
  const started = performance.now();
  try {
    store = await withTimeout(openStore(url), timeoutMs, "open");
    await withTimeout(store.countRecords("mcpstate-doctor"), timeoutMs, "answer");
    add({
      status: "ok",
      check: "backend",
      message: `opens and answers (${Math.round(performance.now() - started)} ms)`,
    });
    add(await exportCheck(store, scheme, timeoutMs));
    add(await encryptionCheck(store, timeoutMs));
    const usage = await withTimeout(store.usage(user), timeoutMs, "answer");
    const reached = quotasReached(usage, quotas);
    add({
      status: reached.length > 0 ? "warn" : "ok",
      check: "usage",
      message: `user ${JSON.stringify(user)}: ${describeUsage(usage, quotas)}`,
      ...(reached.length > 0
        ? {
          fix: `At the ${
            reached.join(" and ")
          } quota, writes are refused: delete or shrink handles, or raise MCPSTATE_QUOTA_*.`,
        }
        : {}),
    });
  } catch (e) {
    add({ status: "fail", check: "backend", ...withAdvice(messageOf(e), backendFix(scheme)) });
  } finally {
    await store?.close().catch(() => {});
  }
}

/** `k1: 3, k2: 1` (users by key id). */
function perKey(ids: Record<string, number>): string {
  return Object.entries(ids).map(([id, n]) => `${id}: ${n.toLocaleString("en-US")}`).join(", ");
}

/**
 * Encryption at rest: the data keys in use by key id, and, with keys, the
 * plaintext copies left; what to run about them (SPEC 9.2).
 */
async function encryptionCheck(store: HandleStore, timeoutMs: number): Promise<Check> {
  let census;
  try {
    census = await withTimeout(store.maintenance.census(), timeoutMs, "answer");
  } catch (e) {
    if (!(e instanceof Error) || !/did not answer within/.test(e.message)) throw e;
    // Counting reads every stored copy: a large store takes longer than an answer.
    return {
      status: "warn",
      check: "encryption",
      message: `the data keys and plaintext copies were not counted within ${
        Math.round(timeoutMs / 1000)
      } s`,
      fix: "Run mcpstate doctor --timeout 600 to wait longer.",
    };
  }
  const users = Object.values(census.keyIds).reduce((a, n) => a + n, 0);
  const keyed = `${users.toLocaleString("en-US")} user${users === 1 ? "" : "s"} with a data key${
    users > 0 ? ` (by key id: ${perKey(census.keyIds)})` : ""
  }`;
  const details: Record<string, unknown> = { keyIds: census.keyIds, users };
  const [current] = census.ring;
  if (current === undefined) {
    if (users === 0) {
      return {
        status: "ok",
        check: "encryption",
        message: "off: no keys given, no data keys stored",
        details,
      };
    }
    return {
      status: "warn",
      check: "encryption",
      message: `no keys given; ${keyed}: their handles read encryption_error no_key`,
      fix: "Give the keys: MCPSTATE_ENCRYPTION_KEYS=id:base64[,…] or --encryption-keys-file PATH.",
      details,
    };
  }
  const plain = census.plaintext ?? { record: 0, trash: 0, entry: 0, result: 0 };
  const left = plain.record + plain.trash + plain.entry + plain.result;
  Object.assign(details, { ring: census.ring, current, plaintext: { ...plain, total: left } });
  const unknown = Object.keys(census.keyIds).filter((id) => !census.ring.includes(id));
  const old = Object.keys(census.keyIds).filter((id) => id !== current);
  const message = `on, current key ${current}; ${keyed}; ${
    left === 0
      ? "no plaintext"
      : `${
        left.toLocaleString("en-US")
      } plaintext stored copies (${plain.record} records, ${plain.trash} in the trash, ${plain.entry} changelog entries, ${plain.result} idempotency results)`
  }`;
  if (unknown.length > 0) {
    return {
      status: "fail",
      check: "encryption",
      message: `${message}; key ${unknown.join(", ")} is not in the ring`,
      fix: `Add ${
        unknown.join(", ")
      } to the keys: those users' handles read encryption_error unknown_key.`,
      details,
    };
  }
  if (left > 0 || old.length > 0) {
    return {
      status: "warn",
      check: "encryption",
      message,
      fix: [
        left > 0 ? "Run mcpstate encrypt (online) to encrypt the plaintext." : "",
        old.length > 0
          ? `Run mcpstate keys rotate to rewrap the data keys under ${
            old.join(", ")
          } with ${current}.`
          : "",
      ].filter((x) => x !== "").join(" "),
      details,
    };
  }
  return { status: "ok", check: "encryption", message, details };
}

/** Whether the store can list users and restore records (export, import, migrate). */
async function exportCheck(store: HandleStore, scheme: string, timeoutMs: number): Promise<Check> {
  if (!store.capabilities.users || !store.capabilities.importRecord) {
    return {
      status: "warn",
      check: "export/migrate",
      message: `the ${scheme} backend cannot list users or restore records yet`,
      fix: "Upgrade mcpstate; until then export with --user, one user at a time.",
    };
  }
  const users = await withTimeout(store.users({ limit: 1001 }), timeoutMs, "answer");
  return {
    status: "ok",
    check: "export/migrate",
    message: `supported; ${users.length > 1000 ? "over 1000" : users.length} user${
      users.length === 1 ? "" : "s"
    } with state`,
  };
}

function filePath(url: string, scheme: string): string | null {
  try {
    const { path } = filePathOf(url, scheme);
    return path === ":memory:" ? null : resolve(path);
  } catch {
    return null;
  }
}

async function checkDirectory(file: string, add: (c: Check) => void): Promise<boolean> {
  const dir = dirname(file);
  let info: Deno.FileInfo | null = null;
  try {
    info = await Deno.stat(dir);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) {
      add({
        status: "fail",
        check: "directory",
        message: `${dir}: ${messageOf(e)}`,
        fix: "Check the path and its permissions.",
      });
      return false;
    }
  }
  if (info === null) {
    add({
      status: "warn",
      check: "directory",
      message: `${dir} does not exist yet; mcpstate creates it on first use`,
      fix: `Or create it yourself: mkdir -p ${JSON.stringify(dir)}`,
    });
    return true;
  }
  if (!info.isDirectory) {
    add({
      status: "fail",
      check: "directory",
      message: `${dir} is not a directory`,
      fix: "Point the backend URL at a file inside a directory.",
    });
    return false;
  }
  const probe = join(dir, `.mcpstate-doctor-${crypto.randomUUID().slice(0, 8)}`);
  try {
    await Deno.writeTextFile(probe, "", { createNew: true });
    await Deno.remove(probe);
  } catch (e) {
    add({
      status: "fail",
      check: "directory",
      message: `${dir} is not writable: ${messageOf(e)}`,
      fix:
        `Give this user write access to ${dir} (the database keeps journal files beside it), or choose another path.`,
    });
    return false;
  }
  let exists = "the database file will be created on first use";
  try {
    const f = await Deno.stat(file);
    exists = `database file ${f.size.toLocaleString("en-US")} bytes`;
  } catch { /* not there yet */ }
  add({ status: "ok", check: "directory", message: `${dir} is writable; ${exists}` });
  return true;
}

/**
 * A failure's message and fix: a message that ends in its own advice
 * ("… closed.. Check that Redis is running …") is split there, so the fix is
 * that advice and the message does not repeat it.
 */
function withAdvice(text: string, fallback: string): { message: string; fix: string } {
  const line = oneLine(text).replace(/\.{2,}(?=\s|$)/g, ".");
  const at = line.search(/\. (Check|Make sure|Start|Run) /);
  if (at < 0) return { message: line, fix: fallback };
  return { message: line.slice(0, at + 1), fix: line.slice(at + 2) };
}

function backendFix(scheme: string): string {
  if (scheme.startsWith("redis") || scheme.startsWith("rediss")) {
    return "Check that Redis runs at that host and port and that the URL's user, password and db are right.";
  }
  if (scheme.startsWith("postgres")) {
    return "Check that PostgreSQL runs at that host and port, the database exists, and the URL's credentials are right.";
  }
  if (scheme.startsWith("denokv+")) {
    return "Check the KV Connect URL and DENO_KV_ACCESS_TOKEN.";
  }
  return "Check the path in the URL and its permissions; another program may hold the file locked.";
}

/** Whether an error is a permission that was not granted. */
function isDenied(e: unknown): boolean {
  return e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied;
}

/** `read()`, or `fallback` when a permission is missing (told to `denied`). */
function unlessDenied<T>(read: () => T, fallback: T, denied?: (e: unknown) => void): T {
  try {
    return read();
  } catch (e) {
    if (!isDenied(e)) throw e;
    denied?.(e);
    return fallback;
  }
}

function messageOf(e: unknown): string {
  if (e instanceof McpStateError) return e.message;
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the backend did not ${what} within ${Math.round(ms / 1000)} s`)),
      ms,
    );
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
