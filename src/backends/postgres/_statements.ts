/**
 * The PostgreSQL backend's SQL: every statement of one schema, built once.
 *
 * @module
 */

import type { ListDialect } from "../_sql.ts";

// Columns of a record, in the order recordOf reads them. Positional rows
// (`.values()`) keep the backend independent of any column-name transform the
// caller configured on an injected client.
export const RECORD_COLUMNS =
  "handle, kind, state, version, created_at, updated_at, expires_at, last_writer, schema_version, " +
  "preview, forked_from";
export const META_COLUMNS =
  "handle, kind, version, created_at, updated_at, expires_at, last_writer";

/** The names every statement of one schema is built from. */
function parts(s: string, channel: string) {
  const h = `${s}.handles`, c = `${s}.changes`, i = `${s}.idempotency`, l = `${s}.leases`;
  const live = "trashed_until IS NULL";
  const notify = (param: string) => `pg_notify('${channel}', ${param})`;
  // A write's lease, taken in the write's own statement when a row of
  // `from` says the write landed (the rule of `acquire`): a CTE taking
  // parameters $n (holder), $n+1 (expiresAt) and $n+2 (now), and the four
  // columns that answer it — the lease taken (holder, expires_at; NULL when
  // another's is in force), then the lease that was in force before.
  const leaseCte = (from: string, n: number) =>
    `,
    lz AS (INSERT INTO ${l} AS old (user_id, handle, holder, expires_at)
           SELECT $1, $2, $${n}, $${n + 1}::bigint FROM ${from}
           ON CONFLICT (user_id, handle) DO UPDATE
             SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
             WHERE old.holder = EXCLUDED.holder OR old.expires_at <= $${n + 2}::bigint
           RETURNING holder, expires_at)`;
  const leaseCols = `(SELECT holder FROM lz), (SELECT expires_at FROM lz),
    (SELECT holder FROM ${l} WHERE user_id = $1 AND handle = $2),
    (SELECT expires_at FROM ${l} WHERE user_id = $1 AND handle = $2)`;
  return { h, c, i, l, live, notify, leaseCte, leaseCols };
}

type Parts = ReturnType<typeof parts>;

/** The statements that insert a record, with its first entry and the writer's lease. */
function inserts(p: Parts) {
  const { h, c, notify, leaseCte, leaseCols } = p;
  // A record's schema version, preview and fork point are always the
  // statement's last three parameters (after the lease's, when it takes one).
  // The INSERT of the record; its last three parameters from `$last` on.
  const into = (last: number) =>
    `INSERT INTO ${h} (user_id, ${RECORD_COLUMNS})
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $${last}::bigint,
               $${last + 1}::text, $${last + 2}::text)
       ON CONFLICT (user_id, handle) DO NOTHING`;
  const insert = (leased: boolean) =>
    `WITH ins AS (
       ${into(leased ? 14 : 11)}
       RETURNING 1
     )${leased ? leaseCte("ins", 11) : ""}
     SELECT ${notify("$10")}${leased ? `, ${leaseCols}` : ""} FROM ins`;
  const insertLogged = (leased: boolean) =>
    `WITH ins AS (
       ${into(leased ? 17 : 14)}
       RETURNING user_id, handle
     ),
     log AS (
       INSERT INTO ${c} (user_id, handle, version, at, text)
       SELECT user_id, handle, $10::bigint, $11::bigint, $12::text FROM ins
       ON CONFLICT (user_id, handle, version) DO UPDATE
         SET at = EXCLUDED.at, text = EXCLUDED.text
     )${leased ? leaseCte("ins", 14) : ""}
     SELECT ${notify("$13")}${leased ? `, ${leaseCols}` : ""} FROM ins`;
  return {
    // A trashed row holds its handle too: the primary key stops the insert.
    insert: insert(false),
    insertLeased: insert(true),
    // The entry goes in only with the row. An entry left by an older instance
    // that deleted a row without its changelog is overwritten, never in the way.
    insertLogged: insertLogged(false),
    insertLoggedLeased: insertLogged(true),
  };
}

