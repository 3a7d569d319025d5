/**
 * Idempotent mints in the shared bucket (`--allow-anonymous`).
 *
 * Every anonymous caller is one user, so a mint's idempotency key alone,
 * scoped per user as the store scopes it, would be shared by every caller: a
 * second caller sending the same key would get the first caller's handle, or
 * learn from "key already used" that someone had used it. Here a key is
 * scoped by itself together with a hash of everything the call carries — the
 * kind, the whole state, the TTL and the writer label. The same key with the
 * same call returns the first handle (a retry); the same key with any other
 * call is a new mint, never an error. Nobody learns that a key was used.
 *
 * What remains: a caller who sends the same key with byte-for-byte the same
 * call gets the same handle. That is what a retry needs; since the retrying
 * caller cannot be told apart from anyone else in the shared bucket, the key
 * is the secret there, and should be random (a UUID), like the handle.
 *
 * @module
 */

/** The prefix of keys derived for a shared-bucket mint (a version, should the scheme change). */
const PREFIX = "anon-mint.1.";

/**
 * The idempotency key a shared-bucket mint is stored under: the caller's key
 * together with a SHA-256 of the call.
 *
 * @param key The caller's `idempotency_key`.
 * @param call Everything the mint carries: kind, state, TTL, writer.
 * @returns The key to hand to the store; the caller's own key, unchanged,
 * when the store would refuse it anyway (so the refusal names it).
 */
export async function sharedBucketMintKey(key: string, call: readonly unknown[]): Promise<string> {
  if (key.length === 0 || key.length > 256 || !key.isWellFormed() || key.includes("\0")) {
    return key;
  }
  let text: string;
  try {
    text = JSON.stringify([key, ...call]);
  } catch {
    return key; // not JSON: the store refuses the state
  }
  const hash = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return PREFIX + Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}
