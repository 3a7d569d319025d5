/**
 * The MCP Registry's rules for `server.json`, as code: the published
 * `server.schema.json` (2025-09-29) and what the official registry adds on
 * top (trusted registry base URLs, `mcpb` bundles on GitHub or GitLab
 * releases, `_meta` only under the publisher-provided key). The tests check
 * the checked-in `server.json` and the one the release writes with them.
 *
 * @module
 */

/** The `$schema` URL's form; its date must be 2025-09-29 or later. */
const SCHEMA_URL =
  /^https:\/\/static\.modelcontextprotocol\.io\/schemas\/(\d{4}-\d{2}-\d{2})\/server\.schema\.json$/;

/** The first schema revision these rules describe. */
const SCHEMA_SINCE = "2025-09-29";

/** `ServerDetail`'s keys. */
const SERVER_KEYS = [
  "$schema",
  "name",
  "description",
  "repository",
  "version",
  "websiteUrl",
  "packages",
  "remotes",
  "_meta",
];

/** `Package`'s keys (the schema sets `additionalProperties: false`). */
const PACKAGE_KEYS = [
  "registryType",
  "registryBaseUrl",
  "identifier",
  "version",
  "fileSha256",
  "runtimeHint",
  "transport",
  "runtimeArguments",
  "packageArguments",
  "environmentVariables",
];

/** `Input`'s keys, which every argument and key-value input shares. */
const INPUT_KEYS = [
  "description",
  "isRequired",
  "format",
  "value",
  "isSecret",
  "default",
  "placeholder",
  "choices",
  "variables",
];

/** The package registries the registry knows. */
const REGISTRY_TYPES = ["npm", "pypi", "nuget", "oci", "mcpb", "cargo", "go"];

/** The only base URL the official registry accepts per registry type, where it names one. */
const BASE_URLS: Record<string, string[]> = {
  npm: ["https://registry.npmjs.org"],
  pypi: ["https://pypi.org"],
  nuget: ["https://api.nuget.org/v3/index.json", "https://api.nuget.org"],
};

/** Where the official registry accepts `mcpb` bundles from. */
const MCPB_URL = /^https:\/\/(github\.com|gitlab\.com)\/[^/]+\/[^/]+\/(-\/)?releases\//;

/**
 * Whether a version string is a range (or `latest`) rather than one version.
 *
 * @param v The version.
 * @returns `true` for `^1.2.3`, `~1.2.3`, `>=1.2.3`, `1.x`, `1.*`, `1 - 2`, `a || b`, `latest`.
 */
