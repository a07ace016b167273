#!/usr/bin/env python3
"""Keeps the README honest: its table of architectures lists exactly the
model_types lmc supports (as lmc's own error message lists them), every
folder the architecture and format tables name exists, loads and generates,
each format row's folder holds that format (config.json), and the library
example compiles against include/lmc.h."""
import json
import os
import re
import subprocess
import sys
import tempfile

LMC = os.environ.get("LMC_CLI", "build/lmc")
SRC = os.environ.get("LMC_SOURCE_DIR", ".")
readme = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
failures = []


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""))
    if not cond:
        failures.append(name)


def table(marker):
    i = readme.index(marker)
    rows = []
    for line in readme[i:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and not set(cells[0]) <= set("- "):
            rows.append(cells)
    return rows[1:]  # without the header


IMAGE = os.path.join(SRC, "tests", "fixtures", "vlm", "images", "rgb-31x47.png")


def generates(folder):
    cfg = json.load(open(os.path.join(SRC, folder, "config.json")))
    # a vision model takes an image and a prompt (the VLM factory), a text one token ids
    given = (["--image", IMAGE, "--prompt", "caption en"] if "vision_config" in cfg else
             ["--tokens", "1,2,3"])
    r = subprocess.run([LMC, "generate", "--model", os.path.join(SRC, folder), *given,
                        "--max-tokens", "2", "--temp", "0", "--print-ids"], capture_output=True,
                       text=True, timeout=120)
    return r.returncode == 0 and len(r.stdout.split()) == 2, r.stderr.strip()


# what lmc supports, from its own error for an unknown model_type
with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump({"model_type": "no_such_architecture"}, f)
    r = subprocess.run([LMC, "logits", "--model", tmp, "--tokens", "1", "--out",
                        os.path.join(tmp, "x")], capture_output=True, text=True, timeout=60)
    m = re.search(r"supported: ([a-z0-9_, ]+)\)", r.stderr)
    supported = set(m.group(1).split(", ")) if m else set()
check("lmc names what it supports", bool(supported), r.stderr)

archs = table("<!-- architectures")
listed = {row[0] for row in archs}
check("the architecture table lists exactly the supported model_types", listed == supported,
      f"missing {sorted(supported - listed)}, extra {sorted(listed - supported)}")
for model_type, _, hf, mlx in archs:
    for folder, quantized in ((hf, False), (mlx, True)):
        path = os.path.join(SRC, folder)
        cfg = json.load(open(os.path.join(path, "config.json"))) if os.path.isdir(path) else {}
        check(f"{model_type}: {folder} is a {model_type} folder", cfg.get("model_type") == model_type)
        check(f"{model_type}: {folder} {'is' if quantized else 'is not'} MLX 4-bit",
              (cfg.get("quantization", {}).get("bits") == 4) == quantized)
        ok, err = generates(folder)
        check(f"{model_type}: {folder} generates", ok, err)

DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
for fmt, _, folder in table("<!-- formats"):
    path = os.path.join(SRC, folder)
    cfg = json.load(open(os.path.join(path, "config.json"))) if os.path.isdir(path) else {}
    q = cfg.get("quantization")
    if fmt in DTYPES:
        good = q is None and (cfg.get("torch_dtype") or cfg.get("dtype")) == DTYPES[fmt]
    elif fmt == "MLX mixed":
        good = bool(q) and any(isinstance(v, (dict, bool)) for v in q.values())
    else:
        bits = int(re.match(r"MLX (\d)-bit", fmt).group(1))
        good = bool(q) and q.get("bits") == bits
    check(f"format {fmt}: {folder} holds it", good)
    ok, err = generates(folder)
    check(f"format {fmt}: {folder} generates", ok, err)

# the library example compiles as printed
m = re.search(r"## The library.*?```c\n(.*?)```", readme, re.S)
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "example.c")
    with open(src, "w") as f:
        f.write(m.group(1) if m else "")
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I",
                        os.path.join(SRC, "include"), src], capture_output=True, text=True)
    check("the library example compiles", bool(m) and r.returncode == 0, r.stderr)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
