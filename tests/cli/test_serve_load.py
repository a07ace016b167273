#!/usr/bin/env python3
"""Load on `lmc serve`: wrk (Debian's) on loopback with tests/cli/serve_load.lua
(chat, streamed chat with usage, text completions; 48 tokens each), 4
connections for LMC_WRK_SECONDS seconds (20 in CI; the README's figures are
from 120) against the shipped model. Passes with 0 failed requests (socket
errors, timeouts, non-2xx) and a server that answers /health afterwards and
exits 0 on SIGTERM. Prints the p50/p99 latency and the tokens/s (the
/metrics generated-tokens counter over the run).

The server runs with --threads 1 (LMC_SERVE_ARGS overrides): ctest runs two
tests at a time on CI's 2 cores, and the kernels' pool, whose workers spin
between the many small loops of a decode step, slows down badly when its
threads must share cores with other processes (see the README).

Environment (set by ctest): LMC_CLI, LMC_SOURCE_DIR; LMC_WRK_SECONDS, LMC_SERVE_ARGS."""
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_load.lua")
SECONDS = int(os.environ.get("LMC_WRK_SECONDS", "20"))


class LoadTest(unittest.TestCase):
    def test_wrk(self):
        wrk = shutil.which("wrk")
        self.assertTrue(wrk, "wrk is not installed (tools/setup.sh installs it)")
        with Server(*os.environ.get("LMC_SERVE_ARGS", "--threads 1").split()) as srv:
            before = srv.metrics()
            t0 = time.time()
            r = subprocess.run([wrk, "-t", "2", "-c", "4", "-d", "%ds" % SECONDS, "--timeout", "30s",
                                "--latency", "-s", SCRIPT, srv.url], capture_output=True, text=True,
                               timeout=SECONDS + 120)
            elapsed = time.time() - t0
            sys.stdout.write(r.stdout + r.stderr)
            self.assertEqual(r.returncode, 0, r.stderr)
            line = [x for x in r.stdout.splitlines() if x.startswith("WRK_JSON ")]
            self.assertTrue(line, r.stdout)
            res = json.loads(line[0][len("WRK_JSON "):])
            after = srv.metrics()
            self.assertGreater(res["requests"], 0)
            for k in ("connect", "read", "write", "status", "timeout"):
                self.assertEqual(res[k], 0, "%s errors: %s" % (k, res))
            self.assertNotIn("Non-2xx", r.stdout)
            self.assertEqual(srv.get("/health")[0], 200)
            tokens = after["lmc_generated_tokens_total"] - before["lmc_generated_tokens_total"]
            served = sum(v - before.get(k, 0) for k, v in after.items()
                         if k.startswith("lmc_http_requests_total") and "completions" in k)
            self.assertGreaterEqual(served, res["requests"])
            self.assertEqual(after["lmc_requests_rejected_total"], 0)
            print("wrk -c 4 -d %ds: %d requests (%.1f/s), 0 failed; latency p50 %.1f ms, p90 %.1f ms, "
                  "p99 %.1f ms, max %.1f ms; %d tokens generated, %.0f tokens/s"
                  % (SECONDS, res["requests"], res["requests"] / (res["duration_us"] / 1e6),
                     res["p50_us"] / 1e3, res["p90_us"] / 1e3, res["p99_us"] / 1e3,
                     res["max_us"] / 1e3, tokens, tokens / (res["duration_us"] / 1e6)))
            self.assertLess(elapsed, SECONDS + 60)


if __name__ == "__main__":
    unittest.main(verbosity=2)
