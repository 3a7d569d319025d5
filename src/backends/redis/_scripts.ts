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

import { createHash } from "node:crypto";

// The TTL rules keep an index or expiry set at least as long-lived as every
// record in it: persistent while one record never expires, else extended
// with PEXPIRE … GT (a persistent key counts as infinite), so a user's keys
// all go once their records have.
const PRELUDE = `
local PATTERNS = {${
  [2, 4, 5, 6, 7, 12, 13, 16].map((n) => `[${n}] = '^${"([^\\t]*)\\t".repeat(n - 1)}(.*)$'`)
    .join(", ")
}}
-- Splits a on tabs into n fields (the last takes the rest).
local function split(a, n)
  return {string.match(a, PATTERNS[n])}
end
local function getrec(key)
  local r = redis.call('HMGET', key, 'm', 'x', 'l')
  if not r[1] then return false end
  local f = split(r[1], 6)
  return {m = r[1], x = r[2], l = r[3], k = f[1], v = f[2], c = f[3], u = f[4], e = f[5]}
end
-- Writes a record's fields and, when log (from append) is given, its new
-- changelog entry in the same HSET.
local function putrec(key, s, m, x, e, ttl, olde, log)
  if log then
    redis.call('HSET', key, 'm', m, 'd', m .. '\\n' .. s, 'x', x,
      log.ef, log.et, log.af, log.at, 'l', log.l)
  else
    redis.call('HSET', key, 'm', m, 'd', m .. '\\n' .. s, 'x', x)
  end
  if e ~= '' then
    redis.call('PEXPIRE', key, ttl)
  elseif olde and olde ~= '' then
    redis.call('PERSIST', key)
  end
end
local function extend(key, ttl, existed)
  if existed then redis.call('PEXPIRE', key, ttl, 'GT') else redis.call('PEXPIRE', key, ttl) end
end
-- Moves a record in the index and expiry sets; old is the previous record
-- (getrec) or false for a new one.
local function reindex(idx, exp, old, newx, e, ttl)
  local oldx, olde = old and old.x, old and old.e
  local idxExisted = true
  if oldx ~= newx then
    if not old then idxExisted = redis.call('EXISTS', idx) == 1 end
    redis.call('ZADD', idx, 0, newx)
    if old then redis.call('ZREM', idx, oldx) end
  end
  if e == '' then
    if not old or olde ~= '' then redis.call('PERSIST', idx) end
  else
    extend(idx, ttl, idxExisted)
  end
  if e ~= '' then
    local expExisted = (olde and olde ~= '') or redis.call('EXISTS', exp) == 1
    redis.call('ZADD', exp, e, newx)
    if olde and olde ~= '' and oldx ~= newx then redis.call('ZREM', exp, oldx) end
    extend(exp, ttl, expExisted)
  elseif olde and olde ~= '' then
    redis.call('ZREM', exp, oldx)
  end
end
-- A record hash that has just arrived at key (out of the trash, or from
-- another user): its lifetime (expiry plus graceMs) and its entries in the
-- index and expiry sets; the copy of a lease it brought goes (the caller
-- copies the lease of its new place, if any). Returns its TTL in ms (-1:
-- none).
local function settle(key, idx, exp, cur, graceMs, now)
  redis.call('HDEL', key, 'L')
  local ttl = -1
  if cur.e == '' then
    redis.call('PERSIST', key)
  else
    ttl = math.max(tonumber(cur.e) + graceMs - now, 1)
    redis.call('PEXPIRE', key, ttl)
  end
  reindex(idx, exp, false, cur.x, cur.e, ttl)
  return ttl
end
local function replay(ikey, now)
  if not ikey then return false end
  local r = redis.call('HMGET', ikey, 'f', 't', 'n', 'h', 'd')
  if not r[1] or tonumber(r[2]) <= now then return false end
  return {'R', r[1], r[3], r[4], r[5]}
end
-- Stores an idempotency record: d is the result's d, or false for null.
local function remember(ikey, fp, till, ittl, h, d)
  if not ikey then return end
  redis.call('DEL', ikey)
  if d then
    redis.call('HSET', ikey, 'f', fp, 't', till, 'h', h, 'd', d)
  else
    redis.call('HSET', ikey, 'f', fp, 't', till, 'n', '1')
  end
  redis.call('PEXPIRE', ikey, ittl)
end
-- Publishes the handle of record key P{T}:r:H on the user's channel P{T}:c.
local function announce(key)
  local base, h = string.match(key, '^(.*}:)r:(.*)$')
  redis.call('PUBLISH', base .. 'c', h)
end
-- Copies lease key lk, if there is one, into the L field of record hash
-- key, which exists and has no L.
local function copylease(key, lk)
  local cur = redis.call('GET', lk)
  if cur then redis.call('HSET', key, 'L', cur) end
end
-- Takes the lease lv (expiresAt, tab, holder; '' = none asked) on key lk by
-- the rule of ACQUIRE, for the record hash key just written (fresh: it was
-- created, so its L is to be copied when no lease is asked): false when
-- taken (or none asked), else the other holder's lease in force.
local function takelease(lk, lv, now, key, fresh)
  if lv == '' then
    if fresh then copylease(key, lk) end
    return false
  end
  local e, h = string.match(lv, '^([^\t]*)\t(.*)$')
  local cur = redis.call('GET', lk)
  if cur then
    local ce, ch = string.match(cur, '^([^\t]*)\t(.*)$')
    if ch ~= h and tonumber(ce) > now then
      if fresh then redis.call('HSET', key, 'L', cur) end
      return cur
    end
  end
  redis.call('SET', lk, lv, 'PX', math.max(tonumber(e) - now, 1))
  redis.call('HSET', key, 'L', lv)
  return false
end
local function conflict(key, cur)
  if not cur then return {'C'} end
  return {'C', redis.call('HGET', key, 'd')}
end
-- Quotas. The base P{T}: of a record or trash key.
-- The grant key of a write through a grant: the last key when it is
-- 'P{T}:g:…' (then taken off KEYS, so the optional keys keep their places).
local function grantkey()
  local n = #KEYS
  if n > 0 and string.match(KEYS[n], '^[^}]*}:g:') then
    local k = KEYS[n]
    KEYS[n] = nil
    return k
  end
  return false
end
-- Why the grant hash gk is not in force at now ('grant_revoked' or
-- 'grant_expired'), or false when it is.
local function grantgone(gk, now)
  local g = redis.call('HMGET', gk, 'e', 'x')
  if not g[1] or g[1] ~= '' then return 'grant_revoked' end
  if g[2] ~= '' and tonumber(g[2]) <= now then return 'grant_expired' end
  return false
end
local function basekey(key)
  return string.match(key, '^(.*}:)[rt]:')
end
-- UTF-8 bytes of the state of a record hash whose m field is m.
local function recbytes(key, m)
  return redis.call('HSTRLEN', key, 'd') - #m - 1
end
-- Adds dh handles and db bytes to the usage of base while it is kept; ttl
-- (> 0): the native expiry just given to a record it counts.
local function track(base, dh, db, ttl)
  local qk = base .. 'q'
  if redis.call('EXISTS', qk) == 0 then return end
  if dh ~= 0 then redis.call('HINCRBY', qk, 'h', dh) end
  if db ~= 0 then redis.call('HINCRBY', qk, 'b', db) end
  if ttl and ttl > 0 then redis.call('PEXPIRE', qk, math.max(ttl - 1, 1), 'LT') end
end
-- Counts the live records of base from its index into a new usage hash.
local function rebuild(base)
  local h, b, low = 0, 0, -1
  for _, x in ipairs(redis.call('ZRANGE', base .. 'i', 0, -1)) do
    local key = base .. 'r:' .. string.sub(x, 15)
    local r = redis.call('HMGET', key, 'm', 'x')
    if r[2] == x then
      h = h + 1
      b = b + recbytes(key, r[1])
      local t = redis.call('PTTL', key)
      if t > 0 and (low < 0 or t < low) then low = t end
    end
  end
  redis.call('HSET', base .. 'q', 'h', h, 'b', b)
  if low > 0 then redis.call('PEXPIRE', base .. 'q', math.max(low - 1, 1)) end
end
-- The quotas of this call: its last argument, 'Q', tab, maxHandles,
-- maxBytes, writesPerMinute ('' = none), tab-joined; false when absent.
local function quotas()
  local qa = ARGV[#ARGV]
  if not qa or string.sub(qa, 1, 2) ~= 'Q\\t' then return false end
  return split(qa, 4)
end
-- Checks a write adding dh handles and db bytes at now against quotas q.
-- Returns the refusal reply, or false and the rate counter (minute, count).
local function quotacheck(base, q, dh, db, now)
  local qk = base .. 'q'
  if redis.call('EXISTS', qk) == 0 then rebuild(base) end
  local u = redis.call('HMGET', qk, 'h', 'b')
  local h, b = tonumber(u[1]), tonumber(u[2])
  if q[2] ~= '' and dh > 0 and h + dh > tonumber(q[2]) then
    return {'Q', 'handles', q[2], tostring(h)}
  end
  if q[3] ~= '' and db > 0 and b + db > tonumber(q[3]) then
    return {'Q', 'bytes', q[3], tostring(b)}
  end
  local minute, w = math.floor(now / 60000), 0
  local cur = redis.call('GET', base .. 'w')
  if cur then
    local cm, cw = string.match(cur, '^([^\\t]*)\\t(.*)$')
    if tonumber(cm) == minute then w = tonumber(cw) end
  end
  if q[4] ~= '' and w >= tonumber(q[4]) then
    return {'Q', 'writes_per_minute', q[4], tostring(w)}
  end
  return false, minute, w
end
local function countwrite(base, minute, w)
  redis.call('SET', base .. 'w', string.format('%d\\t%d', minute, w + 1), 'PX', 120000)
end
-- The changelog bounds from an 'l' field: lo, hi (numbers), the at of hi,
-- and a floor no higher than a<lo> (strings).
local function bounds(l)
  local f = split(l, 4)
  return tonumber(f[1]), tonumber(f[2]), f[3], f[4]
end
local function dropentries(key, lo, hi)
  if lo == hi then
    redis.call('HDEL', key, 'e' .. lo, 'a' .. lo)
    return
  end
  local fields = {}
  for v = lo, hi do
    fields[#fields + 1] = 'e' .. v
    fields[#fields + 1] = 'a' .. v
    if #fields >= 1000 then
      redis.call('HDEL', key, unpack(fields))
      fields = {}
    end
  end
  if #fields > 0 then redis.call('HDEL', key, unpack(fields)) end
end
-- Drops the whole changelog (l: the 'l' field read before, or false).
local function droplog(key, l)
  if not l then return end
  local lo, hi = bounds(l)
  dropentries(key, lo, hi)
  redis.call('HDEL', key, 'l')
end
-- Makes room for entry ver (et = at, tab, text) in the changelog of record
-- hash key (l: its 'l' field read before, or false) and returns the fields
-- that putrec writes with the record. The older entries are trimmed: those
-- with version <= ver - maxn (maxn '' = no limit), then, from the oldest,
-- while some entry at or after it has at < cutoff ('' = none); the new entry
-- is always kept. An entry that does not follow the last one (hi + 1) starts
-- a new log. In the steady state this costs one HDEL.
local function append(key, l, ver, at, et, maxn, cutoff)
  local lo, hi, last, floor
  if l then
    lo, hi, last, floor = bounds(l)
    if hi ~= ver - 1 then
      droplog(key, l)
      lo = nil
    end
  end
  local atn = tonumber(at)
  if lo then
    if maxn ~= '' then
      local keep = math.max(lo, ver - tonumber(maxn) + 1)
      if keep > lo then
        dropentries(key, lo, math.min(keep, ver) - 1)
        lo = keep
      end
    end
    -- a<v> only grows with v, so floor (<= a<lo>) stays a floor of the rest.
    if cutoff ~= '' and lo <= hi and tonumber(floor) < tonumber(cutoff) then
      local c = tonumber(cutoff)
      while lo <= hi do
        local a = redis.call('HGET', key, 'a' .. lo)
        if tonumber(a) >= c then
          floor = a
          break
        end
        redis.call('HDEL', key, 'e' .. lo, 'a' .. lo)
        lo = lo + 1
      end
    end
    -- Keep a<v> the least at of entries v..ver (only clock skew lowers it).
    if lo <= hi and tonumber(last) > atn then
      for v = hi, lo, -1 do
        if tonumber(redis.call('HGET', key, 'a' .. v)) <= atn then break end
        redis.call('HSET', key, 'a' .. v, at)
      end
    end
    if lo > hi then
      lo, floor = ver, at
    elseif atn < tonumber(floor) then
      floor = at
    end
  else
    lo, floor = ver, at
  end
  return {ef = 'e' .. ver, et = et, af = 'a' .. ver, at = at,
    l = lo .. '\\t' .. ver .. '\\t' .. at .. '\\t' .. floor}
end
-- Stores a new grant: its hash gk (record json, expiry x, '' = never) and
-- its id in its handle's grant list.
local function storegrant(gk, list, json, x, id)
  redis.call('HSET', gk, 'j', json, 'e', '', 'x', x)
  redis.call('RPUSH', list, id)
end
-- Ends (at now, a string) the grants of base P{O}: whose encoded ids are in
-- queue, and every re-share under them, that are in force; returns their
-- records (JSON).
local function endgrants(base, queue, now)
  local out, seen, i = {}, {}, 1
  while i <= #queue do
    local id = queue[i]
    i = i + 1
    if not seen[id] then
      seen[id] = true
      local gk = base .. 'g:' .. id
      local g = redis.call('HMGET', gk, 'j', 'e')
      if g[1] and g[2] == '' then
        redis.call('HSET', gk, 'e', now)
        out[#out + 1] = g[1]
      end
      for _, c in ipairs(redis.call('LRANGE', base .. 'gc:' .. id, 0, -1)) do
        queue[#queue + 1] = c
      end
    end
  end
  return out
end
-- An audit step (a grant change or a transfer, recorded as the record's next
-- version): au = two unused fields, the new index member, then the entry's
-- at, maxEntries and cutoff (tab-joined; '' = no step); et = the entry's at,
-- a tab, and its text after '{"version":N,' (see auditEntry). Whether the
-- record hash key is live (true without a step).
local function auditable(key, au)
  if au == '' then return true end
  return redis.call('EXISTS', key) == 1
end
-- Applies the audit step au to the live record hash key, numbered there:
-- version v = version + 1 and updatedAt = the entry's at, everything else
-- kept (state, expiry, TTL, writer); the entry '{"version":' v ',' tail
-- appended and the changelog trimmed as any write does; the record moved in
-- the index and expiry sets. Announces nothing.
local function audit(key, idx, exp, au, et)
  if au == '' then return end
  local a = split(au, 6)
  local cur = getrec(key)
  local v = tonumber(cur.v) + 1
  local tab = string.find(et, '\\t', 1, true)
  local entry = string.sub(et, 1, tab) .. '{"version":' .. v .. ',' .. string.sub(et, tab + 1)
  local m = cur.k .. '\\t' .. v .. '\\t' .. cur.c .. '\\t' .. a[4] .. '\\t' .. split(cur.m, 5)[5]
  local s = string.sub(redis.call('HGET', key, 'd'), #cur.m + 2)
  local ttl = redis.call('PTTL', key)
  local log = append(key, cur.l, v, a[4], entry, a[5], a[6])
  putrec(key, s, m, a[2], cur.e, ttl, cur.e, log)
  reindex(idx, exp, cur, a[2], cur.e, ttl)
end
`;