/** The statements of `save` and `update`: the compare-and-set, the steps of a locked transaction and the one-statement step from a guess. */
function updates(p: Parts) {
  const { h, c, live, notify, leaseCte, leaseCols } = p;
  const save = (leased: boolean) =>
    `WITH s AS (
       UPDATE ${h}
       SET state = $3, version = version + 1, updated_at = $4,
           expires_at = CASE WHEN $5::boolean THEN expires_at ELSE $6::bigint END,
           last_writer = $7,
           schema_version = COALESCE($${leased ? 14 : 11}::bigint, schema_version),
           preview = COALESCE($${leased ? 15 : 12}::text, preview)
       WHERE user_id = $1 AND handle = $2 AND version = $8::bigint AND ${live}
         AND (expires_at IS NULL OR expires_at > $9::bigint)
       RETURNING ${RECORD_COLUMNS}
     )${leased ? leaseCte("s", 11) : ""}
     SELECT ${RECORD_COLUMNS}, ${notify("$10")}${leased ? `, ${leaseCols}` : ""} FROM s`;
  // An entry of (user $1, handle $2): version $v, at $v+1 and text $v+2, and
  // the retention trim before it (delete `version <=` $v+3 or `at <` $v+4,
  // see `entryParams`), the two parts of one statement. The trim leaves the
  // new version alone, so that no row is both deleted and upserted. With
  // `gate`, a CTE, both happen only when it returns a row.
  const appendEntry = (v: number, gate?: string) => {
    const when = gate ? ` AND EXISTS (SELECT 1 FROM ${gate})` : "";
    const entry = `$1, $2, $${v}::bigint, $${v + 1}::bigint, $${v + 2}::text`;
    return {
      cut: `cut AS (
                    DELETE FROM ${c}
                    WHERE user_id = $1 AND handle = $2 AND version < $${v}::bigint
                      AND (version <= $${v + 3}::bigint OR at < $${v + 4}::bigint)${when}
                  )`,
      insert: `INSERT INTO ${c} (user_id, handle, version, at, text)
                  ${gate ? `SELECT ${entry} FROM ${gate}` : `VALUES (${entry})`}
                  ON CONFLICT (user_id, handle, version) DO UPDATE
                    SET at = EXCLUDED.at, text = EXCLUDED.text`,
    };
  };
  const logged = appendEntry(10);
  const gated = appendEntry(10, "wl");
  const guessed = (leased: boolean) =>
    `WITH w AS (
       UPDATE ${h}
       SET kind = $3, state = $4, version = $5, created_at = $6, updated_at = $7,
           expires_at = $8, last_writer = $9, schema_version = $15::bigint,
           preview = $16::text, forked_from = $17::text
       WHERE user_id = $1 AND handle = $2 AND ${live} AND version = $18::bigint
         AND created_at = $19::bigint AND updated_at = $20::bigint
         AND expires_at IS NOT DISTINCT FROM $21::bigint
       RETURNING 1
     ),
     wl AS (SELECT 1 FROM w WHERE $23::boolean),
     ${gated.cut},
     log AS (${gated.insert})${leased ? leaseCte("w", 24) : ""}
     SELECT ${notify("$22")}${leased ? `, ${leaseCols}` : ""} FROM w`;
  return {
    save: save(false),
    saveLeased: save(true),
    write: `UPDATE ${h}
            SET kind = $3, state = $4, version = $5, created_at = $6, updated_at = $7,
                expires_at = $8, last_writer = $9, schema_version = $10::bigint,
                preview = $11::text, forked_from = $12::text
            WHERE user_id = $1 AND handle = $2`,
    // The new row, the entry and the retention trim in one statement (one
    // message where three would cost a server round each).
    writeLogged: `WITH w AS (
                    UPDATE ${h}
                    SET kind = $3, state = $4, version = $5, created_at = $6, updated_at = $7,
                        expires_at = $8, last_writer = $9, schema_version = $15::bigint,
                        preview = $16::text, forked_from = $17::text
                    WHERE user_id = $1 AND handle = $2
                  ),
                  ${logged.cut}
                  ${logged.insert}`,
    // A read-modify-write step computed from a record this process saw (a
    // guess): the row, its entry, the retention trim, the notification and
    // the writer's lease in one statement, applied only while the row is
    // still the record guessed ($18 version, $19 created_at, $20 updated_at,
    // $21 expires_at: every change to a record moves its version and
    // updated_at). No row back: the guess was stale, and the step runs again
    // in a transaction on the row it locks. Parameters as `writeLogged`, then
    // the guess, the payload ($22), whether the step has an entry ($23; the
    // entry's parameters are then placeholders) and, with the lease, $24–$26.
    writeGuessed: guessed(false),
    writeGuessedLeased: guessed(true),
  };
}

