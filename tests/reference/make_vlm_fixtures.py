#!/usr/bin/env python3
"""Vision fixtures: test images, SigLIP pixel values, tiny random PaliGemmas (HF dense, MLX 4-bit).

Run where torch, transformers (5.x), PIL, numpy and safetensors are installed (no internet):
  python3 tests/reference/make_vlm_fixtures.py OUTDIR
e.g. OUTDIR = tests/fixtures/vlm. `--tokenizer-only OUTDIR` writes just the tiny tokenizer
(pure Python, no dependencies), to check the C tokenizer loads it; `--pil-only OUTDIR` only
the PIL-backend pixel values (OUTDIR/pixels-pil) from OUTDIR/images.

OUTDIR/images       test images made with PIL (PNG: RGB, grayscale, RGBA, palette, 1x1; JPEG
                    4:2:0 and 4:4:4); for each JPEG also NAME.jpg.pil.png, PIL's decoded pixels
                    saved losslessly (JPEG decoders differ; the C test compares both)
OUTDIR/pixels       CASE.f32: pixel_values [3, H, W] float32 from transformers'
                    SiglipImageProcessor (the PIL path: convert RGB, PIL bicubic resize with its
                    antialias, rescale, normalize), and pixels.json listing cases with their
                    processor settings; "manual" values (PIL + numpy as the slow processor does)
                    are checked equal to the processor's
OUTDIR/pixels-pil   the same cases (but the 224 one) through the PIL backend
                    (SiglipImageProcessorPil: transformers 4's SiglipImageProcessor)
OUTDIR/paligemma-f32, OUTDIR/paligemma-mlx-4bit-g64
                    model folders (config.json, weights, tokenizer.json, tokenizer_config.json,
                    preprocessor_config.json) with expect.json (input ids from PaliGemmaProcessor,
                    16 greedy tokens, image, prompt, self-checks) and the reference tensors
                    logits.f32 [T, V], vision.f32 (vision tower last_hidden_state [N, Dv]),
                    features.f32 (projector output [N, Dt]) and embeds.f32 (the language model's
                    inputs_embeds [T, Dt]), all float32 little-endian.
The MLX folder has mlx-vlm's key names (conv weight [out, kh, kw, in]) and every Linear and
Embedding whose input dimension divides 64 quantized (4 bits, group 64, float16 scales/biases, by
mlx_quant.py), the vision tower's too; its references come from the dequantized weights.
"""
import json, os, shutil, sys, traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

VOCAB = 400
IMAGE_TOKEN = 399
PAD, EOS, BOS, UNK = 0, 1, 2, 3
NEW_TOKENS = 16
BITS, GROUP = 4, 64
PROMPTS = {"paligemma-f32": "caption en", "paligemma-mlx-4bit-g64": "what is in the image?"}

# ---- the tokenizer (Gemma-like: Replace " " -> "▁", BPE with byte fallback) ---------------

WORDS = ["▁the", "▁a", "▁is", "▁in", "▁what", "▁image", "▁caption", "▁en", "▁describe",
         "▁of", "▁cat", "▁dog", "▁red", "▁blue", "▁and", "▁on", "▁sky", "er", "th", "he",
         "an", "at", "on", "in", "en", "es", "or"]


def tokenizer_json():
    vocab = {"<pad>": PAD, "<eos>": EOS, "<bos>": BOS, "<unk>": UNK}
    for b in range(256):
        vocab["<0x%02X>" % b] = 4 + b
    chars = ["▁", "\n"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + \
        [chr(c) for c in range(ord("A"), ord("Z") + 1)] + list("0123456789.,?!'-:")
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    merges = []
    for w in WORDS:
        cur = w[0]
        for ch in w[1:]:
            new = cur + ch
            if new not in vocab:
                merges.append("%s %s" % (cur, ch))
                vocab[new] = len(vocab)
            cur = new
    n = 0
    while len(vocab) < IMAGE_TOKEN:
        vocab["<unused%d>" % n] = len(vocab)
        n += 1
    vocab["<image>"] = IMAGE_TOKEN
    assert len(vocab) == VOCAB and sorted(vocab.values()) == list(range(VOCAB))

    def added(i, c):
        return {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(PAD, "<pad>"), added(EOS, "<eos>"), added(BOS, "<bos>"),
                         added(UNK, "<unk>"), added(IMAGE_TOKEN, "<image>")],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [BOS], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def write_tokenizer(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False, indent=1)
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>",
           "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
           "additional_special_tokens": ["<image>"], "tokenizer_class": "GemmaTokenizer",
           "model_max_length": 256, "padding_side": "right"}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)