/**
 * insert. KEYS: record, index, expiry, trash, lease[, idempotency].
 * ARGV: s, then tab-joined now, x, e, ttl, fp, till, ittl, h, entry version
 * ("" = no entry), entry at, maxEntries, cutoff (entries older go), m; then
 * the lease to take with the record ("" = none); then the entry (at, tab,
 * text) when there is one.
 * Replies 1 (inserted, and the lease taken), `{'L', lease in force}`
 * (inserted; another holder's lease left alone), 0 (the handle exists, live
 * or trashed) or a replay.
 */
export const INSERT: string = PRELUDE + `
local a = split(ARGV[2], 13)
local r = replay(KEYS[6], tonumber(a[1]))
if r then return r end
if redis.call('EXISTS', KEYS[1], KEYS[4]) > 0 then return 0 end
local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
if q then
  local refused
  refused, qm, qw = quotacheck(base, q, 1, #ARGV[1], tonumber(a[1]))
  if refused then return refused end
end
local ttl = tonumber(a[4])
local log = a[9] ~= '' and append(KEYS[1], false, tonumber(a[9]), a[10], ARGV[4], a[11], a[12])
putrec(KEYS[1], ARGV[1], a[13], a[2], a[3], ttl, false, log)
reindex(KEYS[2], KEYS[3], false, a[2], a[3], ttl)
track(base, 1, #ARGV[1], ttl)
if q then countwrite(base, qm, qw) end
remember(KEYS[6], a[5], a[6], a[7], a[8], KEYS[6] and a[13] .. '\\n' .. ARGV[1])
announce(KEYS[1])
local held = takelease(KEYS[5], ARGV[3], tonumber(a[1]), KEYS[1], true)
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
if not cur or tonumber(cur.v) ~= tonumber(a[3])
    or (cur.e ~= '' and tonumber(cur.e) <= now) then
  return conflict(KEYS[1], cur)
end
local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
local db = #ARGV[1] - recbytes(KEYS[1], cur.m)
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
track(base, 0, db, ttl)
if q then countwrite(base, qm, qw) end
remember(KEYS[5], a[7], a[8], a[9], a[10], KEYS[5] and m .. '\\n' .. ARGV[1])
announce(KEYS[1])
local held = takelease(KEYS[4], ARGV[3], now, KEYS[1], false)
if held then return {'L', m, held} end
return m
`;

