#!/usr/bin/env python3
"""Trains the model lmc ships (models/kjv-llama-11m-4bit): a Llama of 11M
parameters on the King James Bible (models/train/corpus.sh makes the corpus
from Debian's bible-kjv-text 4.38), with a byte-level BPE tokenizer of 4096
tokens trained by `tokenizers` and a chat template. Writes, under OUT:

  hf-f32/       the model as transformers saves it (f32), with tokenizer.json,
                tokenizer_config.json (chat template), generation_config.json
  ref.json      hyper-parameters, versions, losses, and transformers' figures
                on the f32 model: held-out perplexity (full and sample), the
                sample's token ids, greedy tokens from fixed prompts
  loss.csv, loss.png   the loss curve (train and validation)
  heldout.txt, heldout-sample.txt   the test text (never trained on)

usage (on the GPU machine): python3 models/train/train.py --corpus build/corpus/kjv.txt --out OUT
Reproducible: fixed seed, fixed corpus (sha256 checked), deterministic data
order; GPU kernels may differ in the last bits between runs."""
import argparse
import csv
import hashlib
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CORPUS_SHA256 = "cd45f0c9cedab8e4439bd6486c8952c77cc8b0ecc5d1f6ae3513f2039f47229d"

HP = dict(
    seed=1234,
    vocab_size=4096,
    hidden_size=384,
    intermediate_size=1024,
    num_hidden_layers=6,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=1024,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    seq_len=512,
    batch_size=64,
    steps=450,
    lr=1.5e-3,
    min_lr_ratio=0.1,
    warmup_steps=50,
    weight_decay=0.1,
    beta1=0.9,
    beta2=0.95,
    grad_clip=1.0,
    eval_every=25,
    attention_dropout=0.1,
    chat_fraction=0.25,  # share of verse pairs also seen as a one-turn chat per epoch
    system_fraction=0.3,  # of the chats, those with a system message
)
SYSTEMS = [
    "You are a scribe of the King James Bible.",
    "Answer with the next verse.",
    "Continue the scripture.",
]
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def log(*a):
    print(*a, flush=True)


