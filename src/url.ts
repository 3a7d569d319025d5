/**
 * Backend URLs: which backend a URL names, loaded lazily so that a user of
 * one backend never loads another's driver.
 *
 * @module
 */

import type { Backend } from "./backend.ts";
import { InvalidArgument, redact } from "./errors.ts";

/** The URL used when none is given. */
export const DEFAULT_URL = "sqlite:///~/.mcpstate/state.db";

/** The supported forms, for error messages and help. */
export const SUPPORTED_FORMS =
  "sqlite:///~/.mcpstate/state.db, sqlite:////abs/path.db, sqlite:///:memory:, " +
  "redis://[user:pass@]host:port/db, rediss://…, redis+cluster://host:port,host:port, rediss+cluster://…, " +
  "denokv:///~/file.kv, denokv:////abs/path.kv, denokv:///:memory:, denokv+https://…, " +
  "postgres://user:pass@host:port/db?schema=name, postgresql://…, memory://";

/**
 * Opens the backend a URL names.
 *
 * @param url A backend URL; default {@link DEFAULT_URL}.
 * @returns The open backend.
 * @throws {InvalidArgument} for an unknown scheme or a malformed URL (credentials redacted).
 */
export async function openBackend(url: string = DEFAULT_URL): Promise<Backend> {
  if (typeof url !== "string") {
    throw new InvalidArgument(`The backend URL must be a string. Supported: ${SUPPORTED_FORMS}.`);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]?.toLowerCase();
  switch (scheme) {
    case "memory": {
      const { MemoryBackend } = await import("./backends/memory.ts");
      return await MemoryBackend.fromUrl(url);
    }
    case "sqlite": {
      const { SqliteBackend } = await import("./backends/sqlite.ts");
      return await SqliteBackend.fromUrl(url);
    }
    case "redis":
    case "rediss":
    case "redis+cluster":
    case "rediss+cluster": {
      const { RedisBackend } = await import("./backends/redis.ts");
      return await RedisBackend.fromUrl(url);
    }
    case "denokv":
    case "denokv+https":
    case "denokv+http": {
      const { DenoKvBackend } = await import("./backends/denokv.ts");
      return await DenoKvBackend.fromUrl(url);
    }
    case "postgres":
    case "postgresql": {
      const { PostgresBackend } = await import("./backends/postgres.ts");
      return await PostgresBackend.fromUrl(url);
    }
    default:
      throw new InvalidArgument(
        `Unsupported backend URL "${redact(url).slice(0, 200)}". Use one of: ${SUPPORTED_FORMS}.`,
        { field: "backend" },
      );
  }
}

/**
 * Turns the path part of a file URL (`sqlite:///…`, `denokv:///…`) into a
 * file path: `/~/x` is under the home directory, `//abs` is absolute, `/rel`
 * is relative to the working directory, `/:memory:` stays `:memory:`.
 *
 * @param url The whole URL.
 * @param scheme Its scheme, e.g. `sqlite`.
 * @returns The path and the query parameters.
 */
export function filePathOf(url: string, scheme: string): { path: string; params: URLSearchParams } {
  const rest = url.slice(scheme.length + 3);
  const q = rest.indexOf("?");
  const raw = q < 0 ? rest : rest.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : rest.slice(q + 1));
  if (!raw.startsWith("/") || raw.length < 2) {
    throw new InvalidArgument(
      `Malformed ${scheme} URL "${
        redact(url)
      }": write ${scheme}:///~/file, ${scheme}:////absolute/path or ${scheme}:///:memory:.`,
      { field: "backend" },
    );
  }
  let path: string;
  try {
    path = decodeURIComponent(raw.slice(1));
  } catch {
    throw new InvalidArgument(
      `Malformed ${scheme} URL "${redact(url)}": the path has an invalid %-escape.`,
      { field: "backend" },
    );
  }
  if (path === "~" || path.startsWith("~/")) {
    const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
    if (!home) {
      throw new InvalidArgument("Cannot expand ~: neither HOME nor USERPROFILE is set.", {
        field: "backend",
      });
    }
    path = home + path.slice(1);
  }
  return { path, params };
}
