/**
 * The Lua scripts of the Redis backend, one per primitive (private to the
 * package). Each runs atomically inside Redis and touches only the keys of
 * one user, which share a hash slot.
 *
 * Layout (`P` = key prefix, `T` = the user's encoded tag, `H` = an encoded
 * handle, `X` = an index member):
 * - `P{T}:r:H` — hash of one record: `m` metadata, `d` = `m` + newline +
 *   state text, `x` its index member. `m` is kind, version, createdAt,
 *   updatedAt, expiresAt (`""`: never) and writer (JSON text, `""`: none),
 *   joined by tabs (JSON text holds no raw tab or newline), then, when
 *   there are, the schema version (`""`: none) and `P` + the preview (a line
 *   without tabs or newlines). `L`, when there is one, is a copy of the
 *   record's lease key (below) as it was last written, lapsed or not. Reading
 *   a record is one `HGET` of `d`, and with its lease one `HMGET` of `d` and
 *   `L`; listing reads only `m`.
 *
 *   The same hash holds the record's changelog, so the two are written by one
 *   script and expire, move and go together. `l` = `lo`, `hi`, the `at` of
 *   entry `hi` and a floor of `a<lo>`, tab-joined, is there while entries
 *   are; `hi` is always the record's version (a write without an entry drops
 *   the log: the store could never use those entries again). For every `v`
 *   from `lo` to `hi`: `e<v>` = at + tab + the entry's text, and `a<v>` =
 *   the least `at` of entries `v` to `hi`, which makes trimming by age a walk
 *   from `lo` that stops at the first entry to keep.
 * - `P{T}:t:H` — a trashed record: the record hash, changelog included,
 *   renamed, with `u` = trashUntil (store clock); Redis drops it then.
 *   Not indexed; it blocks inserts of the handle.
 * - `P{T}:i` — sorted set, every score 0, of members `X` = 14 hex digits of
 *   `2^53 - updatedAt` followed by `H`: lexicographic order is the listing
 *   order (updatedAt descending, then handle ascending).
 * - `P{T}:x` — sorted set of the same members scored by expiresAt, only for
 *   records that expire: what `sweep` walks.
 * - `P{T}:d:H:K` — hash of one idempotency record: `f` fingerprint, `t` its
 *   expiry (store clock), then `n` = `"1"` for a `null` result, or `h`
 *   (encoded handle) and `d` of the result.
 * - `P{T}:l:H` — string of a lease: expiresAt (store clock), tab, holder.
 *   Redis drops it once it lapses. It decides every lease rule; the record
 *   hash, while there is one, carries a copy in `L` (every script that
 *   writes the lease or brings a record hash into place copies it, and
 *   releasing drops it), so that a read needs no script. A lapsed copy can
 *   outlive the key: readers compare its expiresAt with their clock, as they
 *   do for the key.
 * - `P{T}:q` — hash of the user's usage (quotas): `h` live handles, `b`
 *   bytes of their states. Every script that adds, changes or removes a
 *   record keeps it while it exists, so it costs one `EXISTS` otherwise; a
 *   script that enforces quotas rebuilds it from the index when absent. Its
 *   TTL is never later than the native expiry of a record it counts, so a
 *   record Redis drops by itself is never counted after: the next check
 *   rebuilds.
 * - `P{T}:w` — string of the writes counted against a rate quota: the
 *   minute (store clock, `floor(ms / 60000)`), tab, the count; it expires.
 * - `P{T}:c` — a pub/sub channel, not a key: every script that changes a
 *   record publishes `H` on it (the change feed).
 *
 * Scalar arguments travel tab-joined in one string and the common replies
 * are a number or one string (every argument and reply element costs the
 * client time): a script gets the state text, if any, one header and, when
 * it appends to the changelog, the entry.
 *
 * Needs Redis 7.0 or later (or Valkey): `PEXPIRE … GT`.
 *
 * Scripts never parse state or entry text and never turn a stored number into
 * a Lua number except versions and times, which are integers below 2^53
 * (exact in a double). Numbers go back to Redis as strings (`tostring` of an
 * integer below 10^14 is exact) or arithmetic results passed to `redis.call`.
 *
 * @module
 */

