/* Shapes of real Hugging Face model folders that the fixtures do not have:
 * Meta's model_max_length of 1e30 written as an integer, eos_token_id lists
 * in config.json and generation_config.json, torch_dtype vs dtype,
 * "rope_scaling": null, a UTF-8 BOM at the start of each JSON file,
 * added_tokens_decoder, named chat templates and AddedToken special tokens.
 * Each test builds a small folder in /tmp from tests/fixtures/models/llama-f32
 * with edited JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/json.h"
#include "helpers/bad_input.h"
#include "helpers/skip.h"
#include "lmc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG "1000000000000000019884624838656" /* Llama 3's model_max_length, 1e30 */
#define BOM "\xEF\xBB\xBF"

static const int32_t PROMPT[] = {1, 15, 27, 100, 7};
#define N_PROMPT ((int32_t)(sizeof PROMPT / sizeof PROMPT[0]))

static const char *const MSGS = "[{\"role\": \"user\", \"content\": \"hi\"}]";

static char *folder(void) {
    char *dir = bi_copy_fixture("llama-f32");
    assert_non_null(dir);
    return dir;
}

static void done(char *dir) {
    bi_rmtree(dir);
    free(dir);
}

/* Rewrites dir/name with a UTF-8 BOM in front. */
static void prepend_bom(const char *dir, const char *name) {
    char *p = bi_path(dir, name), *text = NULL;
    size_t len = 0;
    assert_int_equal(lmc_read_file(p, &text, &len), LMC_OK);
    char *out = malloc(len + 3);
    assert_non_null(out);
    memcpy(out, BOM, 3);
    memcpy(out + 3, text, len);
    assert_true(bi_write(dir, name, out, len + 3));
    free(out);
    free(text);
    free(p);
}

/* All-position logits of PROMPT (malloc'd, N_PROMPT x vocab). */
static float *logits_of(const char *dir, int32_t *vocab) {
    lmc_model *m = NULL;
    lmc_session *s = NULL;
    if (lmc_model_load(dir, &m) != LMC_OK) fail_msg("load %s: %s", dir, lmc_last_error());
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    *vocab = info.vocab_size;
    float *out = malloc((size_t)N_PROMPT * (size_t)info.vocab_size * sizeof(float));
    assert_non_null(out);
    assert_int_equal(lmc_session_create(m, 64, &s), LMC_OK);
    assert_int_equal(lmc_session_forward(s, PROMPT, N_PROMPT, 1, out), LMC_OK);
    lmc_session_free(s);
    lmc_model_free(m);
    return out;
}

static void expect_same_logits(const char *a, const char *b) {
    int32_t va = 0, vb = 0;
    float *la = logits_of(a, &va), *lb = logits_of(b, &vb);
    assert_int_equal(va, vb);
    assert_memory_equal(la, lb, (size_t)N_PROMPT * (size_t)va * sizeof(float));
    free(la);
    free(lb);
}

static void expect_render(const char *dir, const char *extra, const char *want) {
    char *out = NULL;
    size_t len = 0;
    lmc_status st = lmc_chat_template_render(dir, MSGS, 1, extra, &out, &len);
    if (st != LMC_OK) fail_msg("render %s: %s", dir, lmc_last_error());
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    lmc_free(out);
}

/* ---- integers beyond int64 -------------------------------------------- */

static json_t *parse(const char *text) {
    json_t *j = NULL;
    if (lmc_json_parse(text, strlen(text), "t", &j) != LMC_OK)
        fail_msg("%s: %s", text, lmc_last_error());
    return j;
}