/** The statements that read, remove, trash and sweep records, and read their changelogs. */
function records(p: Parts) {
  const { h, c, i, l, live, notify } = p;
  const sweep = (byUser: string) =>
    `WITH idem AS (DELETE FROM ${i} WHERE expires_at <= $2::bigint),
     expired AS (DELETE FROM ${h} WHERE expires_at <= $1::bigint AND ${live}${byUser}
                 RETURNING user_id, handle),
     trashed AS (DELETE FROM ${h} WHERE trashed_until <= $2::bigint${byUser}
                 RETURNING user_id, handle),
     gone AS (SELECT user_id, handle FROM expired UNION ALL SELECT user_id, handle FROM trashed),
     log AS (DELETE FROM ${c} AS e USING gone
             WHERE e.user_id = gone.user_id AND e.handle = gone.handle),
     lapsed AS (DELETE FROM ${l} WHERE expires_at <= $2::bigint)
     SELECT count(*)::int, CASE WHEN count(*) > 0 THEN ${notify("'*'")} END FROM expired`;
  return {
    read: `SELECT ${RECORD_COLUMNS} FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live}`,
    readLeased: `SELECT ${RECORD_COLUMNS.split(", ").map((c) => `r.${c}`).join(", ")},
                 l.holder, l.expires_at
                 FROM ${h} AS r LEFT JOIN ${l} AS l ON l.user_id = r.user_id
                   AND l.handle = r.handle AND l.expires_at > $3::bigint
                 WHERE r.user_id = $1 AND r.handle = $2 AND r.${live}`,
    lock: `SELECT ${RECORD_COLUMNS} FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live}
           FOR UPDATE`,
    lockAny: `SELECT trashed_until IS NOT NULL FROM ${h} WHERE user_id = $1 AND handle = $2
              FOR UPDATE`,
    remove: `WITH d AS (
               DELETE FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live}
               RETURNING 1
             )
             SELECT ${notify("$3")} FROM d`,
    // Runs after `remove` in its transaction: the changelog goes when no row
    // (live or trashed) is left to own it.
    removeLog: `DELETE FROM ${c} WHERE user_id = $1 AND handle = $2
                AND NOT EXISTS (SELECT 1 FROM ${h} WHERE user_id = $1 AND handle = $2)`,
    dropLog: `DELETE FROM ${c} WHERE user_id = $1 AND handle = $2`,
    trash: `WITH t AS (
              UPDATE ${h} SET trashed_until = $3::bigint
              WHERE user_id = $1 AND handle = $2 AND ${live}
              RETURNING 1
            )
            SELECT ${notify("$4")} FROM t`,
    untrash: `WITH u AS (
                UPDATE ${h} SET trashed_until = NULL
                WHERE user_id = $1 AND handle = $2 AND trashed_until > $3::bigint
                RETURNING ${RECORD_COLUMNS}
              )
              SELECT ${RECORD_COLUMNS}, ${notify("$4")} FROM u`,
    changes: `SELECT version, at, text FROM ${c}
              WHERE user_id = $1 AND handle = $2 AND version > $3::bigint
                AND EXISTS (SELECT 1 FROM ${h} WHERE user_id = $1 AND handle = $2 AND ${live})
              ORDER BY version`,
    sweepAll: sweep(""),
    sweepUser: sweep(" AND user_id = $3"),
    // `xmax = 0` tells a fresh insert from an update of a conflicting row. A
    // trashed row gives way to any version and leaves the trash.
    importRecord: `INSERT INTO ${h} AS old (user_id, ${RECORD_COLUMNS})
              VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::bigint, $11::text, $12::text)
              ON CONFLICT (user_id, handle) DO UPDATE
                SET kind = EXCLUDED.kind, state = EXCLUDED.state, version = EXCLUDED.version,
                    created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
                    expires_at = EXCLUDED.expires_at, last_writer = EXCLUDED.last_writer,
                    schema_version = EXCLUDED.schema_version, preview = EXCLUDED.preview,
                    forked_from = EXCLUDED.forked_from, trashed_until = NULL
                WHERE old.version < EXCLUDED.version OR old.trashed_until IS NOT NULL
              RETURNING old.xmax = 0`,
    notify: `SELECT ${notify("$1")}`,
    trashedUntil: `SELECT trashed_until FROM ${h}
                   WHERE user_id = $1 AND handle = $2 AND trashed_until IS NOT NULL`,
  };
}

