-- wrk script for lmc serve: a mix of chat and streamed chat requests (and a
-- few text completions), each connection cycling through several questions.
-- done() prints one line "WRK_JSON {...}" that test_serve_load.py reads.
local questions = {
  "Who was Moses?", "What did the LORD say unto Noah?", "Tell me of the ark.",
  "Who was the father of Isaac?", "What is love?", "Where is Egypt?",
}
local counter = 0
local headers = { ["Content-Type"] = "application/json" }
local key = os.getenv("LMC_API_KEY")
if key then headers["Authorization"] = "Bearer " .. key end

request = function()
  counter = counter + 1
  local q = questions[counter % #questions + 1]
  local kind = counter % 5
  if kind == 4 then
    local body = string.format(
      '{"model":"kjv:11m","prompt":"%s","max_tokens":48,"temperature":0.7,"seed":%d}', q, counter)
    return wrk.format("POST", "/v1/completions", headers, body)
  end
  local stream = (kind % 2 == 1) and "true" or "false"
  local body = string.format(
    '{"model":"kjv:11m","messages":[{"role":"user","content":"%s"}],"max_tokens":48,' ..
    '"temperature":0.7,"seed":%d,"stream":%s%s}', q, counter, stream,
    stream == "true" and ',"stream_options":{"include_usage":true}' or "")
  return wrk.format("POST", "/v1/chat/completions", headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
