/**
 * Reading an HTTP request's body within a size and a time limit, and the
 * JSON-RPC error answers with no id the HTTP face sends.
 *
 * @module
 */

/** What {@link readBody} answers for a body over its limit. */
export const TOO_LARGE: unique symbol = Symbol("too large");

/** A JSON-RPC error answer with no id. */
export function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status });
}

/**
 * Reads a request body within `timeoutMs` and `maxBytes`, and decodes it as
 * strict UTF-8 (bytes that are not UTF-8 are a parse error, never replaced by
 * U+FFFD and stored). Answers 408 or 400 as a `Response`, or
 * {@link TOO_LARGE} (at once for a declared length over `maxBytes`), instead.
 */
export async function readBody(
  request: Request,
  maxBytes: number,
  timeoutMs: number,
): Promise<string | Response | typeof TOO_LARGE> {
  // A declared length over the limit is refused at once, before any body.
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > maxBytes) {
    request.body!.cancel().catch(() => {});
    return TOO_LARGE;
  }
  const reader = request.body!.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((r) => {
      timer = setTimeout(() => r("late"), Math.max(0, deadline - Date.now()));
    });
    const next = await Promise.race([reader.read(), late]).finally(() => clearTimeout(timer));
    if (next === "late") {
      reader.cancel().catch(() => {});
      return rpcError(
        408,
        -32000,
        `The request body did not arrive within ${timeoutMs} ms (--body-timeout-ms); send it again.`,
      );
    }
    if (next.done) break;
    size += next.value.byteLength;
    if (size > maxBytes) {
      reader.cancel().catch(() => {});
      return TOO_LARGE;
    }
    chunks.push(next.value);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return rpcError(400, -32700, "Parse error: the request body is not valid UTF-8.");
  }
}