static void test_json_big_integers(void **state) {
    (void)state;
    json_t *j = parse("[" BIG "]");
    assert_true(json_is_real(json_array_get(j, 0)));
    assert_true(json_real_value(json_array_get(j, 0)) == 1e30);
    json_decref(j);
    /* int64's limits stay integers; one past them becomes a real. */
    j = parse("[9223372036854775807, -9223372036854775808, 3, -0, 0, 12.5, 1e3, "
              "9223372036854775808, -9223372036854775809, -" BIG ", " BIG "e2]");
    assert_true(json_is_integer(json_array_get(j, 0)));
    assert_true(json_integer_value(json_array_get(j, 0)) == INT64_MAX);
    assert_true(json_is_integer(json_array_get(j, 1)));
    assert_true(json_integer_value(json_array_get(j, 1)) == INT64_MIN);
    assert_true(json_is_integer(json_array_get(j, 2)));
    assert_int_equal(json_integer_value(json_array_get(j, 2)), 3);
    assert_true(json_is_integer(json_array_get(j, 3)) && json_is_integer(json_array_get(j, 4)));
    assert_true(json_is_real(json_array_get(j, 5)) && json_is_real(json_array_get(j, 6)));
    assert_true(json_is_real(json_array_get(j, 7)));
    assert_true(json_real_value(json_array_get(j, 7)) == 9223372036854775808.0);
    assert_true(json_is_real(json_array_get(j, 8)));
    assert_true(json_real_value(json_array_get(j, 9)) == -1e30);
    assert_true(json_real_value(json_array_get(j, 10)) == 1e32);
    json_decref(j);
    /* Digits in strings (escaped quotes included) and keys are left alone. */
    j = parse("{\"" BIG "\": \"" BIG "\", \"q\\\"" BIG "\": \"\\\\\", \"n\": " BIG "}");
    assert_string_equal(json_string_value(json_object_get(j, BIG)), BIG);
    assert_string_equal(json_string_value(json_object_get(j, "q\"" BIG)), "\\");
    assert_true(json_real_value(json_object_get(j, "n")) == 1e30);
    bool bad = false;
    assert_true(lmc_json_number(j, "n", 0, &bad) == 1e30);
    assert_int_equal(lmc_json_int(j, "n", -1, &bad), -1); /* not an int64 */
    assert_true(bad);
    json_decref(j);
    /* An error after a rewritten literal reports the column of the text as
     * given: the same as with a real literal of the same length. */
    json_t *k = NULL;
    const char *a = "{\"a\": " BIG ", \"b\": " BIG ",\n \"c\": " BIG ", }";
    const char *b =
        "{\"a\": 1.00000000000000001988462483865, \"b\": 1.00000000000000001988462483865,"
        "\n \"c\": 1.00000000000000001988462483865, }";
    assert_int_equal(lmc_json_parse(a, strlen(a), "t", &k), LMC_ERR_FORMAT);
    char *msg = lmc_strdup(lmc_last_error());
    assert_int_equal(lmc_json_parse(b, strlen(b), "t", &k), LMC_ERR_FORMAT);
    assert_string_equal(msg, lmc_last_error());
    assert_non_null(strstr(msg, "line 2, column 40"));
    free(msg);
    /* Too big even for a double: a clear error, never a crash. */
    char huge[400];
    memset(huge, '9', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    assert_int_equal(lmc_json_parse(huge, strlen(huge), "huge", &k), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "huge"));
}

static void test_json_bom(void **state) {
    (void)state;
    json_t *j = parse(BOM "{\"a\": 1}");
    assert_int_equal(lmc_json_int(j, "a", 0, NULL), 1);
    json_decref(j);
    j = parse(BOM " [2]");
    assert_int_equal(json_integer_value(json_array_get(j, 0)), 2);
    json_decref(j);
    /* Only a leading BOM is whitespace. */
    json_t *k = NULL;
    assert_int_equal(lmc_json_parse("[" BOM "1]", strlen("[" BOM "1]"), "t", &k), LMC_ERR_FORMAT);
    assert_int_equal(lmc_json_parse(BOM BOM "[1]", 9, "t", &k), LMC_ERR_FORMAT);
    assert_int_equal(lmc_json_parse(BOM, 3, "t", &k), LMC_ERR_FORMAT);
}

/* Meta's tokenizer_config.json: model_max_length 1e30 as an integer. */
static void test_llama3_model_max_length(void **state) {
    (void)state;
    char *dir = folder();
    assert_true(bi_write_str(
        dir, "tokenizer_config.json",
        "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": \"<|eot_id|>\",\n"
        " \"model_max_length\": " BIG ",\n"
        " \"chat_template\": \"{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content "
        "}}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}A:{% endif %}\"}"));
    expect_render(dir, NULL, "<|begin_of_text|>user: hi<|eot_id|>A:");
    /* A template printing a value that big (it is a float here: Jinja in
     * Python would print the integer's digits). */
    assert_true(
        bi_write_str(dir, "chat_template.jinja", "{{ n }}|{{ n > 1000000 }}|{{ n|tojson }}"));
    expect_render(dir, "{\"n\": " BIG "}", "1e+30|True|1e+30");
    done(dir);
}

