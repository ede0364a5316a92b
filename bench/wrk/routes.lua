-- wrk script of bench/http.sh and bench/cluster_http.sh. WRK_ROUTE=reserve: POST
-- /v1/reservations, one unit of a random catalogue SKU per request (the SKUs bench/http.sh
-- seeds, bench-000000 .. bench-009999, or with WRK_SKU_FILE one drawn from that file, a SKU
-- per line); WRK_ROUTE=healthz: GET /healthz, the gateway's trivial route (the HTTP ceiling
-- of this server). Prints one WRK_RESULT line that the scripts read.
local route = os.getenv("WRK_ROUTE") or "reserve"
math.randomseed(os.time())
local sku_file = os.getenv("WRK_SKU_FILE")
local skus = {}
if sku_file then
  for line in io.lines(sku_file) do
    if line ~= "" then skus[#skus + 1] = line end
  end
end

if route == "reserve" then
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  request = function()
    local sku = #skus > 0 and skus[math.random(1, #skus)] or
                string.format("bench-%06d", math.random(0, 9999))
    return wrk.format(nil, "/v1/reservations", nil,
                      '{"lines":[{"sku":"' .. sku .. '","quantity":1}]}')
  end
else
  wrk.path = "/healthz"
end

done = function(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read +
                 summary.errors.write + summary.errors.timeout
  io.write(string.format(
      "WRK_RESULT requests=%d seconds=%.3f errors=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f\n",
      summary.requests, summary.duration / 1e6, errors, latency:percentile(50) / 1000,
      latency:percentile(90) / 1000, latency:percentile(99) / 1000,
      latency:percentile(99.9) / 1000))
end
