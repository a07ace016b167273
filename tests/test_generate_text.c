/* lmc generate with a text prompt: tokenizer in, streamed detokenization
 * out. On the real stories260K model (../shared/real-models, skipped when
 * absent) the 40 greedy tokens from "Once upon a time" print transformers'
 * story exactly; on a fixture with a chat template the rendered prompt is
 * what gets encoded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/skip.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *run(const char *cmd) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) len += n;
    buf[len] = '\0';
    assert_int_equal(pclose(p), 0);
    return buf;
}

static void test_story_text(void **state) {
    (void)state;
    const char *dir = LMC_SHARED_DIR "/real-models/stories260K-hf";
    json_t *e = json_load_file(LMC_SHARED_DIR "/real-models/stories260K-hf/expect.json", 0, NULL);
    if (!e) TEST_SKIP("no %s/real-models/stories260K-hf (the shared real model)", LMC_SHARED_DIR);
    json_t *story = json_object_get(e, "story");
    const char *want = json_string_value(json_object_get(story, "greedy_text"));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --prompt 'Once upon a time' --max-tokens 40 --temp 0", LMC_CLI,
             dir);
    char *out = run(cmd);
    size_t n = strlen(out);
    assert_true(n > 0 && out[n - 1] == '\n');
    out[n - 1] = '\0';
    assert_string_equal(out, want);
    /* the ids printed for the same prompt are transformers' greedy ids */
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --prompt 'Once upon a time' --max-tokens 40 --temp 0 "
             "--print-ids",
             LMC_CLI, dir);
    char *ids = run(cmd);
    json_t *g = json_object_get(story, "greedy_tokens");
    char *p = ids;
    for (size_t i = 0; i < json_array_size(g); i++) {
        long v = strtol(p, &p, 10);
        assert_int_equal(v, json_integer_value(json_array_get(g, i)));
    }
    free(ids);
    free(out);
    json_decref(e);
}

static void test_chat_prompt_and_bad_input(void **state) {
    (void)state;
    const char *dir = LMC_SHARED_DIR "/conformance/llama-hf";
    json_t *e = json_load_file(LMC_SHARED_DIR "/conformance/llama-hf/expect.json", 0, NULL);
    if (!e) TEST_SKIP("no %s/conformance/llama-hf (the shared reference set)", LMC_SHARED_DIR);
    char cmd[1024];
    /* a templated prompt runs and streams something */
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --prompt 'Name a color of the sky.' --system 'Be brief.' "
             "--max-tokens 4 --temp 0 --ignore-eos",
             LMC_CLI, dir);
    char *out = run(cmd);
    assert_true(strlen(out) >= 1);
    free(out);
    /* --tokens and --prompt together are refused with one line */
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --prompt x --tokens 1 2>&1 >/dev/null | wc -l", LMC_CLI, dir);
    FILE *p = popen(cmd, "r");
    int lines = -1;
    assert_int_equal(fscanf(p, "%d", &lines), 1);
    pclose(p);
    assert_int_equal(lines, 1);
    json_decref(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_story_text),
        cmocka_unit_test(test_chat_prompt_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