import { PRELUDE, script } from "./_prelude.ts";
import {
  MOVE_BACK,
  MOVE_CLEAR,
  MOVE_DONE,
  MOVE_IN,
  MOVE_OUT,
  MOVE_PENDING,
  MOVE_RESERVE,
  TRANSFER,
} from "./_move_scripts.ts";

/**
 * insert. KEYS: record, index, expiry, trash, lease[, idempotency].
 * ARGV: d (m, newline, the state), then tab-joined now, x, e, ttl, fp, till, ittl, h, entry version
 * ("" = no entry), entry at, maxEntries, cutoff (entries older go), m; then
 * the lease to take with the record ("" = none); then the entry (at, tab,
 * text) when there is one.
 * Replies 1 (inserted, and the lease taken), `{'L', lease in force}`
 * (inserted; another holder's lease left alone), 0 (the handle exists, live
 * or trashed) or a replay.
 */
export const INSERT: string = PRELUDE + `
local a = split(ARGV[2], 13)
local r = replay(KEYS[6], a[1])
if r then return r end
if redis.call('EXISTS', KEYS[1], KEYS[4]) > 0 then return 0 end
local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
local db = #ARGV[1] - #a[13] - 1
if q then
  local refused
  refused, qm, qw = quotacheck(base, q, 1, db, tonumber(a[1]))
  if refused then return refused end
end
local ttl = a[3] == '' and -1 or tonumber(a[4])
local log = a[9] ~= '' and append(KEYS[1], false, a[9], a[10], ARGV[4], a[11], a[12])
putd(KEYS[1], ARGV[1], a[13], a[2], a[3], ttl, false, log)
reindex(KEYS[2], KEYS[3], false, a[2], a[3], ttl)
track(base, 1, db, ttl)
if q then countwrite(base, qm, qw) end
remember(KEYS[6], a[5], a[6], a[7], a[8], KEYS[6] and ARGV[1])
announce(KEYS[1], base)
local held = takelease(KEYS[5], ARGV[3], a[1], KEYS[1], true)
if held then return {'L', held} end
return 1
`;

/**
 * save: the conditional write (of a store without history: it drops the
 * changelog). KEYS: record, index, expiry, lease[, idempotency][, grant].
 * ARGV: s, then tab-joined now, graceMs, expectVersion, updatedAt, e (a time,
 * "" or "keep"), x, fp, till, ittl, h, w, sv (the schema version, or "keep"),
 * p (`P` + the preview, or "keep"); then the
 * lease to take with the write ("" = none).
 * Replies the new `m` (a string; the lease taken), `{'L', m, lease in force}`
 * (written; another holder's lease left alone), `{'C'[, d]}`, a replay, or
 * `{'G', reason}` when the grant (a write through one) is not in force.
 */
export const SAVE: string = PRELUDE + `
local gk = grantkey()
local a = split(ARGV[2], 13)
local now = tonumber(a[1])
local r = replay(KEYS[5], now)
if r then return r end
local why = gk and grantgone(gk, now)
if why then return {'G', why} end
local cur = getrec(KEYS[1])
if not cur or (cur.v ~= a[3] and tonumber(cur.v) ~= tonumber(a[3]))
    or (cur.e ~= '' and tonumber(cur.e) <= now) then
  return conflict(KEYS[1], cur)
end
local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
-- The old state's size is read only where usage is kept (or checked).
local kept = q or redis.call('EXISTS', base .. 'q') == 1
local db = kept and #ARGV[1] - recbytes(KEYS[1], cur.m) or 0
if q then
  local refused
  refused, qm, qw = quotacheck(base, q, 0, db, now)
  if refused then return refused end
end
local e = a[5]
if e == 'keep' then e = cur.e end
local ttl = -1
if e ~= '' then ttl = math.max(tonumber(e) + tonumber(a[2]) - now, 1) end
-- The stored schema version and tagged fields ('' or tab, 'P', the preview;
-- tab, 'F', the fork point, kept as it is).
local osv, op = string.match(split(cur.m, 7)[7] or '', '^([^\\t]*)(.*)$')
local of = string.match(op, '(\\tF[^\\t]*)') or ''
local sv, p = a[12], a[13]
if sv == 'keep' then sv = osv end
if p == 'keep' then p = op else p = '\\t' .. p .. of end
local m = cur.k .. '\\t' .. tostring(tonumber(cur.v) + 1) .. '\\t' .. cur.c .. '\\t' .. a[4]
  .. '\\t' .. e .. '\\t' .. a[11]
if sv ~= '' or p ~= '' then m = m .. '\\t' .. sv .. p end
putrec(KEYS[1], ARGV[1], m, a[6], e, ttl, cur.e)
droplog(KEYS[1], cur.l)
reindex(KEYS[2], KEYS[3], cur, a[6], e, ttl)
if kept then track(base, 0, db, ttl, true) end
if q then countwrite(base, qm, qw) end
remember(KEYS[5], a[7], a[8], a[9], a[10], KEYS[5] and m .. '\\n' .. ARGV[1])
announce(KEYS[1], base)
local held = takelease(KEYS[4], ARGV[3], now, KEYS[1], false)
if held then return {'L', m, held} end
return m
`;

