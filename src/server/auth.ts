/**
 * Bearer-token verification for the HTTP transport: JWTs signed by the
 * configured issuer, checked against its JWKS with `jose`, and the RFC 9728
 * protected-resource metadata that points clients at the issuer.
 *
 * @module
 */

import { OAuthError, OAuthErrorCode } from "@modelcontextprotocol/server";
import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from "jose";
import type { VerifiedToken } from "./identity.ts";

/**
 * Verifies access tokens (the MCP SDK's `OAuthTokenVerifier` shape): throws
 * the SDK's `OAuthError` with `invalid_token` for a token it refuses.
 */
export interface TokenVerifier {
  /**
   * Verifies a bearer token.
   *
   * @param token The raw token.
   * @returns What the token proves.
   */
  verifyAccessToken(token: string): Promise<VerifiedToken>;
}

/**
 * The signature algorithms a token may use: asymmetric only. `none` and the
 * HMAC family (`HS*`) are never accepted, so a public key can't be turned
 * into a shared secret.
 */
export const ALLOWED_ALGORITHMS: readonly string[] = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

/** Options of {@link createJwtVerifier}. */
export interface JwtVerifierOptions {
  /** The issuer identifier tokens must carry in `iss`, compared exactly. */
  issuer: string;
  /** The audience tokens must carry in `aud` (usually this server's resource URL). */
  audience: string;
  /** The issuer's JWKS URL; when absent it is read from the issuer's metadata. */
  jwksUrl?: string | undefined;
  /** Minimum ms between JWKS refetches caused by an unknown key id. Default 30,000. */
  jwksCooldownMs?: number;
  /** Seconds of clock skew tolerated on `exp` and `nbf`. Default 30. */
  clockToleranceSec?: number;
}

/**
 * The user id mcpstate gives a verified token: `"<iss>#<sub>"`.
 *
 * @param authInfo A token verified by {@link createJwtVerifier}.
 * @returns The user id, or `undefined` when `authInfo` does not carry one.
 */
export function userOfAuthInfo(authInfo: VerifiedToken | undefined): string | undefined {
  const user = authInfo?.extra?.user;
  return typeof user === "string" && user.length > 0 ? user : undefined;
}

/**
 * Finds the issuer's `jwks_uri` through OpenID Connect discovery, then RFC 8414
 * authorization-server metadata.
 *
 * @param issuer The issuer identifier.
 * @returns The JWKS URL.
 * @throws {Error} When neither document names one.
 */
export async function discoverJwksUrl(issuer: string): Promise<string> {
  const base = issuer.replace(/\/$/, "");
  const u = new URL(issuer);
  const path = u.pathname === "/" ? "" : u.pathname.replace(/\/$/, "");
  const candidates = [
    `${base}/.well-known/openid-configuration`,
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
  ];
  for (const url of candidates) {
    try {
      const res = await fetch(url, {
        headers: { accept: "application/json" },
        signal: AbortSignal.timeout(5000),
      });
      if (!res.ok) {
        await res.body?.cancel();
        continue;
      }
      const doc: unknown = await res.json();
      const jwks = (doc as { jwks_uri?: unknown; issuer?: unknown }).jwks_uri;
      if ((doc as { issuer?: unknown }).issuer !== issuer) continue;
      if (typeof jwks === "string" && URL.canParse(jwks)) return jwks;
    } catch {
      // try the next document
    }
  }
  throw new Error(
    `Could not find the JWKS of issuer ${issuer} (tried ${
      candidates.join(" and ")
    }); pass --auth-jwks-url.`,
  );
}

/**
 * Creates the token verifier the SDK's bearer-auth helpers call: a JWT signed
 * with one of {@link ALLOWED_ALGORITHMS} by a key in the issuer's JWKS, with
 * the configured `iss` and `aud`, an `exp` in the future, `nbf` (when present)
 * in the past and a `sub` that is a non-empty string of at most
 * {@link MAX_SUBJECT_LENGTH} characters (no U+0000, no unpaired surrogates).
 * Anything else is `invalid_token`, never an exception of another kind.
 * Unknown key ids refetch the JWKS (rate-limited), so key rotation is picked
 * up.
 *
 * @param options Issuer, audience, JWKS URL and timing.
 * @returns The verifier; the user id is in `authInfo.extra.user`.
 *
 * @example
 * ```ts ignore
 * import { createJwtVerifier } from "@mcpstate/core/server";
 * const verifier = await createJwtVerifier({
 *   issuer: "https://auth.example.com/",
 *   audience: "https://state.example.com/mcp",
 *   jwksUrl: "https://auth.example.com/.well-known/jwks.json",
 * });
 * ```
 */
