#!/usr/bin/env python3
"""Builds the project's MLX-quantized reference models and records their outputs.

Run where torch and transformers are installed (torch 2.11, transformers 5.17, numpy; no mlx
and no internet needed; CPU is enough):
  python3 tests/reference/make_quant_fixtures.py OUTDIR [NAME ...]
  (the lead commits OUTDIR = tests/fixtures/quant-models)

Each OUTDIR/NAME is an MLX-layout folder as mlx_lm.convert -q writes it (the format of
../shared/conformance/*-mlx-*):
  config.json                   the HF config, keys sorted, "quantization" and the same dict
                                under "quantization_config" (per-module entries keyed by module
                                path: an object with its own bits / group_size, or false = dense),
                                torch_dtype / dtype = the stored dtype
  model.safetensors             metadata {"format": "mlx"}; a quantized module <p> is <p>.weight
                                uint32 [out, in*bits/32] + <p>.scales, <p>.biases [out, in/group]
                                in the model dtype (float16 or bfloat16); other tensors in that
                                dtype; MoE experts stacked as switch_mlp.{gate,up,down}_proj
                                [E, out, in]; no lm_head when tied
  model.safetensors.index.json  metadata.total_size, metadata.total_parameters, weight_map
  expect.json                   quant info, prompt_tokens, greedy_tokens (16, argmax, KV cache,
                                EOS not a stop), logits_file, rtol_l2_hint 1e-3, checks
  logits.f32                    raw little-endian float32 [T, V]
and OUTDIR/manifest.json lists them.

How: a tiny dense model is built with transformers as tests/reference/make_fixtures.py does
(same config helpers, seeding and perturbation) in float32 and saved with save_pretrained (hub
key names). Its tensors are sanitized to mlx-lm's names, cast to the dtype, and quantized with
mlx_quant.py (numpy reference of mlx's CPU quantizer, bit-identical to mlx and to
`lmc convert`). The reference: the dequantized weights (scales * q + biases in float32 from the
stored float16/bfloat16 scales and biases) and every other tensor as stored, upcast to float32,
are written as a float32 HF folder, reloaded with from_pretrained (float32, eager attention, CPU)
and run.

One model failing does not stop the others: its traceback is printed and the summary line
names it. `--selftest [--lmc BUILD/lmc]` runs every part that needs no torch (sanitize,
quantize, the safetensors writer and reader, the dequantized HF tensors, the folder layout) on
tests/fixtures/models and, with --lmc, checks that `lmc convert` writes the same bytes.
"""
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import mlx_quant as mq  # noqa: E402

VOCAB = 256
PROMPT_LEN = 24
NEW_TOKENS = 16
RTOL_L2_HINT = 1e-3

# ---- the models ------------------------------------------------------------------------------
#
# name -> spec:
#   arch       "llama" or "mixtral" (config built by config_for)
#   cfg        overrides of the base config
#   dtype      "float16" / "bfloat16": the stored dtype of scales, biases and dense tensors
#   bits, group_size   the default quantization
#   mode_key   whether "mode": "affine" is written (newer mlx-lm writes it, older did not)
#   overrides  per-module entries: path -> {"bits", "group_size"} or False (left dense)
#   notes

