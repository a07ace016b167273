/* qwen3, gemma2, gemma3_text and starcoder2 on tiny random models written
 * here (no reference outputs needed): they load from their HF key layouts,
 * a wrong layout fails naming the module, the expected tensors and the ones
 * present, and a session (rotating KV cache on sliding layers, prompt longer
 * than the window, then 3x the window of decoding) gives the logits of one
 * batch over a full cache (rel L2 <= 1e-5) with the sliding layers' memory
 * bounded by the window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/fixtures.h"
#include "helpers/random_model.h"
#include "models/model.h"
#include "nn/decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { H = 64, NH = 4, NKV = 2, HD = 16, I = 128, V = 256, L = 4, WINDOW = 8 };
enum { PROMPT = 20, TOTAL = PROMPT + 3 * WINDOW + 4 };

typedef enum { QWEN3, GEMMA2, GEMMA3, STARCODER2 } arch_id;
enum { NO_QK_NORM = 1, LLAMA_MLP_NAMES = 2 };

static const char *const type_names[] = {"qwen3", "gemma2", "gemma3_text", "starcoder2"};

static char *make_dir(void) {
    char tmpl[] = "/tmp/lmc_test_archs_XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

/* The tensors of arch's HF layout (flags break it on purpose). */
static void write_weights(random_model *m, arch_id a, unsigned flags) {
    bool gemma = a == GEMMA2 || a == GEMMA3, sc = a == STARCODER2;
    float norm_offset = gemma ? 0.0f : 1.0f; /* gemma stores w of (1 + w) */
    random_model_add(m, "model.embed_tokens.weight", V, H, gemma ? 0.15f : 1.0f, 0);
    random_model_add(m, "model.norm.weight", H, 0, 0.2f, norm_offset);
    if (sc) random_model_add(m, "model.norm.bias", H, 0, 0.1f, 0);
    if (a == QWEN3) random_model_add(m, "lm_head.weight", V, H, 0.2f, 0);
    static const struct {
        const char *name;
        int64_t out, in;
    } attn[] = {{"q_proj", NH * HD, H},
                {"k_proj", NKV * HD, H},
                {"v_proj", NKV * HD, H},
                {"o_proj", H, NH * HD}};
    for (int l = 0; l < L; l++) {
        for (int j = 0; j < 4; j++) {
            random_model_addf(m, attn[j].out, attn[j].in, 0.25f, 0,
                              "model.layers.%d.self_attn.%s.weight", l, attn[j].name);
            if (sc)
                random_model_addf(m, attn[j].out, 0, 0.1f, 0, "model.layers.%d.self_attn.%s.bias",
                                  l, attn[j].name);
        }
        if ((a == QWEN3 || a == GEMMA3) && !(flags & NO_QK_NORM)) {
            random_model_addf(m, HD, 0, 0.2f, norm_offset,
                              "model.layers.%d.self_attn.q_norm.weight", l);
            random_model_addf(m, HD, 0, 0.2f, norm_offset,
                              "model.layers.%d.self_attn.k_norm.weight", l);
        }
        if (sc && !(flags & LLAMA_MLP_NAMES)) {
            random_model_addf(m, I, H, 0.25f, 0, "model.layers.%d.mlp.c_fc.weight", l);
            random_model_addf(m, I, 0, 0.1f, 0, "model.layers.%d.mlp.c_fc.bias", l);
            random_model_addf(m, H, I, 0.2f, 0, "model.layers.%d.mlp.c_proj.weight", l);
            random_model_addf(m, H, 0, 0.1f, 0, "model.layers.%d.mlp.c_proj.bias", l);
        } else {
            random_model_addf(m, I, H, 0.25f, 0, "model.layers.%d.mlp.gate_proj.weight", l);
            random_model_addf(m, I, H, 0.25f, 0, "model.layers.%d.mlp.up_proj.weight", l);
            random_model_addf(m, H, I, 0.2f, 0, "model.layers.%d.mlp.down_proj.weight", l);
        }
        const char *norms[] = {"input_layernorm", "post_attention_layernorm",
                               "pre_feedforward_layernorm", "post_feedforward_layernorm"};
        for (int j = 0; j < (gemma ? 4 : 2); j++) {
            random_model_addf(m, H, 0, 0.2f, norm_offset, "model.layers.%d.%s.weight", l, norms[j]);
            if (sc) random_model_addf(m, H, 0, 0.1f, 0, "model.layers.%d.%s.bias", l, norms[j]);
        }
    }
}

/* config.json for arch with a window of WINDOW on some layers; extra is
 * spliced in (",\"key\": value ..." or ""). */