/** The statements of the idempotency claims, the user and trash listings, the audit entries and transfers, and the leases. */
function others(p: Parts) {
  const { h, c, i, l, live, notify, leaseCte, leaseCols } = p;
  return {
    // The entry of a share, an unshare or a transfer (an `AuditStep`): the
    // live row steps to its next version and time $3, its state and
    // everything else kept, with the entry numbered there ('{"version":' v ','
    // and the tail $4, see `auditEntry`) and the trim of a write (versions
    // up to v - $5 and entries before $6 go); the payload is $7. No row back:
    // no live record, and nothing changed.
    audit: `WITH w AS (
              UPDATE ${h} SET version = version + 1, updated_at = $3::bigint
              WHERE user_id = $1 AND handle = $2 AND ${live}
              RETURNING version
            ),
            cut AS (
              DELETE FROM ${c} AS e USING w
              WHERE e.user_id = $1 AND e.handle = $2 AND e.version < w.version
                AND (e.version <= w.version - $5::bigint OR e.at < $6::bigint)
            ),
            log AS (
              INSERT INTO ${c} (user_id, handle, version, at, text)
              SELECT $1, $2, w.version, $3::bigint, '{"version":' || w.version || ',' || $4::text
              FROM w
              ON CONFLICT (user_id, handle, version) DO UPDATE
                SET at = EXCLUDED.at, text = EXCLUDED.text
            )
            SELECT ${notify("$7")} FROM w`,
    // A transfer: the live row and its changelog change owner; the old
    // owner's lease goes. Run after both keys are locked.
    moveRecord: `UPDATE ${h} SET user_id = $3 WHERE user_id = $1 AND handle = $2 AND ${live}`,
    moveLog: `UPDATE ${c} SET user_id = $3 WHERE user_id = $1 AND handle = $2`,
    dropLease: `DELETE FROM ${l} WHERE user_id = $1 AND handle = $2`,
    // A transfer's content sealed anew for the new owner (see TransferContent),
    // written after the row lock: whether an entry has no text in $3 (JSON
    // of the content's entries), then the entries' texts and the record's
    // state and preview.
    resealMissing: `SELECT 1 FROM ${c} AS e WHERE e.user_id = $1 AND e.handle = $2
                      AND NOT EXISTS (SELECT 1 FROM json_to_recordset($3::text::json)
                                        AS r(version bigint, text text)
                                      WHERE r.version = e.version)
                    LIMIT 1`,
    resealLog: `UPDATE ${c} AS e SET text = r.text
                FROM json_to_recordset($3::text::json) AS r(version bigint, text text)
                WHERE e.user_id = $1 AND e.handle = $2 AND e.version = r.version`,
    resealRecord: `UPDATE ${h} SET state = $3, preview = $4
                   WHERE user_id = $1 AND handle = $2 AND ${live}`,
    // A live record stops the claim (and is then read by `replay`); an expired
    // one that no sweep has removed yet is taken over.
    claim: `INSERT INTO ${i} AS old (user_id, scope, key, fingerprint, result, expires_at)
            VALUES ($1, $2, $3, $4, NULL, $5)
            ON CONFLICT (user_id, scope, key) DO UPDATE
              SET fingerprint = EXCLUDED.fingerprint, result = NULL, expires_at = EXCLUDED.expires_at
              WHERE old.expires_at <= $6::bigint`,
    replay: `SELECT fingerprint, result FROM ${i} WHERE user_id = $1 AND scope = $2 AND key = $3`,
    remember: `UPDATE ${i} SET result = $4, handle = $5
               WHERE user_id = $1 AND scope = $2 AND key = $3`,
    // A loose index scan over the primary key: one probe per user, however
    // many handles each has, and one more for a live row (a user whose rows
    // are all in the trash is left out). "C" collation: UTF-8 byte order.
    users: `WITH RECURSIVE u (user_id) AS (
              (SELECT user_id FROM ${h} WHERE user_id > $1::text ORDER BY user_id LIMIT 1)
              UNION ALL
              SELECT (SELECT n.user_id FROM ${h} n WHERE n.user_id > u.user_id
                      ORDER BY n.user_id LIMIT 1)
              FROM u WHERE u.user_id IS NOT NULL
            )
            SELECT user_id FROM u
            WHERE user_id IS NOT NULL
              AND EXISTS (SELECT 1 FROM ${h} l WHERE l.user_id = u.user_id AND l.${live})
            LIMIT $2::int`,
    // One user's trashed rows through the primary key, sorted: a trash is small.
    listTrash: `SELECT ${META_COLUMNS}, trashed_until FROM ${h}
              WHERE user_id = $1 AND trashed_until IS NOT NULL AND ($2::bigint IS NULL
                OR trashed_until < $2::bigint OR (trashed_until = $2::bigint AND handle > $3))
              ORDER BY trashed_until DESC, handle LIMIT $4::int`,
    // Stores the lease unless another holder's is still in force.
    acquire: `INSERT INTO ${l} AS old (user_id, handle, holder, expires_at)
              VALUES ($1, $2, $3, $4::bigint)
              ON CONFLICT (user_id, handle) DO UPDATE
                SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                WHERE old.holder = EXCLUDED.holder OR old.expires_at <= $5::bigint
              RETURNING holder, expires_at`,
    leaseOf: `SELECT holder, expires_at FROM ${l} WHERE user_id = $1 AND handle = $2`,
    // `acquire` answering as a leased write does (in `update`'s transaction).
    acquireHeld: `WITH w AS (SELECT 1)${leaseCte("w", 3)} SELECT ${leaseCols}`,
    release: `DELETE FROM ${l} WHERE user_id = $1 AND handle = $2 AND holder = $3
              RETURNING expires_at > $4::bigint`,
    leases: `SELECT handle, holder, expires_at FROM ${l}
             WHERE user_id = $1 AND handle IN (SELECT json_array_elements_text($2::text::json))
               AND expires_at > $3::bigint`,
  };
}