/**
 * update's compare-and-set. KEYS: record, index, expiry, lease[, idempotency][,
 * grant].
 * ARGV: s, then tab-joined now, mode ('W' write / 'N' nothing to write),
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
local r = replay(KEYS[5], tonumber(a[1]))
if r then return r end
local why = gk and grantgone(gk, tonumber(a[1]))
if why then return {'G', why} end
local cur = getrec(KEYS[1])
if a[3] == '' then
  if cur then return conflict(KEYS[1], cur) end
elseif not cur or tonumber(cur.v) ~= tonumber(a[3]) or cur.c ~= a[4] then
  return conflict(KEYS[1], cur)
end
if a[2] == 'W' then
  local base, q, qm, qw = basekey(KEYS[1]), quotas(), 0, 0
  local dh, db = 1, #ARGV[1]
  if cur then dh, db = 0, db - recbytes(KEYS[1], cur.m) end
  if q then
    local refused
    refused, qm, qw = quotacheck(base, q, dh, db, tonumber(a[1]))
    if refused then return refused end
  end
  local ttl = tonumber(a[7])
  local log = false
  if a[12] ~= '' then
    log = append(KEYS[1], cur and cur.l, tonumber(a[12]), a[13], ARGV[4], a[14], a[15])
  elseif cur then
    droplog(KEYS[1], cur.l)
  end
  putrec(KEYS[1], ARGV[1], a[16], a[5], a[6], ttl, cur and cur.e, log)
  reindex(KEYS[2], KEYS[3], cur, a[5], a[6], ttl)
  track(base, dh, db, ttl)
  if q then countwrite(base, qm, qw) end
  remember(KEYS[5], a[8], a[9], a[10], a[11], KEYS[5] and a[16] .. '\\n' .. ARGV[1])
  announce(KEYS[1])
  local held = takelease(KEYS[4], ARGV[3], tonumber(a[1]), KEYS[1], not cur)
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
 * transfer: renames a live record hash (changelog included) from one user's
 * keys to another's and moves it between their indexes, expiry sets and
 * usage; the old owner's lease on it goes, and every grant in force on it
 * (the old owner's grant list of the handle, re-shares included) ends. With
 * an audit step the moved record gets its next version and the `transfer`
 * entry; with a kept grant, the new owner's grant for the old owner is
 * stored. Nothing changes when the new owner has a record or a trashed record
 * of that handle, or the record is not at the audit step's version. The keys
 * of two users sit in two hash slots: a standalone server only.
 * KEYS: record, index, expiry, lease, grant list of the handle (old owner);
 * record, index, expiry, trash[, grant list of the handle, kept grant's hash]
 * (new owner; the last two with a kept grant). ARGV: tab-joined now, graceMs, the
 * kept grant's encoded id and expiry; the audit step ("" = none; see
 * auditable); the entry; the kept grant's record (JSON, "" = none)[; quotas
 * of the new owner].
 * Replies 1 (moved), 0 (no live record), -1 (taken) or a quota refusal.
 */
