/**
 * A sink for OTLP/HTTP exports on loopback: it reads each body and answers
 * success, so that a bench with Deno's OpenTelemetry on pays for exporting
 * its spans without a collector.
 *
 * ```sh
 * deno run --allow-net bench/_otlp_sink.ts 4318
 * ```
 *
 * @module
 */

const port = Number(Deno.args[0] ?? 4318);
Deno.serve({ hostname: "127.0.0.1", port, onListen() {} }, async (req) => {
  await req.arrayBuffer();
  return Response.json({});
});
