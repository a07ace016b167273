/* PaliGemma end to end against transformers 5.17 (tests/fixtures/vlm, made
 * by tests/reference/make_vlm_fixtures.py): a dense model in transformers'
 * layout and a 4-bit one in mlx-vlm's layout (vision tower quantized too,
 * conv weight [out, kh, kw, in]).
 * - logits at every position of the processed input from the reference
 *   pixel values and ids: rel L2 <= 1e-4 (dense) / 1e-3 (quantized);
 * - the processor (image file + prompt -> ids, pixel values) equals
 *   PaliGemmaProcessor's;
 * - greedy generation through lmc_context_generate equals transformers';
 * - one code path: the same function drives an LLM container and a VLM
 *   container through lmc_context_generate (callback, result, stats). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/json.h"
#include "helpers/fixtures.h"
#include "lmc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VLM_DIR LMC_SOURCE_DIR "/tests/fixtures/vlm"

static float *read_f32(const char *dir, const char *name, size_t *n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)size);
    assert_int_equal(fread(v, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size / 4;
    return v;
}

static json_t *expect_of(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/expect.json", dir);
    json_t *j = NULL;
    assert_int_equal(lmc_json_load_file(path, &j), LMC_OK);
    return j;
}

static void check_logits(const char *name, double tol) {
    char dir[512];
    snprintf(dir, sizeof dir, VLM_DIR "/%s", name);
    json_t *e = expect_of(dir);
    size_t n_ids = 0, n_px = 0, n_ref = 0;
    int32_t *ids = json_int_array(json_object_get(e, "input_ids"), &n_ids);
    float *px = read_f32(dir, "pixels.f32", &n_px);
    float *ref = read_f32(dir, "logits.f32", &n_ref);
    lmc_model *m = NULL;
    lmc_status st = lmc_model_load(dir, &m);
    if (st != LMC_OK) fail_msg("%s", lmc_last_error());
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    assert_int_equal(info.image_tokens, json_integer_value(json_object_get(e, "n_image_tokens")));
    size_t V = (size_t)info.vocab_size;
    assert_int_equal(n_ref, n_ids * V);
    assert_int_equal(n_px, (size_t)3 * info.image_size * info.image_size);
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(m, 64, &s), LMC_OK);
    lmc_model_input in = {.tokens = ids,
                          .n_tokens = (int32_t)n_ids,
                          .pixel_values = px,
                          .n_images = 1,
                          .image_height = info.image_size,
                          .image_width = info.image_size};
    float *got = malloc(n_ref * sizeof *got);
    st = lmc_session_forward_input(s, &in, 1, got);
    if (st != LMC_OK) fail_msg("%s", lmc_last_error());
    double worst = 0;
    for (size_t t = 0; t < n_ids; t++) {
        double r = rel_l2(got + t * V, ref + t * V, V);
        worst = r > worst ? r : worst;
    }
    printf("  %-24s %zu positions, worst rel L2 %.3g (tolerance %.0e)\n", name, n_ids, worst, tol);
    assert_true(worst <= tol);
    lmc_session_free(s);
    lmc_model_free(m);
    free(got);
    free(ref);
    free(px);
    free(ids);
    json_decref(e);
}

static void test_logits_hf_dense(void **state) {
    (void)state;
    check_logits("paligemma-f32", 1e-4);
}

static void test_logits_mlx_4bit(void **state) {
    (void)state;
    check_logits("paligemma-mlx-4bit-g64", 1e-3);
}

typedef struct gen_record {
    int32_t tokens[64];
    int n;
    size_t text_bytes;
} gen_record;

static int on_token(int32_t token, const char *text, size_t len, void *ud) {
    gen_record *r = ud;
    if (token >= 0 && r->n < 64) r->tokens[r->n++] = token;
    r->text_bytes += len;
    return 0;
}

typedef struct job {
    const lmc_user_input *in;
    lmc_generate_params params;
    gen_record rec;
    lmc_generate_result result;
    lmc_status st;
    lmc_model_input prepared;
} job;

static lmc_status do_generate(lmc_context *c, void *ud) {
    job *j = ud;
    lmc_status st = lmc_context_prepare(c, j->in, &j->prepared);
    if (st != LMC_OK) return st;
    return lmc_context_generate(c, j->in, &j->params, on_token, &j->rec, &j->result);
}

/* The one path both kinds take: a container, a user input, generate. */
static void generate_via_container(lmc_container *k, const lmc_user_input *in, const int32_t *want,
                                   size_t n_want, job *j) {
    lmc_generate_params_default(&j->params);
    j->params.temperature = 0;
    j->params.max_tokens = (int32_t)n_want;
    j->params.ignore_eos = 1;
    j->in = in;
    j->st = lmc_container_perform(k, do_generate, j);
    if (j->st != LMC_OK) fail_msg("%s", lmc_last_error());
    assert_int_equal(j->result.n_tokens, (int32_t)n_want);
    assert_int_equal(j->rec.n, (int)n_want);
    for (size_t i = 0; i < n_want; i++) {
        assert_int_equal(j->result.tokens[i], want[i]);
        assert_int_equal(j->rec.tokens[i], want[i]);
    }
    assert_int_equal(j->result.stats.generated_tokens, (int32_t)n_want);
    assert_int_equal(j->result.stats.prompt_tokens, j->prepared.n_tokens);
    assert_true(j->result.stats.prompt_seconds >= 0 && j->result.stats.peak_memory_bytes > 0);
    assert_int_equal(j->result.stop_reason, LMC_STOP_LENGTH);
}

