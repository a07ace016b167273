/* Broken model folders: copies of the fixtures with a file cut short, a
 * tensor missing or misshapen, a bad index or a bad config.json. Every case
 * is an exact status plus a message naming the file and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/bad_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define LAYER1_DOWN "model.layers.1.mlp.down_proj.weight"

typedef struct scratch {
    char *dir;
    char *weights; /* dir/model.safetensors */
    char *config;  /* dir/config.json */
} scratch;

static int setup_fixture(void **state, const char *fixture) {
    scratch *s = calloc(1, sizeof *s);
    *state = s;
    s->dir = bi_copy_fixture(fixture);
    if (!s->dir) return -1;
    s->weights = bi_path(s->dir, "model.safetensors");
    s->config = bi_path(s->dir, "config.json");
    return 0;
}

static int setup_f32(void **state) {
    return setup_fixture(state, "llama-f32");
}
static int setup_sharded(void **state) {
    return setup_fixture(state, "llama-sharded");
}

static int teardown(void **state) {
    scratch *s = *state;
    bi_rmtree(s->dir);
    free(s->dir);
    free(s->weights);
    free(s->config);
    free(s);
    return 0;
}

/* Loading fails with `want` and a message holding the given substrings;
 * nothing is handed out. */
#define EXPECT_LOAD(s, want, ...)                                                                  \
    do {                                                                                           \
        lmc_model *m_ = (lmc_model *)1;                                                            \
        BI_EXPECT(lmc_model_load((s)->dir, &m_), want, __VA_ARGS__);                               \
        assert_null(m_);                                                                           \
    } while (0)

static void test_fixture_copy_loads(void **state) {
    scratch *s = *state;
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(s->dir, &m), LMC_OK);
    lmc_model_free(m);
}

/* ---- weights files ---- */

static void test_weights_truncated(void **state) {
    scratch *s = *state;
    /* The data section cut short: the tensor stored last runs past the end. */
    lmc_safetensors st;
    assert_int_equal(lmc_safetensors_open(s->weights, &st), LMC_OK);
    const lmc_tensor *last = &st.tensors[0];
    for (size_t i = 1; i < st.n_tensors; i++)
        if ((const uint8_t *)st.tensors[i].data > (const uint8_t *)last->data)
            last = &st.tensors[i];
    char *name = lmc_strdup(last->name);
    lmc_safetensors_close(&st);
    long size = bi_file_size(s->dir, "model.safetensors");
    assert_true(bi_truncate(s->dir, "model.safetensors", size - 4));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->weights, name, "past the end of the data");
    free(name);
    /* Header cut. */
    assert_true(bi_truncate(s->dir, "model.safetensors", 1000));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->weights, "runs past the end of the file");
    /* Fewer than 8 bytes. */
    assert_true(bi_truncate(s->dir, "model.safetensors", 3));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->weights, "truncated: 3 bytes");
}

static void test_weights_garbage_header(void **state) {
    scratch *s = *state;
    assert_true(bi_write_st(s->dir, "model.safetensors", "not json at all", 0, NULL, 0));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->weights, "not valid JSON");
}

static void test_missing_tensor(void **state) {
    scratch *s = *state;
    bi_tensor_edit e = {.name = LAYER1_DOWN, .drop = true};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    EXPECT_LOAD(s, LMC_ERR_NOT_FOUND, s->dir, "missing tensor '" LAYER1_DOWN "'");
}

static void test_missing_lm_head(void **state) {
    scratch *s = *state;
    bi_tensor_edit e = {.name = "lm_head.weight", .drop = true};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    EXPECT_LOAD(s, LMC_ERR_NOT_FOUND, "missing tensor 'lm_head.weight'");
    /* With tied embeddings the head is not needed. */
    assert_true(bi_edit_json(s->dir, "config.json", "tie_word_embeddings", json_true()));
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(s->dir, &m), LMC_OK);
    lmc_model_free(m);
}

static void test_wrong_shape(void **state) {
    scratch *s = *state;
    bi_tensor_edit e = {.name = "model.layers.0.self_attn.q_proj.weight",
                        .ndim = 2,
                        .shape = {32, 128},
                        .dtype = -1};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    EXPECT_LOAD(s, LMC_ERR_SHAPE, s->dir, "'model.layers.0.self_attn.q_proj.weight'",
                "shape [32, 128], expected [64, 64]");
}

