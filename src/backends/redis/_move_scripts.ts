/**
 * The Redis backend's Lua scripts that move a record between users:
 * `transfer` within one hash slot, and the steps of a move across slots
 * (private to the package). The key layout is described in `_scripts.ts`.
 *
 * @module
 */

import { PRELUDE } from "./_prelude.ts";

/*
 * A transfer's content (see TransferContent): `cv` = its version, tab, the
 * versions of the entries it has a text for, comma-joined (in the order of
 * the texts that travel with it).
 */
const COVERS = `
-- The positions of the entries of content cv by version (see cv above),
-- when record cur (getrec) is at cv's version and every entry of its
-- changelog has a text there; false otherwise.
local function covers(cur, cv)
  local c = split(cv, 2)
  if cur.v ~= c[1] then return false end
  local at, i = {}, 0
  for v in string.gmatch(c[2], '[^,]+') do
    i = i + 1
    at[v] = i
  end
  if cur.l then
    local lo, hi = bounds(cur.l)
    for v = lo, hi do
      if not at[tostring(v)] then return false end
    end
  end
  return at
end
`;

const RESEALED = `
-- The fields that write content cv into record hash key (cur: getrec): m
-- (nm) and d with state s, and each entry e<v> with its text (ARGV from
-- first, in cv's order), at kept; false when the record's m is not om (it
-- changed) or an entry has no text.
local function resealed(key, cur, cv, om, nm, s, first)
  if cur.m ~= om then return false end
  local at = covers(cur, cv)
  if not at then return false end
  local out = {'m', nm, 'd', nm .. '\\n' .. s}
  if cur.l then
    local lo, hi = bounds(cur.l)
    for v = lo, hi do
      local et = redis.call('HGET', key, 'e' .. v)
      out[#out + 1] = 'e' .. v
      local tab = string.find(et, '\\t', 1, true)
      out[#out + 1] = string.sub(et, 1, tab) .. ARGV[first - 1 + at[tostring(v)]]
    end
  end
  return out
end
`;

/**
 * transfer: renames a live record hash (changelog included) from one user's
 * keys to another's and moves it between their indexes, expiry sets and
 * usage; the old owner's lease on it goes, and every grant in force on it
 * (the old owner's grant list of the handle, re-shares included) ends. With
 * an audit step the moved record gets its next version and the `transfer`
 * entry; with a kept grant, the new owner's grant for the old owner is
 * stored; with content, the record's state, preview and entries hold it.
 * Nothing changes when the new owner has a record or a trashed record of
 * that handle, or the content was not made from the record. The keys of two
 * users sit in two hash slots: a standalone server only.
 * KEYS: record, index, expiry, lease, grant list of the handle (old owner);
 * record, index, expiry, trash[, grant list of the handle, kept grant's hash]
 * (new owner; the last two with a kept grant). ARGV: tab-joined now, graceMs, the
 * kept grant's encoded id and expiry; the audit step ("" = none; see
 * auditable); the entry; the kept grant's record (JSON, "" = none); the
 * content's cv ("" = none), then, with one, the m it was made from, the m
 * and state it writes and the entries' texts[; quotas of the new owner].
 * Replies 1 (moved), 0 (no live record), -1 (taken), -2 (the content was
 * not made from the record) or a quota refusal.
 */
export const TRANSFER: string = PRELUDE + COVERS + RESEALED + `
local a = split(ARGV[1], 4)
local now = tonumber(a[1])
local cur = getrec(KEYS[1])
if not cur then return 0 end
if redis.call('EXISTS', KEYS[6]) == 1 or redis.call('EXISTS', KEYS[9]) == 1 then return -1 end
local rs = false
if ARGV[5] ~= '' then
  rs = resealed(KEYS[1], cur, ARGV[5], ARGV[6], ARGV[7], ARGV[8], 9)
  if not rs then return -2 end
end
local to, q, qm, qw = basekey(KEYS[6]), quotas(), 0, 0
local db = recbytes(KEYS[1], cur.m)
local nb = rs and #ARGV[8] or db
if q then
  local refused
  refused, qm, qw = quotacheck(to, q, 1, nb, now)
  if refused then return refused end
end
local from = basekey(KEYS[1])
track(from, -1, -db)
redis.call('ZREM', KEYS[2], cur.x)
if cur.e ~= '' then redis.call('ZREM', KEYS[3], cur.x) end
redis.call('DEL', KEYS[4])
endgrants(from, redis.call('LRANGE', KEYS[5], 0, -1), a[1])
if rs then
  for i = 1, #rs, 1000 do
    redis.call('HSET', KEYS[1], unpack(rs, i, math.min(i + 999, #rs)))
  end
end
redis.call('RENAME', KEYS[1], KEYS[6])
local ttl = settle(KEYS[6], KEYS[7], KEYS[8], cur, tonumber(a[2]), now)
audit(KEYS[6], KEYS[7], KEYS[8], ARGV[2], ARGV[3])
track(to, 1, nb, ttl)
if q then countwrite(to, qm, qw) end
if KEYS[11] then storegrant(KEYS[11], KEYS[10], ARGV[4], a[4], a[3]) end
announce(KEYS[1])
announce(KEYS[6])
return 1
`;

