#!/usr/bin/env python3
"""lmc's figures for the shipped model against transformers' (results/ref.json
for the f32 export, results/ref-quantized.json for the 4-bit folder, both
made on the GPU machine by train.py and eval_quantized.py), written to
results/EVAL.md. Needs the f32 export that train.py wrote (OUT/hf-f32; not in
the repository: 44 MB).

usage: python3 models/train/eval.py --lmc build/lmc --f32 build/kjv/hf-f32
Checks (exit 1 when one fails): lmc's held-out perplexity equals
transformers' within 1e-3 relative (f32 and 4-bit); the 4-bit perplexity is
within 5% of the f32 one; greedy tokens equal transformers' (64 from the
plain prompt, the chat reply up to its end token)."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from common import CHAT_PROMPT, GREEDY_TOKENS, PLAIN_PROMPT, PPL_CTX  # noqa: E402


def lmc(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"lmc {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def figures(binary, model, exact):
    extra = ["--exact"] if exact else []
    ppl = json.loads(lmc(binary, "perplexity", "--model", model, "--ctx", str(PPL_CTX), "--file",
                         os.path.join(HERE, "data", "heldout.txt"), "--json", *extra))
    plain = [int(t) for t in lmc(binary, "generate", "--model", model, "--prompt", PLAIN_PROMPT,
                                 "--no-template", "--temp", "0", "--ignore-eos", "--max-tokens",
                                 str(GREEDY_TOKENS), "--print-ids", *extra).split()]
    chat = [int(t) for t in lmc(binary, "generate", "--model", model, "--prompt", CHAT_PROMPT,
                                "--temp", "0", "--max-tokens", str(GREEDY_TOKENS), "--print-ids",
                                *extra).split()]
    return ppl, plain, chat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmc", default=os.path.join(ROOT, "build", "lmc"))
    ap.add_argument("--f32", required=True, help="the f32 export train.py wrote (OUT/hf-f32)")
    args = ap.parse_args()
    res = os.path.join(HERE, "results")
    ref = json.load(open(os.path.join(res, "ref.json")))
    refq = json.load(open(os.path.join(res, "ref-quantized.json")))
    q4 = os.path.join(ROOT, "models", "kjv-llama-11m-4bit")
    rows, ok = [], True

    def check(name, good, detail):
        nonlocal ok
        ok &= good
        rows.append(f"| {name} | {detail} | {'yes' if good else '**no**'} |")

    runs = [("f32", args.f32, ref, True), ("4-bit", q4, refq, True), ("4-bit", q4, refq, False)]
    ppl_f32 = None
    for label, model, r, exact in runs:
        ppl, plain, chat = figures(args.lmc, model, exact)
        path = "exact f32 activations" if exact else "default (int8/int16 activations)"
        rel = abs(ppl["perplexity"] - r["heldout"]["ppl"]) / r["heldout"]["ppl"]
        check(f"{label}, {path}: held-out perplexity",
              rel <= 1e-3 and ppl["tokens"] == r["heldout"]["tokens"],
              f"lmc {ppl['perplexity']:.6f}, transformers {r['heldout']['ppl']:.6f} "
              f"({ppl['tokens']} tokens), relative difference {rel:.1e}")
        check(f"{label}, {path}: {GREEDY_TOKENS} greedy tokens after {PLAIN_PROMPT!r}",
              plain == r["greedy_plain"]["ids"], f"{sum(a == b for a, b in zip(plain, r['greedy_plain']['ids']))}"
              f" of {len(r['greedy_plain']['ids'])} equal")
        check(f"{label}, {path}: greedy chat reply", chat == r["greedy_chat"]["ids"],
              f"{len(chat)} tokens, transformers {len(r['greedy_chat']['ids'])}")
        if label == "f32":
            ppl_f32 = ppl["perplexity"]
        elif exact:
            d = ppl["perplexity"] / ppl_f32 - 1
            check("4-bit vs f32 perplexity (lmc)", abs(d) <= 0.05, f"{ppl['perplexity']:.4f} vs {ppl_f32:.4f}: {d:+.2%}")
    text = ["# The shipped model against transformers", "",
            f"Made by `python3 models/train/eval.py --lmc build/lmc --f32 OUT/hf-f32` (OUT: train.py's "
            f"output). Held-out text: models/train/data/heldout.txt (40 chapters never trained on), "
            f"perplexity in windows of {PPL_CTX} tokens (`lmc perplexity --ctx {PPL_CTX}`; "
            f"models/train/common.py computes the same in transformers).", "",
            "| check | figures | holds |", "| --- | --- | --- |", *rows, ""]
    with open(os.path.join(res, "EVAL.md"), "w") as f:
        f.write("\n".join(text))
    print("\n".join(text))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