if len(sys.argv) == 3 and sys.argv[1] == "--tokenizer-only":
    write_tokenizer(sys.argv[2])
    sys.exit(0)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import mlx_quant  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

SUMMARY = []


def note(name, status, info=""):
    SUMMARY.append((name, status, info))
    print("%-28s %-7s %s" % (name, status, info), flush=True)


# ---- images ---------------------------------------------------------------------------------

def smooth_rgb(w, h, seed):
    """Gradients, a few discs and mild noise: compressible but with structure at every scale."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    img[..., 0] = 255 * x / max(w - 1, 1)
    img[..., 1] = 255 * y / max(h - 1, 1)
    img[..., 2] = 127.5 + 127.5 * np.sin(x / 3.0 + y / 5.0)
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(2, max(w, h) / 3)
        col = rng.uniform(0, 255, 3)
        img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = col
    img += rng.normal(0, 6, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def make_images(d):
    os.makedirs(d, exist_ok=True)
    imgs = {}

    def save(name, im, **kw):
        im.save(os.path.join(d, name), **kw)
        imgs[name] = im
    save("rgb-300x200.png", Image.fromarray(smooth_rgb(300, 200, 1), "RGB"))
    save("rgb-31x47.png", Image.fromarray(smooth_rgb(31, 47, 2), "RGB"))
    save("gray-128x17.png", Image.fromarray(smooth_rgb(128, 17, 3)[..., 1], "L"))
    rgba = np.concatenate([smooth_rgb(90, 120, 4), smooth_rgb(90, 120, 5)[..., :1]], axis=2)
    save("rgba-90x120.png", Image.fromarray(rgba, "RGBA"))
    save("palette-120x90.png", Image.fromarray(smooth_rgb(120, 90, 6), "RGB").quantize(64))
    save("one-1x1.png", Image.fromarray(np.array([[[200, 30, 90]]], np.uint8), "RGB"))
    save("photo-320x240.jpg", Image.fromarray(smooth_rgb(320, 240, 7), "RGB"), quality=90)
    save("photo444-233x151.jpg", Image.fromarray(smooth_rgb(233, 151, 8), "RGB"), quality=100,
         subsampling=0)
    save("model-a-40x30.png", Image.fromarray(smooth_rgb(40, 30, 9), "RGB"))
    save("model-b-100x80.jpg", Image.fromarray(smooth_rgb(100, 80, 10), "RGB"), quality=95)
    for name in list(imgs):
        if name.endswith(".jpg"):
            dec = Image.open(os.path.join(d, name))
            dec.load()
            dec.convert("RGB").save(os.path.join(d, name + ".pil.png"))
    return imgs


def siglip_processor(height, width, convert_rgb):
    from transformers import SiglipImageProcessor
    return SiglipImageProcessor(do_resize=True, size={"height": height, "width": width},
                                resample=3, do_rescale=True, rescale_factor=1 / 255,
                                do_normalize=True, image_mean=[0.5, 0.5, 0.5],
                                image_std=[0.5, 0.5, 0.5], do_convert_rgb=convert_rgb)


def manual_pixels(path, height, width, mean, std, factor):
    """What the slow processor does: PIL convert RGB, PIL resize BICUBIC (reducing_gap None),
    float64 * factor -> float32, (x - mean) / std in float32, HWC -> CHW."""
    im = Image.open(path).convert("RGB")
    if im.size != (width, height):
        im = im.resize((width, height), resample=Image.BICUBIC, reducing_gap=None)
    a = np.asarray(im)
    a = (a.astype(np.float64) * factor).astype(np.float32)
    a = (a - np.array(mean, np.float32)) / np.array(std, np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def hf_pixels(path, height, width, convert_rgb=True):
    proc = siglip_processor(height, width, convert_rgb)
    im = Image.open(path)
    out = proc(images=im, return_tensors="np")["pixel_values"][0].astype(np.float32)
    return out, type(proc).__name__


PIXEL_CASES = [  # (case, image, height, width)
    ("rgb-300x200-to-128x96", "rgb-300x200.png", 96, 128),
    ("rgb-300x200-to-224", "rgb-300x200.png", 224, 224),
    ("rgb-31x47-to-64x80", "rgb-31x47.png", 80, 64),
    ("gray-128x17-to-56", "gray-128x17.png", 56, 56),
    ("rgba-90x120-to-64", "rgba-90x120.png", 64, 64),
    ("palette-120x90-to-120x90", "palette-120x90.png", 90, 120),
    ("one-1x1-to-28", "one-1x1.png", 28, 28),
    ("photo-320x240-to-112", "photo-320x240.jpg.pil.png", 112, 112),
    ("photo444-233x151-to-100x60", "photo444-233x151.jpg.pil.png", 60, 100),
]


def make_pixels(root):
    d = os.path.join(root, "pixels")
    os.makedirs(d, exist_ok=True)
    cases = []
    for case, image, h, w in PIXEL_CASES:
        try:
            path = os.path.join(root, "images", image)
            ref, cls = hf_pixels(path, h, w)
            man = manual_pixels(path, h, w, [0.5] * 3, [0.5] * 3, 1 / 255)
            ref.astype("<f4").tofile(os.path.join(d, case + ".f32"))
            diff = float(np.abs(ref - man).max())
            cases.append({"case": case, "image": image, "height": h, "width": w,
                          "file": case + ".f32", "shape": list(ref.shape), "processor": cls,
                          "manual_max_abs_diff": diff,
                          "preprocessor": {"do_resize": True, "size": {"height": h, "width": w},
                                           "resample": 3, "do_rescale": True,
                                           "rescale_factor": 1 / 255, "do_normalize": True,
                                           "image_mean": [0.5] * 3, "image_std": [0.5] * 3,
                                           "do_convert_rgb": True}})
            note("pixels " + case, "ok", "%s, manual diff %.3g" % (cls, diff))
        except Exception as e:
            traceback.print_exc()
            note("pixels " + case, "FAILED", "%s: %s" % (type(e).__name__, e))
    # the JPEG decoders: PIL's pixels of each JPEG, for the C test's decoder comparison
    json.dump({"cases": cases, "generator": versions()}, open(os.path.join(d, "pixels.json"), "w"),
              indent=1)


def make_pixels_pil(root):
    """The same cases through the PIL backend (transformers 5's SiglipImageProcessorPil, which is
    transformers 4's SiglipImageProcessor), into OUTDIR/pixels-pil."""
    d = os.path.join(root, "pixels-pil")
    os.makedirs(d, exist_ok=True)
    cases = []
    for case, image, h, w in PIXEL_CASES:
        if case.endswith("-to-224"):
            continue  # keep the fixture small
        try:
            path = os.path.join(root, "images", image)
            man = manual_pixels(path, h, w, [0.5] * 3, [0.5] * 3, 1 / 255)
            cls = "manual PIL"
            try:
                from transformers import SiglipImageProcessorPil
                proc = SiglipImageProcessorPil(
                    do_resize=True, size={"height": h, "width": w}, resample=3, do_rescale=True,
                    rescale_factor=1 / 255, do_normalize=True, image_mean=[0.5] * 3,
                    image_std=[0.5] * 3, do_convert_rgb=True)
                ref = proc(images=Image.open(path), return_tensors="np")["pixel_values"][0]
                ref = ref.astype(np.float32)
                cls = type(proc).__name__
            except ImportError:
                ref = man
            ref.astype("<f4").tofile(os.path.join(d, case + ".f32"))
            diff = float(np.abs(ref - man).max())
            cases.append({"case": case, "image": image, "height": h, "width": w,
                          "file": case + ".f32", "shape": list(ref.shape), "processor": cls,
                          "manual_max_abs_diff": diff,
                          "preprocessor": {"do_resize": True, "size": {"height": h, "width": w},
                                           "resample": 3, "do_rescale": True,
                                           "rescale_factor": 1 / 255, "do_normalize": True,
                                           "image_mean": [0.5] * 3, "image_std": [0.5] * 3,
                                           "do_convert_rgb": True,
                                           "image_processor_type": "SiglipImageProcessorPil"}})
            note("pixels-pil " + case, "ok", "%s, manual diff %.3g" % (cls, diff))
        except Exception as e:
            traceback.print_exc()
            note("pixels-pil " + case, "FAILED", "%s: %s" % (type(e).__name__, e))
    json.dump({"cases": cases, "generator": versions()},
              open(os.path.join(d, "pixels.json"), "w"), indent=1)


def versions():
    import PIL
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "pillow": PIL.__version__, "numpy": np.__version__}


