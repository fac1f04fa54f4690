-- Benchmarks/service.sh's load: each wrk thread posts BENCH_QUOTA requests of BENCH_BATCH notifications, every
-- notification to a token of its own (phase, thread and a counter in its last 28 hex digits), then
-- falls silent; it writes "done THREAD ACCEPTED REFUSED" once every request it posted was answered.
local batch = tonumber(os.getenv("BENCH_BATCH"))
local quota = tonumber(os.getenv("BENCH_QUOTA"))
local key = os.getenv("BENCH_KEY")
local phase = tonumber(os.getenv("BENCH_PHASE") or "0")
local payload = os.getenv("BENCH_PAYLOAD")
local threads = {}

function setup(thread)
    table.insert(threads, thread)
    thread:set("thread_id", #threads)
end

-- Globals, so that done() can read them from each thread.
posted, answered, accepted, refused = 0, 0, 0, 0
local id, prefix, reported, calls = 0, nil, false, 0
-- A request's body as one format of BENCH_BATCH counters, made once: each request is one string.format (its
-- notifications' strings made piece by piece were the client's main cost, on the cores the service is measured on).
local format

function init(args)
    id = wrk.thread:get("thread_id")
    prefix = string.format("5a1f%032x%08x%08x", 0, phase, id)
    local one = '{"token":"' .. prefix .. '%012x","payload":' .. payload:gsub("%%", "%%%%") .. '}'
    local parts = {}
    for i = 1, batch do parts[i] = one end
    format = '{"notifications":[' .. table.concat(parts, ",") .. ']}'
    wrk.headers["Authorization"] = "Bearer " .. key
    wrk.headers["Content-Type"] = "application/json"
end

function delay()
    if posted >= quota then return 3600000 end
    return 0
end

function request()
    -- wrk asks each thread for one request it never sends (before connecting), and a connection's first request
    -- comes without delay(): those, and any past the quota, are a harmless GET.
    calls = calls + 1
    if calls == 1 or posted >= quota then return wrk.format("GET", "/healthz") end
    local counters = {}
    local base = posted * batch
    for i = 1, batch do counters[i] = base + i - 1 end
    posted = posted + 1
    return wrk.format("POST", "/v1/notifications", nil, string.format(format, unpack(counters)))
end

function response(status, headers, body)
    if status == 200 then return end
    answered = answered + 1
    if status == 202 then
        accepted = accepted + tonumber(body:match('"accepted":%s*(%d+)') or "0")
    else
        refused = refused + 1
        if refused <= 3 then io.write(string.format("refused %d %s\n", status, body)) end
    end
    if not reported and posted >= quota and answered >= posted then
        reported = true
        io.write(string.format("done %d %d %d\n", id, accepted, refused))
        io.flush()
    end
end

function done(summary, latency, requests)
    local a, r, p = 0, 0, 0
    for _, thread in ipairs(threads) do
        a = a + thread:get("accepted")
        r = r + thread:get("refused")
        p = p + thread:get("posted")
    end
    io.write(string.format("total posted %d accepted %d refused %d; request latency p50 %.1f ms p99 %.1f ms\n",
        p, a, r, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
