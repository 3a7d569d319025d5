/**
 * A real OAuth issuer on loopback for the server tests: key pairs, a JWKS
 * and OpenID metadata served over HTTP, and signed (and forged) tokens.
 *
 * @module
 */

import { exportJWK, exportSPKI, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";

interface IssuerKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

/** A test authorization server: keys, a JWKS endpoint and token minting. */
export interface TestIssuer extends AsyncDisposable {
  /** The issuer identifier (`http://127.0.0.1:<port>`). */
  issuer: string;
  /** The JWKS URL. */
  jwksUrl: string;
  /** The `serve` flags that trust this issuer: `--auth-issuer … --auth-jwks-url …`. */
  serveArgs: string[];
  /** How many times the JWKS was fetched. */
  jwksFetches(): number;
  /** Signs a token with the current RS256 key (or `opts.key`). */
  token(
    claims: JWTPayload & { sub?: string },
    opts?: {
      alg?: "RS256" | "ES256";
      kid?: string;
      expiresIn?: string | number;
      iss?: string;
      noExp?: boolean;
    },
  ): Promise<string>;
  /** Signs with a fresh key the JWKS does not publish. */
  tokenWithUnknownKey(claims: JWTPayload): Promise<string>;
  /** An unsigned `alg: none` token. */
  unsignedToken(claims: JWTPayload): string;
  /** HS256 with the RSA public key's PEM as the HMAC secret (the key-confusion attack). */
  hs256WithPublicKey(claims: JWTPayload): Promise<string>;
  /** Replaces the RS256 key with a new one (new kid); the JWKS then publishes only the new keys. */
  rotate(): Promise<string>;
  /** Stops the JWKS server. */
  close(): Promise<void>;
}

async function newKey(alg: "RS256" | "ES256", kid: string): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
  return { kid, alg, privateKey, publicKey, jwk };
}

function b64url(obj: unknown): string {
  return btoa(JSON.stringify(obj)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

/**
 * Starts a test issuer: one RSA and one EC key, the JWKS and OpenID metadata
 * served on a loopback port.
 */
export async function startIssuer(): Promise<TestIssuer> {
  let rsa = await newKey("RS256", "rsa-1");
  const ec = await newKey("ES256", "ec-1");
  let rotations = 1;
  let fetches = 0;
  const ac = new AbortController();
  let issuer = "";
  let jwksUrl = "";
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/jwks.json") {
        fetches++;
        return Response.json({ keys: [rsa.jwk, ec.jwk] });
      }
      if (path === "/.well-known/openid-configuration") {
        return Response.json({ issuer, jwks_uri: jwksUrl });
      }
      return new Response("not found", { status: 404 });
    },
  );
  issuer = `http://127.0.0.1:${server.addr.port}`;
  jwksUrl = `${issuer}/jwks.json`;
  const now = () => Math.floor(Date.now() / 1000);
  const sign = async (
    key: IssuerKey,
    claims: JWTPayload,
    iss = issuer,
    expiresIn: string | number | null = "1h",
  ) => {
    const jwt = new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT" })
      .setIssuedAt().setIssuer(iss);
    if (claims.exp === undefined && expiresIn !== null) jwt.setExpirationTime(expiresIn);
    return await jwt.sign(key.privateKey);
  };
  const close = async () => {
    ac.abort();
    await server.finished;
  };
  return {
    issuer,
    jwksUrl,
    serveArgs: ["--auth-issuer", issuer, "--auth-jwks-url", jwksUrl],
    jwksFetches: () => fetches,
    token: (claims, opts = {}) => {
      const key = opts.alg === "ES256" ? ec : rsa;
      return sign(
        opts.kid ? { ...key, kid: opts.kid } : key,
        claims,
        opts.iss ?? issuer,
        opts.noExp ? null : opts.expiresIn ?? "1h",
      );
    },
    tokenWithUnknownKey: async (claims) => sign(await newKey("RS256", "unknown-kid"), claims),
    unsignedToken: (claims) =>
      `${b64url({ alg: "none", typ: "JWT" })}.${
        b64url({ iss: issuer, iat: now(), exp: now() + 3600, ...claims })
      }.`,
    hs256WithPublicKey: async (claims) => {
      const pem = await exportSPKI(rsa.publicKey);
      return await new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: rsa.kid })
        .setIssuedAt().setIssuer(issuer).setExpirationTime("1h")
        .sign(new TextEncoder().encode(pem));
    },
    rotate: async () => {
      rotations++;
      rsa = await newKey("RS256", `rsa-${rotations}`);
      return rsa.kid;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
