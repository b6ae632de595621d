"""The Lua scripts that make each job-state change on Redis atomic (one round trip each).

Key and argument order is documented per script; `jobs.queue` and `jobs.failover` are
the only callers. The final-status rule matches `jobs.model.final_status`.

No script's work grows with the size of a job: creating and cancelling a job are
split into calls of at most `jobs.queue.CHUNK` rollouts each, so Redis (single
threaded) never stops answering other clients for more than a few milliseconds.
Large keys are dropped with UNLINK (freed off Redis's main thread).

Jobs are indexed by status in one sorted set per status (`STATUSES`, job id ->
when it got there), so the metrics count jobs without scanning them. Scripts that
move a job between statuses take those sets as their last six keys (`S`).
"""

from judge_service.jobs.parts import DROP

# The order of the status sets at the end of KEYS; `_S` finds a status's key.
STATUSES = ("queued", "running", "cancelling", "done", "failed", "cancelled")
_S = """
local function skey(first, status)
  local at = {queued = 0, running = 1, cancelling = 2, done = 3, failed = 4, cancelled = 5}
  return KEYS[first + at[status]]
end
local function move(first, job, from, to, now)
  if from then redis.call('ZREM', skey(first, from), job) end
  redis.call('ZADD', skey(first, to), now, job)
end
"""

# The judging slots a stream message's fields hold (`jobs.claims`): its group's size `n`
# (1 without one), at most `cap` (0: no cap).
SLOTS = """
local function slots(fields, cap)
  local n = 1
  for k = 1, #fields, 2 do
    if fields[k] == 'n' then n = tonumber(fields[k + 1]) end
  end
  if cap > 0 and n > cap then n = cap end
  if n < 1 then n = 1 end
  return n
end
"""

# Queues rollout `i` of a job: a group's leader (`lead` field g<i> lists its members)
# with its group's size `n`, for claiming by slots (`jobs.claims`).
_QUEUE = """
local function queue(stream, lead, job, i)
  local group = redis.call('HGET', lead, 'g' .. i)
  if group then
    local _, commas = string.gsub(group, ',', '')
    return redis.call('XADD', stream, '*', 'job', job, 'i', i, 'n', commas + 2)
  end
  return redis.call('XADD', stream, '*', 'job', job, 'i', i)
end
"""

# KEYS: job, idempotency, creating, S (6). ARGV: job id, tenant, total, options,
# fingerprint, now, ttl, has idempotency key ("1"/"0"). Returns "{job id} {fingerprint}" of
# the job that holds the idempotency key: the new one, or the one created earlier with the
# same key. Entries are queued afterwards by ENQUEUE, chunk by chunk.
CREATE = (
    _S
    + """
if ARGV[8] == '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return existing end
end
redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'total', ARGV[3], 'status', 'queued',
  'options', ARGV[4], 'fingerprint', ARGV[5], 'created_at', ARGV[6],
  'done', 0, 'failed', 0, 'cancelled', 0, 'dead', 0, 'enqueued', 0)
redis.call('EXPIRE', KEYS[1], ARGV[7])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
move(4, ARGV[1], nil, 'queued', ARGV[6])
local holder = ARGV[1] .. ' ' .. ARGV[5]
if ARGV[8] == '1' then redis.call('SET', KEYS[2], holder, 'EX', ARGV[7]) end
return holder
"""
)

# KEYS: job, stream, creating, lead. ARGV: job id, start, stop.
# Queues entries start..stop-1 if `enqueued` is still `start` (compare and set: a resumed
# creation racing the original never queues a rollout twice), except the members of a
# group (`lead` holds them: a groupwise job queues one entry per group, its first
# rollout's). Returns where the next chunk starts (the current `enqueued` if another
# caller got there first), or -1 once every entry is queued, the job expired, or an older
# version queued all of them at creation.
ENQUEUE = (
    _QUEUE
    + """
local j = redis.call('HMGET', KEYS[1], 'enqueued', 'total')
if not j[1] or tonumber(j[1]) >= tonumber(j[2]) then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return -1
end
local at, total = tonumber(j[1]), tonumber(j[2])
if at ~= tonumber(ARGV[2]) then return at end
local stop = math.min(tonumber(ARGV[3]), total)
for i = at, stop - 1 do
  if redis.call('HEXISTS', KEYS[4], i) == 0 then queue(KEYS[2], KEYS[4], ARGV[1], i) end
end
redis.call('HSET', KEYS[1], 'enqueued', stop)
if stop >= total then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return -1
end
return stop
"""
)

