/* phi3 longrope, phimoe, qwen2_moe, qwen3_moe and openelm without reference
 * logits: longrope frequencies against hand-derived values, the cache
 * re-run at the long-factor switch, expert call counts (unselected experts
 * never run), and loading of small folders shaped like the real models (HF
 * and MLX-quantized, tied heads, stacked SwitchLinear experts), with errors
 * that name the module and the keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lmc.h"
#include "models/model.h"
#include "nn/decoder.h"
#include "tensor/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- building model folders ---- */

typedef struct folder {
    lmc_safetensors_writer *w;
    void *bufs[1024];
    int n;
    uint32_t seed;
    bool f16; /* dense tensors as f16 (MLX layout) */
} folder;

static float frand(folder *f) {
    f->seed = f->seed * 1664525u + 1013904223u;
    return ((float)(f->seed >> 8) / 16777216.0f - 0.5f) * 0.5f;
}

static void *keep(folder *f, size_t bytes) {
    assert_true(f->n < 1024);
    return f->bufs[f->n++] = calloc(1, bytes);
}

/* A dense tensor: random, or `fill` everywhere when fill is not 0. */
static void dense(folder *f, const char *name, int ndim, const int64_t *shape, float fill) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *v = keep(f, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = fill != 0 ? fill : frand(f);
    if (f->f16) {
        uint16_t *h = keep(f, (size_t)n * 2);
        for (int64_t i = 0; i < n; i++) h[i] = lmc_f32_to_f16(v[i]);
        assert_int_equal(lmc_safetensors_writer_add(f->w, name, LMC_DTYPE_F16, ndim, shape, h),
                         LMC_OK);
    } else {
        assert_int_equal(lmc_safetensors_writer_add(f->w, name, LMC_DTYPE_F32, ndim, shape, v),
                         LMC_OK);
    }
}

static void dense2(folder *f, const char *name, int64_t a, int64_t b) {
    int64_t s[2] = {a, b};
    dense(f, name, 2, s, 0);
}

static void norm(folder *f, const char *name, int64_t n) {
    int64_t s[1] = {n};
    dense(f, name, 1, s, 1.0f);
}

/* MLX 4-bit g64 module <prefix>: weight U32 [.., out, in/8], scales and
 * biases f16 [.., out, in/64]; experts > 0 stacks [experts, out, in]. */
static void quant(folder *f, const char *prefix, int64_t experts, int64_t out, int64_t in) {
    int64_t rows = (experts ? experts : 1) * out;
    float *v = keep(f, (size_t)(rows * in) * sizeof(float));
    for (int64_t i = 0; i < rows * in; i++) v[i] = frand(f);
    uint32_t *packed = keep(f, (size_t)(rows * in / 8) * 4);
    uint16_t *scales = keep(f, (size_t)(rows * in / 64) * 2);
    uint16_t *biases = keep(f, (size_t)(rows * in / 64) * 2);
    assert_int_equal(lmc_quantize_affine(v, rows, in, 4, 64, LMC_DTYPE_F16, packed, scales, biases),
                     LMC_OK);
    char name[300];
    int nd = experts ? 3 : 2;
    int64_t ws[3], ss[3];
    if (experts) {
        int64_t a[3] = {experts, out, in / 8}, b[3] = {experts, out, in / 64};
        memcpy(ws, a, sizeof a);
        memcpy(ss, b, sizeof b);
    } else {
        int64_t a[2] = {out, in / 8}, b[2] = {out, in / 64};
        memcpy(ws, a, sizeof a);
        memcpy(ss, b, sizeof b);
    }
    snprintf(name, sizeof name, "%s.weight", prefix);
    assert_int_equal(lmc_safetensors_writer_add(f->w, name, LMC_DTYPE_U32, nd, ws, packed), LMC_OK);
    snprintf(name, sizeof name, "%s.scales", prefix);
    assert_int_equal(lmc_safetensors_writer_add(f->w, name, LMC_DTYPE_F16, nd, ss, scales), LMC_OK);
    snprintf(name, sizeof name, "%s.biases", prefix);
    assert_int_equal(lmc_safetensors_writer_add(f->w, name, LMC_DTYPE_F16, nd, ss, biases), LMC_OK);
}

/* A Linear [out, in]: quantized when q and in % 64 == 0 (as mlx-lm's
 * convert), else dense. */
static void linear(folder *f, bool q, const char *prefix, int64_t out, int64_t in) {
    char name[300];
    if (q && in % 64 == 0) {
        quant(f, prefix, 0, out, in);
        return;
    }
    snprintf(name, sizeof name, "%s.weight", prefix);
    dense2(f, name, out, in);
}

static void bias(folder *f, const char *prefix, int64_t n) {
    char name[300];
    int64_t s[1] = {n};
    snprintf(name, sizeof name, "%s.bias", prefix);
    dense(f, name, 1, s, 0);
}

