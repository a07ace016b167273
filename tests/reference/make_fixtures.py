#!/usr/bin/env python3
"""Builds the project's tiny reference models with transformers and records their outputs.

Run where torch and transformers are installed (the GPU machine lent to sessions; CPU works):
  python3 tests/reference/make_fixtures.py OUTDIR [NAME ...]
Each OUTDIR/NAME is a model folder written by save_pretrained(safe_serialization=True), plus
  expect.json  prompt_tokens, greedy_tokens (16, argmax, KV cache, EOS not a stop), tolerances
  logits.f32   raw little-endian float32 [T, V]: next-token logits after prompt[0..t]
and OUTDIR/manifest.json lists them (the format of ../shared/conformance, so
../shared/tools/check_reference.py --set OUTDIR works on it).

References are computed in float32 with eager attention on the CPU. A bf16 model is saved in
bf16 and its reference computed from those bf16 values upcast to float32, the way an engine
with float32 activations computes it.
"""
import json, os, sys

import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, MixtralConfig

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

VOCAB = 256
PROMPT_LEN = 24
NEW_TOKENS = 16


def base_llama(**kw):
    cfg = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
               rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=1, eos_token_id=2,
               pad_token_id=0, tie_word_embeddings=False, initializer_range=0.08)
    cfg.update(kw)
    return cfg


# name -> (config class, config kwargs, dtype, save kwargs, notes)
MODELS = {
    "llama-f32": (LlamaConfig, base_llama(), torch.float32, {}, "untied lm_head, GQA 4/2"),
    "llama-f32-tied": (LlamaConfig, base_llama(tie_word_embeddings=True), torch.float32, {},
                       "tied embeddings, no lm_head tensor"),
    "llama-bf16": (LlamaConfig, base_llama(), torch.bfloat16, {}, "weights stored as bf16"),
    "llama-bf16-tied": (LlamaConfig, base_llama(tie_word_embeddings=True), torch.bfloat16, {},
                        "bf16 and tied"),
    "llama-f16": (LlamaConfig, base_llama(num_key_value_heads=1), torch.float16, {},
                  "weights stored as f16, MQA"),
    "llama-sharded": (LlamaConfig, base_llama(num_hidden_layers=3), torch.float32,
                      {"max_shard_size": "150KB"}, "sharded with model.safetensors.index.json"),
    "llama3-rope": (LlamaConfig, base_llama(rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16}, rope_theta=500000.0), torch.float32, {},
        "llama3 rope scaling with small original_max_position_embeddings"),
    "llama-linear-rope": (LlamaConfig, base_llama(rope_scaling={"rope_type": "linear",
                                                                 "factor": 4.0}),
                          torch.float32, {}, "linear rope scaling"),
    "llama-bias": (LlamaConfig, base_llama(attention_bias=True, mlp_bias=True, head_dim=24),
                   torch.float32, {}, "attention and MLP biases, head_dim != hidden/heads"),
    "mistral-sliding": (MistralConfig, dict(base_llama(), sliding_window=7), torch.float32, {},
                        "sliding_window 7 < prompt length 24"),
    "mistral-bf16": (MistralConfig, dict(base_llama(tie_word_embeddings=True), sliding_window=None),
                     torch.bfloat16, {}, "bf16, no sliding window, tied"),
    "mixtral-f32": (MixtralConfig, dict(base_llama(), num_local_experts=4, num_experts_per_tok=2,
                                        sliding_window=None),
                    torch.float32, {}, "MoE, 4 experts top-2, HF per-expert tensors"),
}


def perturb(model, seed):
    """Random init gives norm weights of exactly 1 and zero biases; make them random so a
    wrong norm or bias would show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))


def greedy(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    toks = []
    nxt = int(out.logits[0, -1].argmax())
    margins = []
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
    seq = list(prompt)
    toks = []
    for _ in range(n):
        lg = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1]
        t = int(lg.argmax())
        toks.append(t)
        seq.append(t)
    return toks


def build(out_root, name):
    """Builds NAME; re-seeds until the greedy continuation holds no EOS id, so that an
    engine stopping at EOS by default still produces all NEW_TOKENS."""
    seed = sum(map(ord, name))
    for attempt in range(20):
        entry, toks = build_seed(out_root, name, seed + 1000 * attempt)
        if MODELS[name][1].get("eos_token_id") not in toks:
            return entry
        print(name, "greedy output holds EOS; re-seeding")
    return entry


def build_seed(out_root, name, seed):
    cls, kw, dtype, save_kw, notes = MODELS[name]
    torch.manual_seed(seed)
    cfg = cls(**kw)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    perturb(model, seed)
    model = model.to(dtype)
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        import shutil
        shutil.rmtree(d)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True, **save_kw)

    # The reference: reload what was written, in float32.
    ref = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32,
                                               attn_implementation="eager")
    ref.eval()
    g = torch.Generator().manual_seed(seed + 1)
    prompt = [1] + torch.randint(3, VOCAB, (PROMPT_LEN - 1,), generator=g).tolist()
    with torch.no_grad():
        logits = ref(input_ids=torch.tensor([prompt]), use_cache=False).logits[0].float()
        toks, margins = greedy(ref, prompt, NEW_TOKENS)
        nocache = nocache_greedy(ref, prompt, NEW_TOKENS)
    top2 = torch.topk(logits, 2, dim=-1).values
    logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    expect = {
        "name": name,
        "arch": cfg.architectures[0] if cfg.architectures else type(model).__name__,
        "model_type": cfg.model_type,
        "layout": "hf",
        "quant": None,
        "weights_dtype": str(dtype).replace("torch.", ""),
        "prompt_tokens": prompt,
        "greedy_tokens": toks,
        "n_new_tokens": NEW_TOKENS,
        "logits_file": "logits.f32",
        "logits_shape": list(logits.shape),
        "atol_hint": 1e-3,
        "rtol_l2_hint": 1e-4,
        "notes": notes,
        "checks": {
            "min_top2_margin_prompt": float((top2[:, 0] - top2[:, 1]).min()),
            "min_top2_margin_greedy": min(margins),
            "nocache_greedy_equal": nocache == toks,
        },
        "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "precision": "float32, eager attention, CPU"},
    }
    json.dump(expect, open(os.path.join(d, "expect.json"), "w"), indent=1)
    print(name, "ok", "nocache_equal", nocache == toks, "margin", expect["checks"])
    return {"name": name, "dir": name, "arch": expect["arch"], "model_type": cfg.model_type,
            "layout": "hf", "quant": None, "weights_dtype": expect["weights_dtype"],
            "prompt_len": PROMPT_LEN}, toks


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    entries = [build(out, n) for n in names]
    man_path = os.path.join(out, "manifest.json")
    man = {"set": "lmc-fixtures", "format_version": 1, "models": []}
    if os.path.exists(man_path):
        man = json.load(open(man_path))
    keep = [m for m in man["models"] if m["name"] not in names]
    man["models"] = sorted(keep + entries, key=lambda m: m["name"])
    json.dump(man, open(man_path, "w"), indent=1)


if __name__ == "__main__":
    main()