# KEYS: job, out, run, tries, errors, in, S (6), lead, hold (the group's, when the index
# leads one). ARGV: index, consumer, max deliveries, ttl, job id, now. Returns {kind,
# attempts, payload-or-last-error}. A result that is still running is provisional (a
# group's, `jobs.group_queue`), not done. A group's leader marks its members running too
# (`lead` field g<index>: their indices), those without a result and those whose result
# is provisional: a cancel then leaves the whole group to its worker and the counts show
# the group in flight; and it makes this consumer the group's holder (`hold`), the only
# one that may write its provisional results now. An earlier holder's provisional results
# stay hidden (their members run) until the new holder's writes replace them, each write
# freeing what it replaces (`jobs.parts`): dropping a whole group's here would free up to
# JUDGE_MAX_TOKENS_PER_GROUP of results in one call.
BEGIN = (
    _S
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local running = redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 and not running then return {'done'} end
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
local group = redis.call('HGET', KEYS[13], 'g' .. ARGV[1])
if group then
  local runs = {}  -- one HSET, not one per member: a group may have 256
  for i in string.gmatch(group, '%d+') do
    if redis.call('HEXISTS', KEYS[2], i) == 0 or redis.call('HEXISTS', KEYS[3], i) == 1 then
      runs[#runs + 1] = i
      runs[#runs + 1] = ARGV[2]
    end
  end
  if #runs > 0 then redis.call('HSET', KEYS[3], unpack(runs)) end
  redis.call('SET', KEYS[14], ARGV[2], 'EX', ARGV[4])
end
redis.call('EXPIRE', KEYS[3], ARGV[4])
if status == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'running')
  move(7, ARGV[5], 'queued', 'running', ARGV[6])
end
return {'go', tostring(n), payload}
"""
)

# Shared by FINISH, FINISH_GROUP and CANCEL_RANGE: the job's last result is in. Needs
# `skey`/`move`; KEYS as in FINISH (the group blocks at 16 and the results' parts and
# their counts at 18 and 19: they live as long as the results; the provisional results'
# tags at 17); `first` is where S starts; status is the stored one.
_FINALIZE = """
local function finalize(first, job, stored, failed, total, now, ttl)
  local status = 'done'
  if stored == 'cancelled' then status = 'cancelled' elseif failed >= total then
    status = 'failed'
  end
  redis.call('HSET', KEYS[1], 'status', status, 'finished_at', now)
  redis.call('UNLINK', KEYS[6], KEYS[3], KEYS[7], KEYS[8], KEYS[17])
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[9], ttl)
  redis.call('EXPIRE', KEYS[16], ttl)
  redis.call('EXPIRE', KEYS[18], ttl)
  redis.call('EXPIRE', KEYS[19], ttl)
  local from = stored
  if stored == 'cancelled' then from = 'cancelling' end
  move(first, job, from, status, now)
end
"""

# Shared by FINISH and FINISH_GROUP (KEYS as theirs): count a result just written, and
# once the results are written, finish the job or mark it running.
_TALLY = """
local function count(kind, record)
  if kind == 'dead' then
    redis.call('HINCRBY', KEYS[1], 'dead', 1)
    redis.call('HINCRBY', KEYS[1], 'failed', 1)
    if record then
      redis.call('RPUSH', KEYS[5], record)
      redis.call('LTRIM', KEYS[5], -10000, -1)
    end
  else
    redis.call('HINCRBY', KEYS[1], kind, 1)
  end
end
local function settle(job, now, ttl)
  local j = redis.call('HMGET', KEYS[1], 'total', 'done', 'failed', 'cancelled', 'status')
  local total, failed = tonumber(j[1]), tonumber(j[3])
  if tonumber(j[2]) + failed + tonumber(j[4]) >= total then
    finalize(10, job, j[5], failed, total, now, ttl)
  elseif j[5] == 'queued' then
    redis.call('HSET', KEYS[1], 'status', 'running')
    move(10, job, 'queued', 'running', now)
  end
end
"""

# KEYS: job, out, run, stream, dead, in, tries, errors, ids, S (6), groups, prov, parts,
# nparts. ARGV: index, result, kind (done|failed|cancelled|dead), entry id, group, now, ttl,
# dead-letter record, job id, "keep" (the payload stays; no caller in this version needs
# it: a group is written by FINISH_GROUP). Acknowledges the entry in every case; returns
# 1 if this call wrote the result, 0 if one was there (first write wins), -1 if the job
# is gone.
FINISH = (
    _S
    + _FINALIZE
    + _TALLY
    + """
redis.call('XACK', KEYS[4], ARGV[5], ARGV[4])
redis.call('XDEL', KEYS[4], ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('EXPIRE', KEYS[2], ARGV[7])
if ARGV[10] ~= 'keep' then redis.call('HDEL', KEYS[6], ARGV[1]) end  -- never read again
count(ARGV[3], ARGV[8])
settle(ARGV[9], ARGV[6], ARGV[7])
return 1
"""
)

# KEYS as FINISH's, then the group's hold. ARGV: leader index, entry id (the leader's),
# group, now, ttl, job id, group record ('' for none), dead-letter record ('' for none),
# holder ('' for none), then index, result, kind for each rollout of the group; result ''
# means the rollout's provisional result (`jobs.group_queue.write_members`: in `out`
# while the rollout runs, tagged in `prov` with the consumer that wrote it). The group's
# commit, one step that copies no result: every result counted, the group record and the
# acknowledgement, so a group is committed whole or not at all and the record always
# describes the results a page shows. A judging's commit names its holder, and stands
# only while that consumer still holds the group and wrote every provisional result it
# names: a worker paused past its lease, whose group was taken over and begun again, must
# neither commit the taker's results under its own nor acknowledge the entry the taker
# now holds. A cancel or a dead letter (no judging, every result given) names none. A
# rollout that is no longer running and has a result (the cancelled marker) keeps it.
# Returns how many results this call committed (0: the group was committed already, or
# is not the holder's), -1 if the job is gone, -2 (nothing done, the entry still pending)
# if a provisional result is missing or not the holder's.
FINISH_GROUP = (
    _S
    + DROP
    + _FINALIZE
    + _TALLY
    + """
local live = redis.call('EXISTS', KEYS[1]) == 1
local committed = live and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1
  and redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0
if live and not committed then
  if ARGV[9] ~= '' and redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[9] then return 0 end
  for k = 10, #ARGV, 3 do
    if ARGV[k + 1] == '' then
      local tag = redis.call('HGET', KEYS[17], ARGV[k])
      if not tag or (ARGV[9] ~= '' and tag ~= ARGV[9]) then return -2 end
    end
  end
end
redis.call('XACK', KEYS[4], ARGV[3], ARGV[2])
redis.call('XDEL', KEYS[4], ARGV[2])
if not live then return -1 end
if committed then return 0 end
-- One command per kind of change where it can, not one per member: a group may have 256.
local written, tally = {}, {}
for k = 10, #ARGV, 3 do
  local i = ARGV[k]
  if redis.call('HDEL', KEYS[3], i) == 1 or redis.call('HEXISTS', KEYS[2], i) == 0 then
    if ARGV[k + 1] ~= '' then  -- a given result (a cancel, a dead letter) replaces all
      drop(KEYS[18], KEYS[19], i)
      redis.call('HSET', KEYS[2], i, ARGV[k + 1])
    end
    tally[ARGV[k + 2]] = (tally[ARGV[k + 2]] or 0) + 1
    if i == ARGV[1] and ARGV[7] ~= '' then
      redis.call('HSET', KEYS[16], i, ARGV[7])
      redis.call('EXPIRE', KEYS[16], ARGV[5])
    end
    written[#written + 1] = i
  end
end
redis.call('DEL', KEYS[20])
if #written == 0 then return 0 end
redis.call('HDEL', KEYS[6], unpack(written))
redis.call('HDEL', KEYS[17], unpack(written))
for kind, n in pairs(tally) do
  if kind == 'dead' then
    redis.call('HINCRBY', KEYS[1], 'failed', n)
    if ARGV[8] ~= '' then  -- the group is one entry: one dead-letter record
      redis.call('RPUSH', KEYS[5], ARGV[8])
      redis.call('LTRIM', KEYS[5], -10000, -1)
    end
  end
  redis.call('HINCRBY', KEYS[1], kind, n)
end
redis.call('EXPIRE', KEYS[2], ARGV[5])
settle(ARGV[6], ARGV[4], ARGV[5])
return #written
"""
)

# KEYS: job, S (6). ARGV: job id, now. Marks the job cancelled, so that no rollout starts
# any more. Returns the number of rollouts for CANCEL_RANGE to go through (also when the
# job was cancelled already and not finished: a cancel that died half way is resumed),
# or -1 when there is nothing to do.
CANCEL_START = (
    _S
    + """
local j = redis.call('HMGET', KEYS[1], 'status', 'total', 'finished_at')
if not j[1] or j[3] then return -1 end
if j[1] ~= 'cancelled' then
  redis.call('HSET', KEYS[1], 'status', 'cancelled')
  move(2, ARGV[1], j[1], 'cancelling', ARGV[2])
end
return tonumber(j[2])
"""
)

# KEYS: job, out, run, stream (unused), dead (unused), in, tries, errors, ids, S (6),
# groups, prov, parts, nparts.
# ARGV: start, stop, now, ttl, cancelled marker, job id.
# Rollouts start..stop-1 neither judged nor running get the marker as their result;
# running ones finish. Returns how many were marked.
CANCEL_RANGE = (
    _S
    + _FINALIZE
    + """
local j = redis.call('HMGET', KEYS[1], 'status', 'finished_at')
if j[1] ~= 'cancelled' or j[2] then return 0 end
local c = 0
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do
  if redis.call('HEXISTS', KEYS[2], i) == 0 and redis.call('HEXISTS', KEYS[3], i) == 0 then
    redis.call('HSET', KEYS[2], i, ARGV[5])
    c = c + 1
  end
end
if c > 0 then redis.call('EXPIRE', KEYS[2], ARGV[4]) end
local cancelled = redis.call('HINCRBY', KEYS[1], 'cancelled', c)
local k = redis.call('HMGET', KEYS[1], 'done', 'failed', 'total')
local failed, total = tonumber(k[2]), tonumber(k[3])
if tonumber(k[1]) + failed + cancelled >= total then
  finalize(10, ARGV[6], 'cancelled', failed, total, ARGV[3], ARGV[4])
end
return c
"""
)

# KEYS: stream, job, out, run, tries, lead, hold, prov, parts, nparts. ARGV: entry id, group, job
# id, index, consumer. A stopping worker's entry goes back to the end of the stream (a new
# entry, the old one acknowledged), and the interrupted delivery is not counted against
# the rollout. A leader's group stops running with it, its provisional results dropped.
# Only while the entry is still pending under `consumer`: one taken over meanwhile (the
# worker was taken for dead) is the taker's delivery, which a stale release must neither
# acknowledge nor stop nor queue again. Returns 1 if released.
RELEASE = (
    _QUEUE
    + DROP
    + """
if #redis.call('XPENDING', KEYS[1], ARGV[2], ARGV[1], ARGV[1], 1, ARGV[5]) == 0 then
  return 0
end
if redis.call('XACK', KEYS[1], ARGV[2], ARGV[1]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local running = redis.call('HEXISTS', KEYS[4], ARGV[4]) == 1
if redis.call('HEXISTS', KEYS[3], ARGV[4]) == 1 and not running then return 0 end
local group = redis.call('HGET', KEYS[6], 'g' .. ARGV[4])
if group then
  for i in string.gmatch(ARGV[4] .. ',' .. group, '%d+') do
    if redis.call('HDEL', KEYS[4], i) == 1 then
      drop(KEYS[9], KEYS[10], i)
      redis.call('HDEL', KEYS[3], i)
      redis.call('HDEL', KEYS[8], i)
    end
  end
  redis.call('DEL', KEYS[7])
else
  redis.call('HDEL', KEYS[4], ARGV[4])
end
if tonumber(redis.call('HGET', KEYS[5], ARGV[4]) or '0') > 0 then
  redis.call('HINCRBY', KEYS[5], ARGV[4], -1)
end
queue(KEYS[1], KEYS[6], ARGV[3], ARGV[4])
return 1
"""
)