/*
 * A transfer on a Redis Cluster, where the two users' keys sit in two hash
 * slots: five scripts, each atomic in one slot, and a roll forward (or back)
 * that any caller who finds the move unfinished completes. Two more keys:
 * - `P{T}:n:H` — the new owner's mark of a move in: `R` (reserved) or `D`
 *   (arrived), tab, the move's id, tab, when it was made (ms, wall clock),
 *   tab, the old owner's name.
 * - `P{U}:v:H` — the old owner's record in transit: the record hash,
 *   changelog included, renamed out of the user's view, with `mi` = the
 *   move's id and `mv` = what the move still has to do (JSON).
 * The record is live in at most one place at a time: under the old owner
 * until MOVE_OUT, under the new owner from MOVE_IN.
 */

/**
 * The first step of a move: reserves `(T, H)`. KEYS: the new owner's record,
 * trash, mark and transit keys of the handle. ARGV: the mark (`R…`).
 * Replies 1, -1 (taken) or `{'P', mark}` (a move of that handle is unfinished
 * there: its mark, or "" for one out of T).
 */
export const MOVE_RESERVE: string = `
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('EXISTS', KEYS[4]) == 1 then return {'P', ''} end
local n = redis.call('GET', KEYS[3])
if n then return {'P', n} end
redis.call('SET', KEYS[3], ARGV[1])
return 1
`;

/**
 * The second step: takes the live record out of the old owner's view. KEYS:
 * record, index, expiry, transit (old owner). ARGV: the audit step ("" =
 * none; see auditable), the move's id, what the move still has to do (JSON),
 * the content's cv ("" = none: its texts travel in that JSON, and the third
 * step writes them).
 * Replies the transit hash (HGETALL), 0 (no live record), -2 (the content
 * was not made from the record) or `{'P'}` (a move of that handle out of
 * this user is unfinished).
 */
export const MOVE_OUT: string = PRELUDE + COVERS + `
local cur = getrec(KEYS[1])
if not cur then return 0 end
if redis.call('EXISTS', KEYS[4]) == 1 then return {'P'} end
if ARGV[4] ~= '' and not covers(cur, ARGV[4]) then return -2 end
track(basekey(KEYS[1]), -1, -recbytes(KEYS[1], cur.m))
redis.call('ZREM', KEYS[2], cur.x)
if cur.e ~= '' then redis.call('ZREM', KEYS[3], cur.x) end
redis.call('RENAME', KEYS[1], KEYS[4])
redis.call('HSET', KEYS[4], 'mi', ARGV[2], 'mv', ARGV[3])
announce(KEYS[1])
return redis.call('HGETALL', KEYS[4])
`;

/**
 * The third step: the record arrives under the new owner, as the standalone
 * transfer leaves it (settled, audit step applied, kept grant stored), and
 * the mark turns from `R` to `D`. KEYS: record, index, expiry, trash, mark
 * (new owner)[, the kept grant's hash, the new owner's grant list of the
 * handle]. ARGV: tab-joined move id, now, graceMs, kept grant's encoded id
 * and expiry; the audit step; the entry; the kept grant's record (JSON);
 * the number of hash fields n; n field/value pairs (the transit hash)[;
 * quotas of the new owner].
 * Replies 1 (arrived), 2 (it had), 0 (no reservation of this move: it goes
 * back), -1 (taken) or a quota refusal (both: the reservation goes).
 */
