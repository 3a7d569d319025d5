/**
 * Backend URLs: which backend a URL names, loaded lazily so that a user of
 * one backend never loads another's driver.
 *
 * @module
 */

import type { Backend } from "./backend.ts";
import { InvalidArgument, redact } from "./errors.ts";

export { filePathOf } from "./backends/_file_url.ts";

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