static void test_wrong_rank(void **state) {
    scratch *s = *state;
    bi_tensor_edit e = {.name = "model.norm.weight", .ndim = 2, .shape = {8, 8}, .dtype = -1};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    EXPECT_LOAD(s, LMC_ERR_SHAPE, "'model.norm.weight'", "[8, 8], expected [64]");
}

static void test_vocab_mismatch(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "vocab_size", json_integer(300)));
    EXPECT_LOAD(s, LMC_ERR_SHAPE, "'model.embed_tokens.weight'", "[256, 64], expected [300, 64]");
}

static void test_wrong_dtype(void **state) {
    scratch *s = *state;
    /* Same bytes, integer dtype: neither the norm nor the linear can use it. */
    bi_tensor_edit e = {.name = "model.layers.0.input_layernorm.weight", .dtype = LMC_DTYPE_I32};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    EXPECT_LOAD(s, LMC_ERR_UNSUPPORTED, "'model.layers.0.input_layernorm.weight'", "dtype I32");
    e = (bi_tensor_edit){.name = "model.layers.0.input_layernorm.weight", .dtype = LMC_DTYPE_F32};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    e = (bi_tensor_edit){.name = "model.layers.0.mlp.up_proj.weight", .dtype = LMC_DTYPE_U32};
    assert_true(bi_edit_tensor(s->dir, "model.safetensors", &e));
    /* A U32 weight is the packed half of an MLX-quantized module: its scales are missing. */
    EXPECT_LOAD(s, LMC_ERR_NOT_FOUND, "'model.layers.0.mlp.up_proj.weight'", "packed U32",
                "'model.layers.0.mlp.up_proj.scales' is missing");
}

static void test_no_weights(void **state) {
    scratch *s = *state;
    assert_true(bi_remove(s->dir, "model.safetensors"));
    EXPECT_LOAD(s, LMC_ERR_NOT_FOUND, s->dir, "no model.safetensors");
}

static void test_duplicate_tensor_across_files(void **state) {
    scratch *s = *state;
    float v[64] = {0};
    char header[256];
    snprintf(header, sizeof header,
             "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[0,256]}}");
    assert_true(bi_write_st(s->dir, "extra.safetensors", header, 0, v, sizeof v));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, "'model.norm.weight' appears in more than one file");
}

static void test_missing_folder(void **state) {
    (void)state;
    lmc_model *m = (lmc_model *)1;
    BI_EXPECT(lmc_model_load("/nonexistent/model", &m), LMC_ERR_IO,
              "/nonexistent/model/config.json", "cannot open");
    assert_null(m);
}

/* ---- sharded: model.safetensors.index.json ---- */

static void test_sharded_copy_loads(void **state) {
    test_fixture_copy_loads(state);
}

static void test_index_missing_shard(void **state) {
    scratch *s = *state;
    assert_true(bi_remove(s->dir, "model-00003-of-00004.safetensors"));
    char *shard = bi_path(s->dir, "model-00003-of-00004.safetensors");
    EXPECT_LOAD(s, LMC_ERR_IO, shard, "cannot open");
    free(shard);
}

static void test_index_key_not_in_shard(void **state) {
    scratch *s = *state;
    /* down_proj of layer 1 lives in shard 3; the index claims shard 1. */
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json", "weight_map." LAYER1_DOWN,
                             json_string("model-00001-of-00004.safetensors")));
    EXPECT_LOAD(s, LMC_ERR_NOT_FOUND, "model.safetensors.index.json", "'" LAYER1_DOWN "'",
                "model-00001-of-00004.safetensors, which does not hold it");
}

static void test_index_names_absent_tensor(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json",
                             "weight_map.model.layers.9.mlp.up_proj.weight",
                             json_string("model-00002-of-00004.safetensors")));
    EXPECT_LOAD(s, LMC_ERR_NOT_FOUND, "'model.layers.9.mlp.up_proj.weight'", "does not hold it");
}

static void test_index_path_in_weight_map(void **state) {
    scratch *s = *state;
    char *index = bi_path(s->dir, "model.safetensors.index.json");
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json", "weight_map." LAYER1_DOWN,
                             json_string("../model-00003-of-00004.safetensors")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "weight_map['" LAYER1_DOWN "']",
                "'../model-00003-of-00004.safetensors' is not a plain file name");
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json", "weight_map." LAYER1_DOWN,
                             json_string("/etc/passwd")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "'/etc/passwd' is not a plain file name");
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json", "weight_map." LAYER1_DOWN,
                             json_string("..")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "'..' is not a plain file name");
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json", "weight_map." LAYER1_DOWN,
                             json_string("")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "'' is not a plain file name");
    assert_true(bi_edit_json(s->dir, "model.safetensors.index.json", "weight_map." LAYER1_DOWN,
                             json_integer(3)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "weight_map['" LAYER1_DOWN "'] is not a file name");
    free(index);
}

