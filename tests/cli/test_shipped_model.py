#!/usr/bin/env python3
"""The shipped model (models/kjv-llama-11m-4bit) against transformers'
figures for the same 4-bit weights (models/train/results/ref-quantized.json,
from eval_quantized.py on the GPU machine) and its tokenizer and template
against transformers' (ref.json): token ids of the held-out sample,
perplexity, greedy tokens, the rendered chat prompt; and it is the default
model of generate."""
import json
import os
import subprocess
import sys
import tempfile

LMC = os.environ.get("LMC_CLI", "build/lmc")
SRC = os.environ.get("LMC_SOURCE_DIR", ".")
MODEL = os.path.join(SRC, "models", "kjv-llama-11m-4bit")
TRAIN = os.path.join(SRC, "models", "train")
REF = json.load(open(os.path.join(TRAIN, "results", "ref.json")))
REFQ = json.load(open(os.path.join(TRAIN, "results", "ref-quantized.json")))
SAMPLE = os.path.join(TRAIN, "data", "heldout-sample.txt")
failures = []


def lmc(*args, env=None):
    r = subprocess.run([LMC, *args], capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        raise AssertionError(f"lmc {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""))
    if not cond:
        failures.append(name)


def ids(s):
    return [int(t) for t in s.split()]


# the folder as shipped: an MLX 4-bit layout under 10 MB
size = sum(os.path.getsize(os.path.join(MODEL, f)) for f in os.listdir(MODEL))
cfg = json.load(open(os.path.join(MODEL, "config.json")))
check("folder under 10 MB", size < 10_000_000, f"{size} bytes")
check("MLX 4-bit g64", cfg.get("quantization", {}).get("bits") == 4
      and cfg["quantization"].get("group_size") == 64)

# tokenizer: the held-out sample's ids equal HF tokenizers'
got = ids(lmc("tokenize", "--model", MODEL, "--no-special", "--text-file", SAMPLE))
want = REF["sample"]["ids"]
check("tokenize: sample ids equal transformers'", got == want,
      f"{len(got)} vs {len(want)} ids, first difference at "
      f"{next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))}")
text = lmc("detokenize", "--model", MODEL, "--ids", ",".join(map(str, want)))
check("detokenize: round trip", text == open(SAMPLE, encoding="utf-8").read())

# chat template: the prompt transformers rendered
with tempfile.TemporaryDirectory() as tmp:
    msgs = os.path.join(tmp, "m.json")
    with open(msgs, "w") as f:
        json.dump([{"role": "user", "content": REF["greedy_chat"]["prompt"]}], f)
    rendered = lmc("template", "--model", MODEL, "--messages", msgs, "--add-generation-prompt")
    check("template: rendered as transformers", rendered == REF["greedy_chat"]["rendered"],
          repr(rendered))

# perplexity on the held-out sample, exact and default paths
for extra in ([], ["--exact"]):
    p = json.loads(lmc("perplexity", "--model", MODEL, "--file", SAMPLE, "--ctx", "256", "--json",
                       *extra))
    rel = abs(p["perplexity"] - REFQ["sample"]["ppl"]) / REFQ["sample"]["ppl"]
    check(f"perplexity {' '.join(extra) or 'default'}: within 1e-3 of transformers'",
          rel <= 1e-3 and p["tokens"] == REFQ["sample"]["tokens"],
          f"{p['perplexity']:.6f} vs {REFQ['sample']['ppl']:.6f} ({rel:.1e})")

# greedy tokens: 64 from the plain prompt, the chat reply to its end
for extra in ([], ["--exact"]):
    name = " ".join(extra) or "default"
    g = ids(lmc("generate", "--model", MODEL, "--prompt", REF["greedy_plain"]["prompt"],
                "--no-template", "--temp", "0", "--ignore-eos", "--max-tokens", "64", "--print-ids",
                *extra))
    check(f"greedy plain ({name}): 64 tokens equal transformers'", g == REFQ["greedy_plain"]["ids"])
    g = ids(lmc("generate", "--model", MODEL, "--prompt", REF["greedy_chat"]["prompt"], "--temp",
                "0", "--max-tokens", "64", "--print-ids", *extra))
    check(f"greedy chat ({name}): equal transformers'", g == REFQ["greedy_chat"]["ids"])

# the default model: no --model, the registry name, and the text it writes
out = lmc("generate", "--prompt", "And God said,", "--no-template", "--temp", "0", "--ignore-eos",
          "--max-tokens", "64")
check("default model is the shipped one", out.strip() == REFQ["greedy_plain"]["text"].strip(),
      repr(out[:80]))
out = lmc("generate", "--model", "kjv:11m", "--prompt", "And God said,", "--no-template",
          "--max-tokens", "32", "--seed", "3")
words = out.split()
check("registry name kjv:11m; sampled text is English words", len(words) >= 10 and
      sum(w.strip(".,;:?!'").lower() in {"the", "and", "of", "unto", "lord", "god", "he", "i",
                                         "said", "that", "thou", "thee", "shall", "is", "a", "to",
                                         "in", "his", "my", "not", "be", "for", "them", "they"}
          for w in words) >= len(words) // 5, out)

if failures:
    print(f"{len(failures)} check(s) failed: {failures}")
    sys.exit(1)
print("all checks passed")