# ---- models ---------------------------------------------------------------------------------

MODEL_SHAPES = {
    # name: (vision hidden, intermediate, layers, heads, patch, image size, image, seed base)
    "paligemma-f32": (32, 64, 2, 2, 14, 56, "model-a-40x30.png", 11),
    "paligemma-mlx-4bit-g64": (64, 128, 2, 4, 16, 64, "model-b-100x80.jpg.pil.png", 23),
}


def paligemma_config(name):
    from transformers import PaliGemmaConfig
    dv, iv, lv, hv, patch, size, _, _ = MODEL_SHAPES[name]
    vision = {"model_type": "siglip_vision_model", "hidden_size": dv, "intermediate_size": iv,
              "num_hidden_layers": lv, "num_attention_heads": hv, "patch_size": patch,
              "image_size": size, "num_channels": 3, "hidden_act": "gelu_pytorch_tanh",
              "layer_norm_eps": 1e-6, "projection_dim": 64, "vision_use_head": False}
    text = {"model_type": "gemma", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
            "head_dim": 16, "vocab_size": VOCAB, "max_position_embeddings": 256,
            "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh",
            "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "bos_token_id": BOS,
            "eos_token_id": EOS, "pad_token_id": PAD, "tie_word_embeddings": True,
            "num_image_tokens": (size // patch) ** 2}
    cfg = PaliGemmaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                          vocab_size=VOCAB, projection_dim=64, hidden_size=64, pad_token_id=PAD,
                          bos_token_id=BOS, eos_token_id=EOS, tie_word_embeddings=True)
    for k in ("image_token_id", "image_token_index"):
        try:
            setattr(cfg, k, IMAGE_TOKEN)
        except Exception:
            pass
    return cfg


def build_model(cfg, seed):
    from transformers import PaliGemmaForConditionalGeneration
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    try:
        model = PaliGemmaForConditionalGeneration(cfg).float()
    except TypeError:
        model = PaliGemmaForConditionalGeneration(cfg).float()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "norm" in n:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g)
                        if "vision" in n else 0.2 * torch.randn(p.shape, generator=g))
            elif "position_embedding" in n:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in n:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
            else:
                fan_in = int(np.prod(p.shape[1:]))
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
    model.eval()
    return model