/**
 * update's compare-and-set. KEYS: record, index, expiry, lease[, idempotency][,
 * grant].
 * ARGV: d (m, newline, the state; "" in mode 'N'), then tab-joined now, mode ('W' write / 'N' nothing to write),
 * expectVersion ("" = absent), expectCreatedAt, x, e, ttl, fp, till, ittl,
 * h, entry version ("" = no entry), entry at, maxEntries, cutoff, m; then the
 * lease to take with a write ("" = none); then the entry (at, tab, text) when
 * there is one. Mode 'N' only checks that the record is still the one read
 * and stores the idempotency result; a write without an entry drops the
 * changelog. Replies 1 (a write also took the lease), `{'L', lease in force}`
 * (written; another holder's lease left alone), `{'C'[, d]}`, a replay, or
 * `{'G', reason}` when the grant (a write through one) is not in force.
 */
export const CAS: string = PRELUDE + `
local gk = grantkey()
local a = split(ARGV[2], 16)
local r = replay(KEYS[5], a[1])
if r then return r end
local why = gk and grantgone(gk, tonumber(a[1]))
if why then return {'G', why} end
local cur = getrec(KEYS[1])
if a[3] == '' then
  if cur then return conflict(KEYS[1], cur) end
elseif not cur or (cur.v ~= a[3] and tonumber(cur.v) ~= tonumber(a[3])) or cur.c ~= a[4] then
  return conflict(KEYS[1], cur)
end
if a[2] == 'W' then
  local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
  -- The old state's size is read only where usage is kept (or checked).
  local kept = q or redis.call('EXISTS', base .. 'q') == 1
  local dh, db = 1, #ARGV[1] - #a[16] - 1
  if cur then
    dh = 0
    if kept then db = db - recbytes(KEYS[1], cur.m) end
  end
  if q then
    local refused
    refused, qm, qw = quotacheck(base, q, dh, db, tonumber(a[1]))
    if refused then return refused end
  end
  local ttl = a[6] == '' and -1 or tonumber(a[7])
  local log = false
  if a[12] ~= '' then
    log = append(KEYS[1], cur and cur.l, a[12], a[13], ARGV[4], a[14], a[15])
  elseif cur then
    droplog(KEYS[1], cur.l)
  end
  putd(KEYS[1], ARGV[1], a[16], a[5], a[6], ttl, cur and cur.e, log)
  reindex(KEYS[2], KEYS[3], cur, a[5], a[6], ttl)
  if kept then track(base, dh, db, ttl, true) end
  if q then countwrite(base, qm, qw) end
  remember(KEYS[5], a[8], a[9], a[10], a[11], KEYS[5] and ARGV[1])
  announce(KEYS[1], base)
  local held = takelease(KEYS[4], ARGV[3], a[1], KEYS[1], not cur)
  if held then return {'L', held} end
elseif cur then
  remember(KEYS[5], a[8], a[9], a[10], a[11], redis.call('HGET', KEYS[1], 'd'))
else
  remember(KEYS[5], a[8], a[9], a[10], a[11], false)
end
return 1
`;