static void folder_begin(folder *f, uint32_t seed, bool f16) {
    memset(f, 0, sizeof *f);
    f->seed = seed;
    f->f16 = f16;
    assert_int_equal(lmc_safetensors_writer_create(&f->w), LMC_OK);
}

/* Writes dir/model.safetensors and dir/config.json. */
static void folder_end(folder *f, const char *dir, const char *config) {
    mkdir("/tmp/lmc-test-arch-b", 0755);
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(lmc_safetensors_writer_set_metadata(f->w, "format", f->f16 ? "mlx" : "pt"),
                     LMC_OK);
    assert_int_equal(lmc_safetensors_writer_write(f->w, path), LMC_OK);
    lmc_safetensors_writer_free(f->w);
    for (int i = 0; i < f->n; i++) free(f->bufs[i]);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(config, fp);
    fclose(fp);
}

#define QUANT_CFG                                                                                  \
    "\"quantization\": {\"group_size\": 64, \"bits\": 4}, "                                        \
    "\"quantization_config\": {\"group_size\": 64, \"bits\": 4}, "

static double max_rel(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static bool all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* Loads dir and runs the prompt 1..T; returns the last logits (malloc'd). */
static float *load_and_run(const char *dir, int T, lmc_model **mout) {
    lmc_model *m = NULL;
    lmc_status st = lmc_model_load(dir, &m);
    if (st != LMC_OK) print_error("%s: %s\n", dir, lmc_last_error());
    assert_int_equal(st, LMC_OK);
    lmc_session *s;
    assert_int_equal(lmc_session_create(m, 64, &s), LMC_OK);
    int32_t toks[64];
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((i * 37 + 5) % 256);
    float *logits = malloc(256 * sizeof(float));
    assert_int_equal(lmc_session_forward(s, toks, T, 0, logits), LMC_OK);
    assert_true(all_finite(logits, 256));
    lmc_session_free(s);
    if (mout)
        *mout = m;
    else
        lmc_model_free(m);
    return logits;
}

/* ---- longrope ---- */

static void test_longrope_frequencies(void **state) {
    (void)state;
    /* head_dim 8, theta 1e4, original 16, max 64:
     *   short: 1 / (s_i * 1e4^(2i/8)) with s = 1,2,3,4 -> 1, 1/20, 1/300, 1/4000
     *   long:  with l = 5,6,7,8                        -> 1/5, 1/60, 1/700, 1/8000
     *   factor = 64 / 16 = 4, scale = sqrt(1 + ln 4 / ln 16) = sqrt(1.5) */
    json_t *cfg = json_loads("{\"rope_type\": \"longrope\", \"short_factor\": [1, 2, 3, 4], "
                             "\"long_factor\": [5, 6, 7, 8]}",
                             0, NULL);
    lmc_rope_config rc = {.type = LMC_ROPE_LONGROPE,
                          .theta = 10000.0,
                          .factor = 1.0,
                          .original_max_position_embeddings = 16,
                          .partial_rotary_factor = 1.0,
                          .params = cfg};
    lmc_rope r;
    assert_int_equal(lmc_rope_init(&r, &rc, 8, 64), LMC_OK);
    const double s[4] = {1.0, 1.0 / 20, 1.0 / 300, 1.0 / 4000};
    const double l[4] = {1.0 / 5, 1.0 / 60, 1.0 / 700, 1.0 / 8000};
    for (int i = 0; i < 4; i++) {
        assert_true(fabs(r.inv_freq[i] - s[i]) <= 1e-6 * s[i]);
        assert_true(fabs(r.long_inv_freq[i] - l[i]) <= 1e-6 * l[i]);
    }
    assert_true(fabsf(r.attention_scaling - 1.2247449f) < 1e-6f);
    assert_true(fabsf(r.long_scaling - 1.2247449f) < 1e-6f);
    assert_false(lmc_rope_uses_long(&r, 16));
    assert_true(lmc_rope_uses_long(&r, 17));
    /* a call whose last position is 15 rotates with the short factors, one
     * reaching position 16 with the long ones (transformers' max(position_ids)+1) */
    float x[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    int32_t pos[2] = {3, 15};
    float two[16] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    lmc_rope_apply(&r, two, 2, 1, pos);
    assert_true(fabs(two[0] - cos(3.0) * sqrt(1.5)) < 1e-5);
    pos[1] = 16;
    lmc_rope_apply(&r, x, 1, 1, pos + 1);
    assert_true(fabs(x[0] - cos(16 * 0.2) * sqrt(1.5)) < 1e-5);
    assert_true(fabs(x[4] - sin(16 * 0.2) * sqrt(1.5)) < 1e-5);
    /* explicit attention_factor wins; a wrong-length factor list is an error */
    json_object_set_new(cfg, "attention_factor", json_real(1.5));
    lmc_rope_free(&r);
    assert_int_equal(lmc_rope_init(&r, &rc, 8, 64), LMC_OK);
    assert_true(fabsf(r.attention_scaling - 1.5f) < 1e-7f);
    lmc_rope_free(&r);
    json_object_set_new(cfg, "long_factor", json_loads("[1, 2]", 0, NULL));
    assert_int_equal(lmc_rope_init(&r, &rc, 8, 64), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "long_factor"));
    json_decref(cfg);
}

/* A Phi-3.5-mini-shaped config (rope_scaling longrope, top-level
 * original_max_position_embeddings; no tensor for the frequencies). */
static const char *phi35_dir = "/tmp/lmc-test-arch-b/phi35";
static void write_phi35(void) {
    folder f;
    folder_begin(&f, 11, false);
    dense2(&f, "model.embed_tokens.weight", 256, 64);
    dense2(&f, "lm_head.weight", 256, 64);
    norm(&f, "model.norm.weight", 64);
    for (int i = 0; i < 2; i++) {
        char p[200];
#define P(s) (snprintf(p, sizeof p, "model.layers.%d.%s", i, s), p)
        dense2(&f, P("self_attn.qkv_proj.weight"), 192, 64);
        dense2(&f, P("self_attn.o_proj.weight"), 64, 64);
        dense2(&f, P("mlp.gate_up_proj.weight"), 256, 64);
        dense2(&f, P("mlp.down_proj.weight"), 64, 128);
        norm(&f, P("input_layernorm.weight"), 64);
        norm(&f, P("post_attention_layernorm.weight"), 64);
#undef P
    }
    folder_end(&f, phi35_dir,
               "{\"model_type\": \"phi3\", \"architectures\": [\"Phi3ForCausalLM\"], "
               "\"vocab_size\": 256, \"hidden_size\": 64, \"intermediate_size\": 128, "
               "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 4, "
               "\"max_position_embeddings\": 64, \"original_max_position_embeddings\": 16, "
               "\"rope_theta\": 10000.0, \"rms_norm_eps\": 1e-5, \"hidden_act\": \"silu\", "
               "\"sliding_window\": 262144, \"tie_word_embeddings\": false, "
               "\"rope_scaling\": {\"type\": \"longrope\", "
               "\"short_factor\": [1.0, 1.1, 1.2, 1.3, 1.5, 1.8, 2.0, 2.5], "
               "\"long_factor\": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 16.0]}}");
}

static void test_phi35_longrope_cache(void **state) {
    (void)state;
    write_phi35();
    lmc_model *m;
    float *last = load_and_run(phi35_dir, 20, &m);
    /* one token at a time from a 10-token prompt: positions 10..15 use the
     * short factors; at position 16 the cache is rebuilt with the long ones
     * (Phi3ForCausalLM.prepare_inputs_for_generation), so every step equals
     * a fresh forward over the whole sequence */
    lmc_session *a, *b;
    assert_int_equal(lmc_session_create(m, 64, &a), LMC_OK);
    assert_int_equal(lmc_session_create(m, 64, &b), LMC_OK);
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = (int32_t)((i * 37 + 5) % 256);
    float la[256], lb[256];
    assert_int_equal(lmc_session_forward(a, toks, 10, 0, la), LMC_OK);
    for (int n = 11; n <= 24; n++) {
        assert_int_equal(lmc_session_forward(a, toks + n - 1, 1, 0, la), LMC_OK);
        lmc_session_reset(b);
        assert_int_equal(lmc_session_forward(b, toks, n, 0, lb), LMC_OK);
        double e = max_rel(la, lb, 256);
        if (e > 1e-5) print_error("step %d: rel %.3g\n", n, e);
        assert_true(e <= 1e-5);
        if (n == 20) assert_true(max_rel(la, last, 256) <= 1e-5);
    }
    assert_int_equal(lmc_session_position(a), 24);
    lmc_session_free(a);
    lmc_session_free(b);
    free(last);
    lmc_model_free(m);
}

/* ---- MoE expert calls ---- */

static lmc_tensor f32_tensor(const float *data, int64_t rows, int64_t cols) {
    lmc_tensor t = {.name = "t",
                    .dtype = LMC_DTYPE_F32,
                    .ndim = 2,
                    .data = data,
                    .nbytes = (uint64_t)(rows * cols) * 4};
    t.shape[0] = rows;
    t.shape[1] = cols;
    return t;
}

static void test_moe_unselected_experts_never_run(void **state) {
    (void)state;
    enum { E = 4, H = 8, I = 4, T = 5 };
    /* router rows: experts 0 and 1 score positive inputs high, 2 and 3 low;
     * experts 2 and 3 hold NaN weights, so running them would poison y */
    static float router[E * H], w[E][3][I * H];
    for (int h = 0; h < H; h++) {
        router[0 * H + h] = 1.0f;
        router[1 * H + h] = 0.5f;
        router[2 * H + h] = -1.0f;
        router[3 * H + h] = -2.0f;
    }
    lmc_tensor rt = f32_tensor(router, E, H), wt[E][3];
    lmc_linear gate[E], up[E], down[E];
    for (int e = 0; e < E; e++) {
        for (int j = 0; j < 3; j++) {
            for (int i = 0; i < I * H; i++) w[e][j][i] = e >= 2 ? NAN : 0.01f * (float)(i % 7 + e);
            wt[e][j] = j == 2 ? f32_tensor(w[e][j], H, I) : f32_tensor(w[e][j], I, H);
        }
        gate[e] = (lmc_linear){.weight = &wt[e][0], .in = H, .out = I};
        up[e] = (lmc_linear){.weight = &wt[e][1], .in = H, .out = I};
        down[e] = (lmc_linear){.weight = &wt[e][2], .in = I, .out = H};
    }
    float x[T * H], y[T * H];
    for (int i = 0; i < T * H; i++) x[i] = 0.1f + 0.01f * (float)i;
    for (int routing = 0; routing < 2; routing++) {
        int64_t calls[E] = {0};
        lmc_moe m = {.router = {.weight = &rt, .in = H, .out = E},
                     .routing = (lmc_moe_routing)routing,
                     .jitter_eps = 0.01f,
                     .n_experts = E,
                     .top_k = 2,
                     .gate = gate,
                     .up = up,
                     .down = down};
        assert_int_equal(lmc_moe_forward(&m, x, T, H, y, calls), LMC_OK);
        assert_true(all_finite(y, T * H));
        assert_int_equal(calls[0], T);
        assert_int_equal(calls[1], T);
        assert_int_equal(calls[2], 0);
        assert_int_equal(calls[3], 0);
    }
}

/* sparsemixer by hand: scores (2, 1.99, 0, -1), eps 0.01: the first pick is
 * expert 0 and masks e where (2 - s_e) / max(|s_e|, 2) > 0.02, i.e. keeps 0
 * and 1: w0 = 1 / (1 + e^-0.01). The second pick (expert 0 excluded) is 1
 * with threshold 1.99: keeps only 1, w1 = 1. */
static void test_sparsemixer_weights(void **state) {
    (void)state;
    enum { E = 4, H = 4 };
    static float router[E * H] = {2, 0, 0, 0, 1.99f, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0};
    /* each expert: down(silu(gate x) * up x) with identity-like weights so
     * y = sum_k w_k * f(x) and the weights can be read off */
    static float eye[E][3][H * H];
    lmc_tensor rt = f32_tensor(router, E, H), wt[E][3];
    lmc_linear gate[E], up[E], down[E];
    for (int e = 0; e < E; e++) {
        for (int j = 0; j < 3; j++) {
            for (int i = 0; i < H; i++) eye[e][j][i * H + i] = 1.0f;
            wt[e][j] = f32_tensor(eye[e][j], H, H);
        }
        gate[e] = (lmc_linear){.weight = &wt[e][0], .in = H, .out = H};
        up[e] = (lmc_linear){.weight = &wt[e][1], .in = H, .out = H};
        down[e] = (lmc_linear){.weight = &wt[e][2], .in = H, .out = H};
    }
    int64_t calls[E] = {0};
    lmc_moe m = {.router = {.weight = &rt, .in = H, .out = E},
                 .routing = LMC_MOE_SPARSEMIXER,
                 .jitter_eps = 0.01f,
                 .n_experts = E,
                 .top_k = 2,
                 .gate = gate,
                 .up = up,
                 .down = down};
    float x[H] = {1, 0, 0, 0}, y[H];
    assert_int_equal(lmc_moe_forward(&m, x, 1, H, y, calls), LMC_OK);
    double f = 1.0 / (1.0 + exp(-1.0)); /* silu(1) * 1 */
    double w0 = 1.0 / (1.0 + exp(-0.01)), w1 = 1.0;
    assert_true(fabs(y[0] - (w0 + w1) * f) < 1e-5);
    assert_int_equal(calls[0], 1);
    assert_int_equal(calls[1], 1);
    assert_int_equal(calls[2] + calls[3], 0);
}

/* qwen2_moe (HF per-expert layout, shared expert, decoder_sparse_step 2 so
 * layer 0 is dense) and qwen3_moe (MLX stacked and quantized, q/k norms). */
static void write_qwen_moe(const char *dir, bool qwen3, bool q) {
    folder f;
    folder_begin(&f, qwen3 ? 21 : 22, q);
    linear(&f, q, "model.embed_tokens", 256, 64);
    linear(&f, q, "lm_head", 256, 64);
    norm(&f, "model.norm.weight", 64);
    for (int i = 0; i < 2; i++) {
        char p[200];
#define P(s) (snprintf(p, sizeof p, "model.layers.%d.%s", i, s), p)
        linear(&f, q, P("self_attn.q_proj"), 64, 64);
        linear(&f, q, P("self_attn.k_proj"), 32, 64);
        linear(&f, q, P("self_attn.v_proj"), 32, 64);
        linear(&f, q, P("self_attn.o_proj"), 64, 64);
        if (!qwen3) {
            bias(&f, P("self_attn.q_proj"), 64);
            bias(&f, P("self_attn.k_proj"), 32);
            bias(&f, P("self_attn.v_proj"), 32);
        } else {
            norm(&f, P("self_attn.q_norm.weight"), 16);
            norm(&f, P("self_attn.k_norm.weight"), 16);
        }
        norm(&f, P("input_layernorm.weight"), 64);
        norm(&f, P("post_attention_layernorm.weight"), 64);
        if (!qwen3 && i == 0) { /* dense layer: decoder_sparse_step 2 */
            linear(&f, q, P("mlp.gate_proj"), 128, 64);
            linear(&f, q, P("mlp.up_proj"), 128, 64);
            dense2(&f, P("mlp.down_proj.weight"), 64, 128);
            continue;
        }
        linear(&f, q, P("mlp.gate"), 4, 64);
        if (q) {
            quant(&f, P("mlp.switch_mlp.gate_proj"), 4, 64, 64);
            quant(&f, P("mlp.switch_mlp.up_proj"), 4, 64, 64);
            quant(&f, P("mlp.switch_mlp.down_proj"), 4, 64, 64);
        } else {
            for (int e = 0; e < 4; e++) {
                char s[100];
                snprintf(s, sizeof s, "mlp.experts.%d.gate_proj.weight", e);
                dense2(&f, P(s), 64, 64);
                snprintf(s, sizeof s, "mlp.experts.%d.up_proj.weight", e);
                dense2(&f, P(s), 64, 64);
                snprintf(s, sizeof s, "mlp.experts.%d.down_proj.weight", e);
                dense2(&f, P(s), 64, 64);
            }
        }
        if (!qwen3) {
            linear(&f, q, P("mlp.shared_expert.gate_proj"), 128, 64);
            linear(&f, q, P("mlp.shared_expert.up_proj"), 128, 64);
            linear(&f, q, P("mlp.shared_expert.down_proj"), 64, 128);
            linear(&f, q, P("mlp.shared_expert_gate"), 1, 64);
        }
#undef P
    }
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"%s\", %s \"vocab_size\": 256, \"hidden_size\": 64, "
             "\"intermediate_size\": 128, \"moe_intermediate_size\": 64, "
             "\"shared_expert_intermediate_size\": 128, \"num_hidden_layers\": 2, "
             "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
             "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"norm_topk_prob\": %s, "
             "\"decoder_sparse_step\": %d, \"mlp_only_layers\": [], \"rms_norm_eps\": 1e-6, "
             "\"rope_theta\": 1000000.0, \"tie_word_embeddings\": false, \"hidden_act\": \"silu\"}",
             qwen3 ? "qwen3_moe" : "qwen2_moe", q ? QUANT_CFG : "", qwen3 ? "true" : "false",
             qwen3 ? 1 : 2);
    folder_end(&f, dir, cfg);
}

/* Runs the T tokens of load_and_run again in a session that counts expert
 * calls (the counters belong to the session's cache, not the model). */
static void check_calls(lmc_model *m, int moe_layers, int T, int K) {
    lmc_decoder *d = m->impl;
    enum { MAX_E = 64 };
    int64_t *calls = calloc((size_t)d->n_layers * MAX_E, sizeof *calls);
    assert_non_null(calls);
    lmc_session *s;
    assert_int_equal(lmc_session_create(m, 64, &s), LMC_OK);
    s->kv.expert_calls = calls;
    s->kv.expert_calls_stride = MAX_E;
    int32_t toks[64];
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((i * 37 + 5) % 256);
    assert_int_equal(lmc_session_forward(s, toks, T, 0, NULL), LMC_OK);
    lmc_session_free(s);
    int seen = 0;
    for (int64_t l = 0; l < d->n_layers; l++) {
        if (!d->layers[l].moe) continue;
        assert_true(d->layers[l].moe->n_experts <= MAX_E);
        int64_t sum = 0;
        for (int64_t e = 0; e < d->layers[l].moe->n_experts; e++) sum += calls[l * MAX_E + e];
        assert_int_equal(sum, (int64_t)T * K);
        seen++;
    }
    free(calls);
    assert_int_equal(seen, moe_layers);
}

static void test_qwen_moe_load_and_calls(void **state) {
    (void)state;
    lmc_model *m;
    write_qwen_moe("/tmp/lmc-test-arch-b/qwen2_moe", false, false);
    free(load_and_run("/tmp/lmc-test-arch-b/qwen2_moe", 7, &m));
    check_calls(m, 1, 7, 2);
    lmc_decoder *d = m->impl;
    assert_null(d->layers[0].moe);
    assert_non_null(d->layers[1].moe->shared);
    lmc_model_free(m);
    write_qwen_moe("/tmp/lmc-test-arch-b/qwen3_moe-mlx", true, true);
    free(load_and_run("/tmp/lmc-test-arch-b/qwen3_moe-mlx", 7, &m));
    check_calls(m, 2, 7, 2);
    d = m->impl;
    assert_true(d->layers[0].moe->gate[3].quantized);
    assert_true(d->layers[0].moe->norm_topk);
    lmc_model_free(m);
}

/* ---- loading regressions ---- */

/* A Qwen 2.5-style MLX folder: tied, quantized embedding, no lm_head tensor. */
static void test_quantized_qwen25_tied(void **state) {
    (void)state;
    folder f;
    folder_begin(&f, 31, true);
    quant(&f, "model.embed_tokens", 0, 256, 64);
    norm(&f, "model.norm.weight", 64);
    for (int i = 0; i < 2; i++) {
        char p[200];
#define P(s) (snprintf(p, sizeof p, "model.layers.%d.%s", i, s), p)
        quant(&f, P("self_attn.q_proj"), 0, 64, 64);
        quant(&f, P("self_attn.k_proj"), 0, 32, 64);
        quant(&f, P("self_attn.v_proj"), 0, 32, 64);
        quant(&f, P("self_attn.o_proj"), 0, 64, 64);
        bias(&f, P("self_attn.q_proj"), 64);
        bias(&f, P("self_attn.k_proj"), 32);
        bias(&f, P("self_attn.v_proj"), 32);
        quant(&f, P("mlp.gate_proj"), 0, 128, 64);
        quant(&f, P("mlp.up_proj"), 0, 128, 64);
        quant(&f, P("mlp.down_proj"), 0, 64, 128);
        norm(&f, P("input_layernorm.weight"), 64);
        norm(&f, P("post_attention_layernorm.weight"), 64);
#undef P
    }
    folder_end(&f, "/tmp/lmc-test-arch-b/qwen25-mlx",
               "{\"model_type\": \"qwen2\", " QUANT_CFG "\"vocab_size\": 256, \"hidden_size\": 64, "
               "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"tie_word_embeddings\": true, \"rms_norm_eps\": 1e-6, "
               "\"rope_theta\": 1000000.0, \"torch_dtype\": \"float16\"}");
    lmc_model *m;
    free(load_and_run("/tmp/lmc-test-arch-b/qwen25-mlx", 9, &m));
    lmc_decoder *d = m->impl;
    assert_true(d->tied);
    assert_true(d->embed.quantized);
    lmc_model_free(m);
}

/* OpenELM with per-layer heads and FFN widths; HF f32 and MLX quantized, tied. */
static void write_openelm(const char *dir, bool q) {
    folder f;
    folder_begin(&f, q ? 41 : 42, q);
    linear(&f, q, "transformer.token_embeddings", 256, 64);
    norm(&f, "transformer.norm.weight", 64);
    const int nq[2] = {2, 4}, nkv[2] = {1, 2}, inter[2] = {64, 128};
    for (int i = 0; i < 2; i++) {
        char p[200];
#define P(s) (snprintf(p, sizeof p, "transformer.layers.%d.%s", i, s), p)
        linear(&f, q, P("attn.qkv_proj"), (nq[i] + 2 * nkv[i]) * 16, 64);
        linear(&f, q, P("attn.out_proj"), 64, nq[i] * 16);
        norm(&f, P("attn.q_norm.weight"), 16);
        norm(&f, P("attn.k_norm.weight"), 16);
        linear(&f, q, P("ffn.proj_1"), 2 * inter[i], 64);
        linear(&f, q, P("ffn.proj_2"), 64, inter[i]);
        norm(&f, P("attn_norm.weight"), 64);
        norm(&f, P("ffn_norm.weight"), 64);
#undef P
    }
    char cfg[2048];
    /* ffn widths: make_divisible(1.0 * 64, 64) = 64, make_divisible(2.0 * 64, 64) = 128 */
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"openelm\", \"architectures\": [\"OpenELMForCausalLM\"], %s "
             "\"vocab_size\": 256, \"model_dim\": 64, \"num_transformer_layers\": 2, "
             "\"head_dim\": 16, \"num_query_heads\": [2, 4], \"num_kv_heads\": [1, 2], "
             "\"num_gqa_groups\": 2, \"qkv_multipliers\": [0.5, 1.0], "
             "\"ffn_multipliers\": [1.0, 2.0], \"ffn_dim_divisor\": 64, \"ffn_with_glu\": true, "
             "\"activation_fn_name\": \"swish\", \"normalize_qk_projections\": true, "
             "\"share_input_output_layers\": true, \"rope_freq_constant\": 10000, "
             "\"rope_max_length\": 4096, \"max_context_length\": 128, \"bos_token_id\": 1, "
             "\"eos_token_id\": 2}",
             q ? QUANT_CFG : "");
    folder_end(&f, dir, cfg);
}