def from_pretrained(d):
    from transformers import PaliGemmaForConditionalGeneration
    try:
        m = PaliGemmaForConditionalGeneration.from_pretrained(d, dtype=torch.float32,
                                                              attn_implementation="eager")
    except TypeError:
        m = PaliGemmaForConditionalGeneration.from_pretrained(d, torch_dtype=torch.float32,
                                                              attn_implementation="eager")
    return m.eval()


def processor_for(d, size, n_img):
    from transformers import PaliGemmaProcessor
    tok = None
    errs = []
    for cls_name in ("GemmaTokenizerFast", "GemmaTokenizer", "PreTrainedTokenizerFast"):
        try:
            cls = getattr(transformers, cls_name)
            tok = cls(tokenizer_file=os.path.join(d, "tokenizer.json"), bos_token="<bos>",
                      eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")
            break
        except Exception as e:
            errs.append("%s: %s" % (cls_name, e))
    if tok is None:
        raise RuntimeError("no tokenizer: " + "; ".join(errs))
    ip = siglip_processor(size, size, True)
    ip.image_seq_length = n_img
    return PaliGemmaProcessor(image_processor=ip, tokenizer=tok), tok


def capture(model):
    """Hooks that keep the vision tower's output, the projector's and the LM's inputs_embeds."""
    got = {}
    inner = getattr(model, "model", model)
    vt = getattr(inner, "vision_tower", None) or model.vision_tower
    proj = getattr(inner, "multi_modal_projector", None) or model.multi_modal_projector
    lm = getattr(inner, "language_model", None) or model.language_model

    def vt_hook(m, a, out):
        got.setdefault("vision", out.last_hidden_state.detach().clone())

    def proj_hook(m, a, out):
        got.setdefault("features", out.detach().clone())

    def lm_hook(m, args, kwargs):
        e = kwargs.get("inputs_embeds")
        if e is not None:
            got.setdefault("embeds", e.detach().clone())
    hs = [vt.register_forward_hook(vt_hook), proj.register_forward_hook(proj_hook),
          lm.register_forward_pre_hook(lm_hook, with_kwargs=True)]
    return got, hs


def reference(model, inputs):
    ids = inputs["input_ids"]
    pv = inputs["pixel_values"]
    extra = {k: inputs[k] for k in ("attention_mask", "token_type_ids") if k in inputs}
    got, hooks = capture(model)
    with torch.no_grad():
        out = model(input_ids=ids, pixel_values=pv, use_cache=True, **extra)
        for h in hooks:
            h.remove()
        logits = out.logits[0].float()
        past = out.past_key_values
        toks, margins = [], []
        nxt = int(logits[-1].argmax())
        for _ in range(NEW_TOKENS):
            toks.append(nxt)
            out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            lg = out.logits[0, -1]
            top = torch.topk(lg, 2).values
            margins.append(float(top[0] - top[1]))
            nxt = int(lg.argmax())
        gen_equal = None
        try:
            g = model.generate(input_ids=ids, pixel_values=pv, max_new_tokens=NEW_TOKENS,
                               do_sample=False, min_new_tokens=NEW_TOKENS, **extra)
            gen = g[0, ids.shape[1]:].tolist()
            gen_equal = gen == toks
        except Exception as e:
            gen_equal = "generate failed: %s" % e
        # is the prefix bidirectional? change the last token, see whether position 0 changes
        ids2 = ids.clone()
        ids2[0, -1] = 5 if int(ids[0, -1]) != 5 else 6
        lg2 = model(input_ids=ids2, pixel_values=pv, use_cache=False, **extra).logits[0]
        bidir = bool((lg2[0] - logits[0]).abs().max() > 1e-6)
    top2 = torch.topk(logits, 2, dim=-1).values
    return {"logits": logits, "greedy": toks, "got": got, "checks": {
        "min_top2_margin_prompt": float((top2[:, 0] - top2[:, 1]).min()),
        "min_top2_margin_greedy": min(margins), "generate_equal": gen_equal,
        "prefix_bidirectional": bidir}}


def save_refs(d, ref):
    ref["logits"].numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    for k in ("vision", "features", "embeds"):
        if k in ref["got"]:
            ref["got"][k][0].float().numpy().astype("<f4").tofile(os.path.join(d, k + ".f32"))


def write_preprocessor(d, size, n_tokens):
    json.dump({"do_convert_rgb": None, "do_normalize": True, "do_rescale": True,
               "do_resize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
               "image_processor_type": "SiglipImageProcessor", "image_seq_length": n_tokens,
               "processor_class": "PaliGemmaProcessor", "resample": 3,
               "rescale_factor": 0.00392156862745098, "size": {"height": size, "width": size}},
              open(os.path.join(d, "preprocessor_config.json"), "w"), indent=1)


def hf_to_mlx_name(k):
    """transformers' state-dict names (4.x or 5.x) -> mlx-vlm's. transformers 5.17's vision tower
    keys are vision_tower.embeddings..., without 4.x's vision_model level, which mlx-vlm keeps."""
    for a, b in (("model.vision_tower.vision_model.", "vision_tower.vision_model."),
                 ("vision_tower.vision_model.", "vision_tower.vision_model."),
                 ("model.vision_tower.", "vision_tower.vision_model."),
                 ("vision_tower.", "vision_tower.vision_model."),
                 ("model.multi_modal_projector.", "multi_modal_projector."),
                 ("model.language_model.", "language_model.model."),
                 ("language_model.model.", "language_model.model."),
                 ("multi_modal_projector.", "multi_modal_projector.")):
        if k.startswith(a):
            return b + k[len(a):]
    if k in ("lm_head.weight", "language_model.lm_head.weight"):
        return None  # tied
    raise RuntimeError("unexpected key %s" % k)


def mlx_tensors(state):
    out, quantized, names = {}, [], {}
    for key in sorted(state):
        mk = hf_to_mlx_name(key)
        if mk is None:
            continue
        names[mk] = key
        w = state[key].detach().float().cpu().numpy()
        if "patch_embedding.weight" in mk:
            out[mk] = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).astype(np.float16)
            continue
        module = mk[: -len(".weight")] if mk.endswith(".weight") else None
        is_matrix = module is not None and w.ndim == 2 and "norm" not in mk
        if is_matrix and w.shape[-1] % GROUP == 0:
            q, s, b = mlx_quant.quantize(w, GROUP, BITS, "float16")
            out[mk], out[module + ".scales"], out[module + ".biases"] = q, s, b
            quantized.append(module)
        else:
            out[mk] = w.astype(np.float16)
    return out, quantized, names


