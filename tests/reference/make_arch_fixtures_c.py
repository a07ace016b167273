#!/usr/bin/env python3
"""Tiny qwen2, gemma (1), phi3 and mistral references in HF and MLX 4-bit g64 layouts.

The same machinery as make_arch_fixtures_a.py (random models made by transformers, perturbed
norms and biases, reference logits at every position of a 24-token prompt, 16 greedy tokens,
an MLX copy quantized with mlx_quant.py and its reference from the dequantized weights), for the
architectures ../shared/conformance also covers, so the project has its own copies.
Run where torch, transformers, numpy and safetensors are installed:
  python3 tests/reference/make_arch_fixtures_c.py tests/fixtures/arch-c
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_arch_fixtures_a as A  # noqa: E402
import torch  # noqa: E402


def qwen2_config():
    from transformers import Qwen2Config
    return Qwen2Config(**A.common(rms_norm_eps=1e-6, rope_theta=1000000.0,
                                  tie_word_embeddings=True, use_sliding_window=True,
                                  sliding_window=A.WINDOW, max_window_layers=1))


def gemma_config():
    from transformers import GemmaConfig
    return GemmaConfig(**A.common(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
                                  hidden_activation="gelu_pytorch_tanh"))


def phi3_config():
    from transformers import Phi3Config
    return Phi3Config(**A.common(rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                                 sliding_window=A.WINDOW, original_max_position_embeddings=256,
                                 partial_rotary_factor=0.5))


def mistral_config():
    from transformers import MistralConfig
    return MistralConfig(**A.common(rms_norm_eps=1e-5, rope_theta=10000.0,
                                    tie_word_embeddings=False, sliding_window=A.WINDOW))


A.MODELS = {
    "qwen2-f32": (qwen2_config, torch.float32,
                  "q/k/v biases, tied, use_sliding_window with max_window_layers 1"),
    "gemma-f32": (gemma_config, torch.float32,
                  "(1 + w) RMSNorm, embeddings x sqrt(hidden), GELU-tanh, tied"),
    "phi3-f32": (phi3_config, torch.float32,
                 "fused qkv_proj and gate_up_proj, partial_rotary_factor 0.5, sliding window 8"),
    "mistral-f32": (mistral_config, torch.float32, "sliding window 8 on every layer"),
}

_checks = A.config_checks


def config_checks(name, model):
    if name.startswith("gemma-"):  # Gemma 1 has no sliding window
        return {"sliding_window": None, "layer_types": []}
    return _checks(name, model)


A.config_checks = config_checks

if __name__ == "__main__":
    sys.exit(A.main())
