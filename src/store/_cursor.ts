/**
 * Listing cursors: the `c2.` cursor text and its checks, and the cut of a
 * page to a byte budget. (The listing order is the backends' `compareListOrder`.)
 *
 * @module
 */

import { InvalidArgument } from "../errors.ts";
import { jsonSize } from "../outline.ts";
import type { HandleInfo } from "../types.ts";
import { toPayload } from "../wire.ts";
import { isIdentifier } from "./_check.ts";

/** The order of strings by UTF-16 code units. */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The longest cursor {@link encodeCursor} makes: a 256-character handle
 * whose every character JSON escapes as `\u001f` (6 bytes), a 16-digit time,
 * in base64 (4 characters per 3 bytes), with its prefix.
 */
export const MAX_CURSOR_CHARS = 3 + Math.ceil((256 * 6 + 24) / 3) * 4;

/**
 * A list cursor: `c2.` and the base64url of the UTF-8 of `[updatedAt, handle]`.
 * (`c1.` cursors of earlier releases held the same JSON as Latin-1 and could
 * not carry a handle outside it; {@link decodeCursor} still reads them.)
 */
export function encodeCursor(r: { updatedAt: number; handle: string }): string {
  return "c2." + base64url(new TextEncoder().encode(JSON.stringify([r.updatedAt, r.handle])));
}

/**
 * How many of a page's `handles` fit in `maxBytes` (at least one): the
 * compact JSON of `{"handles":[…],"next_cursor":…}` with the cursor the cut
 * (or `more`) gives, else `null`.
 */
export function fitPage(handles: HandleInfo[], more: boolean, maxBytes: number): number {
  const head = '{"handles":[],"next_cursor":}'.length;
  let items = 0;
  let kept = 0;
  for (let i = 0; i < handles.length; i++) {
    const h = handles[i]!;
    items += jsonSize(toPayload(h)) + (i > 0 ? 1 : 0);
    const last = i === handles.length - 1;
    const cursor = last && !more
      ? 4
      : jsonSize(encodeCursor({ updatedAt: h.updatedAt.getTime(), handle: h.handle }));
    if (i > 0 && head + items + cursor > maxBytes) break;
    kept = i + 1;
  }
  return kept;
}

/** A `c1.` cursor of earlier releases, for {@link decodeCursor} to compare with. */
export function encodeLegacyCursor(r: { updatedAt: number; handle: string }): string {
  return "c1." + base64url(Uint8Array.from(JSON.stringify([r.updatedAt, r.handle]), latin1));
}

/** A character's Latin-1 code; throws beyond it. */
export function latin1(c: string): number {
  const code = c.charCodeAt(0);
  if (code > 0xff) throw new RangeError("Not Latin-1");
  return code;
}

/** Base64url without padding. */
export function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

/**
 * Reads a cursor back. Only the exact text {@link encodeCursor} (or the `c1.`
 * form of earlier releases) makes for a position is accepted: anything else,
 * whatever it decodes to, is `invalid_argument`, never another error.
 */
export function decodeCursor(cursor: unknown): { updatedAt: number; handle: string } {
  const bad = () =>
    new InvalidArgument(
      "This cursor did not come from this store's listPage/state_list. Pass back next_cursor exactly as you got it, or omit it to start from the first page.",
      { field: "cursor" },
    );
  if (typeof cursor !== "string" || cursor.length > MAX_CURSOR_CHARS) throw bad();
  const legacy = cursor.startsWith("c1.");
  if (!legacy && !cursor.startsWith("c2.")) throw bad();
  try {
    const binary = atob(cursor.slice(3).replaceAll("-", "+").replaceAll("_", "/"));
    const json = legacy ? binary : new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(binary, (c) => c.charCodeAt(0)),
    );
    const v: unknown = JSON.parse(json);
    if (
      Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) &&
      typeof v[1] === "string" && v[1].length > 0 && v[1].length <= 256 && isIdentifier(v[1])
    ) {
      const at = { updatedAt: v[0] as number, handle: v[1] };
      // One position, one text: other spellings of it did not come from here.
      if ((legacy ? encodeLegacyCursor(at) : encodeCursor(at)) === cursor) return at;
    }
  } catch { /* fall through */ }
  throw bad();
}
