/**
 * Option tables in one line: `strings("to", "keep")` for options that take a
 * value, `flags("json")` for options that take none.
 *
 * @module
 */

/**
 * Options that take a value (`--name VALUE`), one a name, for an option table.
 *
 * @param names The options' names.
 * @returns Their table.
 */
export function strings<const K extends string>(...names: K[]): Record<K, { type: "string" }> {
  return tableOf(names, "string");
}

/**
 * Options that take no value (`--name`), one a name, for an option table.
 *
 * @param names The options' names.
 * @returns Their table.
 */
export function flags<const K extends string>(...names: K[]): Record<K, { type: "boolean" }> {
  return tableOf(names, "boolean");
}

function tableOf<K extends string, T>(names: K[], type: T): Record<K, { type: T }> {
  return Object.fromEntries(names.map((name) => [name, { type }])) as Record<K, { type: T }>;
}
