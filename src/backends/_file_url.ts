/**
 * The path part of the file backends' URLs (`sqlite:///…`, `denokv:///…`),
 * private to the package. A leaf module: the backends that parse such URLs
 * and `url.ts`, which opens them, both import it.
 *
 * @module
 */

import { InvalidArgument, redact } from "../errors.ts";

/**
 * Turns the path part of a file URL (`sqlite:///…`, `denokv:///…`) into a
 * file path: `/~/x` is under the home directory, `//abs` is absolute, `/rel`
 * is relative to the working directory, `/:memory:` stays `:memory:`.
 *
 * @param url The whole URL.
 * @param scheme Its scheme, e.g. `sqlite`.
 * @returns The path and the query parameters.
 */
export function filePathOf(url: string, scheme: string): { path: string; params: URLSearchParams } {
  const rest = url.slice(scheme.length + 3);
  const q = rest.indexOf("?");
  const raw = q < 0 ? rest : rest.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : rest.slice(q + 1));
  if (!raw.startsWith("/") || raw.length < 2) {
    throw new InvalidArgument(
      `Malformed ${scheme} URL "${
        redact(url)
      }": write ${scheme}:///~/file, ${scheme}:////absolute/path or ${scheme}:///:memory:.`,
      { field: "backend" },
    );
  }
  let path: string;
  try {
    path = decodeURIComponent(raw.slice(1));
  } catch {
    throw new InvalidArgument(
      `Malformed ${scheme} URL "${redact(url)}": the path has an invalid %-escape.`,
      { field: "backend" },
    );
  }
  if (path === "~" || path.startsWith("~/")) {
    const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
    if (!home) {
      throw new InvalidArgument("Cannot expand ~: neither HOME nor USERPROFILE is set.", {
        field: "backend",
      });
    }
    path = home + path.slice(1);
  }
  return { path, params };
}
