/**
 * The PostgreSQL backend's URL (`postgres://…?schema=name&…`) and the
 * pooled client it opens.
 *
 * @module
 */

import postgres from "postgres";
import { InvalidArgument, redact } from "../../errors.ts";

/** The PostgreSQL schema used when none is named. */
export const DEFAULT_POSTGRES_SCHEMA = "mcpstate";

const SCHEMA_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Opens a pooled client from a URL. `?schema=name` picks the PostgreSQL
 * schema; every other query parameter goes to the driver. Unless the URL says
 * otherwise, connecting gives up after 10 seconds and reconnection attempts
 * back off to at most one per second.
 *
 * @param url `postgres://…` or `postgresql://…`.
 * @returns The client, how to open another one like it, and the schema.
 * @throws {InvalidArgument} for a malformed URL or schema (credentials redacted).
 */
export function openClient(url: string): {
  sql: postgres.Sql;
  open: () => postgres.Sql;
  schema: string;
} {
  const { connection, schema, params } = parseUrl(url);
  const options: postgres.Options<Record<string, postgres.PostgresType>> = {
    onnotice: () => {},
    fetch_types: false,
    connection: { application_name: "mcpstate", default_transaction_isolation: "read committed" },
  };
  if (!params.has("connect_timeout")) options.connect_timeout = 10;
  if (!params.has("backoff")) {
    options.backoff = (attempt) => Math.min(0.05 * 2 ** attempt, 1) * (0.5 + Math.random() / 2);
  }
  const open = () => postgres(connection, options);
  try {
    return { sql: open(), open, schema };
  } catch (e) {
    throw new InvalidArgument(
      `Malformed PostgreSQL URL "${redact(url).slice(0, 200)}" (${
        redact(e instanceof Error ? e.message : String(e))
      }). Write postgres://user[:password]@host[:port]/database[?schema=name].`,
      { field: "backend" },
    );
  }
}

/**
 * Checks a PostgreSQL schema name.
 *
 * @throws {InvalidArgument} when it is not 1-63 letters, digits and `_`.
 */
export function checkSchema(schema: unknown): asserts schema is string {
  if (typeof schema !== "string" || !SCHEMA_RE.test(schema)) {
    throw new InvalidArgument(
      `The PostgreSQL schema name ${
        JSON.stringify(String(schema)).slice(0, 80)
      } is not valid: use 1-63 letters, digits and "_", not starting with a digit (e.g. ?schema=mcpstate).`,
      { field: "schema" },
    );
  }
}

function parseUrl(url: string): { connection: string; schema: string; params: URLSearchParams } {
  if (typeof url !== "string" || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new InvalidArgument(
      `Not a PostgreSQL URL: "${
        redact(String(url)).slice(0, 200)
      }". Write postgres://user[:password]@host[:port]/database[?schema=name].`,
      { field: "backend" },
    );
  }
  const q = url.indexOf("?");
  const base = q < 0 ? url : url.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : url.slice(q + 1));
  const schema = params.get("schema") ?? DEFAULT_POSTGRES_SCHEMA;
  checkSchema(schema);
  // postgres.js sends unknown query parameters to the server as settings;
  // `schema` is ours.
  params.delete("schema");
  const rest = params.toString();
  return { connection: rest ? `${base}?${rest}` : base, schema, params };
}
