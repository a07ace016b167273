/* Bad input at run time and at the command line: token ids outside the
 * vocabulary, more tokens than the session holds, NULL arguments, and the
 * CLI given broken folders or bad options (exit non-zero, one line on
 * stderr, no output file left). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/bad_input.h"

#include <stdio.h>
#include <stdlib.h>

#define FIXTURE LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32"

static lmc_model *g_model;

static int load_model(void **state) {
    (void)state;
    return lmc_model_load(FIXTURE, &g_model) == LMC_OK ? 0 : -1;
}

static int free_model(void **state) {
    (void)state;
    lmc_model_free(g_model);
    return 0;
}

/* ---- the library ---- */

static void test_token_ids_out_of_range(void **state) {
    (void)state;
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(g_model, 16, &s), LMC_OK);
    float logits[256];
    int32_t neg[] = {1, -1, 3};
    BI_EXPECT(lmc_session_forward(s, neg, 3, 0, logits), LMC_ERR_RANGE, "token id -1 at position 1",
              "outside the vocabulary (0..255)");
    int32_t big[] = {256};
    BI_EXPECT(lmc_session_forward(s, big, 1, 0, logits), LMC_ERR_RANGE, "token id 256", "(0..255)");
    int32_t huge[] = {5, INT32_MAX};
    BI_EXPECT(lmc_session_forward(s, huge, 2, 1, NULL), LMC_ERR_RANGE, "2147483647");
    /* Nothing was appended by the failed calls. */
    assert_int_equal(lmc_session_position(s), 0);
    int32_t ok[] = {0, 255};
    assert_int_equal(lmc_session_forward(s, ok, 2, 0, logits), LMC_OK);
    assert_int_equal(lmc_session_position(s), 2);
    lmc_session_free(s);
}

static void test_context_exceeded(void **state) {
    (void)state;
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(g_model, 4, &s), LMC_OK);
    int32_t t[5] = {1, 2, 3, 4, 5};
    BI_EXPECT(lmc_session_forward(s, t, 5, 0, NULL), LMC_ERR_RANGE,
              "5 tokens exceed the session's context of 4");
    assert_int_equal(lmc_session_forward(s, t, 3, 0, NULL), LMC_OK);
    BI_EXPECT(lmc_session_forward(s, t, 2, 0, NULL), LMC_ERR_RANGE, "5 tokens exceed", "of 4");
    assert_int_equal(lmc_session_position(s), 3);
    assert_int_equal(lmc_session_forward(s, t, 1, 0, NULL), LMC_OK);
    lmc_session_reset(s);
    assert_int_equal(lmc_session_forward(s, t, 4, 1, NULL), LMC_OK);
    lmc_session_free(s);
    /* The default context is max_position_embeddings (256 here). */
    assert_int_equal(lmc_session_create(g_model, 0, &s), LMC_OK);
    int32_t *many = calloc(257, sizeof *many);
    BI_EXPECT(lmc_session_forward(s, many, 257, 0, NULL), LMC_ERR_RANGE, "context of 256");
    free(many);
    lmc_session_free(s);
}