/* The real Llama 3 tokenizer_config.json (fetched by make test). */
static void test_llama3_real_tokenizer_config(void **state) {
    (void)state;
    char *src = lmc_sprintf("%s/tokenizers/llama3/tokenizer_config.json", LMC_BINARY_DIR);
    if (!lmc_file_exists(src)) {
        free(src);
        TEST_SKIP_UNLESS_CI("no build/tokenizers/llama3 (make test fetches the tokenizers)");
    }
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lmc_read_file(src, &text, &len), LMC_OK);
    assert_non_null(strstr(text, "\"model_max_length\": " BIG));
    char *dir = folder();
    assert_true(bi_write(dir, "tokenizer_config.json", text, len));
    char *out = NULL;
    assert_int_equal(lmc_chat_template_render(dir, MSGS, 1, NULL, &out, &len), LMC_OK);
    assert_non_null(strstr(out, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi"
                                "<|eot_id|>"));
    lmc_free(out);
    json_t *j = NULL;
    assert_int_equal(lmc_json_load_file(src, &j), LMC_OK);
    assert_true(lmc_json_number(j, "model_max_length", 0, NULL) == 1e30);
    json_decref(j);
    free(text);
    free(src);
    done(dir);
}

/* ---- config.json / generation_config.json ------------------------------ */

static void expect_eos(const char *dir, const int32_t *want, int n) {
    lmc_model *m = NULL;
    if (lmc_model_load(dir, &m) != LMC_OK) fail_msg("load %s: %s", dir, lmc_last_error());
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    assert_int_equal(info.num_eos_token_ids, n);
    for (int i = 0; i < n; i++) assert_int_equal(info.eos_token_ids[i], want[i]);
    lmc_model_free(m);
}

/* eos_token_id lists: the stop ids are the union of both files, in order,
 * without duplicates. */
static void test_eos_token_id_lists(void **state) {
    (void)state;
    char *dir = folder();
    assert_true(bi_edit_json(dir, "config.json", "eos_token_id", json_pack("[i, i, i]", 2, 5, 2)));
    assert_true(bi_edit_json(dir, "generation_config.json", "eos_token_id",
                             json_pack("[i, i, i]", 7, 5, 9)));
    expect_eos(dir, (const int32_t[]){2, 5, 7, 9}, 4);
    /* generation_config.json's int, config.json's list. */
    assert_true(bi_edit_json(dir, "generation_config.json", "eos_token_id", json_integer(11)));
    expect_eos(dir, (const int32_t[]){2, 5, 11}, 3);
    /* Only generation_config.json names them. */
    assert_true(bi_edit_json(dir, "config.json", "eos_token_id", json_null()));
    assert_true(bi_edit_json(dir, "generation_config.json", "eos_token_id",
                             json_pack("[i, i]", 128001, 128009)));
    expect_eos(dir, (const int32_t[]){128001, 128009}, 2);
    /* No generation_config.json: config.json's list alone. */
    assert_true(bi_edit_json(dir, "config.json", "eos_token_id", json_pack("[i, i]", 3, 4)));
    assert_true(bi_remove(dir, "generation_config.json"));
    expect_eos(dir, (const int32_t[]){3, 4}, 2);
    done(dir);
}

/* transformers < 4.56 writes torch_dtype, later versions dtype. */
static void test_torch_dtype_or_dtype(void **state) {
    (void)state;
    char *base = folder(), *a = folder(), *b = folder();
    assert_true(bi_edit_json(a, "config.json", "dtype", NULL));
    assert_true(bi_edit_json(a, "config.json", "torch_dtype", json_string("float32")));
    assert_true(bi_edit_json(b, "config.json", "torch_dtype", json_string("float32")));
    expect_same_logits(base, a); /* torch_dtype alone */
    expect_same_logits(base, b); /* both */
    assert_true(bi_edit_json(b, "config.json", "dtype", NULL));
    assert_true(bi_edit_json(b, "config.json", "torch_dtype", NULL));
    expect_same_logits(base, b); /* neither */
    done(base);
    done(a);
    done(b);
}

/* "rope_scaling": null, beside rope_parameters and in the classic spelling
 * (top-level rope_theta): the same logits as without it. */
static void test_rope_scaling_null(void **state) {
    (void)state;
    char *base = folder(), *a = folder(), *b = folder();
    assert_true(bi_edit_json(a, "config.json", "rope_scaling", json_null()));
    expect_same_logits(base, a);
    assert_true(bi_edit_json(b, "config.json", "rope_parameters", NULL));
    assert_true(bi_edit_json(b, "config.json", "rope_theta", json_real(10000.0)));
    assert_true(bi_edit_json(b, "config.json", "rope_scaling", json_null()));
    expect_same_logits(base, b);
    assert_true(bi_edit_json(b, "config.json", "rope_parameters", json_null()));
    expect_same_logits(base, b);
    done(base);
    done(a);
    done(b);
}