/**
 * The SQL texts of one schema. Every statement that writes a record also
 * notifies `channel` with its last parameter, the payload, once per written
 * row; inside `update` and `importRecord` the `notify` statement does it.
 */
export function statements(s: string, channel: string) {
  const p = parts(s, channel);
  return { ...inserts(p), ...updates(p), ...records(p), ...others(p) };
}

/** The SQL texts of one schema, by name. */
export type Statements = ReturnType<typeof statements>;

/**
 * The listing query of schema `s`: an index-only scan of its partial index of
 * live rows, each row of the page then ending with its `forked_from`, read
 * through the primary key (never the state); with `previews`, then its
 * `preview`, read from the row (the index leaves both out).
 */
export function listDialect(s: string, previews = false): ListDialect {
  const fork = previews ? "forked_from" : `(SELECT f.forked_from FROM ${s}.handles AS f ` +
    "WHERE f.user_id = handles.user_id AND f.handle = handles.handle)";
  return {
    from: () => `SELECT ${META_COLUMNS}, ${fork}${previews ? ", preview" : ""} FROM ${s}.handles`,
    user: "user_id",
    updated: "updated_at",
    expires: "expires_at",
    // The predicate of the partial index listing reads.
    rows: ["trashed_until IS NULL"],
    param: (n, type) => `$${n}::${type}`,
  };
}