export const TRANSFER: string = PRELUDE + `
local a = split(ARGV[1], 4)
local now = tonumber(a[1])
local cur = getrec(KEYS[1])
if not cur then return 0 end
if redis.call('EXISTS', KEYS[6]) == 1 or redis.call('EXISTS', KEYS[9]) == 1 then return -1 end
local to, q, qm, qw = basekey(KEYS[6]), quotas(), 0, 0
local db = recbytes(KEYS[1], cur.m)
if q then
  local refused
  refused, qm, qw = quotacheck(to, q, 1, db, now)
  if refused then return refused end
end
local from = basekey(KEYS[1])
track(from, -1, -db)
redis.call('ZREM', KEYS[2], cur.x)
if cur.e ~= '' then redis.call('ZREM', KEYS[3], cur.x) end
redis.call('DEL', KEYS[4])
endgrants(from, redis.call('LRANGE', KEYS[5], 0, -1), a[1])
redis.call('RENAME', KEYS[1], KEYS[6])
local ttl = settle(KEYS[6], KEYS[7], KEYS[8], cur, tonumber(a[2]), now)
audit(KEYS[6], KEYS[7], KEYS[8], ARGV[2], ARGV[3])
track(to, 1, db, ttl)
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
 * none; see auditable), the move's id, what the move still has to do (JSON).
 * Replies the transit hash (HGETALL), 0 (no live record) or `{'P'}` (a move of that handle out of this user is unfinished).
 */
export const MOVE_OUT: string = PRELUDE + `
local cur = getrec(KEYS[1])
if not cur then return 0 end
if redis.call('EXISTS', KEYS[4]) == 1 then return {'P'} end
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