/* ---- a UTF-8 BOM at the start of each file ------------------------------ */

static void test_bom_config_files(void **state) {
    (void)state;
    char *base = folder(), *dir = folder();
    assert_true(
        bi_edit_json(dir, "generation_config.json", "eos_token_id", json_pack("[i, i]", 2, 9)));
    assert_true(bi_write_str(dir, "tokenizer_config.json",
                             "{\"bos_token\": \"<s>\", \"chat_template\": \"{{ bos_token }}{{ "
                             "messages[0].content }}\", \"model_max_length\": " BIG "}"));
    prepend_bom(dir, "config.json");
    prepend_bom(dir, "generation_config.json");
    prepend_bom(dir, "tokenizer_config.json");
    expect_same_logits(base, dir);
    /* generation_config.json was read, not skipped as broken. */
    expect_eos(dir, (const int32_t[]){2, 9}, 2);
    expect_render(dir, NULL, "<s>hi");
    done(base);
    done(dir);
}

static int32_t *encode(const lmc_tokenizer *tok, const char *text, size_t *n) {
    int32_t *ids = NULL;
    assert_int_equal(lmc_tokenizer_encode(tok, text, strlen(text), LMC_ENCODE_ADD_SPECIAL, &ids, n),
                     LMC_OK);
    return ids;
}

/* The real Llama 3 tokenizer.json with a BOM: the same ids. */
static void test_bom_tokenizer_json(void **state) {
    (void)state;
    char *src = lmc_sprintf("%s/tokenizers/llama3", LMC_BINARY_DIR);
    char *file = lmc_path_join(src, "tokenizer.json");
    if (!lmc_file_exists(file)) {
        free(file);
        free(src);
        TEST_SKIP_UNLESS_CI("no build/tokenizers/llama3 (make test fetches the tokenizers)");
    }
    char *dir = folder(), *text = NULL;
    size_t len = 0;
    assert_int_equal(lmc_read_file(file, &text, &len), LMC_OK);
    assert_true(bi_write(dir, "tokenizer.json", text, len));
    prepend_bom(dir, "tokenizer.json");
    lmc_tokenizer *a = NULL, *b = NULL;
    assert_int_equal(lmc_tokenizer_load(src, &a), LMC_OK);
    if (lmc_tokenizer_load(dir, &b) != LMC_OK) fail_msg("%s", lmc_last_error());
    const char *s = "Hello world, <|eot_id|> caf\xC3\xA9 12345!";
    size_t na = 0, nb = 0;
    int32_t *ia = encode(a, s, &na), *ib = encode(b, s, &nb);
    assert_true(na > 3);
    assert_int_equal(na, nb);
    assert_memory_equal(ia, ib, na * sizeof *ia);
    assert_int_equal(lmc_tokenizer_vocab_size(a), lmc_tokenizer_vocab_size(b));
    lmc_free(ia);
    lmc_free(ib);
    lmc_tokenizer_free(a);
    lmc_tokenizer_free(b);
    free(text);
    free(file);
    free(src);
    done(dir);
}

#define TINY_MODEL                                                                                 \
    "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a " \
    "b\"]}"

static lmc_status load_tokenizer(const char *dir, const char *json, lmc_tokenizer **tok) {
    assert_true(bi_write_str(dir, "tokenizer.json", json));
    *tok = NULL;
    return lmc_tokenizer_load(dir, tok);
}

/* A synthetic tokenizer.json: a BOM, and integers beyond int64 where the
 * file holds a number lmc does not read (a clear error where it reads an id). */
static void test_tokenizer_json_bom_and_big_integers(void **state) {
    (void)state;
    char *dir = bi_tmpdir();
    assert_non_null(dir);
    lmc_tokenizer *tok = NULL;
    assert_int_equal(load_tokenizer(dir, BOM "{" TINY_MODEL "}", &tok), LMC_OK);
    size_t n = 0;
    int32_t *ids = encode(tok, "ab", &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 2);
    lmc_free(ids);
    lmc_tokenizer_free(tok);
    assert_int_equal(load_tokenizer(dir,
                                    BOM "{\"truncation\": {\"max_length\": " BIG
                                        "}, \"added_tokens\": "
                                        "[{\"id\": " BIG ", \"content\": \"<x>\", \"special\": "
                                        "true}], " TINY_MODEL "}",
                                    &tok),
                     LMC_OK);
    assert_int_equal(lmc_tokenizer_token_to_id(tok, "<x>"), 3);
    lmc_tokenizer_free(tok);
    /* An id that big: errors naming what is wrong. */
    assert_int_equal(load_tokenizer(dir,
                                    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": " BIG
                                    "}, \"merges\": []}}",
                                    &tok),
                     LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "integer too large"));
    assert_int_equal(
        load_tokenizer(
            dir,
            "{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": "
            "[{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": "
            "\"A\", \"type_id\": 0}}], \"pair\": [], "
            "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [" BIG
            "], \"tokens\": [\"<s>\"]}}}, " TINY_MODEL "}",
            &tok),
        LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "bad special token id"));
    assert_null(tok);
    bi_rmtree(dir);
    free(dir);
}

