"""The Lua scripts that make each job-state change on Redis atomic (one round trip each).

Key and argument order is documented per script; `jobs.queue` is the only caller.
The final-status rule matches `jobs.model.final_status`.
"""

# KEYS: job, idempotency, stream. ARGV: job id, tenant, total, options, fingerprint, now,
# ttl, has idempotency key ("1"/"0"). Returns "{job id} {fingerprint}" of the job that holds
# the idempotency key: the new one, or the one created earlier with the same key.
CREATE = """
if ARGV[8] == '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return existing end
end
redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'total', ARGV[3], 'status', 'queued',
  'options', ARGV[4], 'fingerprint', ARGV[5], 'created_at', ARGV[6],
  'done', 0, 'failed', 0, 'cancelled', 0, 'dead', 0)
redis.call('EXPIRE', KEYS[1], ARGV[7])
for i = 0, tonumber(ARGV[3]) - 1 do
  redis.call('XADD', KEYS[3], '*', 'job', ARGV[1], 'i', i)
end
local holder = ARGV[1] .. ' ' .. ARGV[5]
if ARGV[8] == '1' then redis.call('SET', KEYS[2], holder, 'EX', ARGV[7]) end
return holder
"""

# KEYS: job, out, run, tries, errors, in. ARGV: index, consumer, max deliveries, ttl.
# Returns {kind, attempts, payload-or-last-error}.
BEGIN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {'done'} end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'cancelled' then return {'cancelled'} end
local n = redis.call('HINCRBY', KEYS[4], ARGV[1], 1)
redis.call('EXPIRE', KEYS[4], ARGV[4])
if n > tonumber(ARGV[3]) then
  return {'dead', tostring(n - 1), redis.call('HGET', KEYS[5], ARGV[1]) or ''}
end
local payload = redis.call('HGET', KEYS[6], ARGV[1])
if not payload then return {'gone'} end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[3], ARGV[4])
if status == 'queued' then redis.call('HSET', KEYS[1], 'status', 'running') end
return {'go', tostring(n), payload}
"""

# KEYS: job, out, run, stream, dead, in, tries, errors, ids.
# ARGV: index, result, kind (done|failed|cancelled|dead), entry id, group, now, ttl,
# dead-letter record. Acknowledges the entry in every case; returns 1 if this call wrote
# the result, 0 if one was there (first write wins), -1 if the job is gone.
FINISH = """
redis.call('XACK', KEYS[4], ARGV[5], ARGV[4])
redis.call('XDEL', KEYS[4], ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('EXPIRE', KEYS[2], ARGV[7])
local kind = ARGV[3]
if kind == 'dead' then
  redis.call('HINCRBY', KEYS[1], 'dead', 1)
  redis.call('HINCRBY', KEYS[1], 'failed', 1)
  redis.call('RPUSH', KEYS[5], ARGV[8])
  redis.call('LTRIM', KEYS[5], -10000, -1)
else
  redis.call('HINCRBY', KEYS[1], kind, 1)
end
local j = redis.call('HMGET', KEYS[1], 'total', 'done', 'failed', 'cancelled', 'status')
local total, failed = tonumber(j[1]), tonumber(j[3])
if tonumber(j[2]) + failed + tonumber(j[4]) >= total then
  local status = 'done'
  if j[5] == 'cancelled' then status = 'cancelled' elseif failed >= total then status = 'failed' end
  redis.call('HSET', KEYS[1], 'status', status, 'finished_at', ARGV[6])
  redis.call('DEL', KEYS[6], KEYS[3], KEYS[7], KEYS[8])
  redis.call('EXPIRE', KEYS[1], ARGV[7])
  redis.call('EXPIRE', KEYS[9], ARGV[7])
elseif j[5] == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'running')
end
return 1
"""

# KEYS: job, out, run, in, tries, errors. ARGV: now, ttl, cancelled marker.
# Rollouts neither judged nor running get the marker as their result; running ones finish.
CANCEL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local j = redis.call('HMGET', KEYS[1], 'status', 'total')
if j[1] == 'done' or j[1] == 'failed' or j[1] == 'cancelled' then return 1 end
redis.call('HSET', KEYS[1], 'status', 'cancelled')
local total = tonumber(j[2])
local c = 0
for i = 0, total - 1 do
  if redis.call('HEXISTS', KEYS[2], i) == 0 and redis.call('HEXISTS', KEYS[3], i) == 0 then
    redis.call('HSET', KEYS[2], i, ARGV[3])
    c = c + 1
  end
end
redis.call('EXPIRE', KEYS[2], ARGV[2])
local cancelled = redis.call('HINCRBY', KEYS[1], 'cancelled', c)
local k = redis.call('HMGET', KEYS[1], 'done', 'failed')
if tonumber(k[1]) + tonumber(k[2]) + cancelled >= total then
  redis.call('HSET', KEYS[1], 'finished_at', ARGV[1])
  redis.call('DEL', KEYS[4], KEYS[3], KEYS[5], KEYS[6])
end
return 1
"""

# KEYS: stream, job, out, run, tries. ARGV: entry id, group, job id, index.
# A stopping worker's entry goes back to the end of the stream (a new entry, the old one
# acknowledged), and the interrupted delivery is not counted against the rollout.
RELEASE = """
if redis.call('XACK', KEYS[1], ARGV[2], ARGV[1]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('HEXISTS', KEYS[3], ARGV[4]) == 1 then
  return 0
end
redis.call('HDEL', KEYS[4], ARGV[4])
if tonumber(redis.call('HGET', KEYS[5], ARGV[4]) or '0') > 0 then
  redis.call('HINCRBY', KEYS[5], ARGV[4], -1)
end
redis.call('XADD', KEYS[1], '*', 'job', ARGV[3], 'i', ARGV[4])
return 1
"""
