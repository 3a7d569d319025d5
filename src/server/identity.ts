/**
 * Who calls a tool: what a call knows about its caller ({@link ToolRequest},
 * {@link VerifiedToken}), and writer labels, who wrote a state last, as
 * `<hostname>/<client name>`.
 *
 * @module
 */

/**
 * A verified access token, as the HTTP layer hands it to the tools (the
 * shape of the MCP SDK's `AuthInfo`).
 */
export interface VerifiedToken {
  /** The raw access token. */
  token: string;
  /** The OAuth client the token was issued to (`azp` / `client_id`), or `""`. */
  clientId: string;
  /** The token's scopes. */
  scopes: string[];
  /** Expiry in seconds since the epoch. */
  expiresAt?: number;
  /** The resource (audience) the token was issued for. */
  resource?: URL;
  /** The RFC 9728 metadata URL of the server that accepted it. */
  resourceMetadataUrl?: string;
  /** More facts; mcpstate's verifier puts `user` (`"<iss>#<sub>"`), `iss` and `sub` here. */
  extra?: Record<string, unknown>;
}

/** What a tool call knows about its caller, handed to the identity resolvers. */
export interface ToolRequest {
  /**
   * The client's name: the request's `_meta` client info, the 2025 `initialize`, or an HTTP
   * request's `User-Agent` (control characters dropped, at most 100 characters).
   */
  clientName: string | undefined;
  /** The verified token of an HTTP request, when the transport authenticated one. */
  authInfo: VerifiedToken | undefined;
  /** The HTTP request of the call (HTTP transports only), e.g. to read a header. */
  httpRequest: Request | undefined;
}

/**
 * This machine's hostname, or `"localhost"` when it can't be read (no `sys`
 * permission, or a platform without one).
 *
 * @returns The hostname.
 */
export function machineName(): string {
  try {
    return Deno.hostname() || "localhost";
  } catch {
    return "localhost";
  }
}

/**
 * The default writer resolver: a fixed label when one is configured
 * (`MCPSTATE_WRITER`), else `<hostname>/<client name>` when the request names
 * its client, else `<hostname>`.
 *
 * @param fixed A fixed label, or `undefined`.
 * @param hostname The hostname to use; default {@link machineName}.
 * @returns A resolver for {@link StateToolsOptions.writer}.
 *
 * @example
 * ```ts
 * import { writerLabel } from "@mcpstate/core/server";
 * const writer = writerLabel(undefined, "laptop");
 * ```
 */
export function writerLabel(
  fixed: string | undefined,
  hostname: string = machineName(),
): (request: Pick<ToolRequest, "clientName">) => string {
  if (fixed !== undefined) return () => fixed;
  return ({ clientName }) =>
    cut(clientName === undefined ? hostname : `${hostname}/${clientName}`, 256);
}

/** The most UTF-16 units of a client name taken from a request. */
export const CLIENT_NAME_MAX_CHARS = 100;

/**
 * A client name as a request states it (client info, or a `User-Agent`
 * header), made fit for a writer label: control characters become spaces,
 * invisible format characters and lone surrogates are dropped, whitespace is
 * collapsed, and at most {@link CLIENT_NAME_MAX_CHARS} characters are kept.
 *
 * @param said What the request says, of any type.
 * @returns The label, or `undefined` when nothing usable is left.
 */
export function clientLabel(said: unknown): string | undefined {
  if (typeof said !== "string") return undefined;
  const clean = said.slice(0, 4 * CLIENT_NAME_MAX_CHARS)
    .replace(/[\p{Cc}\p{Zl}\p{Zp}]/gu, " ")
    .replace(/[\p{Cf}\p{Cs}]/gu, "")
    .replace(/\s+/g, " ")
    .trim();
  const label = cut(clean, CLIENT_NAME_MAX_CHARS).trimEnd();
  return label.length > 0 ? label : undefined;
}

/** `text` cut to at most `max` UTF-16 units, never between the halves of a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}