export const MOVE_IN: string = PRELUDE + `
local a = split(ARGV[1], 5)
local now = tonumber(a[2])
local n = redis.call('GET', KEYS[5])
local kind, id = false, false
if n then kind, id = string.match(n, '^([RD])\\t([^\\t]*)\\t') end
if id ~= a[1] then return 0 end
if kind == 'D' then return 2 end
local taken = redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[4]) == 1
if taken then
  redis.call('DEL', KEYS[5])
  return -1
end
local count, fields, m, d = tonumber(ARGV[5]), {}, '', ''
for i = 6, 5 + 2 * count, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  if f ~= 'mi' and f ~= 'mv' then
    fields[#fields + 1] = f
    fields[#fields + 1] = v
    if f == 'm' then m = v elseif f == 'd' then d = v end
  end
end
local to, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
local db = #d - #m - 1
if q then
  local refused
  refused, qm, qw = quotacheck(to, q, 1, db, now)
  if refused then
    redis.call('DEL', KEYS[5])
    return refused
  end
end
for i = 1, #fields, 1000 do
  redis.call('HSET', KEYS[1], unpack(fields, i, math.min(i + 999, #fields)))
end
local ttl = settle(KEYS[1], KEYS[2], KEYS[3], getrec(KEYS[1]), tonumber(a[3]), now)
audit(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
track(to, 1, db, ttl)
if q then countwrite(to, qm, qw) end
if KEYS[6] then storegrant(KEYS[6], KEYS[7], ARGV[4], a[5], a[4]) end
redis.call('SET', KEYS[5], 'D' .. string.sub(n, 2))
announce(KEYS[1])
return 1
`;

/**
 * The fourth step, once the record arrived: the old owner's transit hash and
 * lease go, and the grants in force on its handle end (unless the old owner
 * has a live record of that handle again). KEYS: record, transit, lease,
 * grant list of the handle (old owner). ARGV: the move's id, now.
 * Replies 1, or 0 when the transit hash is not this move's (done already).
 */
export const MOVE_DONE: string = PRELUDE + `
if redis.call('HGET', KEYS[2], 'mi') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2], KEYS[3])
if redis.call('EXISTS', KEYS[1]) == 0 then
  endgrants(basekey(KEYS[1]), redis.call('LRANGE', KEYS[4], 0, -1), ARGV[2])
end
return 1
`;

/**
 * The roll back of a move that could not arrive: the transit hash goes back
 * to the old owner's record, settled, unless the old owner has a record of
 * that handle again (then the transit hash goes). KEYS: record, index,
 * expiry, transit (old owner). ARGV: the move's id, now, graceMs.
 * Replies 1 (back), 0 (not this move's transit hash, or dropped).
 */
export const MOVE_BACK: string = PRELUDE + `
local a = ARGV
if redis.call('HGET', KEYS[4], 'mi') ~= a[1] then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[4])
  return 0
end
redis.call('RENAME', KEYS[4], KEYS[1])
redis.call('HDEL', KEYS[1], 'mi', 'mv')
local cur = getrec(KEYS[1])
local ttl = settle(KEYS[1], KEYS[2], KEYS[3], cur, tonumber(a[3]), tonumber(a[2]))
track(basekey(KEYS[1]), 1, recbytes(KEYS[1], cur.m), ttl)
announce(KEYS[1])
return 1
`;

/**
 * Drops a move's mark: the last step (`D`), or a reservation whose move never
 * took the record out (`R`). KEYS: the mark. ARGV: `R` or `D`, the move's id.
 * Replies 1 when it dropped it.
 */
export const MOVE_CLEAR: string = `
local n = redis.call('GET', KEYS[1])
if not n then return 0 end
local kind, id = string.match(n, '^([RD])\\t([^\\t]*)\\t')
if kind ~= ARGV[1] or id ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`;

/**
 * What a miss of `(user, handle)` looks at on a Redis Cluster. KEYS: trash,
 * transit, mark. Replies `{u or false, mv or false, mark or false}`.
 */
export const MOVE_PENDING: string = `
return {redis.call('HGET', KEYS[1], 'u'), redis.call('HGET', KEYS[2], 'mv'),
  redis.call('GET', KEYS[3])}
`;
