/**
 * The Lua scripts of erase on Redis (private to the package; the key layout
 * is in `_scripts.ts`, the plan in `_erase.ts`). Each runs atomically in one
 * hash slot: the erased user's own, or the slot of one other owner whose
 * grants name the user.
 *
 * @module
 */

import { script } from "./_prelude.ts";

/**
 * Wipes keys of one user, all in its slot. KEYS: keys of the user (found by
 * a `SCAN` of every node for its tag `P{T}:*`). ARGV: the user's key prefix
 * `P{T}:`. Publishes the handle of every record it removes on the user's
 * channel (the change feed). Replies `{records, grants, grant JSON…}`:
 * records counts `r:` and `t:` keys (live, expired and trashed records),
 * grants counts `g:` keys, and the JSON of each grant removed follows, so
 * the caller can drop its look-ups by name, which live in other slots.
 */
export const ERASE_OWN: string = `
local base = ARGV[1]
local n = #base
local records, grants, out = 0, 0, {}
for _, key in ipairs(KEYS) do
  if string.sub(key, 1, n) == base then
    local rest = string.sub(key, n + 1)
    local kind, h = string.match(rest, '^(%a+):(.*)$')
    if kind == 'g' then
      local j = redis.call('HGET', key, 'j')
      if j then out[#out + 1] = j end
    end
    if redis.call('DEL', key) == 1 then
      if kind == 'r' then
        records = records + 1
        redis.call('PUBLISH', base .. 'c', h)
      elseif kind == 't' then
        records = records + 1
      elseif kind == 'g' then
        grants = grants + 1
      end
    end
  end
end
table.insert(out, 1, grants)
table.insert(out, 1, records)
return out
`;

/**
 * Removes grants of one owner (other than the erased user) and every
 * re-share under them, whether ended or in force, with their entries in the
 * handle's grant list `P{O}:go:H` and in their parent's re-share list
 * `P{O}:gc:G`. KEYS: the grant hashes named. ARGV: the owner's key prefix
 * `P{O}:`, then per grant its encoded id, its handle's grant list key and
 * its parent's encoded id (`""`: none). Re-shares made since the caller
 * looked are found here, through the re-share lists. Replies the JSON of
 * each grant removed.
 */
export const ERASE_GRANTS: string = `
local base = ARGV[1]
local queue, out, seen, i = {}, {}, {}, 1
for a = 2, #ARGV, 3 do queue[#queue + 1] = {ARGV[a], ARGV[a + 1], ARGV[a + 2]} end
while i <= #queue do
  local id, go, parent = queue[i][1], queue[i][2], queue[i][3]
  i = i + 1
  if not seen[id] then
    seen[id] = true
    local gk = base .. 'g:' .. id
    local j = redis.call('HGET', gk, 'j')
    if j then
      out[#out + 1] = j
      redis.call('DEL', gk)
    end
    redis.call('LREM', go, 0, id)
    if parent ~= '' then redis.call('LREM', base .. 'gc:' .. parent, 0, id) end
    local ck = base .. 'gc:' .. id
    for _, c in ipairs(redis.call('LRANGE', ck, 0, -1)) do
      queue[#queue + 1] = {c, go, ''}
    end
    redis.call('DEL', ck)
  end
end
return out
`;

/** The erase scripts. */
export const E = {
  own: script(ERASE_OWN),
  grants: script(ERASE_GRANTS),
};