/**
 * remove: deletes a record with its changelog, or renames the record hash
 * (changelog included) to the trash key, kept until trashUntil.
 * KEYS: record, index, expiry, trash[, idempotency].
 * ARGV: tab-joined now, fp, till, ittl, (unused), trashUntil ("" = delete).
 * Replies 1 (removed), 0 (no such record) or a replay.
 */
export const REMOVE: string = PRELUDE + `
local a = split(ARGV[1], 6)
local now = tonumber(a[1])
local r = replay(KEYS[5], now)
if r then return r end
local cur = getrec(KEYS[1])
if not cur then return 0 end
track(basekey(KEYS[1]), -1, -recbytes(KEYS[1], cur.m))
redis.call('ZREM', KEYS[2], cur.x)
if cur.e ~= '' then redis.call('ZREM', KEYS[3], cur.x) end
if a[6] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('RENAME', KEYS[1], KEYS[4])
  redis.call('HSET', KEYS[4], 'u', a[6])
  redis.call('PEXPIRE', KEYS[4], math.max(tonumber(a[6]) - now, 1))
end
remember(KEYS[5], a[2], a[3], a[4], '', false)
announce(KEYS[1])
return 1
`;

/**
 * untrash: renames a trashed record (changelog included) back, unchanged,
 * when its trashUntil is after now and no live record has the handle.
 * KEYS: record, index, expiry, trash, lease. ARGV: tab-joined now, graceMs.
 * Replies the record's `d`, or nil.
 */
export const UNTRASH: string = PRELUDE + `
local a = split(ARGV[1], 2)
local now = tonumber(a[1])
local u = redis.call('HGET', KEYS[4], 'u')
if not u or tonumber(u) <= now or redis.call('EXISTS', KEYS[1]) == 1 then return false end
local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
local db = recbytes(KEYS[4], redis.call('HGET', KEYS[4], 'm'))
if q then
  local refused
  refused, qm, qw = quotacheck(base, q, 1, db, now)
  if refused then return refused end
end
redis.call('RENAME', KEYS[4], KEYS[1])
redis.call('HDEL', KEYS[1], 'u')
local cur = getrec(KEYS[1])
local ttl = settle(KEYS[1], KEYS[2], KEYS[3], cur, tonumber(a[2]), now)
copylease(KEYS[1], KEYS[5])
track(base, 1, db, ttl)
if q then countwrite(base, qm, qw) end
announce(KEYS[1])
return redis.call('HGET', KEYS[1], 'd')
`;

/**
 * changes: the changelog entries of a live record after a version.
 * KEYS: record. ARGV: afterVersion.
 * Replies `{}` or `{first, e<first>, …, e<hi>}` (each entry: at, tab, text).
 */
export const CHANGES: string = PRELUDE + `
local l = redis.call('HGET', KEYS[1], 'l')
if not l then return {} end
local lo, hi = bounds(l)
local from = math.max(lo, tonumber(ARGV[1]) + 1)
if from > hi then return {} end
local out = {tostring(from)}
local fields = {}
for v = from, hi do
  fields[#fields + 1] = 'e' .. v
  if #fields >= 1000 or v == hi then
    for _, e in ipairs(redis.call('HMGET', KEYS[1], unpack(fields))) do out[#out + 1] = e end
    fields = {}
  end
end
return out
`;

/**
 * importRecord: writes a record exactly as given when absent or older; a replaced
 * record's changelog is dropped (the hash is rewritten).
 * KEYS: record, index, expiry, lease. ARGV: s, then tab-joined x, e, version,
 * ttl, m. Replies 'inserted', 'replaced' or 'kept'.
 */
export const IMPORT: string = PRELUDE + `
local a = split(ARGV[2], 5)
local cur = getrec(KEYS[1])
if cur and tonumber(cur.v) >= tonumber(a[3]) then return 'kept' end
local ttl = tonumber(a[4])
local dh, db = 1, #ARGV[1]
if cur then dh, db = 0, db - recbytes(KEYS[1], cur.m) end
if cur then redis.call('DEL', KEYS[1]) end
putrec(KEYS[1], ARGV[1], a[5], a[1], a[2], ttl, false)
copylease(KEYS[1], KEYS[4])
reindex(KEYS[2], KEYS[3], cur, a[1], a[2], ttl)
track(basekey(KEYS[1]), dh, db, ttl)
announce(KEYS[1])
if cur then return 'replaced' end
return 'inserted'
`;

