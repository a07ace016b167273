#!/usr/bin/env python3
"""Reference fixtures for qwen3, gemma2, gemma3_text and starcoder2, in HF and MLX layouts.

Run where torch, transformers (5.x), numpy and safetensors are installed (no internet, no mlx):
  python3 tests/reference/make_arch_fixtures_a.py OUTDIR [NAME ...]
e.g. OUTDIR = tests/fixtures/arch-a. Each OUTDIR/NAME is a model folder plus
  expect.json  prompt_tokens (24, longer than every sliding window of 8), greedy_tokens (16,
               argmax, KV cache, EOS not a stop), tolerances, self-checks
  logits.f32   raw little-endian float32 [T, V]: next-token logits after prompt[0..t]
and OUTDIR/manifest.json lists them (the format of ../shared/conformance).

Models (hidden 64, heads 4, kv heads 2, head_dim 16, vocab 256, sliding_window 8 where the
architecture has one, both sliding and global layers where it mixes them):
  qwen3-f32            q_norm/k_norm, untied head, use_sliding_window with max_window_layers 1
  gemma2-bf16          bf16 weights, small attention/final softcaps, query_pre_attn_scalar 24
  gemma3-f32           3 layers (sliding, sliding, full), local rope 10000 vs global 1e6 with
                       linear scaling, final softcap, query_pre_attn_scalar 24
  starcoder2-f32       LayerNorm with bias, biased c_fc/c_proj and q/k/v/o, sliding window on
                       every layer, tied
and for each NAME-mlx-4bit-g64: the same weights in the layout of an mlx-community repository
(mlx-lm convert -q --q-bits 4 --q-group-size 64), quantized with tests/reference/mlx_quant.py.

References are float32, eager attention, CPU. A bf16 model's reference uses the stored bf16
values upcast; an MLX model's uses scales*q+biases in float32 from the stored float16 scales and
biases and the stored float16 values of every other tensor. Each model is built independently:
a failure is reported and the others still run; the summary at the end lists all.
"""
import json, os, shutil, sys, traceback

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlx_quant  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

VOCAB = 256
PROMPT_LEN = 24
NEW_TOKENS = 16
WINDOW = 8
BOS, EOS, PAD = 1, 2, 0
BITS, GROUP = 4, 64
SEED_TRIES = 24


def common(**kw):
    cfg = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16,
               max_position_embeddings=256, bos_token_id=BOS, eos_token_id=EOS,
               pad_token_id=PAD, initializer_range=0.08)
    cfg.update(kw)
    return cfg


def qwen3_config():
    from transformers import Qwen3Config
    return Qwen3Config(**common(rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
                                use_sliding_window=True, sliding_window=WINDOW,
                                max_window_layers=1))


def gemma2_config():
    from transformers import Gemma2Config
    return Gemma2Config(**common(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
                                 hidden_activation="gelu_pytorch_tanh", sliding_window=WINDOW,
                                 query_pre_attn_scalar=24, attn_logit_softcapping=5.0,
                                 final_logit_softcapping=10.0))


GEMMA3_TYPES = ["sliding_attention", "sliding_attention", "full_attention"]


def gemma3_config():
    from transformers import Gemma3TextConfig
    kw = common(num_hidden_layers=3, rms_norm_eps=1e-6, tie_word_embeddings=True,
                hidden_activation="gelu_pytorch_tanh", sliding_window=WINDOW,
                query_pre_attn_scalar=24, final_logit_softcapping=10.0,
                layer_types=list(GEMMA3_TYPES))
    nested = {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
              "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    try:  # transformers 5 spelling
        cfg = Gemma3TextConfig(**kw, rope_parameters=nested)
    except Exception:  # classic spelling
        cfg = Gemma3TextConfig(**kw, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                               rope_scaling={"rope_type": "linear", "factor": 2.0})
    return cfg


def starcoder2_config():
    from transformers import Starcoder2Config
    return Starcoder2Config(**common(norm_epsilon=1e-5, rope_theta=100000.0,
                                     tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh",
                                     use_bias=True, sliding_window=WINDOW))


# name -> (config builder, storage dtype, notes)
MODELS = {
    "qwen3-f32": (qwen3_config, torch.float32,
                  "q_norm/k_norm before rope, untied head, layer 1 sliding (max_window_layers 1)"),
    "gemma2-bf16": (gemma2_config, torch.bfloat16,
                    "bf16; layer 0 sliding, 1 global; attn softcap 5, final softcap 10, "
                    "query_pre_attn_scalar 24, sandwich norms"),
    "gemma3-f32": (gemma3_config, torch.float32,
                   "layers sliding, sliding, full; local rope 1e4, global 1e6 with linear "
                   "factor 2; q/k norms; final softcap 10; query_pre_attn_scalar 24"),
    "starcoder2-f32": (starcoder2_config, torch.float32,
                       "LayerNorm with bias, biased MLP and attention, sliding window 8 on every "
                       "layer, tied"),
}


def check_sizes(cfg):
    """A config class that silently dropped a keyword would build a different model."""
    want = common()
    for key in ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads",
                "head_dim", "bos_token_id", "eos_token_id"):
        if getattr(cfg, key, None) != want[key]:
            raise RuntimeError("config %s = %r, expected %r" % (key, getattr(cfg, key, None),
                                                                want[key]))


