"""What train.py and eval_quantized.py share: the corpus split, the
perplexity windows (the same rule as `lmc perplexity`), greedy decoding and
the chat template. Runs where torch and transformers are (the GPU machine)."""
import math
import re

VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")

# Chapters i (in canonical order) with i % 30 == 5 validate (early stopping),
# i % 30 == 15 are the held-out test text; the rest are trained on.
SPLIT_EVERY, VALID_AT, TEST_AT = 30, 5, 15
SAMPLE_CHAPTERS = 3  # the first test chapters form the committed sample

SPECIALS = ["<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Only system, user and assistant roles are supported') }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

PLAIN_PROMPT = "And God said,"
CHAT_PROMPT = "In the beginning God created the heaven and the earth."
GREEDY_TOKENS = 64
PPL_CTX = 256


def load_chapters(path):
    """[(book, chapter), [verse text, ...]] in canonical order."""
    chapters = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = VERSE.match(line.rstrip("\n"))
            if not m:
                raise SystemExit(f"{path}:{n}: not a verse line: {line!r}")
            book, ch, _, text = m.groups()
            key = (book, int(ch))
            if not chapters or chapters[-1][0] != key:
                chapters.append((key, []))
            chapters[-1][1].append(" ".join(text.split()))
    return chapters


def split(chapters):
    train, valid, test = [], [], []
    for i, c in enumerate(chapters):
        (valid if i % SPLIT_EVERY == VALID_AT else test if i % SPLIT_EVERY == TEST_AT else train).append(c)
    return train, valid, test


def chapter_text(c):
    return "\n".join(c[1]) + "\n"


def texts_of(chapters):
    return "\n".join(chapter_text(c) for c in chapters)


def perplexity(model, ids, bos, ctx=PPL_CTX, device="cuda"):
    """`lmc perplexity`'s rule: windows of BOS + ctx-1 text tokens, each text
    token scored from the tokens before it in its window. Returns (ppl,
    mean_nll, tokens, windows). f32 throughout."""
    import torch

    per = ctx - 1
    total, scored, windows = 0.0, 0, 0
    with torch.no_grad():
        for at in range(0, len(ids), per):
            w = [bos] + ids[at : at + per]
            x = torch.tensor([w], device=device)
            logits = model(x).logits[0].double()
            lp = torch.log_softmax(logits[:-1], dim=-1)
            tgt = torch.tensor(w[1:], device=device)
            total += float(-lp.gather(1, tgt[:, None]).sum())
            scored += len(w) - 1
            windows += 1
    mean = total / scored
    return math.exp(mean), mean, scored, windows


def greedy(model, prompt_ids, n, stop_ids=(), device="cuda"):
    """Argmax decoding by full recomputation (f32): the first n tokens, or up
    to (not including) a stop id."""
    import torch

    ids = list(prompt_ids)
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids], device=device)).logits[0, -1]
            t = int(torch.argmax(logits))
            if t in stop_ids:
                break
            out.append(t)
            ids.append(t)
    return out
