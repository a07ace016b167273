#!/usr/bin/env bash
# Decode only, lmc and llama.cpp alternating in short runs (many rounds, so
# that the machine's bandwidth swings hit both alike): per round one
# `lmc bench -p 0 -n N -r 1` and one `llama-bench -p 0 -n N -r 1`, the order
# flipped every round. Uses the models and the llama.cpp build that
# ../shared/tools/peer-bench left in its --work folder.
#
# usage: bench/alt_tg.sh LMC WORK [rounds (10)] [pairs ("q4 q8 bf16")] [tokens (64)]
# Prints each round and, per pair, the median of the per-round ratios, their
# range and the ratio of the summed rates.
set -euo pipefail
LMC=$(realpath "$1") W=$2 R=${3:-10} PAIRS=${4:-"q4 q8 bf16"} N=${5:-64}
LB=$W/llama.cpp/build/bin/llama-bench
declare -A LM=([q4]=lmc-1b-q4 [q8]=lmc-1b-q8 [bf16]=hf-1b)
declare -A LL=([q4]=m-1b-Q4_0.gguf [q8]=m-1b-Q8_0.gguf [bf16]=m-1b-F16.gguf)
lmc_tg() { "$LMC" bench --model "$W/${LM[$1]}" -p 0 -n "$N" -r 1 -t 2 -o json 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["mean_tps"])'; }
llama_tg() { "$LB" -m "$W/${LL[$1]}" -t 2 -p 0 -n "$N" -r 1 -o jsonl 2>/dev/null |
    python3 -c 'import json,sys; print([json.loads(l) for l in sys.stdin if l.startswith("{")][0]["avg_ts"])'; }
out=$(mktemp)
for r in $(seq 1 "$R"); do
  for p in $PAIRS; do
    if [ $((r % 2)) -eq 1 ]; then a=$(lmc_tg "$p"); b=$(llama_tg "$p"); else b=$(llama_tg "$p"); a=$(lmc_tg "$p"); fi
    echo "round $r $p lmc $a llama $b" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    f = l.split(); rows.setdefault(f[2], []).append((float(f[4]), float(f[6])))
print("| pair | rounds | lmc tg median | llama.cpp tg median | ratio median | ratio range | sum ratio |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for p, v in rows.items():
    r = [a / b for a, b in v]
    print(f"| {p} | {len(v)} | {st.median(a for a, _ in v):.1f} | {st.median(b for _, b in v):.1f} | "
          f"{st.median(r):.2f} | {min(r):.2f}-{max(r):.2f} | {sum(a for a, _ in v) / sum(b for _, b in v):.2f} |")
PY
rm -f "$out"
