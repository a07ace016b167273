#!/usr/bin/env python3
"""The lmc command as users run it: every subcommand's main path and a usage
error, --help on stdout with status 0, --version, exit codes (0 ok, 1 error,
2 usage, 130 interrupted), one-line errors, no progress bar off a terminal,
--verbose load details, and Ctrl-C during generate. Runs the shipped model."""
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

LMC = os.environ.get("LMC_CLI", "build/lmc")
SRC = os.environ.get("LMC_SOURCE_DIR", ".")
MODEL = os.path.join(SRC, "models", "kjv-llama-11m-4bit")
failures = []


def run(*args, stdin=None, timeout=300):
    return subprocess.run([LMC, *args], capture_output=True, text=True, timeout=timeout,
                          input=stdin)


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""))
    if not cond:
        failures.append(name)


def one_line(s):
    return s.count("\n") == 1 and s.endswith("\n")


# ---- the top level ----
r = run("--version")
check("--version", r.returncode == 0 and r.stdout.startswith("lmc ") and not r.stderr, r.stdout)
r = run("--help")
check("--help: stdout, 0", r.returncode == 0 and "usage: lmc COMMAND" in r.stdout)
commands = [line.split()[0] for line in r.stdout.split("commands:\n")[1].split("\n\n")[0].splitlines()]
want = {"generate", "chat", "models", "logits", "tokenize", "detokenize", "template", "convert",
        "bench", "perplexity"}
check("every subcommand listed", want <= set(commands), str(commands))
r = run()
check("no command: usage on stderr, 2", r.returncode == 2 and "usage" in r.stderr)
r = run("frobnicate")
check("unknown command: 2, one line", r.returncode == 2 and one_line(r.stderr), r.stderr)

# ---- every subcommand: --help and a usage error ----
for c in commands:
    r = run(c, "--help")
    check(f"{c} --help: stdout, 0", r.returncode == 0 and r.stdout.startswith(f"usage: lmc {c}")
          and not r.stderr, r.stderr)
    r = run(c, "-h")
    check(f"{c} -h", r.returncode == 0 and r.stdout.startswith(f"usage: lmc {c}"))
    r = run(c, "--no-such-option")
    check(f"{c} --no-such-option: 2, one line naming it", r.returncode == 2 and one_line(r.stderr)
          and "--no-such-option" in r.stderr, r.stderr)

usage_errors = [
    ("generate", "--max-tokens", "-3"), ("generate", "--temp", "nan"), ("generate", "--top-p", "0"),
    ("generate", "--repetition-penalty", "nan"), ("generate", "--top-k", "-1"),
    ("generate", "--threads", "100000"), ("generate", "--tokens", "1,,2"),
    ("generate", "--tokens", "1,2,"), ("generate", "--tokens", "1", "--prompt", "x"),
    ("generate", "--seed"), ("generate", "--stats=yes"), ("logits", "--tokens", "1"),
    ("logits", "--out", "/tmp/x"), ("tokenize",), ("detokenize",), ("detokenize", "--ids", "a"),
    ("template",), ("convert", "--model", MODEL), ("convert", "--model", MODEL, "--out", "/tmp/x",
                                                    "--dtype", "f8"),
    ("bench", "-p", "0", "-n", "0"), ("bench", "-t", "1,x"), ("bench", "-o", "csv"), ("perplexity",), ("perplexity", "--text", "x", "--ctx", "1"),
    ("models", "extra-argument"),
]
for args in usage_errors:
    r = run(*args)
    check(f"usage error exits 2: lmc {' '.join(args)}", r.returncode == 2 and one_line(r.stderr),
          f"{r.returncode} {r.stderr!r}")

# ---- runtime errors: 1, one line naming what was tried ----
r = run("generate", "--model", "/nonexistent", "--prompt", "hi")
check("generate --model /nonexistent: 1, one line naming it", r.returncode == 1
      and one_line(r.stderr) and "/nonexistent" in r.stderr and "registry" in r.stderr, r.stderr)
r = run("generate", "--model", "no-such-org/no-such-model", "--prompt", "hi")
check("generate with an uncached hub id: 1, names the cache", r.returncode == 1
      and one_line(r.stderr) and "no-such-org/no-such-model" in r.stderr, r.stderr)