export async function createJwtVerifier(options: JwtVerifierOptions): Promise<TokenVerifier> {
  const jwksUrl = options.jwksUrl ?? await discoverJwksUrl(options.issuer);
  const jwks = createRemoteJWKSet(new URL(jwksUrl), {
    cooldownDuration: options.jwksCooldownMs ?? 30_000,
    timeoutDuration: 5000,
  });
  const { issuer, audience } = options;
  const tolerance = options.clockToleranceSec ?? 30;
  let resource: URL | undefined;
  try {
    resource = new URL(audience);
  } catch {
    resource = undefined;
  }
  return {
    async verifyAccessToken(token: string): Promise<VerifiedToken> {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, jwks, {
          issuer,
          audience,
          algorithms: [...ALLOWED_ALGORITHMS],
          requiredClaims: ["exp", "sub"],
          clockTolerance: tolerance,
        }));
      } catch (e) {
        throw new OAuthError(OAuthErrorCode.InvalidToken, describeJoseError(e, issuer));
      }
      // jose checks that `sub` is present and that `iss` equals the issuer,
      // but not that `sub` is a string: a list, a number or an object would
      // otherwise be formatted into someone's user id.
      if (payload.iss !== issuer) {
        throw new OAuthError(OAuthErrorCode.InvalidToken, `The token was not issued by ${issuer}`);
      }
      const sub = payload.sub;
      if (!isSubject(sub)) {
        throw new OAuthError(
          OAuthErrorCode.InvalidToken,
          `The token's "sub" claim must be a non-empty string of at most ${MAX_SUBJECT_LENGTH} characters, without U+0000 or unpaired surrogates`,
        );
      }
      const scope = typeof payload.scope === "string"
        ? payload.scope.split(" ").filter(Boolean)
        : Array.isArray(payload.scp)
        ? payload.scp.filter((s): s is string => typeof s === "string")
        : [];
      const clientId = typeof payload.azp === "string"
        ? payload.azp
        : typeof payload.client_id === "string"
        ? payload.client_id
        : "";
      return {
        token,
        clientId,
        scopes: scope,
        expiresAt: payload.exp as number,
        ...(resource ? { resource } : {}),
        extra: { user: `${issuer}#${sub}`, sub, iss: issuer },
      };
    },
  };
}

/** The longest `sub` claim a token may carry, in UTF-16 code units. */
export const MAX_SUBJECT_LENGTH = 1024;

/** Whether a `sub` claim is a subject mcpstate keys state by. */
function isSubject(sub: unknown): sub is string {
  return typeof sub === "string" && sub.length > 0 && sub.length <= MAX_SUBJECT_LENGTH &&
    !sub.includes("\u0000") && sub.isWellFormed();
}

/** A short, token-free reason for a 401's `error_description`. */
function describeJoseError(e: unknown, issuer: string): string {
  if (e instanceof errors.JWTExpired) return "The token has expired";
  if (e instanceof errors.JWTClaimValidationFailed) {
    switch (e.claim) {
      case "nbf":
        return "The token is not valid yet (nbf)";
      case "iss":
        return `The token was not issued by ${issuer}`;
      case "aud":
        return "The token was not issued for this resource (aud)";
      default:
        return `The token's "${e.claim}" claim is ${
          e.reason === "missing" ? "missing" : "invalid"
        }`;
    }
  }
  if (e instanceof errors.JOSEAlgNotAllowed || e instanceof errors.JOSENotSupported) {
    return "The token's signature algorithm is not accepted (asymmetric algorithms only)";
  }
  if (e instanceof errors.JWKSNoMatchingKey) {
    return "No key of the issuer matches the token's key id (kid)";
  }
  if (e instanceof errors.JWSSignatureVerificationFailed) return "The token's signature is invalid";
  if (e instanceof errors.JWKSTimeout) return "The issuer's keys could not be fetched in time";
  if (e instanceof errors.JOSEError) return "The token is malformed or not a signed JWT";
  return "The token could not be verified";
}

/**
 * The RFC 9728 protected-resource metadata document of this server.
 *
 * @param resource The public URL of the MCP endpoint.
 * @param issuer The authorization server whose tokens are accepted.
 * @returns The JSON document.
 */
export function protectedResourceMetadata(resource: URL, issuer: string): Record<string, unknown> {
  return {
    resource: resource.href,
    authorization_servers: [issuer],
    bearer_methods_supported: ["header"],
    resource_name: "mcpstate",
  };
}