def dequantized_state(tensors, quantized, names):
    sd = {}
    for mk, v in tensors.items():
        if mk.endswith(".scales") or mk.endswith(".biases"):
            continue
        module = mk[: -len(".weight")] if mk.endswith(".weight") else None
        if module in quantized:
            w = mlx_quant.dequantize(v, tensors[module + ".scales"], tensors[module + ".biases"],
                                     GROUP, BITS, "float16")
        else:
            w = v.astype(np.float32)
            if "patch_embedding.weight" in mk:
                w = w.transpose(0, 3, 1, 2)
        sd[names[mk]] = torch.from_numpy(np.ascontiguousarray(w))
    return sd


def attempt(root, name, seed):
    dv, iv, lv, hv, patch, size, image, _ = MODEL_SHAPES[name]
    cfg = paligemma_config(name)
    model = build_model(cfg, seed)
    hf_dir = os.path.join(root, name if not name.startswith("paligemma-mlx") else
                          ".tmp-hf-" + name)
    shutil.rmtree(hf_dir, ignore_errors=True)
    model.save_pretrained(hf_dir, safe_serialization=True)
    write_tokenizer(hf_dir)
    n_img = (size // patch) ** 2
    write_preprocessor(hf_dir, size, n_img)
    proc, tok = processor_for(hf_dir, size, n_img)
    img_path = os.path.join(root, "images", image)
    prompt = PROMPTS[name]
    inputs = proc(text=prompt, images=Image.open(img_path), return_tensors="pt")
    manual = [IMAGE_TOKEN] * n_img + [BOS] + tok.encode(prompt + "\n", add_special_tokens=False)
    ids = inputs["input_ids"][0].tolist()
    hf = from_pretrained(hf_dir)
    saved_keys = sorted(json.load(open(os.path.join(hf_dir, "model.safetensors.index.json")))
                        ["weight_map"]) if os.path.exists(
        os.path.join(hf_dir, "model.safetensors.index.json")) else None
    if saved_keys is None:
        from safetensors import safe_open
        with safe_open(os.path.join(hf_dir, "model.safetensors"), "np") as f:
            saved_keys = sorted(f.keys())
    checks = {"manual_ids_equal": manual == ids, "manual_ids": manual,
              "tokenizer_class": type(tok).__name__, "processor_keys": sorted(inputs.keys())}
    if name.startswith("paligemma-mlx"):
        state = {k: v.float() for k, v in hf.state_dict().items()}
        tensors, quantized, names = mlx_tensors(state)
        d = os.path.join(root, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "mlx"})
        c = json.load(open(os.path.join(hf_dir, "config.json")))
        c["quantization"] = {"group_size": GROUP, "bits": BITS}
        c["quantization_config"] = {"group_size": GROUP, "bits": BITS}
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=1, sort_keys=True)
        for f in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json",
                  "generation_config.json"):
            if os.path.exists(os.path.join(hf_dir, f)):
                shutil.copy(os.path.join(hf_dir, f), os.path.join(d, f))
        sd = dequantized_state(tensors, quantized, names)
        ref_model = build_model(cfg, seed)
        missing, unexpected = ref_model.load_state_dict(sd, strict=False)
        missing = [k for k in missing if "lm_head" not in k]
        if missing or unexpected:
            raise RuntimeError("MLX reference: missing %r unexpected %r" % (missing, unexpected))
        if hasattr(ref_model, "tie_weights"):
            ref_model.tie_weights()
        ref = reference(ref_model.eval(), inputs)
        fref = reference(hf, inputs)
        checks["vs_float_model_rel_l2"] = float((ref["logits"] - fref["logits"]).norm() /
                                                fref["logits"].norm())
        checks["quantized_modules"] = quantized
        shutil.rmtree(hf_dir, ignore_errors=True)
        layout, quant = "mlx", {"bits": BITS, "group_size": GROUP, "scales_dtype": "float16"}
    else:
        d = hf_dir
        ref = reference(hf, inputs)
        layout, quant = "hf", None
    checks.update(ref["checks"])
    save_refs(d, ref)
    inputs["pixel_values"][0].float().numpy().astype("<f4").tofile(os.path.join(d, "pixels.f32"))
    expect = {"name": name, "model_type": "paligemma", "layout": layout, "quant": quant,
              "image": image, "prompt": prompt, "input_ids": ids, "n_image_tokens": n_img,
              "greedy_tokens": ref["greedy"], "n_new_tokens": NEW_TOKENS,
              "logits_shape": list(ref["logits"].shape),
              "vision_shape": [n_img, dv], "features_shape": [n_img, 64],
              "embeds_shape": [len(ids), 64], "rtol_l2_hint": 1e-3 if layout == "mlx" else 1e-4,
              "seed": seed, "saved_keys_hf": saved_keys, "checks": checks,
              "tensors": sorted(k for k in ("vision", "features", "embeds") if k in ref["got"]),
              "generator": versions()}
    json.dump(expect, open(os.path.join(d, "expect.json"), "w"), indent=1)
    has_eos = EOS in ref["greedy"]
    margin = min(ref["checks"]["min_top2_margin_greedy"], ref["checks"]["min_top2_margin_prompt"])
    return has_eos, margin