/**
 * list: one bounded pass over the index. KEYS: index, expiry.
 * ARGV: start (ZRANGEBYLEX bound), limit, kind ("" any), liveAt ("" any),
 * record key prefix, how many members to examine at most.
 * Index entries whose record is gone (reclaimed by TTL) are pruned.
 * Replies `{continueFrom, rows}`; `continueFrom` is "" when the pass is
 * complete, else the bound to pass next time. A row is `{member, m}`.
 */
export const LIST: string = `
local idx, exp = KEYS[1], KEYS[2]
local start, limit = ARGV[1], tonumber(ARGV[2])
local kind, live, prefix, cap = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local livet = tonumber(live)
local out, seen = {}, 0
while true do
  local batch = math.min(math.max(limit - #out, 32), cap - seen)
  local ms = redis.call('ZRANGEBYLEX', idx, start, '+', 'LIMIT', 0, batch)
  for _, x in ipairs(ms) do
    seen = seen + 1
    start = '(' .. x
    local r = redis.call('HMGET', prefix .. string.sub(x, 15), 'm', 'x')
    if r[2] ~= x then
      redis.call('ZREM', idx, x)
      redis.call('ZREM', exp, x)
    else
      local k, e = string.match(r[1], '^([^\\t]*)\\t[^\\t]*\\t[^\\t]*\\t[^\\t]*\\t([^\\t]*)\\t')
      if (kind == '' or k == kind) and (live == '' or e == '' or tonumber(e) > livet) then
        out[#out + 1] = {x, r[1]}
        if #out >= limit then return {'', out} end
      end
    end
  end
  if #ms < batch then return {'', out} end
  if seen >= cap then return {start, out} end
end
`;

/**
 * sweep of one user: deletes records whose expiresAt is at or before a time
 * (each announced on the user's channel).
 * KEYS: index, expiry. ARGV: cutoff, record key prefix, batch size.
 * Replies `{deleted, examined}`; call again while `examined` equals the batch.
 */
export const SWEEP: string = `
local idx, exp, prefix = KEYS[1], KEYS[2], ARGV[2]
local channel = string.sub(idx, 1, -2) .. 'c'
local ms = redis.call('ZRANGEBYSCORE', exp, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local qk = string.sub(idx, 1, -2) .. 'q'
local kept = redis.call('EXISTS', qk) == 1
local n = 0
for _, m in ipairs(ms) do
  local key = prefix .. string.sub(m, 15)
  local r = redis.call('HMGET', key, 'x', 'm')
  if r[1] == m then
    if kept then
      redis.call('HINCRBY', qk, 'h', -1)
      redis.call('HINCRBY', qk, 'b', -(redis.call('HSTRLEN', key, 'd') - #r[2] - 1))
    end
    redis.call('DEL', key)
    redis.call('PUBLISH', channel, string.sub(m, 15))
    n = n + 1
  end
  redis.call('ZREM', idx, m)
  redis.call('ZREM', exp, m)
end
return {n, #ms}
`;

/**
 * usage: a user's usage hash, rebuilt from the index when absent, and the
 * rate counter. KEYS: index (`P{T}:i`). Replies `{h, b, w}` (`w`: the
 * counter's text, or false).
 */
export const USAGE: string = PRELUDE + `
local base = string.sub(KEYS[1], 1, -2)
if redis.call('EXISTS', base .. 'q') == 0 then rebuild(base) end
local u = redis.call('HMGET', base .. 'q', 'h', 'b')
return {u[1], u[2], redis.call('GET', base .. 'w')}
`;

/**
 * acquireLease: stores the lease unless another holder's is in force (its
 * expiresAt after now, by the store's clock), with a native TTL, and its
 * copy in the record hash when there is one.
 * KEYS: lease, record. ARGV: now, ttl (ms, at least 1), expiresAt, holder.
 * Replies 1 (acquired) or the lease in force.
 */
export const ACQUIRE: string = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local e, h = string.match(cur, '^([^\\t]*)\\t(.*)$')
  if h ~= ARGV[4] and tonumber(e) > tonumber(ARGV[1]) then return cur end
