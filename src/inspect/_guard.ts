/**
 * Who may see the inspector: the person who holds the URL it printed.
 *
 * - `Host`: a loopback name (`localhost`, `127.0.0.1`, `[::1]`) or the host it
 *   listens on, whatever the port — the check the MCP server's HTTP face
 *   makes against DNS rebinding. Otherwise 403.
 * - `Origin`, when a browser sends one: exactly the inspector's own origin,
 *   port included (cookies do not tell ports apart, so another server on
 *   localhost must not ride on the session). Otherwise 403. A write (POST)
 *   must carry it.
 * - The one-time token (256 random bits) is exchanged, once, for a session
 *   cookie (HttpOnly, SameSite=Strict) and a redirect to a URL without it.
 *   A request with neither a valid token nor the cookie is 401 with a short
 *   page that shows no state and says to run `mcpstate inspect` again for a
 *   new link (a spent link opened in a second browser lands there); the page
 *   opened again with the cookie (a reload) is served, even from the spent
 *   link.
 *
 * @module
 */

/**
 * The page of a 401: no state, and how to get a new link.
 *
 * @param reason `spent` for the printed link used again, `token` for none or a wrong one.
 * @returns The HTML.
 */
export function refusedPage(reason: "spent" | "token"): string {
  const why = reason === "spent"
    ? "This link was used already: each link opens the inspector once, in one browser."
    : "This address needs the link that mcpstate inspect printed.";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mcpstate inspect: new link needed</title></head>
<body><h1>mcpstate inspect</h1>
<p>${why}</p>
<p>Run <code>mcpstate inspect</code> again for a new link.</p>
</body></html>
`;
}

/** The hostnames a `Host` header may name besides the one listened on. */
const LOOPBACK = ["localhost", "127.0.0.1", "[::1]"];

/** The outcome of {@link Guard.check}. */
export type Verdict =
  | { ok: true }
  | { ok: false; status: 403; reason: string }
  | { ok: false; status: 401; reason: "spent" | "token" }
  | { ok: "exchange"; cookie: string };

/** The token, the session and the host rules of one inspector. */
export class Guard {
  /** The one-time token of the printed URL. */
  readonly token: string;
  readonly #session: string;
  readonly #cookieName: string;
  readonly #hosts: string[];
  readonly #origins: Set<string>;
  #used = false;

  /**
   * @param hostname The host the inspector listens on.
   * @param port Its port.
   */
  constructor(hostname: string, port: number) {
    this.token = randomToken();
    this.#session = randomToken();
    // A name of its own: two inspectors on one machine do not share a cookie.
    this.#cookieName = `mcpstate_inspect_${randomToken().slice(0, 8)}`;
    const own = hostname.includes(":") && !hostname.startsWith("[") ? `[${hostname}]` : hostname;
    this.#hosts = [...new Set([...LOOPBACK, own.toLowerCase()])];
    this.#origins = new Set(this.#hosts.map((h) => `http://${h}:${port}`));
  }

  /**
   * Judges a request before anything is served.
   *
   * @param request The request.
   * @returns Serve it, exchange its token for a cookie, or refuse it.
   */
  check(request: Request): Verdict {
    const host = hostnameOf(request.headers.get("host"));
    if (host === undefined || !this.#hosts.includes(host)) {
      return { ok: false, status: 403, reason: "Host" };
    }
    const origin = request.headers.get("origin");
    if (origin !== null && !this.#origins.has(origin)) {
      return { ok: false, status: 403, reason: "Origin" };
    }
    if (request.method !== "GET" && request.method !== "HEAD" && origin === null) {
      return { ok: false, status: 403, reason: "Origin" };
    }
    if (this.#hasSession(request)) return { ok: true };
    const token = new URL(request.url).searchParams.get("token");
    if (token !== null && request.method === "GET" && !this.#used && same(token, this.token)) {
      this.#used = true;
      return {
        ok: "exchange",
        cookie: `${this.#cookieName}=${this.#session}; Path=/; HttpOnly; SameSite=Strict`,
      };
    }
    const spent = token !== null && this.#used && same(token, this.token);
    return { ok: false, status: 401, reason: spent ? "spent" : "token" };
  }

  #hasSession(request: Request): boolean {
    for (const part of (request.headers.get("cookie") ?? "").split(";")) {
      const eq = part.indexOf("=");
      if (eq < 0 || part.slice(0, eq).trim() !== this.#cookieName) continue;
      if (same(part.slice(eq + 1).trim(), this.#session)) return true;
    }
    return false;
  }
}

/** The hostname of a `Host` header (lowercase, IPv6 in brackets), or `undefined`. */
function hostnameOf(header: string | null): string | undefined {
  if (!header) return undefined;
  try {
    return new URL(`http://${header}`).hostname;
  } catch {
    return undefined;
  }
}

/** 32 random bytes (256 bits) in base64url. */
function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replaceAll("=", "");
}

/** String equality in time that depends on the length only. */
function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