SPECS = {
    "llama-q4-g64-f16": dict(arch="llama", dtype="float16", bits=4, group_size=64,
                             notes="the common mlx-community layout, untied lm_head"),
    "llama-q2-g32-f16": dict(arch="llama", dtype="float16", bits=2, group_size=32,
                             notes="2 bits: 16 values per uint32"),
    "llama-q3-g64-bf16": dict(arch="llama", dtype="bfloat16", bits=3, group_size=64,
                              notes="3 bits straddle uint32 words; bfloat16 scales"),
    "llama-q5-g32-bf16": dict(arch="llama", dtype="bfloat16", bits=5, group_size=32,
                              mode_key=False, notes="5 bits; no mode key in the config"),
    "llama-q6-g64-f16-tied": dict(arch="llama", cfg=dict(tie_word_embeddings=True),
                                  dtype="float16", bits=6, group_size=64,
                                  notes="6 bits, tied: the quantized embedding is the head"),
    "llama-q8-g128-bf16": dict(arch="llama", cfg=dict(hidden_size=128, intermediate_size=256),
                               dtype="bfloat16", bits=8, group_size=128,
                               notes="8 bits, group 128 (hidden 128 so every module divides)"),
    "llama-q4-g32-bf16-tied": dict(arch="llama", cfg=dict(tie_word_embeddings=True),
                                   dtype="bfloat16", bits=4, group_size=32,
                                   notes="tied, bfloat16, group 32"),
    "llama-mixed-f16": dict(arch="llama", dtype="float16", bits=4, group_size=64,
                            overrides={
                                "model.layers.0.self_attn.q_proj": {"group_size": 32, "bits": 8},
                                "model.layers.0.self_attn.k_proj": {"group_size": 32, "bits": 8},
                                "model.layers.0.self_attn.v_proj": {"group_size": 32, "bits": 8},
                                "model.layers.0.self_attn.o_proj": {"group_size": 32, "bits": 8},
                                "model.layers.0.mlp.gate_proj": {"group_size": 32, "bits": 8},
                                "model.layers.0.mlp.up_proj": {"group_size": 32, "bits": 8},
                                "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8},
                                "model.layers.1.mlp.down_proj": False,
                                "lm_head": {"group_size": 64, "bits": 6},
                            },
                            notes="per-module quantization: layer 0 8-bit g32, lm_head 6-bit, "
                                  "layer 1 down_proj left dense (false)"),
    "mixtral-q4-g64-f16": dict(arch="mixtral", dtype="float16", bits=4, group_size=64,
                               notes="MoE: 4 experts stacked as switch_mlp [E, out, in], "
                                     "quantized router"),
    "mixtral-q3-g32-bf16": dict(arch="mixtral", dtype="bfloat16", bits=3, group_size=32,
                                notes="MoE, 3 bits, bfloat16"),
}


def base_config(arch, overrides):
    cfg = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
               rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=1, eos_token_id=2,
               pad_token_id=0, tie_word_embeddings=False, initializer_range=0.08)
    if arch == "mixtral":
        cfg.update(num_local_experts=4, num_experts_per_tok=2, rope_theta=1e6,
                   sliding_window=None)
    cfg.update(overrides or {})
    return cfg


# ---- safetensors without the safetensors package -------------------------------------------

ST_DTYPE = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U32": np.uint32,
            "I64": np.int64, "I32": np.int32}
DTYPE_ST = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