/* ---- tokenizer_config.json as transformers writes it ---------------------- */

/* added_tokens_decoder, chat_template as a list of {name, template}, and
 * special tokens as AddedToken dicts: the render sees their content. */
static void test_tokenizer_config_shapes(void **state) {
    (void)state;
    char *dir = folder();
    assert_true(bi_write_str(
        dir, "tokenizer_config.json",
        "{\"add_bos_token\": true,\n"
        " \"added_tokens_decoder\": {\n"
        "  \"0\": {\"content\": \"<unk>\", \"lstrip\": false, \"normalized\": false, \"rstrip\": "
        "false, \"single_word\": false, \"special\": true},\n"
        "  \"1\": {\"content\": \"<s>\", \"lstrip\": false, \"normalized\": false, \"rstrip\": "
        "false, \"single_word\": false, \"special\": true},\n"
        "  \"2\": {\"content\": \"</s>\", \"lstrip\": false, \"normalized\": false, \"rstrip\": "
        "false, \"single_word\": false, \"special\": true}},\n"
        " \"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\", \"lstrip\": false, "
        "\"normalized\": true, \"rstrip\": false, \"single_word\": false},\n"
        " \"eos_token\": {\"__type\": \"AddedToken\", \"content\": \"</s>\", \"lstrip\": false, "
        "\"normalized\": true, \"rstrip\": false, \"single_word\": false},\n"
        " \"unk_token\": {\"__type\": \"AddedToken\", \"content\": \"<unk>\"},\n"
        " \"pad_token\": null,\n"
        " \"additional_special_tokens\": [{\"__type\": \"AddedToken\", \"content\": \"<x>\"}, "
        "\"<y>\"],\n"
        " \"chat_template\": [\n"
        "  {\"name\": \"default\", \"template\": \"{{ bos_token }}[{{ messages[0].content }}]{{ "
        "eos_token }}{{ unk_token }}{{ pad_token is defined }}{{ "
        "additional_special_tokens|join(',') "
        "}}\"},\n"
        "  {\"name\": \"tool_use\", \"template\": \"T{{ bos_token }}{{ tools|length }}\"},\n"
        "  {\"name\": \"rag\", \"template\": \"R{{ eos_token }}{{ documents|length }}\"}],\n"
        " \"model_max_length\": " BIG ",\n"
        " \"tokenizer_class\": \"LlamaTokenizer\"}"));
    expect_render(dir, NULL, "<s>[hi]</s><unk>False<x>,<y>");
    expect_render(dir, "{\"tools\": [{\"type\": \"function\"}]}", "T<s>1");
    expect_render(dir, "{\"template_name\": \"rag\", \"documents\": [1, 2]}", "R</s>2");
    /* The caller's variables override the file's tokens, as kwargs do. */
    expect_render(dir, "{\"bos_token\": \"B\"}", "B[hi]</s><unk>False<x>,<y>");
    /* The same file with a BOM. */
    prepend_bom(dir, "tokenizer_config.json");
    expect_render(dir, NULL, "<s>[hi]</s><unk>False<x>,<y>");
    done(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_big_integers),
        cmocka_unit_test(test_json_bom),
        cmocka_unit_test(test_llama3_model_max_length),
        cmocka_unit_test(test_llama3_real_tokenizer_config),
        cmocka_unit_test(test_eos_token_id_lists),
        cmocka_unit_test(test_torch_dtype_or_dtype),
        cmocka_unit_test(test_rope_scaling_null),
        cmocka_unit_test(test_bom_config_files),
        cmocka_unit_test(test_bom_tokenizer_json),
        cmocka_unit_test(test_tokenizer_json_bom_and_big_integers),
        cmocka_unit_test(test_tokenizer_config_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
