#!/usr/bin/env bash
# One fuzz campaign: fuzz/run.sh NAME SECONDS runs build-fuzz/fuzz/fuzz_NAME
# for SECONDS from its committed seeds (fuzz/seeds/NAME), keeping what it
# finds in fuzz-corpus/NAME (git-ignored) and its log in fuzz-corpus/NAME.log;
# the last lines of the log (libFuzzer's final stats) go to stdout.
# make fuzz-run FUZZ_TIME=1800 FUZZ_PAR=2 runs every target this way.
set -uo pipefail
t=${1:?usage: fuzz/run.sh NAME SECONDS}
secs=${2:?usage: fuzz/run.sh NAME SECONDS}
case $t in
  tokenizer_load) max_len=400000 ;;
  template) max_len=65536 ;;
  *) max_len=8192 ;;
esac
dict=()
[ -f "fuzz/$t.dict" ] && dict=("-dict=fuzz/$t.dict")
mkdir -p "fuzz-corpus/$t" "fuzz-corpus/$t.artifacts"
build-fuzz/fuzz/"fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
  -print_final_stats=1 -max_len="$max_len" "${dict[@]}" \
  -artifact_prefix="fuzz-corpus/$t.artifacts/" \
  "fuzz-corpus/$t" "fuzz/seeds/$t" >"fuzz-corpus/$t.log" 2>&1
rc=$?
echo "== fuzz_$t: $secs s, exit $rc"
grep -E "^#[0-9]+.*DONE|^stat::(number_of_executed_units|peak_rss_mb|new_units_added)|ERROR|SUMMARY" \
  "fuzz-corpus/$t.log" | tail -n 8
exit $rc