static void test_openelm_loads(void **state) {
    (void)state;
    lmc_model *m;
    write_openelm("/tmp/lmc-test-arch-b/openelm", false);
    free(load_and_run("/tmp/lmc-test-arch-b/openelm", 9, &m));
    lmc_decoder *d = m->impl;
    assert_int_equal(d->layers[0].n_heads, 2);
    assert_int_equal(d->layers[1].n_kv_heads, 2);
    assert_true(d->tied);
    lmc_model_free(m);
    write_openelm("/tmp/lmc-test-arch-b/openelm-mlx", true);
    free(load_and_run("/tmp/lmc-test-arch-b/openelm-mlx", 9, &m));
    d = m->impl;
    assert_true(d->embed.quantized && d->tied && d->layers[1].qkv.quantized);
    assert_false(d->layers[0].o.quantized); /* 32 inputs: left dense, as mlx-lm does */
    lmc_model_free(m);
}

/* A Phi-3.5-MoE MLX folder: stacked quantized SwitchLinear experts
 * (packed [E, out, in/8]), LayerNorm with bias, attention and lm_head
 * biases. The variants break one tensor and expect an error naming it. */
static void write_phimoe(const char *dir, int breakage) {
    folder f;
    folder_begin(&f, 51, true);
    quant(&f, "model.embed_tokens", 0, 256, 64);
    quant(&f, "lm_head", 0, 256, 64);
    bias(&f, "lm_head", 256);
    norm(&f, "model.norm.weight", 64);
    bias(&f, "model.norm", 64);
    for (int i = 0; i < 2; i++) {
        char p[200];
#define P(s) (snprintf(p, sizeof p, "model.layers.%d.%s", i, s), p)
        const char *proj[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        const int out[4] = {64, 32, 32, 64};
        for (int j = 0; j < 4; j++) {
            char s[64];
            snprintf(s, sizeof s, "self_attn.%s", proj[j]);
            quant(&f, P(s), 0, out[j], 64);
            bias(&f, P(s), out[j]);
        }
        quant(&f, P("block_sparse_moe.gate"), 0, 4, 64);
        if (breakage == 1 && i == 1) { /* scales of the wrong group count */
            int64_t ws[3] = {4, 128, 8}, ss[3] = {4, 128, 2};
            static uint32_t pk[4 * 128 * 8];
            static uint16_t sc[4 * 128 * 2];
            lmc_safetensors_writer_add(f.w, P("block_sparse_moe.switch_mlp.gate_proj.weight"),
                                       LMC_DTYPE_U32, 3, ws, pk);
            lmc_safetensors_writer_add(f.w, P("block_sparse_moe.switch_mlp.gate_proj.scales"),
                                       LMC_DTYPE_F16, 3, ss, sc);
            lmc_safetensors_writer_add(f.w, P("block_sparse_moe.switch_mlp.gate_proj.biases"),
                                       LMC_DTYPE_F16, 3, ss, sc);
        } else {
            quant(&f, P("block_sparse_moe.switch_mlp.gate_proj"), 4, 128, 64);
        }
        quant(&f, P("block_sparse_moe.switch_mlp.up_proj"), 4, 128, 64);
        if (breakage == 2 && i == 1)
            linear(&f, false, P("block_sparse_moe.switch_mlp.down_proj"), 64, 128);
        else
            quant(&f, P("block_sparse_moe.switch_mlp.down_proj"), 4, 64, 128);
        norm(&f, P("input_layernorm.weight"), 64);
        bias(&f, P("input_layernorm"), 64);
        norm(&f, P("post_attention_layernorm.weight"), 64);
        bias(&f, P("post_attention_layernorm"), 64);
#undef P
    }
    folder_end(&f, dir,
               "{\"model_type\": \"phimoe\", " QUANT_CFG
               "\"vocab_size\": 256, \"hidden_size\": 64, "
               "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, "
               "\"attention_bias\": true, \"lm_head_bias\": true, \"rms_norm_eps\": 1e-5, "
               "\"router_jitter_noise\": 0.01, \"max_position_embeddings\": 64, "
               "\"original_max_position_embeddings\": 16, \"rope_theta\": 10000.0, "
               "\"rope_scaling\": {\"type\": \"longrope\", \"short_mscale\": 1.1, "
               "\"long_mscale\": 1.2, \"short_factor\": [1, 1, 1, 1, 1, 1, 1, 1], "
               "\"long_factor\": [1, 2, 3, 4, 5, 6, 7, 8]}, \"tie_word_embeddings\": false}");
}

static void test_phimoe_switch_linear(void **state) {
    (void)state;
    lmc_model *m;
    write_phimoe("/tmp/lmc-test-arch-b/phimoe-mlx", 0);
    free(load_and_run("/tmp/lmc-test-arch-b/phimoe-mlx", 20, &m));
    lmc_decoder *d = m->impl;
    assert_true(d->layers[1].moe->down[3].quantized);
    assert_int_equal(d->layers[1].moe->routing, LMC_MOE_SPARSEMIXER);
    assert_true(d->final_norm.layer_norm && d->final_norm.bias && d->lm_head.bias);
    assert_true(fabsf(d->rope.attention_scaling - 1.1f) < 1e-6f);
    assert_true(fabsf(d->rope.long_scaling - 1.2f) < 1e-6f);
    check_calls(m, 2, 20, 2);
    lmc_model_free(m);

    write_phimoe("/tmp/lmc-test-arch-b/phimoe-bad-scales", 1);
    assert_int_not_equal(lmc_model_load("/tmp/lmc-test-arch-b/phimoe-bad-scales", &m), LMC_OK);
    print_message("bad scales: %s\n", lmc_last_error());
    assert_non_null(
        strstr(lmc_last_error(), "model.layers.1.block_sparse_moe.switch_mlp.gate_proj"));
    assert_non_null(strstr(lmc_last_error(), "group_size"));

    write_phimoe("/tmp/lmc-test-arch-b/phimoe-dense-down", 2);
    assert_int_not_equal(lmc_model_load("/tmp/lmc-test-arch-b/phimoe-dense-down", &m), LMC_OK);
    print_message("dense down: %s\n", lmc_last_error());
    assert_non_null(strstr(lmc_last_error(), "switch_mlp.down_proj"));
}

/* A missing tensor names the module and what is there. */
static void test_missing_key_message(void **state) {
    (void)state;
    folder f;
    folder_begin(&f, 61, false);
    dense2(&f, "model.embed_tokens.weight", 256, 64);
    norm(&f, "model.norm.weight", 64);
    dense2(&f, "lm_head.weight", 256, 64);
    folder_end(&f, "/tmp/lmc-test-arch-b/openelm-wrong-names",
               "{\"model_type\": \"openelm\", \"vocab_size\": 256, \"model_dim\": 64, "
               "\"num_transformer_layers\": 1, \"head_dim\": 16, \"num_query_heads\": [4], "
               "\"num_kv_heads\": [2], \"ffn_multipliers\": [1.0], \"ffn_dim_divisor\": 64, "
               "\"share_input_output_layers\": false}");
    lmc_model *m;
    assert_int_equal(lmc_model_load("/tmp/lmc-test-arch-b/openelm-wrong-names", &m),
                     LMC_ERR_NOT_FOUND);
    print_message("wrong names: %s\n", lmc_last_error());
    assert_non_null(strstr(lmc_last_error(), "transformer.token_embeddings.weight"));
    write_qwen_moe("/tmp/lmc-test-arch-b/qwen2_moe", false, false);
    /* a config asking for more experts than the file holds: the missing
     * expert's module is named, with the tensors present next to it */
    FILE *fp = fopen("/tmp/lmc-test-arch-b/qwen2_moe/config.json", "r+");
    assert_non_null(fp);
    char cfg[4096];
    size_t n = fread(cfg, 1, sizeof cfg - 1, fp);
    cfg[n] = 0;
    fclose(fp);
    char *e = strstr(cfg, "\"num_experts\": 4");
    assert_non_null(e);
    e[15] = '5';
    fp = fopen("/tmp/lmc-test-arch-b/qwen2_moe/config.json", "w");
    fputs(cfg, fp);
    fclose(fp);
    assert_int_equal(lmc_model_load("/tmp/lmc-test-arch-b/qwen2_moe", &m), LMC_ERR_SHAPE);
    print_message("5 experts: %s\n", lmc_last_error());
    assert_non_null(strstr(lmc_last_error(), "model.layers.1.mlp.gate"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_longrope_frequencies),
        cmocka_unit_test(test_phi35_longrope_cache),
        cmocka_unit_test(test_moe_unselected_experts_never_run),
        cmocka_unit_test(test_sparsemixer_weights),
        cmocka_unit_test(test_qwen_moe_load_and_calls),
        cmocka_unit_test(test_quantized_qwen25_tied),
        cmocka_unit_test(test_openelm_loads),
        cmocka_unit_test(test_phimoe_switch_linear),
        cmocka_unit_test(test_missing_key_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
