/* Broken MLX-quantized folders get a clear error naming the key and the
 * shapes, never a crash: scales or biases missing or of the wrong shape, a
 * packed width that does not fit bits and group, bits the file and
 * config.json disagree on, an unsupported bits value, a module the config
 * marks dense but the file quantizes. Copies of
 * tests/fixtures/quant-models/llama-q4-g64-f16 (hidden 64: q_proj is U32
 * [64, 8], scales and biases F16 [64, 1]). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/bad_input.h"

#include <stdlib.h>

#define FILE_ "model.safetensors"
#define QP "model.layers.0.self_attn.q_proj"

static int setup(void **state) {
    char *dir = bi_copy_fixture("../quant-models/llama-q4-g64-f16");
    /* without the index the loader reads model.safetensors itself, so an edit
     * that drops a tensor is not caught by the index check first */
    if (!dir || !bi_remove(dir, "model.safetensors.index.json")) return -1;
    *state = dir;
    return 0;
}

static int teardown(void **state) {
    bi_rmtree(*state);
    free(*state);
    return 0;
}

static void expect_load(const char *dir, lmc_status want, const char *a, const char *b) {
    lmc_model *m = (lmc_model *)1;
    BI_EXPECT(lmc_model_load(dir, &m), want, a, b);
    assert_null(m);
}

static void test_copy_loads(void **state) {
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(*state, &m), LMC_OK);
    lmc_model_free(m);
}

static void test_biases_missing(void **state) {
    bi_tensor_edit e = {.name = QP ".biases", .drop = true, .dtype = -1};
    assert_true(bi_edit_tensor(*state, FILE_, &e));
    expect_load(*state, LMC_ERR_NOT_FOUND, "'" QP "'", QP ".biases");
}

static void test_scales_missing(void **state) {
    bi_tensor_edit e = {.name = QP ".scales", .drop = true, .dtype = -1};
    assert_true(bi_edit_tensor(*state, FILE_, &e));
    expect_load(*state, LMC_ERR_NOT_FOUND, QP ".weight", QP ".scales' is missing");
}

static void test_scales_wrong_shape(void **state) {
    bi_tensor_edit e = {.name = QP ".scales", .ndim = 2, .shape = {32, 1}, .dtype = -1};
    assert_true(bi_edit_tensor(*state, FILE_, &e));
    expect_load(*state, LMC_ERR_SHAPE, QP, "[32, 1]");
}

static void test_packed_width_disagrees_with_config(void **state) {
    /* 4 words a row for 64 inputs is 2 bits; config.json says 4 */
    bi_tensor_edit e = {.name = QP ".weight", .ndim = 2, .shape = {64, 4}, .dtype = -1};
    assert_true(bi_edit_tensor(*state, FILE_, &e));
    expect_load(*state, LMC_ERR_FORMAT, "bits 4", "hold bits 2");
}

static void test_packed_width_fits_nothing(void **state) {
    /* 3 words a row: 96 bits for 64 inputs fits no bits value */
    bi_tensor_edit e = {.name = QP ".weight", .ndim = 2, .shape = {64, 3}, .dtype = -1};
    assert_true(bi_edit_tensor(*state, FILE_, &e));
    expect_load(*state, LMC_ERR_SHAPE, "'" QP "'", "[64, 3]");
}

static void test_unsupported_bits(void **state) {
    /* 14 words a row for 64 inputs is 7 bits, and the module's config entry agrees */
    bi_tensor_edit e = {.name = QP ".weight", .ndim = 2, .shape = {32, 14}, .dtype = -1};
    assert_true(bi_edit_tensor(*state, FILE_, &e));
    assert_true(bi_edit_json(*state, "config.json", "quantization." QP,
                             json_pack("{s:i, s:i}", "bits", 7, "group_size", 64)));
    expect_load(*state, LMC_ERR_UNSUPPORTED, QP, "7");
}

static void test_config_marks_module_dense(void **state) {
    assert_true(bi_edit_json(*state, "config.json", "quantization." QP, json_false()));
    expect_load(*state, LMC_ERR_FORMAT, "'" QP "' as not quantized", QP ".scales");
}

static void test_no_quantization_in_config(void **state) {
    assert_true(bi_edit_json(*state, "config.json", "quantization", NULL));
    assert_true(bi_edit_json(*state, "config.json", "quantization_config", NULL));
    expect_load(*state, LMC_ERR_FORMAT, "stored quantized", "no \"quantization\"");
}

static void test_other_schemes_refused(void **state) {
    assert_true(bi_edit_json(*state, "config.json", "quantization", NULL));
    assert_true(bi_edit_json(*state, "config.json", "quantization_config",
                             json_pack("{s:s, s:i}", "quant_method", "gptq", "bits", 4)));
    expect_load(*state, LMC_ERR_UNSUPPORTED, "quant_method 'gptq'", "config.json");
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_copy_loads),
        T(test_biases_missing),
        T(test_scales_missing),
        T(test_scales_wrong_shape),
        T(test_packed_width_disagrees_with_config),
        T(test_packed_width_fits_nothing),
        T(test_unsupported_bits),
        T(test_config_marks_module_dense),
        T(test_no_quantization_in_config),
        T(test_other_schemes_refused),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
