#!/usr/bin/env python3
"""transformers' figures for an MLX affine-quantized folder (what `lmc convert
-q` wrote): the weights are dequantized exactly (w = q * scale + bias per
group, in f32) into a LlamaForCausalLM, which then computes the held-out
perplexity (full text and sample) and greedy tokens from the prompts
train.py used. lmc's figures for the same folder must match these (tests/
cli/test_shipped_model.py). Writes OUT/ref-quantized.json.
usage (on the GPU machine): eval_quantized.py --model DIR --heldout DIR_WITH_TEXTS --out OUT"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def dequantize(tensors, config):
    import numpy as np

    q = config["quantization"]
    out = {}
    for name, w in tensors.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            continue
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if base is not None and base + ".scales" in tensors:
            over = config["quantization"].get(base, {})
            bits = over.get("bits", q["bits"]) if isinstance(over, dict) else q["bits"]
            group = over.get("group_size", q["group_size"]) if isinstance(over, dict) else q["group_size"]
            w = w.astype(np.uint32)
            per = 32 // bits
            shifts = (np.arange(per, dtype=np.uint32) * bits)[None, None, :]
            vals = ((w[:, :, None] >> shifts) & ((1 << bits) - 1)).reshape(w.shape[0], -1)
            s = tensors[base + ".scales"].astype(np.float32)
            b = tensors[base + ".biases"].astype(np.float32)
            vals = vals.astype(np.float32).reshape(w.shape[0], -1, group)
            out[name] = (vals * s[:, :, None] + b[:, :, None]).reshape(w.shape[0], -1)
        else:
            out[name] = w.astype(np.float32)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    config = json.load(open(os.path.join(args.model, "config.json")))
    assert 32 % config["quantization"]["bits"] == 0
    weights = dequantize(load_file(os.path.join(args.model, "model.safetensors")), config)
    cfg = LlamaConfig(**{k: v for k, v in config.items() if k not in ("quantization", "quantization_config")})
    model = LlamaForCausalLM(cfg)
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
    missing = [m for m in missing if m != "lm_head.weight" or not cfg.tie_word_embeddings]
    if missing or unexpected:
        raise SystemExit(f"missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model = model.float().cuda().eval()
    tok = AutoTokenizer.from_pretrained(args.model)
    end_id = tok.convert_tokens_to_ids("<|end|>")
    res = {"model": os.path.basename(os.path.normpath(args.model)), "quantization": config["quantization"]}
    for key, fname in (("heldout", "heldout.txt"), ("sample", "heldout-sample.txt")):
        text = open(os.path.join(args.heldout, fname), encoding="utf-8").read()
        ids = tok(text, add_special_tokens=False)["input_ids"]
        p = common.perplexity(model, ids, 0)
        res[key] = {"ppl": p[0], "mean_nll": p[1], "tokens": p[2], "windows": p[3], "ctx": common.PPL_CTX}
    plain = tok(common.PLAIN_PROMPT)["input_ids"]
    res["greedy_plain"] = {"prompt_ids": plain, "ids": common.greedy(model, plain, common.GREEDY_TOKENS)}
    rendered = tok.apply_chat_template([{"role": "user", "content": common.CHAT_PROMPT}],
                                       add_generation_prompt=True, tokenize=False)
    chat = tok(rendered, add_special_tokens=False)["input_ids"]
    res["greedy_chat"] = {"prompt_ids": chat,
                          "ids": common.greedy(model, chat, common.GREEDY_TOKENS, stop_ids=(1, end_id))}
    for k in ("greedy_plain", "greedy_chat"):
        res[k]["text"] = tok.decode(res[k]["ids"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ref-quantized.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