r = run("generate", "--prompt", "@/nonexistent/prompt.txt")
check("--prompt @missing-file: 1", r.returncode == 1 and one_line(r.stderr)
      and "/nonexistent/prompt.txt" in r.stderr, r.stderr)
r = run("logits", "--tokens", "1,2", "--out", "/dev/full")
check("logits --out /dev/full: 1, says why, the device stays", r.returncode == 1
      and one_line(r.stderr) and "No space" in r.stderr and not os.path.isfile("/dev/full"),
      r.stderr)
r = run("generate", "--prompt", "hi", "--max-tokens", "100000", "--ignore-eos", "--temp", "0")
check("generate past the context: stops there and says so", r.returncode == 0
      and "context (1024 tokens)" in r.stderr, r.stderr)
r = run("generate", "--prompt", "And God said, " * 400, "--no-template", "--max-tokens", "4")
check("a prompt longer than the context: 1, says so", r.returncode == 1 and one_line(r.stderr)
      and "context" in r.stderr, r.stderr)
r = run("logits", "--tokens", "1,2", "--out", "/nonexistent/dir/x.f32")
check("logits to an unwritable path: 1", r.returncode == 1 and one_line(r.stderr), r.stderr)
if os.path.exists("/dev/full"):
    p = subprocess.run(f"'{LMC}' generate --max-tokens 8 --seed 1 > /dev/full", shell=True,
                       capture_output=True, text=True, timeout=60)
    check("generate > /dev/full: 1, says so", p.returncode == 1 and "write" in p.stderr, p.stderr)

# ---- main paths ----
r = run("generate", "--prompt", "And God said,", "--no-template", "--max-tokens", "24", "--seed",
        "3", "--stats")
check("generate (default model): text, stats on stderr", r.returncode == 0
      and len(r.stdout.split()) >= 8 and "tokens/s" in r.stderr and "\r" not in r.stderr, r.stderr)
r2 = run("generate", "--prompt", "And God said,", "--no-template", "--max-tokens", "24", "--seed",
         "3")
check("generate: same seed, same text", r2.stdout == r.stdout)
with tempfile.TemporaryDirectory() as tmp:
    pf = os.path.join(tmp, "prompt.txt")
    with open(pf, "w") as f:
        f.write("And God said,")
    r3 = run("generate", "--prompt", "@" + pf, "--no-template", "--max-tokens", "24", "--seed", "3")
    check("generate --prompt @file", r3.returncode == 0 and r3.stdout == r.stdout)
r = run("generate", "--prompt", "And God said,", "--no-template", "--max-tokens", "64", "--temp",
        "0", "--ignore-eos", "--stop", "LORD")
check("generate --stop", r.returncode == 0 and "LORD" not in r.stdout and r.stdout.strip(), r.stdout)
r = run("generate", "--prompt", "The LORD is my shepherd", "--system", "Continue the scripture.",
        "--max-tokens", "16", "--temp", "0.7", "--top-k", "40", "--top-p", "0.9", "--min-p", "0.05",
        "--repetition-penalty", "1.1", "--repetition-context-size", "32", "--presence-penalty",
        "0.5", "--frequency-penalty", "0.2", "--seed", "1", "--threads", "1", "--verbose")
check("generate: every sampling option, --verbose load details", r.returncode == 0
      and "lmc: load" in r.stderr and "loaded" in r.stderr, r.stderr[-300:])
r = run("generate", "--tokens", "0,303,394,395,18", "--max-tokens", "8", "--temp", "0",
        "--print-ids")