def read_safetensors(path):
    """name -> (safetensors dtype, numpy array; BF16 as raw uint16)."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        a = np.frombuffer(b[8 + n + s:8 + n + e], dtype=ST_DTYPE[v["dtype"]]).reshape(v["shape"])
        out[k] = (v["dtype"], a)
    return out


def read_folder(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = (sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx)
             else ["model.safetensors"])
    out = {}
    for f in files:
        out.update(read_safetensors(os.path.join(d, f)))
    return out


def write_safetensors(path, tensors, metadata):
    """tensors: name -> (dtype, array). Header as lmc's writer and mlx write it: metadata
    first, tensors in name order, compact JSON padded with spaces to a multiple of 8."""
    header = {"__metadata__": metadata}
    off = 0
    blobs = []
    for k in sorted(tensors):
        dt, a = tensors[k]
        a = np.ascontiguousarray(a, dtype=ST_DTYPE[dt])
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def to_f32(dt, a):
    return mq.from_storage(a, {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dt])


# ---- mlx-lm's conversion in numpy -------------------------------------------------------------

def sanitize(tensors, config):
    """mlx-lm sanitize(): drop rotary inv_freq, lm_head when tied; stack Mixtral experts
    (w1 -> gate_proj, w3 -> up_proj, w2 -> down_proj) into switch_mlp [E, out, in].
    tensors: name -> float32 array. Returns a new dict."""
    tied = config.get("tie_word_embeddings", False)
    out = {k: v for k, v in tensors.items()
           if "rotary_emb.inv_freq" not in k and not (tied and k.startswith("lm_head."))}
    if config.get("model_type") == "mixtral":
        E = config["num_local_experts"]
        for l in range(config["num_hidden_layers"]):
            p = "model.layers.%d.block_sparse_moe" % l
            if p + ".experts.0.w1.weight" not in out:
                raise ValueError("mixtral checkpoint without %s.experts.0.w1.weight (keys: %s)"
                                 % (p, sorted(out)[:8]))
            for n, m in (("w1", "gate_proj"), ("w2", "down_proj"), ("w3", "up_proj")):
                out["%s.switch_mlp.%s.weight" % (p, m)] = np.stack(
                    [out.pop("%s.experts.%d.%s.weight" % (p, e, n)) for e in range(E)])
    return out


def unsanitize(tensors, config):
    """The inverse for the reference folder: switch_mlp back to per-expert hub names."""
    out = dict(tensors)
    if config.get("model_type") == "mixtral":
        for l in range(config["num_hidden_layers"]):
            p = "model.layers.%d.block_sparse_moe" % l
            for n, m in (("w1", "gate_proj"), ("w2", "down_proj"), ("w3", "up_proj")):
                stacked = out.pop("%s.switch_mlp.%s.weight" % (p, m))
                for e in range(stacked.shape[0]):
                    out["%s.experts.%d.%s.weight" % (p, e, n)] = stacked[e]
    return out


def quantizable(name, a, group):
    """nn.quantize's default predicate: Linear / Embedding / SwitchLinear weights (2D, or the
    stacked 3D switch_mlp ones) whose input dimension divides the group size."""
    if not name.endswith(".weight") or "norm" in name:
        return False
    if not (a.ndim == 2 or (a.ndim == 3 and ".switch_mlp." in name)):
        return False
    return a.shape[-1] % group == 0


def quantize_tensors(tensors, spec):
    """tensors: mlx names -> float32. Returns (stored: name -> (st dtype, array),
    quantization dict for config.json, {module: (bits, group)}, [dense linear/embedding])."""
    dtype = spec["dtype"]
    st = DTYPE_ST[dtype]
    quant = {"group_size": spec["group_size"], "bits": spec["bits"]}
    if spec.get("mode_key", True):
        quant["mode"] = "affine"
    overrides = spec.get("overrides", {})
    stored, modules, dense = {}, {}, []
    for k in sorted(tensors):
        a = np.asarray(tensors[k], dtype=np.float32)
        path = k[:-len(".weight")] if k.endswith(".weight") else None
        entry = overrides.get(path) if path else None
        bits = (entry or {}).get("bits", spec["bits"]) if entry is not False else None
        group = (entry or {}).get("group_size", spec["group_size"]) if entry is not False else None
        if path and entry is not False and quantizable(k, a, group):
            rows = a.reshape(-1, a.shape[-1])
            packed, s, b = mq.quantize(rows, group, bits, dtype, backend="cpu")
            lead = list(a.shape[:-1])
            stored[path + ".weight"] = ("U32", packed.reshape(lead + [packed.shape[-1]]))
            stored[path + ".scales"] = (st, s.reshape(lead + [s.shape[-1]]))
            stored[path + ".biases"] = (st, b.reshape(lead + [b.shape[-1]]))
            modules[path] = (bits, group)
        else:
            if path and a.ndim >= 2 and "norm" not in k:
                dense.append(path)
            stored[k] = (st, mq.to_storage(a, dtype))
    for path, entry in overrides.items():
        quant[path] = entry
    return stored, quant, modules, dense


def dequantized_f32(stored, modules):
    """What an engine computes with: scales * q + biases in float32 from the stored
    scales/biases, every other tensor as stored, upcast. mlx names -> float32."""
    out = {}
    for k, (dt, a) in stored.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        path = k[:-len(".weight")] if k.endswith(".weight") else None
        if path in modules:
            bits, group = modules[path]
            sdt, s = stored[path + ".scales"]
            _, b = stored[path + ".biases"]
            cols = a.shape[-1] * 32 // bits
            w = mq.dequantize(a.reshape(-1, a.shape[-1]), s.reshape(-1, s.shape[-1]),
                              b.reshape(-1, b.shape[-1]), group, bits,
                              {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}[sdt])
            out[k] = w.reshape(list(a.shape[:-1]) + [cols])
        else:
            out[k] = to_f32(dt, a)
    return out


def total_parameters(stored, modules):
    """mlx_lm.utils.get_total_parameters: a quantized weight counts its logical size,
    scales and biases nothing."""
    n = 0
    for k, (dt, a) in stored.items():
        path = k.rsplit(".", 1)[0]
        if path in modules:
            if k.endswith(".weight"):
                n += a.size * 32 // modules[path][0]
            continue
        n += a.size
    return n


def write_mlx_folder(d, config, stored, quant, modules, dtype, side_dir=None):
    """config.json (save_config: sorted top level, indent 4), model.safetensors with
    {"format": "mlx"}, model.safetensors.index.json (save_model), side files copied."""
    os.makedirs(d, exist_ok=True)
    cfg = copy.deepcopy(config)
    cfg.pop("_name_or_path", None)
    cfg["quantization"] = quant
    cfg["quantization_config"] = quant
    for key in ("torch_dtype", "dtype"):
        if key in cfg:
            cfg[key] = dtype
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(sorted(cfg.items())), f, indent=4)
    write_safetensors(os.path.join(d, "model.safetensors"), stored, {"format": "mlx"})
    index = {"metadata": {"total_size": sum(a.nbytes for _, a in stored.values()),
                          "total_parameters": total_parameters(stored, modules)},
             "weight_map": {k: "model.safetensors" for k in sorted(stored)}}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=4)
    if side_dir:
        for name in ("generation_config.json", "tokenizer.json", "tokenizer_config.json",
                     "special_tokens_map.json", "chat_template.jinja"):
            if os.path.exists(os.path.join(side_dir, name)):
                shutil.copy(os.path.join(side_dir, name), d)


def convert_dense_folder(dense_dir, out_dir, spec):
    """The numpy pipeline on a dense HF folder: returns (config, stored, quant, modules, dense,
    dequantized HF-named float32 tensors)."""
    config = json.load(open(os.path.join(dense_dir, "config.json")))
    hf = {k: to_f32(dt, a) for k, (dt, a) in read_folder(dense_dir).items()}
    mlx = sanitize(hf, config)
    stored, quant, modules, dense = quantize_tensors(mlx, spec)
    write_mlx_folder(out_dir, config, stored, quant, modules, spec["dtype"], side_dir=dense_dir)
    deq = unsanitize(dequantized_f32(stored, modules), config)
    return config, stored, quant, modules, dense, deq


# ---- the torch part ---------------------------------------------------------------------------

class EosInGreedy(Exception):
    """The greedy continuation holds EOS: re-seed, so an engine that stops at EOS by default
    still produces all NEW_TOKENS."""


def build_reseeding(out_root, name, tries=20):
    for attempt in range(tries):
        try:
            return build(out_root, name, attempt)
        except EosInGreedy:
            print(name, "greedy output holds EOS; re-seeding")
    raise RuntimeError("%s: no seed in %d tries keeps EOS out of the greedy output" % (name, tries))


def build(out_root, name, attempt=0):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig, MixtralConfig
    import make_fixtures as mf

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    spec = SPECS[name]
    cls = {"llama": LlamaConfig, "mixtral": MixtralConfig}[spec["arch"]]
    seed = sum(map(ord, name)) + 1000 * attempt
    torch.manual_seed(seed)
    cfg = cls(**base_config(spec["arch"], spec.get("cfg")))
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    mf.perturb(model, seed)
    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    work = tempfile.mkdtemp(prefix="lmc-quant-")
    try:
        dense_dir = os.path.join(work, "dense")
        model.save_pretrained(dense_dir, safe_serialization=True)
        config, stored, quant, modules, dense, deq = convert_dense_folder(dense_dir, d, spec)

        # the reference: the dequantized weights as a float32 HF folder, reloaded
        ref_dir = os.path.join(work, "ref")
        os.makedirs(ref_dir)
        shutil.copy(os.path.join(dense_dir, "config.json"), ref_dir)
        write_safetensors(os.path.join(ref_dir, "model.safetensors"),
                          {k: ("F32", v) for k, v in deq.items()}, {"format": "pt"})
        ref, info = AutoModelForCausalLM.from_pretrained(
            ref_dir, torch_dtype=torch.float32, attn_implementation="eager",
            output_loading_info=True)
        ref.eval()
        missing = [k for k in info.get("missing_keys", [])
                   if not (config.get("tie_word_embeddings") and k.startswith("lm_head."))]
        unexpected = list(info.get("unexpected_keys", []))
        mismatched = [str(x) for x in info.get("mismatched_keys", [])]
        if missing or unexpected or mismatched:
            raise RuntimeError("reference reload: missing %s unexpected %s mismatched %s"
                               % (missing, unexpected, mismatched))
        # the reloaded parameters are the dequantized values
        sd = ref.state_dict()
        probe = "model.embed_tokens.weight"
        if not np.array_equal(sd[probe].numpy(), deq[probe]):
            raise RuntimeError("reference reload changed " + probe)

        dense_model = AutoModelForCausalLM.from_pretrained(
            dense_dir, torch_dtype=torch.float32, attn_implementation="eager")
        dense_model.eval()
        g = torch.Generator().manual_seed(seed + 1)
        prompt = [1] + torch.randint(3, VOCAB, (PROMPT_LEN - 1,), generator=g).tolist()
        with torch.no_grad():
            ids = torch.tensor([prompt])
            logits = ref(input_ids=ids, use_cache=False).logits[0].float()
            float_logits = dense_model(input_ids=ids, use_cache=False).logits[0].float()
            toks, margins = mf.greedy(ref, prompt, NEW_TOKENS)
            if cfg.eos_token_id in toks:
                raise EosInGreedy(name)
            nocache = mf.nocache_greedy(ref, prompt, NEW_TOKENS)
        vs_float = float(torch.linalg.norm(logits - float_logits) / torch.linalg.norm(float_logits))
        top2 = torch.topk(logits, 2, dim=-1).values
        logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
        qinfo = {"bits": spec["bits"], "group_size": spec["group_size"],
                 "scales_dtype": spec["dtype"], "mode": "affine",
                 "config_has_mode_key": spec.get("mode_key", True),
                 "n_quantized": len(modules),
                 "unquantized_linear_or_embedding": dense,
                 "per_module": {k: v for k, v in quant.items()
                                if k not in ("bits", "group_size", "mode")},
                 "modules": {k: {"bits": b, "group_size": gs} for k, (b, gs) in modules.items()}}
        expect = {
            "name": name,
            "arch": cfg.architectures[0] if cfg.architectures else type(model).__name__,
            "model_type": cfg.model_type,
            "layout": "mlx",
            "quant": qinfo,
            "weights_dtype": spec["dtype"],
            "prompt_tokens": prompt,
            "greedy_tokens": toks,
            "n_new_tokens": NEW_TOKENS,
            "logits_file": "logits.f32",
            "logits_shape": list(logits.shape),
            "atol_hint": 1e-2,
            "rtol_l2_hint": RTOL_L2_HINT,
            "notes": spec.get("notes", ""),
            "checks": {
                "min_top2_margin_prompt": float((top2[:, 0] - top2[:, 1]).min()),
                "min_top2_margin_greedy": min(margins),
                "nocache_greedy_equal": nocache == toks,
                "vs_float_model_rel_l2": vs_float,
                "reference_reload_missing_unexpected": [missing, unexpected],
            },
            "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                          "numpy": np.__version__,
                          "quantizer": "tests/reference/mlx_quant.py (mlx CPU kernel)",
                          "precision": "float32, eager attention, CPU"},
        }
        json.dump(expect, open(os.path.join(d, "expect.json"), "w"), indent=1)
        print("%-24s ok  quantized %d modules, vs float rel_l2 %.3g, nocache_equal %s"
              % (name, len(modules), vs_float, nocache == toks))
        return {"name": name, "dir": name, "arch": expect["arch"], "model_type": cfg.model_type,
                "layout": "mlx", "quant": {"bits": spec["bits"], "group_size": spec["group_size"],
                                           "scales_dtype": spec["dtype"], "mode": "affine"},
                "weights_dtype": spec["dtype"], "prompt_len": PROMPT_LEN}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main_build(out, names):
    os.makedirs(out, exist_ok=True)
    entries, failed = [], []
    for n in names:
        try:
            entries.append(build_reseeding(out, n))
        except Exception:  # noqa: BLE001 - one model failing must not stop the others
            traceback.print_exc()
            failed.append(n)
            shutil.rmtree(os.path.join(out, n), ignore_errors=True)
    man_path = os.path.join(out, "manifest.json")
    man = {"set": "lmc-quant-fixtures", "format_version": 1, "models": []}
    if os.path.exists(man_path):
        man = json.load(open(man_path))
    keep = [m for m in man["models"] if m["name"] not in names]
    man["models"] = sorted(keep + entries, key=lambda m: m["name"])
    try:
        import torch
        import transformers
        man["generator"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                            "precision": "float32, eager attention, CPU"}
    except ImportError:
        pass
    json.dump(man, open(man_path, "w"), indent=1)
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    print("summary: %d of %d built, %d failed%s; %s holds %.2f MB"
          % (len(entries), len(names), len(failed), (" (" + ", ".join(failed) + ")") if failed else "",
             out, size / 1e6))
    return 0 if not failed else 1


# ---- self test without torch ------------------------------------------------------------------

def selftest(lmc=None):
    """Every non-torch part on the dense fixtures: quantize -> write -> read back ->
    dequantize, unsanitize(sanitize(x)) == x, the folder layout, and (with lmc) byte identity
    with `lmc convert` for the uniform specs."""
    fixtures = os.path.join(ROOT, "tests", "fixtures", "models")
    moe = "/work/shared/conformance/mixtral-hf"
    failures = 0
    work = tempfile.mkdtemp(prefix="lmc-quant-selftest-")
    try:
        cases = [("llama-f32", n) for n in SPECS if SPECS[n]["arch"] == "llama"]
        if os.path.isdir(moe):
            cases += [(moe, n) for n in SPECS if SPECS[n]["arch"] == "mixtral"]
        for src, name in cases:
            spec = dict(SPECS[name])
            if spec.get("cfg", {}).get("tie_word_embeddings"):
                src = "llama-f32-tied"
            dense_dir = src if os.path.isabs(src) else os.path.join(fixtures, src)
            out = os.path.join(work, name)
            try:
                config, stored, quant, modules, dense, deq = convert_dense_folder(dense_dir, out, spec)
                back = read_folder(out)
                assert sorted(back) == sorted(stored), "read back: key sets differ"
                for k, (dt, a) in stored.items():
                    assert back[k][0] == dt and np.array_equal(back[k][1], a), k
                meta = json.loads(open(os.path.join(out, "model.safetensors"), "rb").read()[8:][
                    :struct.unpack("<Q", open(os.path.join(out, "model.safetensors"), "rb").read(8))[0]])
                assert meta["__metadata__"] == {"format": "mlx"}
                c = json.load(open(os.path.join(out, "config.json")))
                assert c["quantization"] == c["quantization_config"] == quant
                hf = {k: to_f32(dt, a) for k, (dt, a) in read_folder(dense_dir).items()}
                assert sorted(unsanitize(sanitize(hf, config), config)) == sorted(
                    k for k in hf if not (config.get("tie_word_embeddings") and k.startswith("lm_head.")))
                assert sorted(deq) == sorted(unsanitize(sanitize(hf, config), config))
                worst = 0.0
                for k, w in deq.items():
                    ref = hf[k]
                    worst = max(worst, float(np.linalg.norm(w - ref) / (np.linalg.norm(ref) + 1e-30)))
                    p = k[:-7] if k.endswith(".weight") else None
                    if p in modules or "experts" in k:
                        continue
                    # dense tensors: exactly the dtype rounding of the source
                    assert np.array_equal(w, mq.round_to_dtype(ref, spec["dtype"])), k
                for p, (bits, group) in modules.items():
                    assert stored[p + ".weight"][1].shape[-1] * 32 // bits == \
                        stored[p + ".scales"][1].shape[-1] * group, p
                for p, e in spec.get("overrides", {}).items():
                    assert (p in modules) == (e is not False), p
                    if e:
                        assert modules[p] == (e["bits"], e["group_size"]), p
                msg = "%d quantized, dense %s, worst weight rel err %.3g" % (
                    len(modules), dense, worst)
                if lmc:  # the folder loads and runs in lmc (per-module overrides included)
                    subprocess.run([lmc, "logits", "--model", out, "--tokens", "1,5,9,200",
                                    "--out", os.path.join(work, name + ".f32")], check=True)
                if lmc and not spec.get("overrides"):
                    lo = os.path.join(work, name + "-lmc")
                    subprocess.run([lmc, "convert", "--model", dense_dir, "--out", lo, "-q",
                                    "--q-bits", str(spec["bits"]), "--q-group-size",
                                    str(spec["group_size"]), "--dtype",
                                    {"float16": "f16", "bfloat16": "bf16"}[spec["dtype"]]],
                                   check=True)
                    same = open(os.path.join(lo, "model.safetensors"), "rb").read() == \
                        open(os.path.join(out, "model.safetensors"), "rb").read()
                    same_idx = json.load(open(os.path.join(lo, "model.safetensors.index.json"))) == \
                        json.load(open(os.path.join(out, "model.safetensors.index.json")))
                    assert same, "model.safetensors differs from lmc convert's"
                    assert same_idx, "index differs from lmc convert's"
                    msg += "; byte-identical to lmc convert"
                print("selftest %-24s ok  %s" % (name, msg))
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                print("selftest %-24s FAILED" % name)
                failures += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("selftest summary: %d of %d ok" % (len(cases) - failures, len(cases)))
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    if args and args[0] == "--selftest":
        lmc = args[args.index("--lmc") + 1] if "--lmc" in args else None
        return selftest(lmc)
    if not args:
        print(__doc__)
        return 2
    out, names = args[0], args[1:] or list(SPECS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        print("unknown models: %s (known: %s)" % (unknown, ", ".join(SPECS)))
        return 2
    return main_build(out, names)


if __name__ == "__main__":
    sys.exit(main())
