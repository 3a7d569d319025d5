/**
 * The Deno KV backend's URL (`denokv:///…`, `denokv:///:memory:`,
 * `denokv+https://…`) and the `Deno.Kv` it opens.
 *
 * @module
 */

import { dirname } from "node:path";
import { BackendError, InvalidArgument, redact } from "../../errors.ts";
import { filePathOf } from "../_file_url.ts";
import { retryWhile } from "../_retry.ts";
import { isLocked, scrub } from "./_io.ts";

/** What a `denokv` URL points at, as {@link parseDenoKvUrl} reads it. */
export interface DenoKvTarget {
  /** `"memory"` for `denokv:///:memory:`, `"file"` for a local file, `"remote"` for KV Connect. */
  kind: "memory" | "file" | "remote";
  /** The argument for `Deno.openKv`: `:memory:`, a file path, or an `https://`/`http://` URL. */
  path: string;
}

/**
 * Reads a `denokv` URL without opening anything.
 *
 * @param url `denokv:///~/file.kv`, `denokv:////abs/path.kv`,
 *   `denokv:///rel/path.kv`, `denokv:///:memory:`, `denokv+https://host/…`
 *   or `denokv+http://host/…`.
 * @returns What the URL points at and the argument for `Deno.openKv`.
 * @throws {InvalidArgument} for anything else (credentials redacted). A KV
 *   Connect URL must not carry credentials: the token goes in
 *   `DENO_KV_ACCESS_TOKEN`.
 *
 * @example
 * ```ts
 * import { parseDenoKvUrl } from "@mcpstate/core/denokv";
 * parseDenoKvUrl("denokv+https://kv.example.com/db"); // { kind: "remote", path: "https://kv.example.com/db" }
 * parseDenoKvUrl("denokv:///:memory:"); // { kind: "memory", path: ":memory:" }
 * ```
 */
export function parseDenoKvUrl(url: string): DenoKvTarget {
  const forms =
    "denokv:///~/file.kv, denokv:////absolute/path.kv, denokv:///:memory:, denokv+https://host/… or denokv+http://host/…";
  if (typeof url !== "string") {
    throw new InvalidArgument(`A Deno KV URL must be a string: ${forms}.`, { field: "backend" });
  }
  const scheme = /^(denokv(?:\+https?)?):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === "denokv") {
    const { path, params } = filePathOf(url, url.slice(0, "denokv".length));
    if ([...params.keys()].length > 0) {
      throw new InvalidArgument(
        `The Deno KV URL "${
          redact(url).slice(0, 200)
        }" has query parameters, which it does not take. Use ${forms}.`,
        { field: "backend" },
      );
    }
    return path === ":memory:" ? { kind: "memory", path } : { kind: "file", path };
  }
  if (scheme === "denokv+https" || scheme === "denokv+http") {
    let parsed: URL;
    try {
      parsed = new URL(url.slice("denokv+".length));
    } catch {
      throw new InvalidArgument(
        `Malformed Deno KV URL "${redact(url).slice(0, 200)}". Use ${forms}.`,
        { field: "backend" },
      );
    }
    if (parsed.username !== "" || parsed.password !== "") {
      throw new InvalidArgument(
        `The Deno KV URL "${
          redact(url).slice(0, 200)
        }" carries credentials. Remove them from the URL and put the access token in the environment variable DENO_KV_ACCESS_TOKEN instead.`,
        { field: "backend" },
      );
    }
    if (parsed.hostname === "") {
      throw new InvalidArgument(
        `The Deno KV URL "${redact(url).slice(0, 200)}" names no host. Use ${forms}.`,
        { field: "backend" },
      );
    }
    return { kind: "remote", path: parsed.href };
  }
  throw new InvalidArgument(
    `"${redact(String(url)).slice(0, 200)}" is not a Deno KV URL. Use ${forms}.`,
    { field: "backend" },
  );
}

/**
 * Opens the Deno KV a URL names (see `DenoKvBackend.fromUrl`).
 *
 * @param url The URL.
 * @returns The KV, the access token of a KV Connect endpoint, and whether it is one.
 * @throws {InvalidArgument} for a malformed URL, a missing token, or a Deno
 *   run without `--unstable-kv`.
 * @throws {BackendError} when the KV cannot be opened.
 */
export async function openDenoKv(
  url: string,
): Promise<{ kv: Deno.Kv; token: string | undefined; remote: boolean }> {
  const target = parseDenoKvUrl(url);
  const openKv = (Deno as { openKv?: typeof Deno.openKv }).openKv;
  if (typeof openKv !== "function") {
    throw new InvalidArgument(
      `Deno KV is not enabled in this Deno process, so "${
        redact(url).slice(0, 200)
      }" cannot be opened. Run deno with --unstable-kv (e.g. deno run --unstable-kv …), or add "unstable": ["kv"] to deno.json, then try again.`,
      { field: "backend" },
    );
  }
  let token: string | undefined;
  if (target.kind === "remote") {
    try {
      token = Deno.env.get("DENO_KV_ACCESS_TOKEN");
    } catch {
      throw new InvalidArgument(
        "Reading DENO_KV_ACCESS_TOKEN was not allowed: run deno with --allow-env=DENO_KV_ACCESS_TOKEN.",
        { field: "backend" },
      );
    }
    if (!token) {
      throw new InvalidArgument(
        `The KV Connect endpoint ${
          displayUrl(target.path)
        } needs an access token: set the environment variable DENO_KV_ACCESS_TOKEN (the token of your denokv server or Deno Deploy database) and try again.`,
        { field: "backend" },
      );
    }
  } else if (target.kind === "file") {
    try {
      await Deno.mkdir(dirname(target.path), { recursive: true });
    } catch { /* Deno.openKv reports the real problem. */ }
  }
  let kv: Deno.Kv;
  try {
    // Two processes creating one new file at once: the loser finds it locked.
    kv = await retryWhile(() => openKv(target.path), isLocked, Date.now() + 10_000);
  } catch (e) {
    const where = target.kind === "remote" ? displayUrl(target.path) : `"${target.path}"`;
    let raw = scrub(e instanceof Error ? e.message : String(e), token);
    // Deno's message repeats the endpoint URL: show it without its query string.
    if (target.kind === "remote") raw = raw.replaceAll(target.path, where);
    const refused = target.kind === "remote" && /status (401|403)\b/.test(raw);
    throw new BackendError(
      refused
        ? `The Deno KV endpoint ${where} refused the access token (${raw}). Check DENO_KV_ACCESS_TOKEN.`
        : `Could not open Deno KV at ${where}: ${raw}`,
      { cause: e },
    );
  }
  return { kv, token, remote: target.kind === "remote" };
}

/** A KV Connect URL for messages: credentials and query string removed. */
function displayUrl(href: string): string {
  try {
    const u = new URL(href);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "(malformed URL)";
  }
}