static void check_end_to_end(const char *name) {
    char dir[512], image[512];
    snprintf(dir, sizeof dir, VLM_DIR "/%s", name);
    json_t *e = expect_of(dir);
    snprintf(image, sizeof image, VLM_DIR "/images/%s",
             json_string_value(json_object_get(e, "image")));
    size_t n_ids = 0, n_greedy = 0, n_px = 0;
    int32_t *ids = json_int_array(json_object_get(e, "input_ids"), &n_ids);
    int32_t *greedy = json_int_array(json_object_get(e, "greedy_tokens"), &n_greedy);
    float *px = read_f32(dir, "pixels.f32", &n_px);
    lmc_container *k = NULL;
    lmc_status st = lmc_vlm_load(dir, NULL, &k);
    if (st != LMC_OK) fail_msg("%s", lmc_last_error());
    const char *images[] = {image};
    lmc_user_input in = {
        .prompt = json_string_value(json_object_get(e, "prompt")), .images = images, .n_images = 1};
    job j;
    memset(&j, 0, sizeof j);
    generate_via_container(k, &in, greedy, n_greedy, &j);
    /* the processor: ids and pixel values as PaliGemmaProcessor's */
    assert_int_equal(j.prepared.n_tokens, (int32_t)n_ids);
    for (size_t i = 0; i < n_ids; i++) assert_int_equal(j.prepared.tokens[i], ids[i]);
    assert_int_equal(j.prepared.n_images, 1);
    double worst = 0;
    for (size_t i = 0; i < n_px; i++) {
        double d = fabs((double)j.prepared.pixel_values[i] - px[i]);
        worst = d > worst ? d : worst;
    }
    printf("  %-24s ids equal, pixel values max |diff| %.3g, greedy %zu tokens equal\n", name,
           worst, n_greedy);
    assert_true(worst <= 1e-6);
    lmc_model_input_clear(&j.prepared);
    lmc_generate_result_clear(&j.result);
    lmc_container_free(k);
    free(ids);
    free(greedy);
    free(px);
    json_decref(e);
}

static void test_end_to_end_hf(void **state) {
    (void)state;
    check_end_to_end("paligemma-f32");
}

static void test_end_to_end_mlx(void **state) {
    (void)state;
    check_end_to_end("paligemma-mlx-4bit-g64");
}

/* An LLM (tests/fixtures/arch-c/gemma-f32) through the same function. */
static void test_same_path_llm(void **state) {
    (void)state;
    const char *dir = LMC_SOURCE_DIR "/tests/fixtures/arch-c/gemma-f32";
    json_t *e = expect_of(dir);
    size_t n_prompt = 0, n_greedy = 0;
    int32_t *prompt = json_int_array(json_object_get(e, "prompt_tokens"), &n_prompt);
    int32_t *greedy = json_int_array(json_object_get(e, "greedy_tokens"), &n_greedy);
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load(dir, NULL, &k), LMC_OK);
    lmc_user_input in = {.tokens = prompt, .n_tokens = (int32_t)n_prompt};
    job j;
    memset(&j, 0, sizeof j);
    generate_via_container(k, &in, greedy, n_greedy, &j);
    assert_null(j.prepared.pixel_values);
    lmc_model_input_clear(&j.prepared);
    lmc_generate_result_clear(&j.result);
    lmc_container_free(k);
    free(prompt);
    free(greedy);
    json_decref(e);
}

