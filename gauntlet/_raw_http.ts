/**
 * HTTP/1.1 over a raw loopback TCP socket, for what `fetch` will not do:
 * trickle a request byte by byte, stall halfway, hold a thousand
 * connections at once, send bytes that are not UTF-8 in a header.
 *
 * @module
 */

import { timer } from "./_util.ts";

/** A parsed HTTP/1.1 response (or what arrived of one). */
export interface RawResponse {
  /** The status code, or `null` when no status line arrived. */
  status: number | null;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** The body, de-chunked, as text. */
  body: string;
  /** Ms from the first byte sent to the status line, or `null`. */
  answeredMs: number | null;
  /** Ms from the first byte sent to the server closing the connection, or `null`. */
  closedMs: number | null;
}

const enc = new TextEncoder();

/** Bytes of a text, or the bytes themselves. */
export function bytesOf(x: string | Uint8Array): Uint8Array {
  return typeof x === "string" ? enc.encode(x) : x;
}

/**
 * Builds the bytes of an HTTP/1.1 request.
 *
 * @param method The method.
 * @param path The request target (raw bytes allowed).
 * @param headers Header lines (values may be raw bytes).
 * @param body The body; `Content-Length` is added unless `headers` has one or it is `null`.
 */
export function requestBytes(
  method: string,
  path: string | Uint8Array,
  headers: Record<string, string | Uint8Array>,
  body: string | Uint8Array | null,
): Uint8Array {
  const parts: Uint8Array[] = [
    enc.encode(`${method} `),
    bytesOf(path),
    enc.encode(" HTTP/1.1\r\n"),
  ];
  const names = Object.keys(headers).map((h) => h.toLowerCase());
  const b = body === null ? null : bytesOf(body);
  const all: Record<string, string | Uint8Array> = { ...headers };
  if (b && !names.includes("content-length") && !names.includes("transfer-encoding")) {
    all["Content-Length"] = String(b.length);
  }
  for (const [k, v] of Object.entries(all)) {
    parts.push(enc.encode(`${k}: `), bytesOf(v), enc.encode("\r\n"));
  }
  parts.push(enc.encode("\r\n"));
  if (b) parts.push(b);
  return concat(parts);
}

/** Concatenates byte arrays. */
export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Parses what arrived of a response. */
export function parseResponse(data: Uint8Array): Omit<RawResponse, "answeredMs" | "closedMs"> {
  const text = new TextDecoder().decode(data);
  const end = text.indexOf("\r\n\r\n");
  const head = end < 0 ? text : text.slice(0, end);
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  const headers: Record<string, string> = {};
  for (const line of head.split("\r\n").slice(1)) {
    const i = line.indexOf(":");
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = end < 0 ? "" : text.slice(end + 4);
  if (headers["transfer-encoding"]?.includes("chunked")) {
    let out = "";
    let rest = body;
    for (;;) {
      const nl = rest.indexOf("\r\n");
      if (nl < 0) break;
      const size = parseInt(rest.slice(0, nl), 16);
      if (!Number.isFinite(size) || size === 0) break;
      // Sizes count bytes, the text counts UTF-16 units: cut on bytes.
      const after = enc.encode(rest.slice(nl + 2));
      out += new TextDecoder().decode(after.subarray(0, size));
      rest = new TextDecoder().decode(after.subarray(size)).replace(/^\r\n/, "");
    }
    body = out;
  }
  return { status: m ? Number(m[1]) : null, headers, body };
}

/** Options of {@link exchange}. */
export interface ExchangeOptions {
  /** Pause between the parts, ms. Default 0. */
  gapMs?: number;
  /** Give up (and close) this long after the first byte, ms. */
  maxMs: number;
  /** Stop sending once the server answered. Default true. */
  stopOnAnswer?: boolean;
  /** After the answer, wait this long for the server to close, ms. Default 0. */
  lingerMs?: number;
}

/**
 * Sends `parts` on a fresh connection (pausing between them) and reads the
 * answer until the server closes, the answer is complete, or `maxMs` passed.
 *
 * @param port The loopback port.
 * @param parts The request, in pieces.
 * @param options Timing.
 */
export async function exchange(
  port: number,
  parts: Uint8Array[],
  options: ExchangeOptions,
): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const t0 = performance.now();
  const chunks: Uint8Array[] = [];
  let answeredMs: number | null = null;
  let closedMs: number | null = null;
  let weClosed = false;
  const complete = Promise.withResolvers<void>();
  const reading = (async () => {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) break;
        chunks.push(buf.slice(0, n));
        answeredMs ??= performance.now() - t0;
        if (isComplete(concat(chunks))) complete.resolve();
      }
    } catch {
      // reset by the server: closed as well
    }
    if (!weClosed) closedMs = performance.now() - t0;
    complete.resolve();
  })();
  const deadline = timer(options.maxMs);
  const stopOnAnswer = options.stopOnAnswer ?? true;
  const sending = (async () => {
    for (const part of parts) {
      if (closedMs !== null || (stopOnAnswer && answeredMs !== null)) return;
      if (performance.now() - t0 > options.maxMs) return;
      try {
        await conn.write(part);
      } catch {
        return;
      }
      if (options.gapMs) {
        const t = timer(options.gapMs);
        await Promise.race([t.done, complete.promise]);
        t.cancel();
      }
    }
  })();
  await Promise.race([complete.promise, deadline.done]);
  if (options.lingerMs && closedMs === null) {
    const t = timer(options.lingerMs);
    await Promise.race([t.done, reading]);
    t.cancel();
  }
  deadline.cancel();
  weClosed = closedMs === null;
  try {
    conn.close();
  } catch {
    // already closed
  }
  await reading;
  await sending;
  return { ...parseResponse(concat(chunks)), answeredMs, closedMs };
}

/** Whether the bytes hold a whole response (by Content-Length or the last chunk). */
function isComplete(data: Uint8Array): boolean {
  const text = new TextDecoder().decode(data);
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const head = text.slice(0, end).toLowerCase();
  const bodyBytes = data.length - enc.encode(text.slice(0, end + 4)).length;
  const cl = /\r\ncontent-length:\s*(\d+)/.exec(head);
  if (cl) return bodyBytes >= Number(cl[1]);
  if (head.includes("transfer-encoding: chunked")) return text.endsWith("\r\n0\r\n\r\n");
  return false;
}