export function isVersionRange(v: string): boolean {
  return v === "latest" || /^[\^~<>=]/.test(v) || /(^|\.)[xX*](\.|$)/.test(v) ||
    /\s-\s|\|\|/.test(v) || v.trim() === "" || v === "*";
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const isUri = (v: unknown): boolean => {
  if (typeof v !== "string") return false;
  try {
    new URL(v);
    return true;
  } catch {
    return false;
  }
};

function extraKeys(o: Record<string, unknown>, allowed: string[], at: string): string[] {
  return Object.keys(o).filter((k) => !allowed.includes(k)).map((k) =>
    `${at}: "${k}" is not a key of the schema`
  );
}

function inputProblems(o: unknown, at: string, extra: string[]): string[] {
  if (!isObject(o)) return [`${at}: not an object`];
  const out = extraKeys(o, [...INPUT_KEYS, ...extra], at);
  if (
    o.format !== undefined &&
    !["string", "number", "boolean", "filepath"].includes(String(o.format))
  ) {
    out.push(`${at}.format: must be string, number, boolean or filepath`);
  }
  for (const k of ["description", "value", "default", "placeholder"]) {
    if (o[k] !== undefined && typeof o[k] !== "string") out.push(`${at}.${k}: must be a string`);
  }
  for (const k of ["isRequired", "isSecret"]) {
    if (o[k] !== undefined && typeof o[k] !== "boolean") out.push(`${at}.${k}: must be a boolean`);
  }
  if (
    o.choices !== undefined &&
    !(Array.isArray(o.choices) && o.choices.every((c) => typeof c === "string"))
  ) {
    out.push(`${at}.choices: must be an array of strings`);
  }
  return out;
}

function argumentProblems(a: unknown, at: string): string[] {
  if (!isObject(a)) return [`${at}: not an object`];
  if (a.type === "positional") {
    const out = inputProblems(a, at, ["type", "valueHint", "isRepeated"]);
    if (a.valueHint === undefined && a.value === undefined) {
      out.push(`${at}: a positional argument needs "valueHint" or "value"`);
    }
    return out;
  }
  if (a.type === "named") {
    const out = inputProblems(a, at, ["type", "name", "isRepeated"]);
    if (typeof a.name !== "string") out.push(`${at}.name: required for a named argument`);
    return out;
  }
  return [`${at}.type: must be "positional" or "named"`];
}

function keyValueProblems(kv: unknown, at: string): string[] {
  if (!isObject(kv)) return [`${at}: not an object`];
  const out = inputProblems(kv, at, ["name"]);
  if (typeof kv.name !== "string" || kv.name === "") out.push(`${at}.name: required`);
  return out;
}

function transportProblems(t: unknown, at: string): string[] {
  if (!isObject(t)) return [`${at}: required, an object`];
  if (t.type === "stdio") return extraKeys(t, ["type"], at);
  if (t.type === "streamable-http" || t.type === "sse") {
    const out = extraKeys(t, ["type", "url", "headers"], at);
    if (typeof t.url !== "string") out.push(`${at}.url: required`);
    if (t.headers !== undefined) {
      if (!Array.isArray(t.headers)) out.push(`${at}.headers: must be an array`);
      else t.headers.forEach((h, i) => out.push(...keyValueProblems(h, `${at}.headers[${i}]`)));
    }
    return out;
  }
  return [`${at}.type: must be "stdio", "streamable-http" or "sse"`];
}

function packageProblems(p: unknown, at: string): string[] {
  if (!isObject(p)) return [`${at}: not an object`];
  const out = extraKeys(p, PACKAGE_KEYS, at);
  for (const k of ["registryType", "identifier", "version"]) {
    if (typeof p[k] !== "string" || p[k] === "") out.push(`${at}.${k}: required, a string`);
  }
  const type = String(p.registryType);
  if (!REGISTRY_TYPES.includes(type)) out.push(`${at}.registryType: unknown registry "${type}"`);
  if (typeof p.version === "string" && isVersionRange(p.version)) {
    out.push(`${at}.version: "${p.version}" is a range or "latest", not one version`);
  }
  if (p.fileSha256 !== undefined && !/^[a-f0-9]{64}$/.test(String(p.fileSha256))) {
    out.push(`${at}.fileSha256: must be 64 lowercase hex digits`);
  }
  if (type === "mcpb") {
    if (p.fileSha256 === undefined) out.push(`${at}.fileSha256: required for an mcpb package`);
    if (!MCPB_URL.test(String(p.identifier))) {
      out.push(`${at}.identifier: an mcpb bundle must be a GitHub or GitLab release download URL`);
    }
  }
  if (p.registryBaseUrl !== undefined) {
    if (!isUri(p.registryBaseUrl)) out.push(`${at}.registryBaseUrl: must be a URI`);
    const allowed = BASE_URLS[type];
    if (allowed && !allowed.includes(String(p.registryBaseUrl))) {
      out.push(`${at}.registryBaseUrl: the official registry accepts only ${allowed.join(" or ")}`);
    }
  }
  if (p.runtimeHint !== undefined && typeof p.runtimeHint !== "string") {
    out.push(`${at}.runtimeHint: must be a string`);
  }
  out.push(...transportProblems(p.transport, `${at}.transport`));
  for (const k of ["runtimeArguments", "packageArguments"]) {
    if (p[k] === undefined) continue;
    if (!Array.isArray(p[k])) out.push(`${at}.${k}: must be an array`);
    else {(p[k] as unknown[]).forEach((a, i) =>
        out.push(...argumentProblems(a, `${at}.${k}[${i}]`))
      );}
  }
  if (p.runtimeArguments !== undefined && p.runtimeHint === undefined) {
    out.push(`${at}.runtimeHint: should be given with runtimeArguments`);
  }
  if (p.environmentVariables !== undefined) {
    if (!Array.isArray(p.environmentVariables)) {
      out.push(`${at}.environmentVariables: must be an array`);
    } else {
      p.environmentVariables.forEach((e, i) =>
        out.push(...keyValueProblems(e, `${at}.environmentVariables[${i}]`))
      );
    }
  }
  return out;
}

/**
 * Everything in a `server.json` document that the registry's schema
 * (2025-09-29) or the official registry would reject.
 *
 * @param doc The parsed document.
 * @returns One line per problem; empty when the document is valid.
 */
export function serverJsonProblems(doc: unknown): string[] {
  if (!isObject(doc)) return ["the document is not an object"];
  const out = extraKeys(doc, SERVER_KEYS, "server");
  if (doc.$schema !== undefined) {
    const m = SCHEMA_URL.exec(String(doc.$schema));
    if (!m) out.push(`$schema: not a registry schema URL: ${doc.$schema}`);
    else if (m[1]! < SCHEMA_SINCE) out.push(`$schema: ${m[1]} is older than ${SCHEMA_SINCE}`);
  }
  const name = doc.name;
  if (typeof name !== "string") out.push("name: required, a string");
  else if (
    !/^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/.test(name) || name.length < 3 || name.length > 200
  ) {
    out.push(`name: "${name}" must match ^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$ (3 to 200 characters)`);
  }
  const description = doc.description;
  if (typeof description !== "string" || description.length < 1) {
    out.push("description: required, a non-empty string");
  } else if (description.length > 100) {
    out.push(`description: ${description.length} characters, at most 100`);
  }
  const version = doc.version;
  if (typeof version !== "string" || version === "") out.push("version: required, a string");
  else if (version.length > 255) out.push("version: at most 255 characters");
  else if (isVersionRange(version)) out.push(`version: "${version}" is a range, not one version`);
  if (doc.repository !== undefined) {
    const r = doc.repository;
    if (!isObject(r)) out.push("repository: must be an object");
    else {
      out.push(...extraKeys(r, ["url", "source", "id", "subfolder"], "repository"));
      if (!isUri(r.url)) out.push("repository.url: required, a URI");
      if (typeof r.source !== "string") out.push("repository.source: required, a string");
    }
  }
  if (doc.websiteUrl !== undefined && !isUri(doc.websiteUrl)) out.push("websiteUrl: must be a URI");
  if (doc.packages !== undefined) {
    if (!Array.isArray(doc.packages)) out.push("packages: must be an array");
    else doc.packages.forEach((p, i) => out.push(...packageProblems(p, `packages[${i}]`)));
  }
  if (doc.remotes !== undefined) {
    if (!Array.isArray(doc.remotes)) out.push("remotes: must be an array");
    else {
      doc.remotes.forEach((r, i) => {
        out.push(...transportProblems(r, `remotes[${i}]`));
        if (isObject(r) && r.type === "stdio") out.push(`remotes[${i}]: a remote cannot be stdio`);
      });
    }
  }
  if (doc._meta !== undefined) {
    if (!isObject(doc._meta)) out.push("_meta: must be an object");
    else {
      out.push(
        ...extraKeys(doc._meta, ["io.modelcontextprotocol.registry/publisher-provided"], "_meta"),
      );
    }
  }
  return out;
}
