/* Writes a Llama-shaped model folder with random weights, for benchmarks:
 *   build/bench/make_random_model OUTDIR [bf16|f16|f32|q4|q8] [hidden layers vocab intermediate
 * heads kv_heads [experts top_k]] defaults: bf16, hidden 2048, 16 layers, vocab 32000, intermediate
 * 5632, 32 heads, 4 KV heads. q4/q8: MLX affine 4/8-bit, group 64, bf16 scales (every Linear and
 * the embedding), as mlx_lm.convert -q writes it. With experts > 0 the model is a Mixtral: each
 * layer's MLP is a router plus stacked switch_mlp experts [experts, out, in] (mlx-lm's layout). */
#include "kernels/quant.h"
#include "tensor/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int g_bits; /* 0 = dense */
static void *g_extra[4096];
static int g_n_extra;

/* A 2D Linear/Embedding weight: dense, or quantized into .weight/.scales/.biases. */
static void *matrix(lmc_safetensors_writer *w, const char *name, lmc_dtype dt, const int64_t *shape,
                    float scale);

static void *tensor(lmc_safetensors_writer *w, const char *name, lmc_dtype dt, int ndim,
                    const int64_t *shape, float scale, float offset) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    void *data = malloc((size_t)n * lmc_dtype_size(dt));
    float buf[4096];
    for (int64_t i = 0; i < n; i += 4096) {
        int64_t m = n - i < 4096 ? n - i : 4096;
        for (int64_t k = 0; k < m; k++) buf[k] = offset + scale * frand();
        lmc_convert_from_f32(dt, buf, (uint8_t *)data + (size_t)i * lmc_dtype_size(dt), m);
    }
    if (lmc_safetensors_writer_add(w, name, dt, ndim, shape, data) != LMC_OK) {
        fprintf(stderr, "%s\n", lmc_last_error());
        exit(1);
    }
    return data;
}

static void *matrix(lmc_safetensors_writer *w, const char *name, lmc_dtype dt, const int64_t *shape,
                    float scale) {
    if (!g_bits) return tensor(w, name, dt, 2, shape, scale, 0);
    int64_t rows = shape[0], cols = shape[1], group = 64;
    float *f = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++) f[i] = scale * frand();
    uint32_t *packed = malloc((size_t)(rows * cols * g_bits / 32) * 4);
    uint16_t *sc = malloc((size_t)(rows * cols / group) * 2),
             *bi = malloc((size_t)(rows * cols / group) * 2);
    if (lmc_quantize_affine(f, rows, cols, g_bits, (int)group, LMC_DTYPE_BF16, packed, sc, bi) !=
        LMC_OK) {
        fprintf(stderr, "%s\n", lmc_last_error());
        exit(1);
    }
    free(f);
    char n[300];
    size_t len = strlen(name) - strlen(".weight");
    int64_t ps[2] = {rows, cols * g_bits / 32}, ss[2] = {rows, cols / group};
    lmc_safetensors_writer_add(w, name, LMC_DTYPE_U32, 2, ps, packed);
    snprintf(n, sizeof n, "%.*s.scales", (int)len, name);
    lmc_safetensors_writer_add(w, n, LMC_DTYPE_BF16, 2, ss, sc);
    snprintf(n, sizeof n, "%.*s.biases", (int)len, name);
    lmc_safetensors_writer_add(w, n, LMC_DTYPE_BF16, 2, ss, bi);
    g_extra[g_n_extra++] = sc;
    g_extra[g_n_extra++] = bi;
    return packed;
}

