/**
 * Erasing a user on the SQL backends (SQLite, PostgreSQL), private to the
 * package: which grants go, as one recursive query both engines run.
 *
 * @module
 */

import type { ListDialect } from "./_sql.ts";

/**
 * A `WITH RECURSIVE gone(id)` clause over the grants table `t`: the grants
 * on the handles of user 1 (its own), those made to it and those made by it,
 * then every re-share under any of them. Ended grants are included.
 *
 * @param t The grants table, qualified as the engine needs.
 * @param p The engine's parameters.
 * @returns The clause, to put before a `SELECT` or `DELETE` that reads `gone`.
 */
export function goneGrants(t: string, p: ListDialect["param"]): string {
  const u = p(1, "text");
  return `WITH RECURSIVE gone(id) AS (` +
    `SELECT grant_id FROM ${t} WHERE owner = ${u} OR to_user = ${u} OR by_user = ${u} ` +
    `UNION SELECT g.grant_id FROM ${t} g JOIN gone ON g.parent = gone.id)`;
}
