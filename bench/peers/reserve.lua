-- A basket's reservation in one atomic script, as our Reserve does it: every line is checked
-- first, then every stock key is decremented and one hold record is written; all or none.
-- KEYS: stock keys; ARGV: the quantity of each line, in the same order.
for i, key in ipairs(KEYS) do
  local available = tonumber(redis.call('GET', key) or '0')
  if available < tonumber(ARGV[i]) then
    return redis.error_reply('insufficient stock for ' .. key)
  end
end
local id = redis.call('INCR', 'hold:next')
local hold = {}
for i, key in ipairs(KEYS) do
  redis.call('DECRBY', key, ARGV[i])
  hold[#hold + 1] = key
  hold[#hold + 1] = ARGV[i]
end
redis.call('HSET', 'hold:' .. id, unpack(hold))
return id
