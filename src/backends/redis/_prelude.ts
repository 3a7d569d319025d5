/**
 * The Lua prelude of the Redis backend's scripts (private to the package):
 * the local functions every script may call, and how a script keeps only
 * the definitions it uses. The key layout is described in `_scripts.ts`.
 *
 * @module
 */

import { createHash } from "node:crypto";

/**
 * The local functions the scripts share; a script's text starts with it.
 *
 * The TTL rules keep an index or expiry set at least as long-lived as every
 * record in it: persistent while one record never expires, else extended
 * with PEXPIRE … GT (a persistent key counts as infinite), so a user's keys
 * all go once their records have.
 */
export const PRELUDE: string = `
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
-- Writes a record's fields (d: m, newline, the state) and, when log (from
-- append) is given, its new changelog entry in the same HSET.
local function putd(key, d, m, x, e, ttl, olde, log)
  if log then
    redis.call('HSET', key, 'm', m, 'd', d, 'x', x, log.ef, log.et, log.af, log.at, 'l', log.l)
  else
    redis.call('HSET', key, 'm', m, 'd', d, 'x', x)
  end
  if e ~= '' then
    redis.call('PEXPIRE', key, ttl)
  elseif olde and olde ~= '' then
    redis.call('PERSIST', key)
  end
end
local function putrec(key, s, m, x, e, ttl, olde, log)
  putd(key, m .. '\\n' .. s, m, x, e, ttl, olde, log)
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
    redis.call('ZADD', idx, '0', newx)
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
-- (now: a number or its text; numbers are read only where needed, as the
-- conversions cost more than most commands.)
local function replay(ikey, now)
  if not ikey then return false end
  local r = redis.call('HMGET', ikey, 'f', 't', 'n', 'h', 'd')
  if not r[1] or tonumber(r[2]) <= tonumber(now) then return false end
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
-- Publishes the handle of record key P{T}:r:H on the user's channel P{T}:c
-- (base: its P{T}:, when known).
local function announce(key, base)
  if base then
    redis.call('PUBLISH', base .. 'c', string.sub(key, #base + 3))
    return
  end
  local b, h = string.match(key, '^(.*}:)r:(.*)$')
  redis.call('PUBLISH', b .. 'c', h)
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
-- taken (or none asked), else the other holder's lease in force. (now: a
-- number or its text.)
local function takelease(lk, lv, now, key, fresh)
  if lv == '' then
    if fresh then copylease(key, lk) end
    return false
  end
  now = tonumber(now)
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
-- (> 0): the native expiry just given to a record it counts. kept: whether
-- the usage hash is known to exist (nil: looked up).
local function track(base, dh, db, ttl, kept)
  local qk = base .. 'q'
  if kept == nil then kept = redis.call('EXISTS', qk) == 1 end
  if not kept then return end
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
-- a floor no higher than a<lo>, and lo again (strings).
local function bounds(l)
  local f = split(l, 4)
  return tonumber(f[1]), tonumber(f[2]), f[3], f[4], f[1]
end
-- Drops entries lo..hi (los: lo as text, when known).
local function dropentries(key, lo, hi, los)
  if lo == hi then
    los = los or lo
    redis.call('HDEL', key, 'e' .. los, 'a' .. los)
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
-- Makes room for entry vs (its version as text; et = at, tab, text) in the
-- changelog of record hash key (l: its 'l' field read before, or false) and
-- returns the fields that putrec writes with the record. The older entries
-- are trimmed: those with version <= ver - maxn (maxn '' = no limit), then,
-- from the oldest, while some entry at or after it has at < cutoff ('' =
-- none); the new entry is always kept. An entry that does not follow the
-- last one (hi + 1) starts a new log. In the steady state this costs one
-- HDEL.
local function append(key, l, vs, at, et, maxn, cutoff)
  local ver = tonumber(vs)
  local lo, hi, last, floor, los
  if l then
    lo, hi, last, floor, los = bounds(l)
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
        dropentries(key, lo, math.min(keep, ver) - 1, los)
        lo, los = keep, nil
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
        lo, los = lo + 1, nil
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
      lo, los, floor = ver, vs, at
    elseif atn < tonumber(floor) then
      floor = at
    end
  else
    lo, los, floor = ver, vs, at
  end
  return {ef = 'e' .. vs, et = et, af = 'a' .. vs, at = at,
    l = (los or lo) .. '\\t' .. vs .. '\\t' .. at .. '\\t' .. floor}
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
  local log = append(key, cur.l, tostring(v), a[4], entry, a[5], a[6])
  putrec(key, s, m, a[2], cur.e, ttl, cur.e, log)
  reindex(idx, exp, cur, a[2], cur.e, ttl)
end
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

/** A script with the prelude pruned to what it uses, and its SHA-1. */
export function script(lua: string): Script {
  lua = pruned(lua);
  return { lua, sha: createHash("sha1").update(lua).digest("hex") };
}
