#!/usr/bin/env python3
"""`lmc serve` driven by the official `openai` npm package: chat, completions,
streaming (text reassembled from chunks equals the non-streamed text at
temperature 0), stop strings, usage counts, an auth failure, errors as the
client's error types, an aborted stream (tests/cli/serve_openai.cjs).

The package (pinned: OPENAI_VERSION) is installed at test time into
LMC_BINARY_DIR/npm with `npm install --prefix`; a failed install fails the
test with npm's reason. Environment (set by ctest): LMC_CLI, LMC_SOURCE_DIR,
LMC_BINARY_DIR."""
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import BINARY, Server  # noqa: E402

OPENAI_VERSION = "6.49.0"  # the last major that runs on Debian 13's Node.js 20
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_openai.cjs")


def install_openai():
    prefix = os.path.abspath(os.path.join(BINARY, "npm"))
    module = os.path.join(prefix, "node_modules", "openai")
    try:
        with open(os.path.join(module, "package.json")) as f:
            if json.load(f)["version"] == OPENAI_VERSION:
                return module
    except (OSError, ValueError, KeyError):
        pass
    npm = shutil.which("npm")
    if not npm:
        raise AssertionError("npm is not installed (tools/setup.sh installs it)")
    os.makedirs(prefix, exist_ok=True)
    r = subprocess.run([npm, "install", "--prefix", prefix, "--no-audit", "--no-fund",
                        "--no-save", "openai@" + OPENAI_VERSION],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("npm install openai@%s failed (exit %d):\n%s%s"
                             % (OPENAI_VERSION, r.returncode, r.stdout, r.stderr))
    return module


class OpenAIClientTest(unittest.TestCase):
    def test_openai_npm_client(self):
        module = install_openai()
        node = shutil.which("node")
        self.assertTrue(node, "node is not installed")
        with Server("--api-key", "lmc-test-key", "--threads", "1") as srv:
            env = dict(os.environ, OPENAI_MODULE=module, LMC_BASE_URL=srv.url + "/v1",
                       LMC_API_KEY="lmc-test-key")
            r = subprocess.run([node, SCRIPT], capture_output=True, text=True, env=env,
                               timeout=300)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + "".join(srv.lines))
            self.assertIn("passed", r.stdout)
            m = srv.metrics()
            self.assertGreaterEqual(m["lmc_requests_cancelled_total"], 1)  # the aborted stream


if __name__ == "__main__":
    unittest.main(verbosity=2)