static void write_model(const char *dir, arch_id a, unsigned flags, const char *extra) {
    static const char *const per_arch[] = {
        "\"tie_word_embeddings\": false, \"use_sliding_window\": true, \"max_window_layers\": 2, "
        "\"sliding_window\": 8, \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-6",
        "\"query_pre_attn_scalar\": 24, \"attn_logit_softcapping\": 2.0, "
        "\"final_logit_softcapping\": 5.0, \"sliding_window\": 8, \"rms_norm_eps\": 1e-6, "
        "\"hidden_activation\": \"gelu_pytorch_tanh\"",
        "\"query_pre_attn_scalar\": 24, \"sliding_window\": 8, \"rms_norm_eps\": 1e-6, "
        "\"hidden_activation\": \"gelu_pytorch_tanh\"",
        "\"sliding_window\": 8, \"norm_epsilon\": 1e-5, \"use_bias\": true, "
        "\"hidden_act\": \"gelu_pytorch_tanh\", \"rope_theta\": 100000.0"};
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
             "\"head_dim\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 256, "
             "\"bos_token_id\": 1, \"eos_token_id\": 2, %s%s}",
             type_names[a], H, I, L, NH, NKV, HD, V, per_arch[a], extra ? extra : "");
    random_model *m = random_model_create(17 + a);
    write_weights(m, a, flags);
    assert_int_equal(random_model_write(m, dir, cfg), 0);
}

static void tokens(int32_t *t, int n) {
    srand(11);
    for (int i = 0; i < n; i++) t[i] = 3 + rand() % (V - 3);
}

/* logits [n, V] of tokens in one batch over a cache keeping every position */
static void full_cache_logits(lmc_model *m, const int32_t *t, int n, float *out) {
    lmc_kv_cache kv;
    const lmc_model_config *c = &m->cfg;
    assert_int_equal(
        lmc_kv_cache_init(&kv, c->num_hidden_layers, c->num_key_value_heads, c->head_dim, n),
        LMC_OK);
    assert_int_equal(m->arch->forward(m, &kv, t, n, true, out), LMC_OK);
    lmc_kv_cache_free(&kv);
}

static void check_rotating_equals_full(arch_id a, const char *extra, int expect_sliding) {
    char *dir = make_dir();
    write_model(dir, a, 0, extra);
    lmc_model *m;
    if (lmc_model_load(dir, &m) != LMC_OK) fail_msg("%s: %s", type_names[a], lmc_last_error());
    int32_t t[TOTAL];
    tokens(t, TOTAL);
    float *ref = malloc(sizeof(float) * TOTAL * V), *got = malloc(sizeof(float) * TOTAL * V);
    full_cache_logits(m, t, TOTAL, ref);
    for (int i = 0; i < TOTAL * V; i++) assert_true(isfinite(ref[i]));

    lmc_session *s;
    assert_int_equal(lmc_session_create(m, TOTAL, &s), LMC_OK);
    /* The prompt (longer than the window) in one call, then token by token. */
    assert_int_equal(lmc_session_forward(s, t, PROMPT, 1, got), LMC_OK);
    for (int i = PROMPT; i < TOTAL; i++)
        assert_int_equal(lmc_session_forward(s, t + i, 1, 0, got + (size_t)i * V), LMC_OK);
    for (int i = 0; i < TOTAL; i++) {
        double e = rel_l2(got + (size_t)i * V, ref + (size_t)i * V, V);
        if (e > 1e-5) fail_msg("%s: position %d: rel_l2 %.3g", type_names[a], i, e);
    }
    /* Sliding layers hold window + max_batch - 1 slots, the others all. */
    const lmc_decoder *d = m->impl;
    int sliding = 0;
    for (int l = 0; l < L; l++) {
        const lmc_kv_layer *kl = &s->kv.layers[l];
        if (d->layers[l].sliding_window) {
            sliding++;
            assert_int_equal(kl->window, WINDOW);
            assert_true(kl->capacity <= WINDOW + s->kv.max_batch - 1);
            assert_true(kl->capacity < TOTAL);
        } else {
            assert_int_equal(kl->window, 0);
            assert_true(kl->capacity >= TOTAL);
        }
    }
    assert_int_equal(sliding, expect_sliding);
    /* All at once: the session splits it into batches of max_batch. */
    lmc_session_reset(s);
    assert_int_equal(lmc_session_forward(s, t, TOTAL, 1, got), LMC_OK);
    for (int i = 0; i < TOTAL; i++)
        assert_true(rel_l2(got + (size_t)i * V, ref + (size_t)i * V, V) <= 1e-5);
    /* Only the last position's logits. */
    lmc_session_reset(s);
    assert_int_equal(lmc_session_forward(s, t, TOTAL, 0, got), LMC_OK);
    assert_true(rel_l2(got, ref + (size_t)(TOTAL - 1) * V, V) <= 1e-5);
    lmc_session_free(s);
    lmc_model_free(m);
    free(ref);
    free(got);
    random_model_remove(dir);
    free(dir);
}