/* A stacked [E, out, in] expert weight, dense or quantized like matrix(). */
static void *stacked(lmc_safetensors_writer *w, const char *name, lmc_dtype dt, int64_t E,
                     int64_t out, int64_t in) {
    int64_t s2[2] = {E * out, in};
    void *p = matrix(w, name, dt, s2, 0.02f);
    /* re-add with the 3D shapes: the writer copies shapes, so rebuild the entries */
    lmc_safetensors_writer_remove_last(w, g_bits ? 3 : 1);
    if (!g_bits) {
        int64_t s3[3] = {E, out, in};
        lmc_safetensors_writer_add(w, name, dt, 3, s3, p);
        return p;
    }
    char n[300];
    size_t len = strlen(name) - strlen(".weight");
    int64_t ps[3] = {E, out, in * g_bits / 32}, ss[3] = {E, out, in / 64};
    lmc_safetensors_writer_add(w, name, LMC_DTYPE_U32, 3, ps, p);
    snprintf(n, sizeof n, "%.*s.scales", (int)len, name);
    lmc_safetensors_writer_add(w, n, LMC_DTYPE_BF16, 3, ss, g_extra[g_n_extra - 2]);
    snprintf(n, sizeof n, "%.*s.biases", (int)len, name);
    lmc_safetensors_writer_add(w, n, LMC_DTYPE_BF16, 3, ss, g_extra[g_n_extra - 1]);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: make_random_model OUTDIR [bf16|f16|f32] [hidden layers vocab "
                        "intermediate heads kv_heads]\n");
        return 2;
    }
    const char *out = argv[1];
    const char *dts = argc > 2 ? argv[2] : "bf16";
    lmc_dtype dt = !strcmp(dts, "f32")   ? LMC_DTYPE_F32
                   : !strcmp(dts, "f16") ? LMC_DTYPE_F16
                                         : LMC_DTYPE_BF16;
    g_bits = !strcmp(dts, "q4") ? 4 : !strcmp(dts, "q8") ? 8 : 0;
    int64_t H = argc > 3 ? atol(argv[3]) : 2048, L = argc > 4 ? atol(argv[4]) : 16;
    int64_t V = argc > 5 ? atol(argv[5]) : 32000, I = argc > 6 ? atol(argv[6]) : 5632;
    int64_t nh = argc > 7 ? atol(argv[7]) : 32, nkv = argc > 8 ? atol(argv[8]) : 4;
    int64_t hd = H / nh;
    int64_t E = argc > 9 ? atol(argv[9]) : 0, K = argc > 10 ? atol(argv[10]) : 2;
    mkdir(out, 0755);
    lmc_safetensors_writer *w;
    lmc_safetensors_writer_create(&w);
    void *ptrs[1024];
    int np = 0;
    char name[256];
    int64_t s2[2], s1[1] = {H};
    s2[0] = V, s2[1] = H;
    ptrs[np++] = matrix(w, "model.embed_tokens.weight", dt, s2, 0.02f);
    ptrs[np++] = matrix(w, "lm_head.weight", dt, s2, 0.02f);
    ptrs[np++] = tensor(w, "model.norm.weight", dt, 1, s1, 0.1f, 1);
    for (int64_t l = 0; l < L && np < 1000; l++) {
        struct {
            const char *n;
            int64_t o, i;
        } lin[] = {{"self_attn.q_proj", nh * hd, H},
                   {"self_attn.k_proj", nkv * hd, H},
                   {"self_attn.v_proj", nkv * hd, H},
                   {"self_attn.o_proj", H, nh * hd},
                   {"mlp.gate_proj", I, H},
                   {"mlp.up_proj", I, H},
                   {"mlp.down_proj", H, I}};
        for (int k = 0; k < (E ? 4 : 7); k++) {
            snprintf(name, sizeof name, "model.layers.%lld.%s.weight", (long long)l, lin[k].n);
            s2[0] = lin[k].o, s2[1] = lin[k].i;
            ptrs[np++] = matrix(w, name, dt, s2, 0.02f);
        }
        if (E) {
            snprintf(name, sizeof name, "model.layers.%lld.block_sparse_moe.gate.weight",
                     (long long)l);
            s2[0] = E, s2[1] = H;
            ptrs[np++] = matrix(w, name, dt, s2, 0.02f);
            static const char *const sw[3] = {"gate_proj", "up_proj", "down_proj"};
            for (int k = 0; k < 3; k++) {
                snprintf(name, sizeof name,
                         "model.layers.%lld.block_sparse_moe.switch_mlp.%s.weight", (long long)l,
                         sw[k]);
                ptrs[np++] = stacked(w, name, dt, E, k == 2 ? H : I, k == 2 ? I : H);
            }
        }
        snprintf(name, sizeof name, "model.layers.%lld.input_layernorm.weight", (long long)l);
        ptrs[np++] = tensor(w, name, dt, 1, s1, 0.1f, 1);
        snprintf(name, sizeof name, "model.layers.%lld.post_attention_layernorm.weight",
                 (long long)l);
        ptrs[np++] = tensor(w, name, dt, 1, s1, 0.1f, 1);
    }
    lmc_safetensors_writer_set_metadata(w, "format", g_bits ? "mlx" : "pt");
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    if (lmc_safetensors_writer_write(w, path) != LMC_OK) {
        fprintf(stderr, "%s\n", lmc_last_error());
        return 1;
    }
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", "
            "\"num_local_experts\": %lld, \"num_experts_per_tok\": %lld, "
            "\"hidden_size\": %lld, \"intermediate_size\": %lld, \"num_hidden_layers\": %lld, "
            "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"vocab_size\": %lld, "
            "\"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
            "\"tie_word_embeddings\": false, \"torch_dtype\": \"%s\", \"bos_token_id\": 1, "
            "\"eos_token_id\": 2%s}\n",
            E ? "MixtralForCausalLM" : "LlamaForCausalLM", E ? "mixtral" : "llama", (long long)E,
            (long long)K, (long long)H, (long long)I, (long long)L, (long long)nh, (long long)nkv,
            (long long)V,
            dt == LMC_DTYPE_F32   ? "float32"
            : dt == LMC_DTYPE_F16 ? "float16"
                                  : "bfloat16",
            g_bits == 4   ? ", \"quantization\": {\"group_size\": 64, \"bits\": 4}"
            : g_bits == 8 ? ", \"quantization\": {\"group_size\": 64, \"bits\": 8}"
                          : "");
    fclose(f);
    lmc_safetensors_writer_free(w);
    for (int i = 0; i < np; i++) free(ptrs[i]);
    for (int i = 0; i < g_n_extra; i++) free(g_extra[i]);
    printf("wrote %s (%s)\n", out, dts);
    return 0;
}
