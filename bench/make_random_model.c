/* Writes a Llama-shaped model folder with random weights, for benchmarks:
 *   build/bench/make_random_model OUTDIR [bf16|f16|f32] [hidden layers vocab intermediate heads kv_heads]
 * defaults: bf16, hidden 2048, 16 layers, vocab 32000, intermediate 5632, 32 heads, 4 KV heads. */
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

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: make_random_model OUTDIR [bf16|f16|f32] [hidden layers vocab "
                        "intermediate heads kv_heads]\n");
        return 2;
    }
    const char *out = argv[1];
    const char *dts = argc > 2 ? argv[2] : "bf16";
    lmc_dtype dt = !strcmp(dts, "f32") ? LMC_DTYPE_F32 : !strcmp(dts, "f16") ? LMC_DTYPE_F16
                                                                              : LMC_DTYPE_BF16;
    int64_t H = argc > 3 ? atol(argv[3]) : 2048, L = argc > 4 ? atol(argv[4]) : 16;
    int64_t V = argc > 5 ? atol(argv[5]) : 32000, I = argc > 6 ? atol(argv[6]) : 5632;
    int64_t nh = argc > 7 ? atol(argv[7]) : 32, nkv = argc > 8 ? atol(argv[8]) : 4;
    int64_t hd = H / nh;
    mkdir(out, 0755);
    lmc_safetensors_writer *w;
    lmc_safetensors_writer_create(&w);
    void *ptrs[1024];
    int np = 0;
    char name[256];
    int64_t s2[2], s1[1] = {H};
    s2[0] = V, s2[1] = H;
    ptrs[np++] = tensor(w, "model.embed_tokens.weight", dt, 2, s2, 0.02f, 0);
    ptrs[np++] = tensor(w, "lm_head.weight", dt, 2, s2, 0.02f, 0);
    ptrs[np++] = tensor(w, "model.norm.weight", dt, 1, s1, 0.1f, 1);
    for (int64_t l = 0; l < L && np < 1000; l++) {
        struct {
            const char *n;
            int64_t o, i;
        } lin[] = {{"self_attn.q_proj", nh * hd, H}, {"self_attn.k_proj", nkv * hd, H},
                   {"self_attn.v_proj", nkv * hd, H}, {"self_attn.o_proj", H, nh * hd},
                   {"mlp.gate_proj", I, H},          {"mlp.up_proj", I, H},
                   {"mlp.down_proj", H, I}};
        for (int k = 0; k < 7; k++) {
            snprintf(name, sizeof name, "model.layers.%lld.%s.weight", (long long)l, lin[k].n);
            s2[0] = lin[k].o, s2[1] = lin[k].i;
            ptrs[np++] = tensor(w, name, dt, 2, s2, 0.02f, 0);
        }
        snprintf(name, sizeof name, "model.layers.%lld.input_layernorm.weight", (long long)l);
        ptrs[np++] = tensor(w, name, dt, 1, s1, 0.1f, 1);
        snprintf(name, sizeof name, "model.layers.%lld.post_attention_layernorm.weight",
                 (long long)l);
        ptrs[np++] = tensor(w, name, dt, 1, s1, 0.1f, 1);
    }
    lmc_safetensors_writer_set_metadata(w, "format", "pt");
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    if (lmc_safetensors_writer_write(w, path) != LMC_OK) {
        fprintf(stderr, "%s\n", lmc_last_error());
        return 1;
    }
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
            "\"hidden_size\": %lld, \"intermediate_size\": %lld, \"num_hidden_layers\": %lld, "
            "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"vocab_size\": %lld, "
            "\"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
            "\"tie_word_embeddings\": false, \"torch_dtype\": \"%s\", \"bos_token_id\": 1, "
            "\"eos_token_id\": 2}\n",
            (long long)H, (long long)I, (long long)L, (long long)nh, (long long)nkv, (long long)V,
            dt == LMC_DTYPE_F32 ? "float32" : dt == LMC_DTYPE_F16 ? "float16" : "bfloat16");
    fclose(f);
    lmc_safetensors_writer_free(w);
    for (int i = 0; i < np; i++) free(ptrs[i]);
    printf("wrote %s (%s)\n", out, dts);
    return 0;
}