static lmc_status prepare_only(lmc_context *c, void *ud) {
    job *j = ud;
    return lmc_context_prepare(c, j->in, &j->prepared);
}

/* Errors through the API: the wrong factory, an image for an LLM, a VLM
 * prompt without an image, bad image files. */
static void test_api_errors(void **state) {
    (void)state;
    const char *vlm = VLM_DIR "/paligemma-f32";
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load(vlm, NULL, &k), LMC_ERR_UNSUPPORTED);
    assert_non_null(strstr(lmc_last_error(), "lmc_vlm_load"));
    assert_int_equal(lmc_vlm_load(LMC_SOURCE_DIR "/tests/fixtures/arch-c/gemma-f32", NULL, &k),
                     LMC_ERR_UNSUPPORTED);
    assert_int_equal(lmc_vlm_load(vlm, NULL, &k), LMC_OK);
    job j;
    memset(&j, 0, sizeof j);
    lmc_user_input none = {.prompt = "caption en"};
    j.in = &none;
    assert_int_equal(lmc_container_perform(k, prepare_only, &j), LMC_ERR_INVALID_ARG);
    assert_non_null(strstr(lmc_last_error(), "needs an image"));
    const char *bad[] = {VLM_DIR "/pixels/pixels.json"};
    lmc_user_input text_file = {.prompt = "caption en", .images = bad, .n_images = 1};
    j.in = &text_file;
    assert_int_equal(lmc_container_perform(k, prepare_only, &j), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "pixels.json"));
    const char *missing[] = {VLM_DIR "/images/missing.png"};
    lmc_user_input gone = {.prompt = "caption en", .images = missing, .n_images = 1};
    j.in = &gone;
    assert_int_equal(lmc_container_perform(k, prepare_only, &j), LMC_ERR_IO);
    /* max_kv_size with images */
    const char *img[] = {VLM_DIR "/images/model-a-40x30.png"};
    lmc_user_input ok = {.prompt = "caption en", .images = img, .n_images = 1};
    j.in = &ok;
    lmc_generate_params_default(&j.params);
    j.params.max_kv_size = 16;
    j.params.max_tokens = 2;
    assert_int_equal(lmc_container_perform(k, do_generate, &j), LMC_ERR_UNSUPPORTED);
    lmc_model_input_clear(&j.prepared);
    lmc_generate_result_clear(&j.result);
    lmc_container_free(k);
    /* an image for an LLM */
    assert_int_equal(lmc_llm_load(LMC_SOURCE_DIR "/tests/fixtures/arch-c/gemma-f32", NULL, &k),
                     LMC_OK);
    int32_t t[] = {1, 2, 3};
    lmc_user_input llm_img = {.prompt = "x", .images = img, .n_images = 1};
    memset(&j, 0, sizeof j);
    j.in = &llm_img;
    assert_int_equal(lmc_container_perform(k, prepare_only, &j), LMC_ERR_INVALID_ARG);
    lmc_model_input fake = {.tokens = t, .n_tokens = 3, .pixel_values = (float *)t, .n_images = 1};
    lmc_session *s = NULL;
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(LMC_SOURCE_DIR "/tests/fixtures/arch-c/gemma-f32", &m), LMC_OK);
    assert_int_equal(lmc_session_create(m, 16, &s), LMC_OK);
    assert_int_equal(lmc_session_forward_input(s, &fake, 0, NULL), LMC_ERR_INVALID_ARG);
    assert_non_null(strstr(lmc_last_error(), "not a vision-language model"));
    lmc_session_free(s);
    lmc_model_free(m);
    lmc_container_free(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_hf_dense), cmocka_unit_test(test_logits_mlx_4bit),
        cmocka_unit_test(test_end_to_end_hf),   cmocka_unit_test(test_end_to_end_mlx),
        cmocka_unit_test(test_same_path_llm),   cmocka_unit_test(test_api_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
