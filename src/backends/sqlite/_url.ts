/**
 * The SQLite backend's URL: `sqlite:///…` with `?synchronous=full|normal`.
 *
 * @module
 */

import { InvalidArgument, McpStateError, redact } from "../../errors.ts";
import { filePathOf } from "../_file_url.ts";
import { messageOf } from "../_shared.ts";

/** How commits reach the disk. */
export type SqliteSynchronous = "full" | "normal";

const URL_OPTIONS = "synchronous=full|normal";

/**
 * Parses a `sqlite://` URL.
 *
 * @param url The URL.
 * @returns The file path (or `:memory:`) and the durability level.
 * @throws {InvalidArgument} when the URL is malformed or has an unknown option.
 */
export function parseSqliteUrl(url: string): { path: string; synchronous: SqliteSynchronous } {
  if (typeof url !== "string" || !/^sqlite:\/\//i.test(url)) {
    throw new InvalidArgument(
      `Not a SQLite URL: "${
        redact(String(url)).slice(0, 200)
      }". Write sqlite:///~/file.db, sqlite:////absolute/path.db or sqlite:///:memory:.`,
      { field: "backend" },
    );
  }
  let parsed: { path: string; params: URLSearchParams };
  try {
    parsed = filePathOf(url, url.slice(0, "sqlite".length));
  } catch (e) {
    if (e instanceof McpStateError) throw e;
    throw new InvalidArgument(
      `Malformed sqlite URL "${redact(url).slice(0, 200)}" (${
        messageOf(e)
      }): write sqlite:///~/file.db, sqlite:////absolute/path.db or sqlite:///:memory:.`,
      { field: "backend" },
    );
  }
  let synchronous: SqliteSynchronous = "full";
  for (const [name, value] of parsed.params) {
    if (name !== "synchronous") {
      throw new InvalidArgument(
        `Unknown option "${
          name.slice(0, 40)
        }" in the sqlite URL. The allowed options are: ${URL_OPTIONS}.`,
        { field: "backend" },
      );
    }
    const v = value.toLowerCase();
    if (v !== "full" && v !== "normal") {
      throw new InvalidArgument(
        `synchronous=${
          value.slice(0, 20)
        } is not supported in the sqlite URL. The allowed options are: ${URL_OPTIONS}.`,
        { field: "backend" },
      );
    }
    synchronous = v;
  }
  return { path: parsed.path, synchronous };
}