static void test_null_arguments(void **state) {
    (void)state;
    lmc_model *m = (lmc_model *)1;
    BI_EXPECT(lmc_model_load(NULL, &m), LMC_ERR_INVALID_ARG, "lmc_model_load", "dir");
    assert_null(m);
    BI_EXPECT(lmc_model_load(FIXTURE, NULL), LMC_ERR_INVALID_ARG, "lmc_model_load", "out");
    lmc_session *s = (lmc_session *)1;
    BI_EXPECT(lmc_session_create(NULL, 0, &s), LMC_ERR_INVALID_ARG, "lmc_session_create", "model");
    assert_null(s);
    BI_EXPECT(lmc_session_create(g_model, 0, NULL), LMC_ERR_INVALID_ARG, "lmc_session_create");
    BI_EXPECT(lmc_session_create(g_model, -5, &s), LMC_ERR_INVALID_ARG, "max_tokens = -5");
    assert_null(s);
    assert_int_equal(lmc_session_create(g_model, 8, &s), LMC_OK);
    int32_t t[1] = {1};
    BI_EXPECT(lmc_session_forward(NULL, t, 1, 0, NULL), LMC_ERR_INVALID_ARG, "lmc_session_forward");
    BI_EXPECT(lmc_session_forward(s, NULL, 1, 0, NULL), LMC_ERR_INVALID_ARG, "lmc_session_forward");
    BI_EXPECT(lmc_session_forward(s, t, -1, 0, NULL), LMC_ERR_INVALID_ARG, "lmc_session_forward");
    BI_EXPECT(lmc_session_forward(s, t, 0, 0, NULL), LMC_ERR_INVALID_ARG, "no tokens");
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.max_tokens = 2;
    BI_EXPECT(lmc_generate(NULL, NULL, t, 1, &p, NULL, NULL, NULL), LMC_ERR_INVALID_ARG,
              "lmc_generate");
    BI_EXPECT(lmc_generate(s, NULL, NULL, 1, &p, NULL, NULL, NULL), LMC_ERR_INVALID_ARG,
              "lmc_generate");
    BI_EXPECT(lmc_generate(s, NULL, t, 0, &p, NULL, NULL, NULL), LMC_ERR_INVALID_ARG,
              "lmc_generate");
    int32_t bad[2] = {1, 999};
    BI_EXPECT(lmc_generate(s, NULL, bad, 2, &p, NULL, NULL, NULL), LMC_ERR_RANGE, "token id 999");
    assert_int_equal(lmc_session_position(s), 0);
    /* Generation that reaches the session's capacity stops there ("length"). */
    p.max_tokens = 20;
    p.temperature = 0;
    p.ignore_eos = 1;
    lmc_generate_result r;
    assert_int_equal(lmc_generate(s, NULL, t, 1, &p, NULL, NULL, &r), LMC_OK);
    assert_int_equal(r.stop_reason, LMC_STOP_LENGTH);
    assert_int_equal(r.n_tokens, 8);
    assert_int_equal(lmc_session_position(s), 8);
    lmc_generate_result_clear(&r);
    int32_t nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    BI_EXPECT(lmc_generate(s, NULL, nine, 9, &p, NULL, NULL, NULL), LMC_ERR_RANGE, "context of 8");
    lmc_session_free(s);
    lmc_session_free(NULL);
    lmc_model_free(NULL);
}

/* Regression: the pool's workers exit when the thread count changes; their
 * per-thread scratch (attention scores, converted rows) used to leak
 * (LeakSanitizer in the -DLMC_SANITIZE=ON build). */
/* Every function of the library API added for embedding: NULLs, bad
 * values, a folder that is not a model. */
static lmc_status noop_fn(lmc_context *c, void *ud) {
    (void)c, (void)ud;
    return LMC_OK;
}

static lmc_status bad_prepare(lmc_context *c, void *ud) {
    (void)ud;
    lmc_model_input mi;
    lmc_user_input none = {0};
    BI_EXPECT(lmc_context_prepare(c, &none, &mi), LMC_ERR_INVALID_ARG, "exactly one");
    int32_t t[1] = {1};
    lmc_user_input two = {.prompt = "x", .tokens = t, .n_tokens = 1};
    BI_EXPECT(lmc_context_prepare(c, &two, &mi), LMC_ERR_INVALID_ARG, "exactly one");
    lmc_user_input text = {.prompt = "hello"};
    BI_EXPECT(lmc_context_prepare(c, &text, &mi), LMC_ERR_INVALID_ARG, "no tokenizer.json");
    lmc_message img = {"user", "look", (const char *[]){"a.png"}, 1};
    lmc_user_input with_image = {.messages = &img, .n_messages = 1};
    BI_EXPECT(lmc_context_prepare(c, &with_image, &mi), LMC_ERR_INVALID_ARG, "no tokenizer.json");
    BI_EXPECT(lmc_context_prepare(c, NULL, &mi), LMC_ERR_INVALID_ARG, "lmc_context_prepare");
    BI_EXPECT(lmc_context_prepare(NULL, &text, &mi), LMC_ERR_INVALID_ARG, "lmc_context_prepare");
    BI_EXPECT(lmc_context_generate(NULL, &text, NULL, NULL, NULL, NULL), LMC_ERR_INVALID_ARG,
              "lmc_context_generate");
    lmc_user_input tok = {.tokens = t, .n_tokens = 1};
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    const char *stop[] = {"x"};
    p.stop = stop;
    p.n_stop = 1;
    BI_EXPECT(lmc_context_generate(c, &tok, &p, NULL, NULL, NULL), LMC_ERR_INVALID_ARG,
              "stop strings need a tokenizer");
    assert_non_null(lmc_context_model(c));
    assert_null(lmc_context_tokenizer(c));
    assert_non_null(lmc_context_session(c));
    assert_non_null(lmc_context_dir(c));
    return LMC_OK;
}