def from_config(cfg):
    check_sizes(cfg)
    cfg._attn_implementation = "eager"
    try:
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    except TypeError:
        return AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)


def from_pretrained(d):
    try:
        return AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                    attn_implementation="eager")
    except TypeError:
        return AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32,
                                                    attn_implementation="eager")


def perturb(model, seed):
    """Random init gives norm weights of 1 (or 0 for gemma's 1 + w) and zero biases; make them
    random so a wrong norm or bias would show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))


def greedy(model, prompt, n):
    out = model(input_ids=torch.tensor([prompt]), use_cache=True)
    past = out.past_key_values
    toks, margins = [], []
    nxt = int(out.logits[0, -1].argmax())
    for _ in range(n):
        toks.append(nxt)
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        lg = out.logits[0, -1]
        top = torch.topk(lg, 2).values
        margins.append(float(top[0] - top[1]))
        nxt = int(lg.argmax())
    return toks, margins


def nocache_greedy(model, prompt, n):
    seq, toks = list(prompt), []
    for _ in range(n):
        t = int(model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].argmax())
        toks.append(t)
        seq.append(t)
    return toks


def reference(model, prompt):
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt]), use_cache=False).logits[0].float()
        toks, margins = greedy(model, prompt, NEW_TOKENS)
        nocache = nocache_greedy(model, prompt, NEW_TOKENS)
    top2 = torch.topk(logits, 2, dim=-1).values
    return {"logits": logits, "greedy": toks, "checks": {
        "min_top2_margin_prompt": float((top2[:, 0] - top2[:, 1]).min()),
        "min_top2_margin_greedy": min(margins),
        "nocache_greedy_equal": nocache == toks}}


def config_checks(name, model):
    """What the config must have produced, so a silently ignored key fails here."""
    cfg = model.config
    out = {"sliding_window": getattr(cfg, "sliding_window", None),
           "layer_types": list(getattr(cfg, "layer_types", None) or [])}
    if name.startswith("gemma3"):
        if out["layer_types"] != GEMMA3_TYPES:
            raise RuntimeError("gemma3 layer_types came out as %r" % out["layer_types"])
        rot = model.model.rotary_emb
        loc = getattr(rot, "sliding_attention_inv_freq", None)
        glo = getattr(rot, "full_attention_inv_freq", None)
        if loc is None or glo is None:
            raise RuntimeError("gemma3 rotary embedding has no per-layer-type inv_freq")
        base = 1.0 / (1e4 ** (torch.arange(0, 16, 2, dtype=torch.float32) / 16))
        want_glo = 1.0 / (1e6 ** (torch.arange(0, 16, 2, dtype=torch.float32) / 16)) / 2.0
        out["rope_check"] = {
            "local_is_1e4_default": bool(torch.allclose(loc.float().cpu(), base, rtol=1e-6)),
            "global_is_1e6_linear2": bool(torch.allclose(glo.float().cpu(), want_glo, rtol=1e-6))}
        if not all(out["rope_check"].values()):
            raise RuntimeError("gemma3 rope frequencies are not as configured: %r" % out)
    if out["sliding_window"] != WINDOW:
        raise RuntimeError("%s: sliding_window came out as %r" % (name, out["sliding_window"]))
    return out


# ---- MLX layout -------------------------------------------------------------------

def mlx_tensors(state, tied):
    """HF state dict (float tensors) -> (tensors as mlx-lm writes them, quantized module names,
    unquantized Linear/Embedding names). For these four architectures mlx-lm's sanitize keeps
    HF's key names and only drops lm_head.weight when tied (gemma2/gemma3/starcoder2 models
    have no lm_head then)."""
    out, quantized, dense = {}, [], []
    for key in sorted(state):
        if tied and key == "lm_head.weight":
            continue
        w = state[key].detach().float().cpu().numpy()
        module = key[: -len(".weight")] if key.endswith(".weight") else None
        is_matrix = module is not None and w.ndim == 2 and "norm" not in key
        if is_matrix and w.shape[-1] % GROUP == 0:
            q, s, b = mlx_quant.quantize(w, GROUP, BITS, "float16")
            out[key] = q
            out[module + ".scales"] = s
            out[module + ".biases"] = b
            quantized.append(module)
        else:
            if is_matrix:
                dense.append(module)
            out[key] = w.astype(np.float16)
    return out, quantized, dense


def dequantized_state(tensors, quantized):
    sd = {}
    for key, v in tensors.items():
        if key.endswith(".scales") or key.endswith(".biases"):
            continue
        module = key[: -len(".weight")] if key.endswith(".weight") else None
        if module in quantized:
            w = mlx_quant.dequantize(v, tensors[module + ".scales"], tensors[module + ".biases"],
                                     GROUP, BITS, "float16")
        else:
            w = v.astype(np.float32)
        sd[key] = torch.from_numpy(np.ascontiguousarray(w))
    return sd


def write_mlx(hf_dir, d, tensors):
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "mlx"})
    total_size = int(sum(v.nbytes for v in tensors.values()))
    params = 0
    for k, v in tensors.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        n = int(np.prod(v.shape))
        params += n * 32 // BITS if v.dtype == np.uint32 else n
    index = {"metadata": {"total_size": total_size, "total_parameters": params},
             "weight_map": {k: "model.safetensors" for k in sorted(tensors)}}
    json.dump(index, open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=4)
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    q = {"group_size": GROUP, "bits": BITS}
    cfg["quantization"] = dict(q)
    cfg["quantization_config"] = dict(q)
    if "dtype" in cfg:
        cfg["dtype"] = "float16"
    cfg["torch_dtype"] = "float16"
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=4, sort_keys=True)
    gen = os.path.join(hf_dir, "generation_config.json")
    if os.path.exists(gen):
        shutil.copy(gen, os.path.join(d, "generation_config.json"))


# ---- one model in both layouts ---------------------------------------------------------

def write_case(d, name, cfg, ref, layout, quant, weights_dtype, notes, seed, extra_checks):
    ref["logits"].numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    checks = dict(ref["checks"])
    checks.update(extra_checks)
    expect = {
        "name": name,
        "arch": cfg.architectures[0] if getattr(cfg, "architectures", None) else None,
        "model_type": cfg.model_type,
        "layout": layout,
        "quant": quant,
        "weights_dtype": weights_dtype,
        "prompt_tokens": ref["prompt"],
        "greedy_tokens": ref["greedy"],
        "n_new_tokens": NEW_TOKENS,
        "logits_file": "logits.f32",
        "logits_shape": list(ref["logits"].shape),
        "atol_hint": 2e-3 if layout == "mlx" else 1e-3,
        "rtol_l2_hint": 1e-3 if layout == "mlx" else 1e-4,
        "notes": notes,
        "seed": seed,
        "checks": checks,
        "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "precision": "float32, eager attention, CPU"},
    }
    json.dump(expect, open(os.path.join(d, "expect.json"), "w"), indent=1)
    return {"name": name, "dir": name, "arch": expect["arch"], "model_type": cfg.model_type,
            "layout": layout, "quant": quant, "weights_dtype": weights_dtype,
            "prompt_len": PROMPT_LEN}


def attempt(out_root, name, seed):
    """Builds NAME and its MLX copy from seed; returns (entries, has_eos, min margin)."""
    make_cfg, dtype, notes = MODELS[name]
    torch.manual_seed(seed)
    cfg = make_cfg()
    model = from_config(cfg)
    perturb(model, seed)
    model = model.to(dtype)
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model.save_pretrained(d, safe_serialization=True)

    g = torch.Generator().manual_seed(seed + 1)
    prompt = [BOS] + torch.randint(3, VOCAB, (PROMPT_LEN - 1,), generator=g).tolist()

    hf = from_pretrained(d)
    checks = config_checks(name, hf)
    ref = reference(hf, prompt)
    ref["prompt"] = prompt
    wdt = str(dtype).replace("torch.", "")
    entries = [write_case(d, name, hf.config, ref, "hf", None, wdt, notes, seed, checks)]

    # MLX copy: from the stored values (bf16 upcast for a bf16 model).
    state = {k: v.float() for k, v in hf.state_dict().items()}
    tensors, quantized, dense = mlx_tensors(state, tied)
    mname = name.rsplit("-", 1)[0] + "-mlx-%dbit-g%d" % (BITS, GROUP)
    md = os.path.join(out_root, mname)
    shutil.rmtree(md, ignore_errors=True)
    write_mlx(d, md, tensors)
    sd = dequantized_state(tensors, quantized)
    if tied:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()
    mref_model = from_config(hf.config)
    missing, unexpected = mref_model.load_state_dict(sd, strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise RuntimeError("MLX reference: missing %r unexpected %r" % (missing, unexpected))
    mref = reference(mref_model, prompt)
    mref["prompt"] = prompt
    diff = (mref["logits"] - ref["logits"]).norm() / ref["logits"].norm()
    agree = float((mref["logits"].argmax(-1) == ref["logits"].argmax(-1)).float().mean())
    quant = {"bits": BITS, "group_size": GROUP, "scales_dtype": "float16", "mode": "affine",
             "config_has_mode_key": False, "n_quantized": len(quantized),
             "unquantized_linear_or_embedding": dense}
    mchecks = dict(checks)
    mchecks.update({"vs_float_model_rel_l2": float(diff), "vs_float_model_argmax_agree": agree})
    mnotes = ("expected outputs computed in float32 by transformers from the dequantized weights "
              "(scale*q+bias with the stored float16 scales/biases) and the stored float16 values "
              "of all other tensors. " + notes)
    entries.append(write_case(md, mname, hf.config, mref, "mlx", quant, "float16", mnotes, seed,
                              mchecks))
    greedy_all = ref["greedy"] + mref["greedy"]
    margin = min(ref["checks"]["min_top2_margin_greedy"], mref["checks"]["min_top2_margin_greedy"],
                 ref["checks"]["min_top2_margin_prompt"], mref["checks"]["min_top2_margin_prompt"])
    ok_cache = ref["checks"]["nocache_greedy_equal"] and mref["checks"]["nocache_greedy_equal"]
    return entries, EOS in greedy_all, margin, ok_cache, float(diff)


def build(out_root, name):
    """Tries seeds until neither greedy output holds EOS, preferring clear top-2 margins."""
    base = sum(map(ord, name))
    best = None
    for i in range(SEED_TRIES):
        seed = base + 1000 * i
        entries, has_eos, margin, ok_cache, mlx_rel = attempt(out_root, name, seed)
        if not has_eos and ok_cache and margin > 1e-3:
            return entries, seed, margin, mlx_rel
        if not has_eos and ok_cache and (best is None or margin > best[1]):
            best = (seed, margin)
    if best is None:
        raise RuntimeError("no seed in %d tries gives greedy output without EOS (and equal "
                           "with and without cache)" % SEED_TRIES)
    entries, _, margin, _, mlx_rel = attempt(out_root, name, best[0])
    return entries, best[0], margin, mlx_rel


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    entries, summary = [], []
    for name in names:
        if name not in MODELS:
            summary.append((name, "FAILED", "unknown model (known: %s)" % ", ".join(MODELS)))
            continue
        try:
            es, seed, margin, mlx_rel = build(out, name)
            entries += es
            summary.append((name, "ok", "seed %d, min top-2 margin %.3g, MLX rel_l2 vs float %.3g"
                            % (seed, margin, mlx_rel)))
        except Exception as e:  # one model's failure must not stop the others
            traceback.print_exc()
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)
            shutil.rmtree(os.path.join(out, name.rsplit("-", 1)[0] + "-mlx-%dbit-g%d"
                                       % (BITS, GROUP)), ignore_errors=True)
            summary.append((name, "FAILED", "%s: %s" % (type(e).__name__, e)))

    man_path = os.path.join(out, "manifest.json")
    man = {"set": "lmc-arch-a", "format_version": 1, "models": []}
    if os.path.exists(man_path):
        man = json.load(open(man_path))
    done = {e["name"] for e in entries}
    failed_dirs = set()
    for name, status, _ in summary:
        if status != "ok" and name in MODELS:
            failed_dirs |= {name, name.rsplit("-", 1)[0] + "-mlx-%dbit-g%d" % (BITS, GROUP)}
    keep = [m for m in man["models"] if m["name"] not in done and m["name"] not in failed_dirs]
    man["models"] = sorted(keep + entries, key=lambda m: m["name"])
    man["generator"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                        "precision": "float32, eager attention, CPU"}
    if man["models"]:
        json.dump(man, open(man_path, "w"), indent=1)

    print("\nsummary (%s):" % out)
    for name, status, info in summary:
        print("  %-16s %-7s %s" % (name, status, info))
    size = dir_bytes(out)
    print("  total %.2f MB in %s%s" % (size / 1e6, out, "  (over 4 MB!)" if size > 4e6 else ""))
    return 0 if all(s == "ok" for _, s, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
