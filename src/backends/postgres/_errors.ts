/**
 * The PostgreSQL backend's errors: which driver failures mean "the server
 * is not there (now)", and the `backend_error` each failure becomes.
 *
 * @module
 */

import postgres from "postgres";
import { BackendError, McpStateError, redact } from "../../errors.ts";

/** The error of a call on a closed backend. */
export function closedError(): BackendError {
  return new BackendError("The PostgreSQL backend is closed; open a new store.");
}

/** Error codes meaning "the server is not there (now)", not "the server said no". */
const UNAVAILABLE = new Set([
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, shutting down)
  "53300", // too_many_connections
]);

/** Whether `e` says the server is not there (now) rather than that it refused something. */
export function isConnectionError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (UNAVAILABLE.has(code) || code.startsWith("08"));
}

/**
 * Turns a driver failure into a `backend_error` whose message says what
 * happened and what to do; mcpstate errors pass through. Every message goes
 * through `redact` (postgres.js names host and port in its connection errors,
 * never the password, but a server message may quote anything).
 */
export function toBackendError(e: unknown, opening = false): McpStateError {
  if (e instanceof McpStateError) return e;
  const code = typeof (e as { code?: unknown })?.code === "string"
    ? (e as { code: string }).code
    : "";
  const text = redact(e instanceof Error ? e.message : String(e)).slice(0, 500);
  const unavailable = isConnectionError(e);
  if (opening) {
    const detail = `${text}${code && !text.includes(code) ? `, SQLSTATE ${code}` : ""}`;
    return new BackendError(
      unavailable
        ? `Could not open the PostgreSQL store: the server is unreachable or restarting (${detail}). Check that it is running and that the URL's host and port are right, then try again; nothing was changed.`
        : `Could not open the PostgreSQL store (${detail}). Check the URL's database and credentials and the role's privileges on the schema; nothing was changed.`,
      { cause: e },
    );
  }
  if (unavailable) {
    return new BackendError(
      `PostgreSQL is unreachable or restarting (${text}). Whether this call was applied is unknown: re-read the handle before changing it again, or repeat the call with the same idempotency key once the database is back.`,
      { cause: e },
    );
  }
  if (code === "54000" && /index row/.test(text)) {
    return new BackendError(
      `PostgreSQL cannot index values this long (${text}). Nothing was applied: a user id together with its writer label or idempotency key must stay under about 2,600 bytes of UTF-8.`,
      { cause: e },
    );
  }
  if (e instanceof postgres.PostgresError) {
    return new BackendError(
      `PostgreSQL refused the operation: ${text} (SQLSTATE ${code}). Nothing was applied; try again later, and tell the operator if it persists.`,
      { cause: e },
    );
  }
  return new BackendError(
    `The PostgreSQL driver failed: ${text}. Whether this call was applied is unknown: re-read the handle before changing it again.`,
    { cause: e },
  );
}