static void test_index_bad_json(void **state) {
    scratch *s = *state;
    char *index = bi_path(s->dir, "model.safetensors.index.json");
    assert_true(bi_write_str(s->dir, "model.safetensors.index.json", "{\n  \"weight_map\": {\n"));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "invalid JSON at line");
    assert_true(bi_write_str(s->dir, "model.safetensors.index.json", "{\"metadata\": {}}"));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "no 'weight_map' object");
    assert_true(bi_write_str(s->dir, "model.safetensors.index.json", "[]"));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, index, "no 'weight_map' object");
    free(index);
}

/* ---- config.json ---- */

static void test_config_bad_json(void **state) {
    scratch *s = *state;
    assert_true(
        bi_write_str(s->dir, "config.json", "{\n  \"model_type\": \"llama\",\n  oops\n}\n"));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "invalid JSON at line 3, column");
    assert_true(bi_write_str(s->dir, "config.json", ""));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "invalid JSON");
}

static void test_config_not_object(void **state) {
    scratch *s = *state;
    assert_true(bi_write_str(s->dir, "config.json", "[{\"model_type\": \"llama\"}]"));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "not a JSON object");
    assert_true(bi_write_str(s->dir, "config.json", "\"llama\""));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "not a JSON object");
}

static void test_config_model_type(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "model_type", NULL));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "no string 'model_type'");
    assert_true(bi_edit_json(s->dir, "config.json", "model_type", json_integer(1)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "no string 'model_type'");
    assert_true(bi_edit_json(s->dir, "config.json", "model_type", json_string("gpt2")));
    EXPECT_LOAD(s, LMC_ERR_UNSUPPORTED, s->config,
                "model_type 'gpt2' is not supported (supported: llama, mistral");
}