static void test_qwen3(void **state) {
    (void)state;
    check_rotating_equals_full(QWEN3, NULL, 2); /* layers 2, 3 from max_window_layers */
}

static void test_gemma2(void **state) {
    (void)state;
    check_rotating_equals_full(GEMMA2, NULL, 2); /* layers 0 and 2 */
}

static void test_gemma3(void **state) {
    (void)state;
    check_rotating_equals_full(GEMMA3, ", \"sliding_window_pattern\": 2", 2);
    check_rotating_equals_full(GEMMA3,
                               ", \"layer_types\": [\"sliding_attention\", \"sliding_attention\", "
                               "\"sliding_attention\", \"full_attention\"]",
                               3);
}

static void test_starcoder2(void **state) {
    (void)state;
    check_rotating_equals_full(STARCODER2, NULL, L);
}

static float *logits_of(const char *dir, const int32_t *t, int n) {
    lmc_model *m;
    if (lmc_model_load(dir, &m) != LMC_OK) fail_msg("%s", lmc_last_error());
    float *out = malloc(sizeof(float) * (size_t)n * V);
    full_cache_logits(m, t, n, out);
    lmc_model_free(m);
    return out;
}

/* transformers 5's nested rope_parameters and layer_types read as the
 * classic rope_theta / rope_local_base_freq / sliding_window_pattern; the
 * local base frequency reaches the sliding layers only. */
static void test_gemma3_config_spellings(void **state) {
    (void)state;
    int32_t t[TOTAL];
    tokens(t, TOTAL);
    char *dir = make_dir();
    write_model(dir, GEMMA3, 0,
                ", \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, "
                "\"sliding_window_pattern\": 2");
    float *classic = logits_of(dir, t, TOTAL);
    random_model_remove(dir);
    mkdir(dir, 0700);
    write_model(dir, GEMMA3, 0,
                ", \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\", "
                "\"rope_theta\": 1000000.0}, \"sliding_attention\": {\"rope_type\": \"default\", "
                "\"rope_theta\": 10000.0}}, \"layer_types\": [\"sliding_attention\", "
                "\"full_attention\", \"sliding_attention\", \"full_attention\"]");
    float *nested = logits_of(dir, t, TOTAL);
    assert_true(rel_l2(nested, classic, (size_t)TOTAL * V) == 0.0);
    random_model_remove(dir);
    mkdir(dir, 0700);
    write_model(dir, GEMMA3, 0,
                ", \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 500.0, "
                "\"sliding_window_pattern\": 2");
    float *local = logits_of(dir, t, TOTAL);
    assert_true(rel_l2(local, classic, (size_t)TOTAL * V) > 1e-4);
    random_model_remove(dir);
    free(classic);
    free(nested);
    free(local);
    free(dir);
}

/* gemma2's final softcap bounds the logits. */
static void test_gemma2_softcap(void **state) {
    (void)state;
    int32_t t[TOTAL];
    tokens(t, TOTAL);
    char *dir = make_dir();
    write_model(dir, GEMMA2, 0, NULL);
    float *lg = logits_of(dir, t, TOTAL);
    float mx = 0;
    for (int i = 0; i < TOTAL * V; i++) mx = fabsf(lg[i]) > mx ? fabsf(lg[i]) : mx;
    assert_true(mx <= 5.0f && mx > 1.0f);
    free(lg);
    random_model_remove(dir);
    free(dir);
}

static void expect_load_error(arch_id a, unsigned flags, const char *const *needles) {
    char *dir = make_dir();
    write_model(dir, a, flags, NULL);
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(dir, &m), LMC_ERR_NOT_FOUND);
    assert_null(m);
    const char *msg = lmc_last_error();
    for (int i = 0; needles[i]; i++)
        if (!strstr(msg, needles[i])) fail_msg("'%s' not in: %s", needles[i], msg);
    print_message("%s\n", msg);
    random_model_remove(dir);
    free(dir);
}

/* A Llama-style MLP in a starcoder2 file, a qwen3 file without q_norm. */
static void test_layout_errors(void **state) {
    (void)state;
    const char *sc[] = {"starcoder2", "model.layers.0.mlp.c_fc", "gate_proj.weight",
                        "under 'model.layers.0.mlp'", NULL};
    expect_load_error(STARCODER2, LLAMA_MLP_NAMES, sc);
    const char *qw[] = {"qwen3", "model.layers.0.self_attn.q_norm",
                        "under 'model.layers.0.self_attn': k_proj.weight", NULL};
    expect_load_error(QWEN3, NO_QK_NORM, qw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gemma2),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_starcoder2),
        cmocka_unit_test(test_gemma3_config_spellings),
        cmocka_unit_test(test_gemma2_softcap),
        cmocka_unit_test(test_layout_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