static void test_library_api_bad_arguments(void **state) {
    (void)state;
    lmc_container *k = (lmc_container *)state;
    BI_EXPECT(lmc_llm_load(NULL, NULL, &k), LMC_ERR_INVALID_ARG, "no model");
    assert_null(k);
    BI_EXPECT(lmc_llm_load(LMC_SOURCE_DIR "/tests", NULL, &k), LMC_ERR_NOT_FOUND, "config.json");
    BI_EXPECT(lmc_llm_load("/nonexistent/model", NULL, &k), LMC_ERR_NOT_FOUND, "not found");
    BI_EXPECT(lmc_llm_load(LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32", NULL, NULL),
              LMC_ERR_INVALID_ARG, "out is NULL");
    lmc_load_options o = {NULL, NULL, -1};
    BI_EXPECT(lmc_llm_load(LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32", &o, &k),
              LMC_ERR_INVALID_ARG, "max_kv_tokens");
    char *dir = NULL;
    BI_EXPECT(lmc_model_locate("", &dir), LMC_ERR_INVALID_ARG, "no model");
    BI_EXPECT(lmc_model_locate("x", NULL), LMC_ERR_INVALID_ARG, "dir is NULL");
    BI_EXPECT(lmc_registry_add(NULL), LMC_ERR_INVALID_ARG, "lmc_registry_add");
    lmc_model_preset bad_kind = {"k", "x/y", NULL, NULL, (lmc_model_kind)7};
    BI_EXPECT(lmc_registry_add(&bad_kind), LMC_ERR_INVALID_ARG, "kind");
    assert_null(lmc_registry_find(NULL));
    BI_EXPECT(lmc_container_perform(NULL, noop_fn, NULL), LMC_ERR_INVALID_ARG, "perform");
    assert_int_equal(lmc_llm_load(LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32", NULL, &k),
                     LMC_OK);
    BI_EXPECT(lmc_container_perform(k, NULL, NULL), LMC_ERR_INVALID_ARG, "perform");
    assert_int_equal(lmc_container_perform(k, bad_prepare, NULL), LMC_OK);
    lmc_container_free(k);
    lmc_container_free(NULL);
    assert_null(lmc_context_model(NULL));
    lmc_model_input_clear(NULL);
    lmc_generate_result_clear(NULL);
    lmc_generate_params_default(NULL);
    /* sessions */
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(g_model, 16, &s), LMC_OK);
    BI_EXPECT(lmc_session_truncate(NULL, 0), LMC_ERR_INVALID_ARG, "truncate");
    BI_EXPECT(lmc_session_truncate(s, 1), LMC_ERR_RANGE, "outside");
    BI_EXPECT(lmc_session_save(NULL, "/tmp/x"), LMC_ERR_INVALID_ARG, "save");
    BI_EXPECT(lmc_session_load(s, NULL), LMC_ERR_INVALID_ARG, "load");
    assert_null(lmc_session_tokens(NULL));
    /* generation parameters, each named */
    int32_t t[2] = {1, 2};
    static const struct {
        const char *field;
        void (*set)(lmc_generate_params *);
    } cases[] = {0};
    (void)cases;
    lmc_generate_params p;
#define BAD_PARAM(stmt, field)                                                                     \
    do {                                                                                           \
        lmc_generate_params_default(&p);                                                           \
        stmt;                                                                                      \
        BI_EXPECT(lmc_generate(s, NULL, t, 2, &p, NULL, NULL, NULL), LMC_ERR_INVALID_ARG, field);  \
    } while (0)
    BAD_PARAM(p.temperature = NAN, "temperature");
    BAD_PARAM(p.temperature = -1, "temperature");
    BAD_PARAM(p.top_p = 0, "top_p");
    BAD_PARAM(p.top_p = NAN, "top_p");
    BAD_PARAM(p.min_p = 2, "min_p");
    BAD_PARAM(p.top_k = -1, "top_k");
    BAD_PARAM(p.repetition_penalty = NAN, "repetition_penalty");
    BAD_PARAM(p.repetition_penalty = 0, "repetition_penalty");
    BAD_PARAM(p.presence_penalty = INFINITY, "presence_penalty");
    BAD_PARAM(p.frequency_penalty = NAN, "frequency_penalty");
    BAD_PARAM(p.max_tokens = -1, "max_tokens");
    BAD_PARAM(p.prefill_step = -1, "prefill_step");
    BAD_PARAM(p.n_logit_bias = 1, "logit_bias");
    BAD_PARAM(p.n_stop = 2, "stop");
    BAD_PARAM(p.n_processors = 1, "processors");
    BAD_PARAM(p.n_eos_tokens = 1, "eos_tokens");
    lmc_session_free(s);
}

/* The tokenizer, detokenizer, template and convert functions with NULLs,
 * bad values and folders that are not models: a status and a message each. */
static void test_text_api_bad_arguments(void **state) {
    (void)state;
    lmc_tokenizer *tok = (lmc_tokenizer *)1;
    BI_EXPECT(lmc_tokenizer_load(NULL, &tok), LMC_ERR_INVALID_ARG, "lmc_tokenizer_load");
    assert_null(tok);
    BI_EXPECT(lmc_tokenizer_load(FIXTURE, NULL), LMC_ERR_INVALID_ARG, "lmc_tokenizer_load");
    BI_EXPECT(lmc_tokenizer_load(FIXTURE, &tok), LMC_ERR_NOT_FOUND, "tokenizer.json");
    BI_EXPECT(lmc_tokenizer_load("/nonexistent/dir", &tok), LMC_ERR_NOT_FOUND, "tokenizer.json");
    int32_t *ids = NULL;
    size_t n = 0;
    BI_EXPECT(lmc_tokenizer_encode(NULL, "x", 1, 0, &ids, &n), LMC_ERR_INVALID_ARG, "encode");
    char *text = NULL;
    size_t len = 0;
    int32_t one = 1;
    BI_EXPECT(lmc_tokenizer_decode(NULL, &one, 1, 0, &text, &len), LMC_ERR_INVALID_ARG, "decode");
    assert_int_equal(lmc_tokenizer_vocab_size(NULL), 0);
    assert_int_equal(lmc_tokenizer_token_to_id(NULL, "x"), -1);
    lmc_detokenizer *d = NULL;
    BI_EXPECT(lmc_detokenizer_create(NULL, 0, &d), LMC_ERR_INVALID_ARG, "detokenizer");
    const char *piece;
    BI_EXPECT(lmc_detokenizer_push(NULL, 1, &piece, &len), LMC_ERR_INVALID_ARG, "detokenizer");
    BI_EXPECT(lmc_detokenizer_flush(NULL, &piece, &len), LMC_ERR_INVALID_ARG, "detokenizer");
    lmc_detokenizer_free(NULL);
    lmc_tokenizer_free(NULL);
    BI_EXPECT(lmc_chat_template_render(NULL, "[]", 1, NULL, &text, &len), LMC_ERR_INVALID_ARG,
              "lmc_chat_template_render");
    BI_EXPECT(lmc_chat_template_render(FIXTURE, NULL, 1, NULL, &text, &len), LMC_ERR_INVALID_ARG,
              "lmc_chat_template_render");
    BI_EXPECT(lmc_chat_template_render(FIXTURE, "[]", 1, NULL, NULL, &len), LMC_ERR_INVALID_ARG,
              "lmc_chat_template_render");
    BI_EXPECT(lmc_convert(NULL, NULL, NULL), LMC_ERR_INVALID_ARG, "lmc_convert");
    lmc_convert_params cp;
    lmc_convert_params_default(&cp);
    BI_EXPECT(lmc_convert(&cp, NULL, NULL), LMC_ERR_INVALID_ARG, "input and output");
    cp.input_dir = "/nonexistent/in";
    cp.output_dir = "/tmp/lmc-never-written";
    BI_EXPECT(lmc_convert(&cp, NULL, NULL), LMC_ERR_NOT_FOUND, "/nonexistent/in");
    cp.input_dir = FIXTURE;
    cp.quantize = 1;
    cp.q_bits = 7;
    BI_EXPECT(lmc_convert(&cp, NULL, NULL), LMC_ERR_INVALID_ARG, "bits");
    lmc_model_info info;
    lmc_model_get_info(NULL, &info); /* zeroed, no crash */
    assert_int_equal(info.vocab_size, 0);
    assert_non_null(lmc_status_string((lmc_status)1000));
    assert_int_equal(lmc_session_position(NULL), 0);
    lmc_session_reset(NULL);
    lmc_container *k = NULL;
    BI_EXPECT(lmc_vlm_load(NULL, NULL, &k), LMC_ERR_INVALID_ARG, "no model");
    assert_null(lmc_context_preset(NULL));
}

/* The model listing functions: NULLs, folders that are not models, a bad
 * config.json; the free functions take NULL. */
static void test_listing_api_bad_arguments(void **state) {
    (void)state;
    lmc_model_summary s;
    memset(&s, 0x5a, sizeof s);
    BI_EXPECT(lmc_model_summarize(NULL, &s), LMC_ERR_INVALID_ARG, "lmc_model_summarize", "dir");
    assert_null(s.dir);
    assert_null(s.hub_id);
    BI_EXPECT(lmc_model_summarize(FIXTURE, NULL), LMC_ERR_INVALID_ARG, "lmc_model_summarize",
              "out");
    BI_EXPECT(lmc_model_summarize("/nonexistent/model", &s), LMC_ERR_NOT_FOUND,
              "no folder /nonexistent/model");
    assert_null(s.dir);
    BI_EXPECT(lmc_model_summarize(LMC_SOURCE_DIR "/tests", &s), LMC_ERR_NOT_FOUND,
              "no config.json");
    BI_EXPECT(lmc_model_summarize(FIXTURE "/config.json", &s), LMC_ERR_NOT_FOUND,
              "is not a folder");
    char *dir = bi_copy_fixture("llama-f32");
    assert_non_null(dir);
    assert_true(bi_write_str(dir, "config.json", "{\"model_type\": \"llama\",,}"));
    BI_EXPECT(lmc_model_summarize(dir, &s), LMC_ERR_FORMAT, "config.json: invalid JSON at line 1");
    assert_null(s.dir);
    assert_true(bi_write_str(dir, "config.json", "{\"model_type\": [\"llama\"]}"));
    BI_EXPECT(lmc_model_summarize(dir, &s), LMC_ERR_FORMAT, "model_type is not a string");
    assert_true(bi_write_str(dir, "config.json", "{\"quantization\": {\"bits\": 4.5}}"));
    BI_EXPECT(lmc_model_summarize(dir, &s), LMC_ERR_FORMAT, "bits");
    assert_true(bi_remove(dir, "config.json"));
    BI_EXPECT(lmc_model_summarize(dir, &s), LMC_ERR_NOT_FOUND, "not a model folder");
    bi_rmtree(dir);
    free(dir);
    lmc_model_summary_clear(NULL);
    lmc_model_summaries_free(NULL, 0);
    lmc_model_summaries_free(NULL, 7);
    lmc_model_summary *list = (lmc_model_summary *)1;
    int32_t n = 3;
    BI_EXPECT(lmc_hub_list(NULL, &n), LMC_ERR_INVALID_ARG, "lmc_hub_list", "out");
    assert_int_equal(n, 0);
    BI_EXPECT(lmc_hub_list(&list, NULL), LMC_ERR_INVALID_ARG, "lmc_hub_list", "n is NULL");
    assert_null(list);
    BI_EXPECT(lmc_hub_cache_path(NULL), LMC_ERR_INVALID_ARG, "lmc_hub_cache_path");
}

static void test_thread_restart_frees_scratch(void **state) {
    (void)state;
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(g_model, 64, &s), LMC_OK);
    int32_t t[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    for (int threads = 3; threads >= 1; threads--) {
        lmc_set_num_threads(threads);
        lmc_session_reset(s);
        assert_int_equal(lmc_session_forward(s, t, 16, 1, NULL), LMC_OK);
    }
    lmc_set_num_threads(0);
    lmc_session_free(s);
}

/* ---- the CLI ---- */

typedef struct cli_case {
    char *dir;
    char *out; /* dir/logits.bin */
} cli_case;

static int setup_cli(void **state) {
    cli_case *c = calloc(1, sizeof *c);
    *state = c;
    c->dir = bi_copy_fixture("llama-f32");
    c->out = c->dir ? bi_path(c->dir, "logits.bin") : NULL;
    return c->out ? 0 : -1;
}

static int teardown_cli(void **state) {
    cli_case *c = *state;
    bi_rmtree(c->dir);
    free(c->dir);
    free(c->out);
    free(c);
    return 0;
}

/* Runs the CLI; it must exit with a non-zero status (not a signal) and print
 * exactly one line on stderr holding `want`. */
static void expect_cli_fails(const char *args, const char *want) {
    char *err = NULL;
    int rc = bi_run_cli(args, &err);
    if (rc <= 0) fail_msg("lmc %s: exit status %d (stderr: %s)", args, rc, err ? err : "");
    assert_non_null(err);
    if (bi_count_lines(err) != 1)
        fail_msg("lmc %s: %d lines on stderr:\n%s", args, bi_count_lines(err), err);
    if (want && !strstr(err, want)) fail_msg("lmc %s: stderr \"%s\" lacks \"%s\"", args, err, want);
    free(err);
}

static void expect_logits_fail(cli_case *c, const char *tokens, const char *want) {
    char *args =
        lmc_sprintf("logits --model '%s' --tokens '%s' --out '%s'", c->dir, tokens, c->out);
    expect_cli_fails(args, want);
    free(args);
    assert_int_equal(bi_file_size(c->dir, "logits.bin"), -1);
}

static void expect_generate_fail(cli_case *c, const char *tokens, const char *want) {
    char *args = lmc_sprintf("generate --model '%s' --tokens '%s' --max-tokens 3 --temp 0 "
                             "--print-ids",
                             c->dir, tokens);
    expect_cli_fails(args, want);
    free(args);
}

static void test_cli_good_model(void **state) {
    cli_case *c = *state;
    char *args = lmc_sprintf("logits --model '%s' --tokens 1,2,3 --out '%s'", c->dir, c->out);
    char *err = NULL;
    assert_int_equal(bi_run_cli(args, &err), 0);
    assert_string_equal(err, "");
    assert_int_equal(bi_file_size(c->dir, "logits.bin"), 3 * 256 * 4);
    free(err);
    free(args);
}

static void test_cli_bad_arguments(void **state) {
    cli_case *c = *state;
    expect_logits_fail(c, "1,x", "--tokens");
    expect_logits_fail(c, "", "--tokens");
    expect_logits_fail(c, "1,99999999999", "--tokens");
    expect_generate_fail(c, "1,x", "--tokens");
    /* without --model the shipped model runs: its errors name no --model */
    char *args = lmc_sprintf("logits --tokens 1,2,5000 --out '%s'", c->out);
    expect_cli_fails(args, "token id 5000");
    free(args);
    assert_int_equal(bi_file_size(c->dir, "logits.bin"), -1);
    expect_cli_fails("generate --tokens 1,2 --model /nonexistent/m --print-ids", "/nonexistent/m");
    expect_cli_fails("generate --tokens 1,,2", "--tokens");
    expect_cli_fails("generate --tokens 1,2,", "--tokens");
    expect_cli_fails("generate --temp nan", "--temp");
    expect_cli_fails("generate --threads 100000", "--threads");
    args = lmc_sprintf("logits --model '%s' --tokens 1 --out '%s' --bogus", c->dir, c->out);
    expect_cli_fails(args, "unknown option '--bogus'");
    free(args);
    args = lmc_sprintf("generate --model '%s' --tokens 1 --print-ids --max-tokens -3", c->dir);
    expect_cli_fails(args, "--max-tokens");
    free(args);
    args = lmc_sprintf("logits --model '%s' --tokens 1 --out", c->dir);
    expect_cli_fails(args, "--out");
    free(args);
    args = lmc_sprintf("generate --model '%s' --tokens 1 --print-ids --temp", c->dir);
    expect_cli_fails(args, "--temp");
    free(args);
    expect_cli_fails("models --bogus", "unknown option '--bogus'");
    expect_cli_fails("models --json=yes", "--json takes no value");
}

static void test_cli_ids_out_of_range(void **state) {
    cli_case *c = *state;
    expect_logits_fail(c, "1,256", "token id 256");
    expect_logits_fail(c, "-1", "token id -1");
    expect_generate_fail(c, "5,300", "token id 300");
}

static void test_cli_unwritable_out(void **state) {
    cli_case *c = *state;
    char *args =
        lmc_sprintf("logits --model '%s' --tokens 1 --out '%s/no/such/dir/x.bin'", c->dir, c->dir);
    expect_cli_fails(args, "No such file or directory");
    free(args);
}

static void test_cli_broken_folders(void **state) {
    cli_case *c = *state;
    /* A missing tensor. */
    bi_tensor_edit e = {.name = "model.layers.1.mlp.down_proj.weight", .drop = true};
    assert_true(bi_edit_tensor(c->dir, "model.safetensors", &e));
    expect_logits_fail(c, "1,2", "missing tensor 'model.layers.1.mlp.down_proj.weight'");
    expect_generate_fail(c, "1,2", "missing tensor 'model.layers.1.mlp.down_proj.weight'");
    /* Truncated weights. */
    assert_true(bi_truncate(c->dir, "model.safetensors", 100));
    expect_logits_fail(c, "1,2", "model.safetensors: header length");
    expect_generate_fail(c, "1,2", "model.safetensors: header length");
    /* Bad config.json. */
    assert_true(bi_write_str(c->dir, "config.json", "{\"model_type\": \"llama\",,}"));
    expect_logits_fail(c, "1,2", "config.json: invalid JSON at line 1");
    expect_generate_fail(c, "1,2", "config.json: invalid JSON at line 1");
    assert_true(bi_write_str(c->dir, "config.json", "{\"model_type\": \"bert\"}"));
    expect_logits_fail(c, "1", "model_type 'bert' is not supported");
    /* No such folder. */
    expect_cli_fails("logits --model /nonexistent/m --tokens 1 --out /tmp/lmc-never-written",
                     "no folder /nonexistent/m");
}

int main(void) {
    const struct CMUnitTest lib_tests[] = {
        cmocka_unit_test(test_token_ids_out_of_range),
        cmocka_unit_test(test_context_exceeded),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_thread_restart_frees_scratch),
        cmocka_unit_test(test_library_api_bad_arguments),
        cmocka_unit_test(test_text_api_bad_arguments),
        cmocka_unit_test(test_listing_api_bad_arguments),
    };
    const struct CMUnitTest cli_tests[] = {
#define C(f) cmocka_unit_test_setup_teardown(f, setup_cli, teardown_cli)
        C(test_cli_good_model),     C(test_cli_bad_arguments),  C(test_cli_ids_out_of_range),
        C(test_cli_unwritable_out), C(test_cli_broken_folders),
#undef C
    };
    int failed = cmocka_run_group_tests(lib_tests, load_model, free_model);
    return failed + cmocka_run_group_tests(cli_tests, NULL, NULL);
}