def train_tokenizer(train_texts, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=HP["vocab_size"],
        min_frequency=2,
        special_tokens=common.SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(train_texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 0)]
    )
    assert tok.get_vocab_size() == HP["vocab_size"], tok.get_vocab_size()
    for i, s in enumerate(common.SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    added = {
        str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for i, s in enumerate(common.SPECIALS)
    }
    cfg = {
        "added_tokens_decoder": added,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        "chat_template": common.CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": HP["max_position_embeddings"],
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return tok


def chat_doc(verses, i, rng):
    msgs = []
    if rng.random() < HP["system_fraction"]:
        msgs.append(("system", rng.choice(SYSTEMS)))
    msgs.append(("user", verses[i]))
    k = rng.choice([1, 1, 2])
    msgs.append(("assistant", " ".join(verses[i + 1 : i + 1 + k])))
    return "<s>" + "".join(f"<|{r}|>\n{c}<|end|>\n" for r, c in msgs) + "</s>"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=HP["steps"])
    args = ap.parse_args()
    HP["steps"] = args.steps
    t_start = time.time()
    import numpy as np
    import tokenizers
    import torch
    import transformers
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    sha = hashlib.sha256(open(args.corpus, "rb").read()).hexdigest()
    if sha != CORPUS_SHA256:
        raise SystemExit(f"corpus sha256 {sha} is not {CORPUS_SHA256} (run models/train/corpus.sh)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    random.seed(HP["seed"])
    np.random.seed(HP["seed"])
    torch.manual_seed(HP["seed"])

    chapters = common.load_chapters(args.corpus)
    train, valid, test = common.split(chapters)
    log(f"chapters: {len(train)} train, {len(valid)} valid, {len(test)} test")
    out = args.out
    hf = os.path.join(out, "hf-f32")
    os.makedirs(hf, exist_ok=True)
    test_text = common.texts_of(test)
    sample_text = common.texts_of(test[: common.SAMPLE_CHAPTERS])
    with open(os.path.join(out, "heldout.txt"), "w") as f:
        f.write(test_text)
    with open(os.path.join(out, "heldout-sample.txt"), "w") as f:
        f.write(sample_text)

    tok = train_tokenizer([common.chapter_text(c) for c in train], hf)
    try:
        hf_tok = AutoTokenizer.from_pretrained(hf)
    except Exception as e:  # noqa: BLE001
        log(f"AutoTokenizer: {e!r}; using PreTrainedTokenizerFast")
        from transformers import PreTrainedTokenizerFast

        hf_tok = PreTrainedTokenizerFast.from_pretrained(hf)
    end_id = tok.token_to_id("<|end|>")

    plain_ids = [tok.encode("<s>" + common.chapter_text(c) + "</s>", add_special_tokens=False).ids
                 for c in train]
    n_plain = sum(map(len, plain_ids))
    log(f"train tokens per epoch (plain): {n_plain}")
    valid_ids = tok.encode(common.texts_of(valid), add_special_tokens=False).ids
    test_ids = tok.encode(test_text, add_special_tokens=False).ids
    sample_ids = tok.encode(sample_text, add_special_tokens=False).ids
    assert hf_tok(sample_text, add_special_tokens=False)["input_ids"] == sample_ids

    rng = random.Random(HP["seed"])
    S, B = HP["seq_len"], HP["batch_size"]

    def epoch_chunks():
        docs = list(plain_ids)
        chats = []
        for c in train:
            v = c[1]
            for i in range(len(v) - 1):
                if rng.random() < HP["chat_fraction"]:
                    chats.append(chat_doc(v, i, rng))
        docs += [e.ids for e in tok.encode_batch(chats, add_special_tokens=False)]
        rng.shuffle(docs)
        flat = np.fromiter((t for d in docs for t in d), dtype=np.int64)
        n = len(flat) // (S + 1)
        chunks = flat[: n * (S + 1)].reshape(n, S + 1)
        perm = np.random.default_rng(rng.randrange(1 << 30)).permutation(n)
        return chunks[perm]

    cfg = LlamaConfig(
        vocab_size=HP["vocab_size"], hidden_size=HP["hidden_size"],
        intermediate_size=HP["intermediate_size"], num_hidden_layers=HP["num_hidden_layers"],
        num_attention_heads=HP["num_attention_heads"], num_key_value_heads=HP["num_key_value_heads"],
        max_position_embeddings=HP["max_position_embeddings"], rope_theta=HP["rope_theta"],
        rms_norm_eps=HP["rms_norm_eps"], tie_word_embeddings=HP["tie_word_embeddings"],
        bos_token_id=0, eos_token_id=1, pad_token_id=2, hidden_act="silu",
        attention_dropout=HP["attention_dropout"],
    )
    model = LlamaForCausalLM(cfg).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"parameters: {n_params}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": HP["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]), fused=True,
    )

    def lr_at(step):
        if step < HP["warmup_steps"]:
            return HP["lr"] * (step + 1) / HP["warmup_steps"]
        p = (step - HP["warmup_steps"]) / max(1, HP["steps"] - HP["warmup_steps"])
        lo = HP["lr"] * HP["min_lr_ratio"]
        return lo + 0.5 * (HP["lr"] - lo) * (1 + math.cos(math.pi * p))

    def valid_nll():
        model.eval()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, mean, _, _ = common.perplexity(model, valid_ids, 0)
        model.train()
        return mean

    curve = []
    best = (float("inf"), -1, None)
    chunks, ci, epoch = epoch_chunks(), 0, 0
    model.train()
    t0 = time.time()
    for step in range(HP["steps"]):
        if ci + B > len(chunks):
            chunks, ci, epoch = epoch_chunks(), 0, epoch + 1
        batch = torch.from_numpy(chunks[ci : ci + B]).cuda()
        ci += B
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), HP["grad_clip"])
        opt.step()
        if (step + 1) % HP["eval_every"] == 0 or step == 0:
            v = valid_nll()
            curve.append((step + 1, epoch, loss.item(), v))
            log(f"step {step + 1} epoch {epoch} train {loss.item():.4f} valid {v:.4f} "
                f"({time.time() - t0:.0f} s)")
            if v < best[0]:
                best = (v, step + 1, {k: t.detach().clone() for k, t in model.state_dict().items()})
    log(f"best validation NLL {best[0]:.4f} at step {best[1]}")
    model.load_state_dict(best[2])
    model.eval()
    model.save_pretrained(hf)
    GenerationConfig(bos_token_id=0, eos_token_id=[1, end_id], pad_token_id=2).save_pretrained(hf)

    with open(os.path.join(out, "loss.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "epoch", "train_nll", "valid_nll"])
        w.writerows(curve)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot([c[0] for c in curve], [c[2] for c in curve], label="train (batch)")
        ax.plot([c[0] for c in curve], [c[3] for c in curve], label="validation")
        ax.axvline(best[1], color="grey", ls=":", label=f"kept (step {best[1]})")
        ax.set_xlabel("step")
        ax.set_ylabel("NLL (nats/token)")
        ax.set_title("kjv-llama-11m: loss")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "loss.png"), dpi=100)
    except ImportError:
        log("no matplotlib: no loss.png")

    # transformers' figures on the f32 export, reloaded from disk
    ref_model = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32).cuda().eval()
    ppl = common.perplexity(ref_model, test_ids, 0)
    ppl_s = common.perplexity(ref_model, sample_ids, 0)
    plain_prompt = hf_tok(common.PLAIN_PROMPT)["input_ids"]
    assert plain_prompt[0] == 0, plain_prompt
    plain_out = common.greedy(ref_model, plain_prompt, common.GREEDY_TOKENS)
    rendered = hf_tok.apply_chat_template([{"role": "user", "content": common.CHAT_PROMPT}],
                                          add_generation_prompt=True, tokenize=False)
    chat_prompt = hf_tok(rendered, add_special_tokens=False)["input_ids"]
    chat_out = common.greedy(ref_model, chat_prompt, common.GREEDY_TOKENS, stop_ids=(1, end_id))
    ref = {
        "hyperparameters": HP,
        "parameters": n_params,
        "corpus": {"sha256": sha, "packages": "bible-kjv-text 4.38, bible-kjv 4.38 (Debian 12)",
                   "chapters": [len(train), len(valid), len(test)],
                   "train_tokens_per_epoch_plain": n_plain,
                   "split": f"chapter i: i % {common.SPLIT_EVERY} == {common.VALID_AT} validation, "
                            f"== {common.TEST_AT} test, else train"},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
        "best_step": best[1],
        "best_valid_nll_bf16": best[0],
        "epochs": epoch + 1,
        "train_seconds": time.time() - t0,
        "heldout": {"ppl": ppl[0], "mean_nll": ppl[1], "tokens": ppl[2], "windows": ppl[3],
                    "ctx": common.PPL_CTX},
        "sample": {"ppl": ppl_s[0], "mean_nll": ppl_s[1], "tokens": ppl_s[2], "windows": ppl_s[3],
                   "ids": sample_ids},
        "greedy_plain": {"prompt": common.PLAIN_PROMPT, "prompt_ids": plain_prompt, "ids": plain_out,
                         "text": hf_tok.decode(plain_out)},
        "greedy_chat": {"prompt": common.CHAT_PROMPT, "rendered": rendered, "prompt_ids": chat_prompt,
                        "ids": chat_out, "text": hf_tok.decode(chat_out)},
    }
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    log(json.dumps({k: ref[k] for k in ("best_step", "heldout", "greedy_plain", "greedy_chat")},
                   indent=1)[:3000])
    log(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