/** A script and its SHA-1, for `EVALSHA`. */
export interface Script {
  /** The Lua source. */
  lua: string;
  /** Its SHA-1, hex. */
  sha: string;
}

/** The top-level definitions of {@link PRELUDE}, each with the comment above it. */
const PRELUDE_PARTS: { name: string; text: string }[] = (() => {
  const parts: { name: string; text: string }[] = [];
  let pending: string[] = [];
  for (const line of PRELUDE.split("\n")) {
    const name = /^local (?:function )?(\w+)/.exec(line)?.[1];
    if (name !== undefined) {
      parts.push({ name, text: "" });
      pending.push(line);
      parts[parts.length - 1]!.text = pending.join("\n");
      pending = [];
    } else if (line.startsWith("--") || parts.length === 0) {
      pending.push(line);
    } else {
      parts[parts.length - 1]!.text += "\n" + line;
    }
  }
  return parts;
})();

/**
 * A script whose text starts with {@link PRELUDE} keeps only the prelude's
 * definitions it uses, directly or through another one, in their order:
 * Redis runs the whole text on every call, and each definition it runs
 * costs time (a closure made and bound).
 */
function pruned(lua: string): string {
  if (!lua.startsWith(PRELUDE)) return lua;
  const body = lua.slice(PRELUDE.length);
  // Comments name definitions too: only code counts.
  const uses = (text: string, name: string) =>
    new RegExp(`\\b${name}\\b`).test(text.replace(/--.*$/gm, ""));
  const keep = new Set<string>();
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of PRELUDE_PARTS) {
      if (keep.has(p.name)) continue;
      if (
        uses(body, p.name) || PRELUDE_PARTS.some((q) => keep.has(q.name) && uses(q.text, p.name))
      ) {
        keep.add(p.name);
        grew = true;
      }
    }
  }
  return PRELUDE_PARTS.filter((p) => keep.has(p.name)).map((p) => p.text + "\n").join("") + body;
}

function script(lua: string): Script {
  lua = pruned(lua);
  return { lua, sha: createHash("sha1").update(lua).digest("hex") };
}

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