static void test_config_wrong_types(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "hidden_size", json_string("64")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "'hidden_size' must be an integer");
    assert_true(bi_edit_json(s->dir, "config.json", "hidden_size", json_integer(64)));
    assert_true(bi_edit_json(s->dir, "config.json", "num_hidden_layers", json_real(2.5)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "'num_hidden_layers' must be an integer");
    assert_true(bi_edit_json(s->dir, "config.json", "num_hidden_layers", json_real(2.0)));
    assert_true(bi_edit_json(s->dir, "config.json", "rms_norm_eps", json_string("1e-5")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "'rms_norm_eps' must be a number");
    assert_true(bi_edit_json(s->dir, "config.json", "rms_norm_eps", json_real(1e-5)));
    assert_true(bi_edit_json(s->dir, "config.json", "tie_word_embeddings", json_integer(0)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "'tie_word_embeddings' must be a boolean");
    assert_true(bi_edit_json(s->dir, "config.json", "tie_word_embeddings", json_false()));
    assert_true(
        bi_edit_json(s->dir, "config.json", "rope_parameters.rope_theta", json_string("10000")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "'rope_theta' must be a number");
    assert_true(
        bi_edit_json(s->dir, "config.json", "rope_parameters.rope_theta", json_real(10000.0)));
    assert_true(bi_edit_json(s->dir, "config.json", "rope_parameters.rope_type", json_integer(3)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "'rope_type' must be a string");
    /* Repaired, it loads again. */
    assert_true(
        bi_edit_json(s->dir, "config.json", "rope_parameters.rope_type", json_string("default")));
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(s->dir, &m), LMC_OK);
    lmc_model_free(m);
}

static void test_config_sizes_out_of_range(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "vocab_size", json_integer(0)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "vocab_size = 0 is out of range");
    assert_true(bi_edit_json(s->dir, "config.json", "vocab_size", json_integer(256)));
    assert_true(bi_edit_json(s->dir, "config.json", "hidden_size", json_integer(-64)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "hidden_size = -64 is out of range");
    assert_true(bi_edit_json(s->dir, "config.json", "hidden_size", json_integer(64)));
    assert_true(bi_edit_json(s->dir, "config.json", "num_attention_heads", json_integer(0)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "num_attention_heads = 0 is out of range");
    /* Huge head counts would overflow heads * head_dim. */
    assert_true(bi_edit_json(s->dir, "config.json", "num_attention_heads",
                             json_integer((json_int_t)1 << 40)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "num_attention_heads = 1099511627776");
    assert_true(bi_edit_json(s->dir, "config.json", "num_attention_heads", json_integer(4)));
    assert_true(bi_edit_json(s->dir, "config.json", "head_dim", json_integer(1 << 30)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "head_dim = 1073741824 is out of range");
    assert_true(bi_edit_json(s->dir, "config.json", "head_dim", json_integer(16)));
    assert_true(bi_edit_json(s->dir, "config.json", "max_position_embeddings", json_integer(-1)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "max_position_embeddings = -1 is out of range");
}

static void test_config_heads_not_multiple(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "num_key_value_heads", json_integer(3)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config,
                "num_attention_heads (4) is not a multiple of num_key_value_heads (3)");
}

static void test_config_rope(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "rope_parameters.rope_type",
                             json_string("ntk-by-parts")));
    EXPECT_LOAD(s, LMC_ERR_UNSUPPORTED, s->config, "rope type 'ntk-by-parts' is not supported",
                "default, linear, llama3");
    /* Known to the config, not implemented yet by the rope code. */
    assert_true(
        bi_edit_json(s->dir, "config.json", "rope_parameters.rope_type", json_string("yarn")));
    EXPECT_LOAD(s, LMC_ERR_UNSUPPORTED, s->config, "rope type 'yarn' is not supported");
    /* llama3 without its parameters. */
    assert_true(
        bi_edit_json(s->dir, "config.json", "rope_parameters.rope_type", json_string("llama3")));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "llama3 needs original_max_position_embeddings");
    assert_true(
        bi_edit_json(s->dir, "config.json", "rope_parameters.rope_type", json_string("default")));
    /* A rotary part larger than the head would rotate past it. */
    assert_true(bi_edit_json(s->dir, "config.json", "partial_rotary_factor", json_real(2.0)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "partial_rotary_factor = 2 is not in (0, 1]");
    assert_true(bi_edit_json(s->dir, "config.json", "partial_rotary_factor", NULL));
    assert_true(bi_edit_json(s->dir, "config.json", "rope_parameters.rope_theta", json_real(-1)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "rope_theta (-1)", "must be positive");
}

static void test_config_hidden_act(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "hidden_act", json_string("relu2")));
    EXPECT_LOAD(s, LMC_ERR_UNSUPPORTED, s->config, "hidden_act 'relu2' is not supported");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A config asking for more layers than the weights hold fails before any
 * per-layer allocation: at once, with little memory (3,000,000 layers took
 * 9 s and 2.98 GB before the check). */
static void test_config_more_layers_than_weights(void **state) {
    scratch *s = *state;
    assert_true(bi_edit_json(s->dir, "config.json", "num_hidden_layers", json_integer(3000000)));
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    double t0 = now_s();
    EXPECT_LOAD(s, LMC_ERR_FORMAT, s->config, "num_hidden_layers is 3000000", "the weights in",
                "hold 2 layers");
    double dt = now_s() - t0;
    getrusage(RUSAGE_SELF, &after);
    if (dt > 0.1) fail_msg("the check took %.3f s", dt);
    if (after.ru_maxrss - before.ru_maxrss > 50 * 1024)
        fail_msg("peak RSS grew by %ld KB", after.ru_maxrss - before.ru_maxrss);
    assert_true(bi_edit_json(s->dir, "config.json", "num_hidden_layers", json_integer(3)));
    EXPECT_LOAD(s, LMC_ERR_FORMAT, "num_hidden_layers is 3", "hold 2 layers");
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup_f32, teardown)
#define S(f) cmocka_unit_test_setup_teardown(f, setup_sharded, teardown)
        T(test_fixture_copy_loads),
        T(test_weights_truncated),
        T(test_weights_garbage_header),
        T(test_missing_tensor),
        T(test_missing_lm_head),
        T(test_wrong_shape),
        T(test_wrong_rank),
        T(test_vocab_mismatch),
        T(test_wrong_dtype),
        T(test_no_weights),
        T(test_duplicate_tensor_across_files),
        T(test_missing_folder),
        S(test_sharded_copy_loads),
        S(test_index_missing_shard),
        S(test_index_key_not_in_shard),
        S(test_index_names_absent_tensor),
        S(test_index_path_in_weight_map),
        S(test_index_bad_json),
        T(test_config_bad_json),
        T(test_config_not_object),
        T(test_config_model_type),
        T(test_config_wrong_types),
        T(test_config_sizes_out_of_range),
        T(test_config_heads_not_multiple),
        T(test_config_rope),
        T(test_config_hidden_act),
        T(test_config_more_layers_than_weights),
#undef T
#undef S
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
