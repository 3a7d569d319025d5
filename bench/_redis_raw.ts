/**
 * The raw baseline of a Redis save in the bench files: a trivial version
 * check and write of the same bytes, as one script.
 *
 * @module
 */

/** The compare-and-set script: `KEYS[1]`, expected version, new version, state. */
export const RAW_CAS = `
if redis.call('HGET', KEYS[1], 'v') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
  return 1
end
return 0`;
