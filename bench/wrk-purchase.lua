-- bench/wrk-purchase.lua - wrk script for the admission figures of BENCHMARKS.md
-- ("Issue 23 closed"): each request POSTs a purchase of a fresh user on
-- activity 7 (bench/lab.sh up makes it); wrk -t1 keeps one counter.
-- Usage: wrk -t1 -c200 -d5s -s bench/wrk-purchase.lua http://127.0.0.1:18080/
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/api/v1/activities/7/purchase",
    {["X-User-Id"] = tostring(5000000 + n), ["Content-Type"] = "application/json"}, '{"quantity":1}')
end
done = function(summary, latency, requests)
  io.write(string.format("non2xx %d\n", summary.errors.status))
end