def build(root, name):
    base = MODEL_SHAPES[name][-1]
    best = None
    for i in range(6):
        seed = base + 1000 * i
        has_eos, margin = attempt(root, name, seed)
        if not has_eos and margin > 1e-3:
            return seed, margin
        if not has_eos and (best is None or margin > best[1]):
            best = (seed, margin)
    if best is None:
        raise RuntimeError("every seed's greedy output holds EOS")
    attempt(root, name, best[0])
    return best


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if sys.argv[1] == "--pil-only":  # OUTDIR already has images/
        make_pixels_pil(sys.argv[2])
        return 0 if all(st == "ok" for _, st, _ in SUMMARY) else 1
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    try:
        make_images(os.path.join(root, "images"))
        note("images", "ok")
    except Exception as e:
        traceback.print_exc()
        note("images", "FAILED", str(e))
        return 1
    make_pixels(root)
    make_pixels_pil(root)
    for name in MODEL_SHAPES:
        try:
            seed, margin = build(root, name)
            note(name, "ok", "seed %d, min top-2 margin %.3g" % (seed, margin))
        except Exception as e:
            traceback.print_exc()
            note(name, "FAILED", "%s: %s" % (type(e).__name__, e))
    json.dump({"set": "lmc-vlm", "models": list(MODEL_SHAPES), "generator": versions()},
              open(os.path.join(root, "manifest.json"), "w"), indent=1)
    print("\nsummary:")
    for n, s, i in SUMMARY:
        print("  %-28s %-7s %s" % (n, s, i))
    return 0 if all(s == "ok" for _, s, _ in SUMMARY) else 1


if __name__ == "__main__":
    sys.exit(main())