end
local lv = ARGV[3] .. '\\t' .. ARGV[4]
redis.call('SET', KEYS[1], lv, 'PX', ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HSET', KEYS[2], 'L', lv) end
return 1
`;

/**
 * releaseLease: deletes the lease, and its copy in the record hash, when the
 * holder holds it.
 * KEYS: lease, record. ARGV: now, holder.
 * Replies 1 when a lease in force (expiresAt after now) was deleted, else 0.
 */
export const RELEASE: string = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local e, h = string.match(cur, '^([^\\t]*)\\t(.*)$')
if h ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'L')
if tonumber(e) > tonumber(ARGV[1]) then return 1 end
return 0
`;

/**
 * putGrant. KEYS: the grant hash, its handle's grant list, the owner's
 * record, index and expiry set[, the parent's grant hash, the parent's
 * re-share list]. ARGV: the record (JSON), its expiry ("" = never), now, the
 * encoded grant id, the audit step ("" = none; see auditable), the entry
 * (see auditable; "" without an audit step). Replies 1, 0 (the grant exists
 * already), -1 (with an audit step, the record is not live: nothing stored)
 * or `{'G', reason}` (the parent is not in force).
 */
export const GRANT_PUT: string = PRELUDE + `
if KEYS[6] then
  local why = grantgone(KEYS[6], tonumber(ARGV[3]))
  if why then return {'G', why} end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not auditable(KEYS[3], ARGV[5]) then return -1 end
storegrant(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4])
if KEYS[7] then redis.call('RPUSH', KEYS[7], ARGV[4]) end
if ARGV[5] ~= '' then
  audit(KEYS[3], KEYS[4], KEYS[5], ARGV[5], ARGV[6])
  announce(KEYS[3])
end
return 1
`;

/**
 * endGrant: ends a grant and every re-share under it (all in the owner's
 * slot). KEYS: the grant hash, the record of its handle, the owner's index
 * and expiry set. ARGV: now, the owner's key prefix `P{O}:`, the encoded
 * grant id, the audit step ("" = none; see auditable), the entry. The audit
 * step applies when the record is live and a grant ended.
 * Replies the records (JSON) it ended.
 */
export const GRANT_END: string = PRELUDE + `
local ended = endgrants(ARGV[2], {ARGV[3]}, ARGV[1])
if #ended > 0 and ARGV[4] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
  audit(KEYS[2], KEYS[3], KEYS[4], ARGV[4], ARGV[5])
  announce(KEYS[2])
end
return ended
`;

/**
 * Reads grants of one owner. KEYS: grant hashes, or (with ARGV[1] = 'L')
 * one handle's grant list, then ARGV[2] is the owner's prefix `P{O}:`.
 * Replies, per grant, its record (JSON, or false when absent) and its end
 * ("" while in force).
 */
export const GRANT_READ: string = PRELUDE + `
local keys = KEYS
if ARGV[1] == 'L' then
  keys = {}
  for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    keys[#keys + 1] = ARGV[2] .. 'g:' .. id
  end
end
local out = {}
for _, k in ipairs(keys) do
  local g = redis.call('HMGET', k, 'j', 'e')
  out[#out + 1] = g[1]
  out[#out + 1] = g[2]
end
return out
`;

/** Every script, by the primitive that runs it. */
export const S = {
  insert: script(INSERT),
  save: script(SAVE),
  cas: script(CAS),
  remove: script(REMOVE),
  untrash: script(UNTRASH),
  transfer: script(TRANSFER),
  moveReserve: script(MOVE_RESERVE),
  moveOut: script(MOVE_OUT),
  moveIn: script(MOVE_IN),
  moveDone: script(MOVE_DONE),
  moveBack: script(MOVE_BACK),
  moveClear: script(MOVE_CLEAR),
  movePending: script(MOVE_PENDING),
  changes: script(CHANGES),
  importRecord: script(IMPORT),
  list: script(LIST),
  sweep: script(SWEEP),
  acquire: script(ACQUIRE),
  release: script(RELEASE),
  usage: script(USAGE),
  grantPut: script(GRANT_PUT),
  grantEnd: script(GRANT_END),
  grantRead: script(GRANT_READ),
};