check("generate --tokens --print-ids", r.returncode == 0 and len(r.stdout.split()) == 8, r.stdout)

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "l.f32")
    r = run("logits", "--prompt", "And God said,", "--out", out)
    n = os.path.getsize(out) if os.path.exists(out) else -1
    check("logits --prompt: T x V floats", r.returncode == 0 and n == 5 * 4096 * 4, str(n))
    if n > 0:
        vals = struct.unpack("<4096f", open(out, "rb").read()[-4096 * 4:])
        check("logits: the last row's argmax is the greedy token",
              max(range(4096), key=lambda i: vals[i]) == 1871)
    r = run("convert", "--model", MODEL, "--out", os.path.join(tmp, "dense"), "--dequantize",
            "--dtype", "f32")
    check("convert --dequantize", r.returncode == 0
          and os.path.exists(os.path.join(tmp, "dense", "model.safetensors")), r.stderr)
    r = run("generate", "--model", os.path.join(tmp, "dense"), "--prompt", "And God said,",
            "--no-template", "--temp", "0", "--max-tokens", "8", "--print-ids")
    check("the dequantized folder generates the same greedy start", r.returncode == 0
          and r.stdout.split()[:1] == ["1871"], r.stdout)
    r = run("convert", "--model", MODEL, "--out", os.path.join(tmp, "dense"), "--dequantize")
    check("convert onto an existing folder without --force: 1", r.returncode == 1
          and one_line(r.stderr), r.stderr)
    msgs = os.path.join(tmp, "m.json")
    with open(msgs, "w") as f:
        json.dump([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], f)
    r = run("template", "--messages", msgs, "--add-generation-prompt")
    check("template", r.returncode == 0 and
          r.stdout == "<s><|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\n", repr(r.stdout))
    with open(msgs, "w") as f:
        json.dump([{"role": "tool", "content": "x"}], f)
    r = run("template", "--messages", msgs)
    check("template raising an exception: 1, the message", r.returncode == 1
          and one_line(r.stderr) and "roles" in r.stderr, r.stderr)

r = run("tokenize", "--text", "In the beginning")
check("tokenize", r.returncode == 0 and r.stdout.split()[0] == "0", r.stdout)
ids = r.stdout.split()
r = run("detokenize", "--ids", ",".join(ids), "--skip-special")
check("detokenize", r.returncode == 0 and r.stdout == "In the beginning", repr(r.stdout))
r = run("perplexity", "--text", "And God said, Let there be light: and there was light.\n", "--json")
p = json.loads(r.stdout) if r.returncode == 0 else {}
check("perplexity --text", r.returncode == 0 and 1 < p.get("perplexity", 0) < 100, r.stdout)
r = run("bench", "-p", "16", "-n", "8", "-r", "1", "-t", "1")
check("bench", r.returncode == 0 and "tokens/s" in r.stdout, r.stdout)
r = run("bench", "-p", "16", "-n", "4", "-r", "1", "-t", "1,2", "-d", "0,8", "-o", "json")
rows = [json.loads(l) for l in r.stdout.splitlines()]
check("bench -o json: one object per test", r.returncode == 0 and len(rows) == 8 and
      {x["test"] for x in rows} == {"pp16", "tg4", "pp16 @ d8", "tg4 @ d8"} and
      all(k in x for x in rows for k in ("threads", "mean_tps", "sd_tps", "bytes_per_token",
                                          "bandwidth_gbs", "limit_share")), r.stdout)
r = run("bench", "-p", "8", "-n", "4", "-r", "3", "-t", "1", "-d", "0,8", "--interleave", "-o", "json")
rows = [json.loads(l) for l in r.stdout.splitlines()] if r.returncode == 0 else []
check("bench --interleave: the same tests, every repetition timed",
      [x["test"] for x in rows] == ["pp8", "tg4", "pp8 @ d8", "tg4 @ d8"] and
      all(x["interleaved"] and len(x["samples_ts"]) == 3 and min(x["samples_ts"]) > 0
          for x in rows), r.stdout + r.stderr)
r = run("models")
check("models lists the shipped model", r.returncode == 0 and "kjv:11m" in r.stdout)
r = run("chat", "--temp", "0", "--max-tokens", "16", stdin="In the beginning God created the heaven.\n")
check("chat through a pipe", r.returncode == 0 and r.stdout.strip() and "> " not in r.stdout,
      repr(r.stdout))

# ---- Ctrl-C during generate: stops cleanly, prints the stats so far, 130 ----
p = subprocess.Popen([LMC, "generate", "--prompt", "And God said,", "--no-template", "--ignore-eos",
                      "--max-tokens", "1000000", "--threads", "1"], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
t0 = time.time()
first = p.stdout.read(16)  # generation has begun
p.send_signal(signal.SIGINT)
try:
    out, err = p.communicate(timeout=30)
    check("Ctrl-C: exit 130 within a second, stats printed", p.returncode == 130
          and "interrupted" in err and "generated:" in err and time.time() - t0 < 20,
          f"{p.returncode} {err!r}")
except subprocess.TimeoutExpired:
    p.kill()
    check("Ctrl-C stops generate", False, "still running 30 s after SIGINT")

if failures:
    print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("all checks passed")
