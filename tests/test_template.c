/* Chat templates: the Jinja2 subset against jinja2's own output
 * (tests/fixtures/templates/language.json), real models' templates against
 * transformers' renders (expected.json), the public API's template lookup,
 * error positions, sandbox limits and the CLI. The fixtures come from
 * tests/reference/make_template_reference.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/base.h"
#include "base/json.h"
#include "template/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIXTURES LMC_SOURCE_DIR "/tests/fixtures/templates"

static json_t *load_fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", FIXTURES, name);
    json_t *j = NULL;
    lmc_status st = lmc_json_load_file(path, &j);
    if (st != LMC_OK) fail_msg("cannot load %s: %s", path, lmc_last_error());
    return j;
}

/* Renders src with vars; returns the status, *out malloc'd on success. */
static lmc_status render(const char *src, const char *vars_json, const tpl_options *opts,
                         char **out, size_t *len) {
    lmc_template *t = NULL;
    *out = NULL;
    lmc_status st = tpl_compile(src, strlen(src), &t);
    if (st != LMC_OK) return st;
    json_t *vars = NULL;
    if (vars_json && (st = lmc_json_parse(vars_json, strlen(vars_json), "vars", &vars)) != LMC_OK) {
        tpl_free(t);
        return st;
    }
    st = tpl_render(t, vars, opts, out, len);
    json_decref(vars);
    tpl_free(t);
    return st;
}

static void report_mismatch(const char *what, const char *want, size_t want_len, const char *got,
                            size_t got_len) {
    size_t i = 0;
    while (i < want_len && i < got_len && want[i] == got[i]) i++;
    print_message("MISMATCH %s at byte %zu\n  want: %.*s\n  got:  %.*s\n", what, i,
                  (int)(want_len - i > 80 ? 80 : want_len - i), want + i,
                  (int)(got_len - i > 80 ? 80 : got_len - i), got + i);
}

static time_t fixed_time_of(const json_t *fixture) {
    const char *s = lmc_json_string(fixture, "fixed_date", "2025-02-10T12:00:00", NULL);
    struct tm tm = {0};
    int y, mo, d, h, mi, se;
    assert_int_equal(sscanf(s, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &se), 6);
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    return timegm(&tm);
}

/* Cases where lmc deliberately differs from jinja2's sandbox (none now:
 * list.append was allowed before, transformers refuses it). */
static bool known_divergence(const char *name) {
    (void)name;
    return false;
}

static void test_language_cases(void **state) {
    (void)state;
    json_t *fx = load_fixture("language.json");
    tpl_options opts;
    tpl_options_default(&opts);
    opts.fixed_time = true;
    opts.now = fixed_time_of(fx);
    json_t *cases = json_object_get(fx, "cases"), *c;
    size_t i, pass = 0, total = 0, failed = 0;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        if (known_divergence(name)) continue;
        total++;
        char *vars = json_dumps(json_object_get(c, "vars"), JSON_COMPACT);
        char *out = NULL;
        size_t len = 0;
        lmc_status st =
            render(json_string_value(json_object_get(c, "template")), vars, &opts, &out, &len);
        json_t *want = json_object_get(c, "rendered");
        if (want) {
            const char *w = json_string_value(want);
            size_t wl = json_string_length(want);
            if (st != LMC_OK) {
                print_message("FAIL %s: %s\n", name, lmc_last_error());
                failed++;
            } else if (len != wl || memcmp(out, w, wl)) {
                report_mismatch(name, w, wl, out, len);
                failed++;
            } else {
                pass++;
            }
        } else if (st == LMC_OK) {
            print_message("FAIL %s: expected an error (%s), rendered '%s'\n", name,
                          json_string_value(json_object_get(c, "error")), out);
            failed++;
        } else {
            pass++;
        }
        free(out);
        free(vars);
    }
    print_message("language cases: %zu/%zu match jinja2\n", pass, total);
    json_decref(fx);
    assert_int_equal(failed, 0);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *make_dir(const char *tag) {
    char *dir = lmc_sprintf("%s/tests/tpl_%s_%d", LMC_BINARY_DIR, tag, (int)getpid());
    mkdir(dir, 0755);
    return dir;
}

static void remove_dir(char *dir) {
    static const char *const files[] = {"tokenizer_config.json",
                                        "chat_template.jinja",
                                        "chat_template.json",
                                        "messages.json",
                                        "tools.json",
                                        "out.txt",
                                        "err.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = lmc_path_join(dir, files[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
    free(dir);
}

/* Writes a model folder whose tokenizer_config.json holds the fixture's
 * template and special tokens. */
static void write_config(const char *dir, const json_t *tpl) {
    json_t *cfg = json_object();
    json_object_set(cfg, "chat_template", json_object_get(tpl, "template"));
    static const char *const toks[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(tpl, toks[i]);
        if (v && !json_is_null(v)) json_object_set(cfg, toks[i], v);
    }
    char *p = lmc_path_join(dir, "tokenizer_config.json");
    assert_int_equal(json_dump_file(cfg, p, 0), 0);
    free(p);
    json_decref(cfg);
}

static void test_real_templates(void **state) {
    (void)state;
    json_t *fx = load_fixture("expected.json");
    const char *date = lmc_json_string(fx, "fixed_date", NULL, NULL);
    assert_non_null(date);
    setenv("LMC_FIXED_DATE", date, 1);
    json_t *cases = json_object_get(fx, "cases"), *c;
    size_t i, pass = 0, failed = 0;
    char *dir = make_dir("real");
    const char *loaded = "";
    json_t *tpl = NULL;
    json_array_foreach(cases, i, c) {
        const char *tname = json_string_value(json_object_get(c, "template"));
        const char *cname = json_string_value(json_object_get(c, "name"));
        if (strcmp(tname, loaded)) {
            json_decref(tpl);
            char file[256];
            snprintf(file, sizeof file, "%s.json", tname);
            tpl = load_fixture(file);
            write_config(dir, tpl);
            loaded = tname;
        }
        char *msgs = json_dumps(json_object_get(c, "messages"), JSON_COMPACT);
        char *extra = json_dumps(json_object_get(c, "extra_vars"), JSON_COMPACT);
        int agp = json_is_true(json_object_get(c, "add_generation_prompt"));
        char *out = NULL;
        size_t len = 0;
        lmc_status st = lmc_chat_template_render(dir, msgs, agp, extra, &out, &len);
        json_t *want = json_object_get(c, "rendered");
        char what[160];
        snprintf(what, sizeof what, "%s/%s", tname, cname);
        if (want) {
            if (st != LMC_OK) {
                print_message("FAIL %s: %s\n", what, lmc_last_error());
                failed++;
            } else if (len != json_string_length(want) ||
                       memcmp(out, json_string_value(want), len)) {
                report_mismatch(what, json_string_value(want), json_string_length(want), out, len);
                failed++;
            } else {
                pass++;
            }
        } else {
            const char *err = json_string_value(json_object_get(c, "error"));
            if (st != LMC_ERR_FORMAT || !strstr(lmc_last_error(), err)) {
                print_message("FAIL %s: expected error '%s', got status %d '%s'\n", what, err, st,
                              st ? lmc_last_error() : "");
                failed++;
            } else {
                pass++;
            }
        }
        lmc_free(out);
        free(msgs);
        free(extra);
    }
    print_message("real-template cases: %zu/%zu byte-identical to %s\n", pass,
                  json_array_size(cases), lmc_json_string(fx, "renderer", "?", NULL));
    json_decref(tpl);
    remove_dir(dir);
    unsetenv("LMC_FIXED_DATE");
    json_decref(fx);
    assert_int_equal(failed, 0);
}

/* The template in the shared conformance folder, as expect.json records it. */
static void test_shared_conformance(void **state) {
    (void)state;
    char *dir = lmc_sprintf("%s/conformance/llama-hf", LMC_SHARED_DIR);
    char *path = lmc_path_join(dir, "expect.json");
    if (!lmc_file_exists(path)) {
        printf("SKIPPED: no %s (the shared reference set)\n", path);
        fflush(stdout);
        free(path);
        free(dir);
        skip();
    }
    json_t *e = NULL;
    assert_int_equal(lmc_json_load_file(path, &e), LMC_OK);
    json_t *chat = json_object_get(e, "chat");
    char *msgs = json_dumps(json_object_get(chat, "messages"), JSON_COMPACT);
    char *out = NULL;
    size_t len = 0;
    lmc_status st = lmc_chat_template_render(
        dir, msgs, json_is_true(json_object_get(chat, "add_generation_prompt")), NULL, &out, &len);
    if (st != LMC_OK) fail_msg("%s", lmc_last_error());
    json_t *want = json_object_get(chat, "rendered");
    assert_int_equal(len, json_string_length(want));
    assert_memory_equal(out, json_string_value(want), len);
    lmc_free(out);
    free(msgs);
    json_decref(e);
    free(path);
    free(dir);
}

static void expect_error(const char *src, const char *vars, const tpl_options *opts,
                         lmc_status want, const char *needle) {
    char *out = NULL;
    size_t len;
    lmc_status st = render(src, vars, opts, &out, &len);
    free(out);
    if (st != want || (needle && !strstr(lmc_last_error(), needle)))
        fail_msg("template %.60s: want status %d with '%s', got %d '%s'", src, want,
                 needle ? needle : "", st, lmc_last_error());
}

static void test_error_positions(void **state) {
    (void)state;
    expect_error("line1\n  {{ x|nosuchfilter }}", "{\"x\": 1}", NULL, LMC_ERR_FORMAT,
                 "line 2, column 8: no filter named 'nosuchfilter'");
    expect_error("ab\n{% if x %}\nunclosed", NULL, NULL, LMC_ERR_FORMAT, "line 3, column 9");
    expect_error("{{ 'a' + 1 }}", NULL, NULL, LMC_ERR_FORMAT, "line 1, column 8");
    expect_error("\n\n{{ missing.attr }}", NULL, NULL, LMC_ERR_FORMAT,
                 "line 3, column 11: 'missing' is undefined");
    expect_error("{% for x in 3 %}{% endfor %}", NULL, NULL, LMC_ERR_FORMAT, "line 1, column 13");
    expect_error("x\n{{ raise_exception('Roles must alternate') }}", NULL, NULL, LMC_ERR_FORMAT,
                 "line 2, column 19: Roles must alternate");
    expect_error("{% frobnicate %}", NULL, NULL, LMC_ERR_FORMAT,
                 "line 1, column 4: unknown or unsupported tag");
    expect_error("{{ 'abc }}", NULL, NULL, LMC_ERR_FORMAT, "unterminated string");
    expect_error("{# never closed", NULL, NULL, LMC_ERR_FORMAT, "missing end of comment");
    expect_error("{{ (1 ] }}", NULL, NULL, LMC_ERR_FORMAT, "unexpected ']'");
    expect_error("{% break %}", NULL, NULL, LMC_ERR_FORMAT, "outside of a loop");
    expect_error("{% include 'x.html' %}", NULL, NULL, LMC_ERR_FORMAT, "unsupported tag 'include'");
    expect_error("{{ 1 // 0 }}", NULL, NULL, LMC_ERR_FORMAT, "by zero");
}

static void test_limits(void **state) {
    (void)state;
    tpl_options o;
    tpl_options_default(&o);
    o.max_steps = 100000;
    expect_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                 NULL, &o, LMC_ERR_LIMIT, "step limit");
    tpl_options_default(&o);
    o.max_output = 1 << 20;
    expect_error("{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}", NULL, &o, LMC_ERR_LIMIT,
                 "output limit");
    expect_error("{{ 'x' * 100000000 }}", NULL, &o, LMC_ERR_LIMIT, NULL);
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s "
                 "%}{% endfor %}",
                 NULL, &o, LMC_ERR_LIMIT, NULL);
    tpl_options_default(&o);
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &o, LMC_ERR_LIMIT,
                 "macro recursion");
    expect_error("{{ range(1000000)|length }}", NULL, &o, LMC_ERR_LIMIT, "Range too big");
    /* Deep nesting is refused by the parser instead of overflowing the stack. */
    char *deep = malloc(20001);
    assert_non_null(deep);
    if (!deep) return;
    memset(deep, '(', 10000);
    memset(deep + 10000, ')', 10000);
    deep[20000] = 0;
    char *src = lmc_sprintf("{{ %s }}", deep);
    expect_error(src, NULL, &o, LMC_ERR_FORMAT, NULL);
    free(src);
    memset(deep, '[', 20000);
    src = lmc_sprintf("{{ %s }}", deep);
    expect_error(src, NULL, &o, LMC_ERR_FORMAT, NULL);
    free(src);
    for (int i = 0; i < 5000; i++) memcpy(deep + 4 * i, "not ", 4);
    src = lmc_sprintf("{{ %s 1 }}", deep);
    expect_error(src, NULL, &o, LMC_ERR_LIMIT, "nested deeper");
    free(src);
    free(deep);
    o.max_memory = 8 << 20;
    expect_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + "
                 "[i] %}{% endfor %}",
                 NULL, &o, LMC_ERR_LIMIT, "memory limit");
}

static void test_language_extras(void **state) {
    (void)state;
    char *out;
    size_t len;
    /* Mutating the input is refused as transformers' immutable sandbox does:
     * a template cannot change the messages it was given. */
    expect_error("{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}{{ messages }}",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", NULL,
                 LMC_ERR_FORMAT, "access to attribute 'append' of 'list' object is unsafe");
    expect_error("{% set _ = messages[0].update({'content': 'x'}) %}",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", NULL,
                 LMC_ERR_FORMAT, "'update' of 'dict' object is unsafe");
    expect_error("{% set _ = messages.pop() %}",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", NULL,
                 LMC_ERR_FORMAT, "'pop' of 'list' object is unsafe");
    expect_error("{% set xs = [] %}{% set _ = xs.append(1) %}", NULL, NULL, LMC_ERR_FORMAT,
                 "'append' of 'list' object is unsafe");
    /* NUL bytes in data survive. */
    assert_int_equal(render("{{ s }}|", "{\"s\": \"a\\u0000b\"}", NULL, &out, &len), LMC_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "a\0b|", 4);
    free(out);
    /* Iterating an empty dict (a fuzzer's find: memcpy from its NULL keys,
     * which UBSan reports) gives an empty list, as jinja2 does. */
    assert_int_equal(render("{{ {}|select|list }}|{{ {}|list }}|{% for k in {} %}x{% else %}e{% "
                            "endfor %}|{{ {}|map('upper')|join }}",
                            NULL, NULL, &out, &len),
                     LMC_OK);
    assert_string_equal(out, "[]|[]|e|");
    free(out);
}

/* Template lookup of the public API: named lists, chat_template.jinja,
 * AddedToken dicts, tool_use selection. */
static void test_api_lookup(void **state) {
    (void)state;
    char *dir = make_dir("api");
    char *cfg = lmc_path_join(dir, "tokenizer_config.json");
    write_file(
        cfg,
        "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"}, \"eos_token\": null,"
        " \"chat_template\": [{\"name\": \"default\", \"template\": \"D{{ bos_token }}{{ eos_token "
        "is defined }}{{ messages|length }}{{ tools }}\"},"
        " {\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}\"},"
        " {\"name\": \"rag\", \"template\": \"R{{ documents }}{{ x }}\"}]}");
    const char *msgs = "[{\"role\": \"user\", \"content\": \"hi\"}]";
    char *out = NULL;
    size_t len;
    assert_int_equal(lmc_chat_template_render(dir, msgs, 0, NULL, &out, &len), LMC_OK);
    assert_string_equal(out, "D<s>False1None");
    lmc_free(out);
    assert_int_equal(lmc_chat_template_render(dir, msgs, 0, "{\"tools\": [1, 2]}", &out, &len),
                     LMC_OK);
    assert_string_equal(out, "T2");
    lmc_free(out);
    assert_int_equal(lmc_chat_template_render(dir, msgs, 0,
                                              "{\"template_name\": \"rag\", \"x\": 5}", &out, &len),
                     LMC_OK);
    assert_string_equal(out, "RNone5");
    lmc_free(out);
    assert_int_equal(
        lmc_chat_template_render(dir, msgs, 0, "{\"template_name\": \"nope\"}", &out, &len),
        LMC_ERR_NOT_FOUND);
    assert_int_equal(lmc_chat_template_render(dir, "{}", 0, NULL, &out, &len), LMC_ERR_INVALID_ARG);
    assert_int_equal(lmc_chat_template_render(dir, msgs, 0, "[1]", &out, &len),
                     LMC_ERR_INVALID_ARG);
    /* chat_template.jinja wins over tokenizer_config.json (newer transformers). */
    char *jinja = lmc_path_join(dir, "chat_template.jinja");
    write_file(jinja, "J{{ add_generation_prompt }}\n");
    assert_int_equal(lmc_chat_template_render(dir, msgs, 1, NULL, &out, &len), LMC_OK);
    assert_string_equal(out, "JTrue");
    lmc_free(out);
    unlink(jinja);
    /* chat_template.json when the tokenizer config has none. */
    write_file(cfg, "{\"eos_token\": \"</s>\"}");
    char *cj = lmc_path_join(dir, "chat_template.json");
    write_file(cj, "{\"chat_template\": \"P{{ eos_token }}\"}");
    assert_int_equal(lmc_chat_template_render(dir, msgs, 1, NULL, &out, &len), LMC_OK);
    assert_string_equal(out, "P</s>");
    lmc_free(out);
    unlink(cj);
    assert_int_equal(lmc_chat_template_render(dir, msgs, 1, NULL, &out, &len), LMC_ERR_NOT_FOUND);
    write_file(cfg, "{\"chat_template\": \"{% if %}\"}");
    assert_int_equal(lmc_chat_template_render(dir, msgs, 1, NULL, &out, &len), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "chat template: line 1"));
    free(cj);
    free(jinja);
    free(cfg);
    remove_dir(dir);
}

static int run_cli(const char *args, const char *dir, char **out, char **err) {
    char *cmd = lmc_sprintf("cd '%s' && %s template %s >out.txt 2>err.txt", dir, LMC_CLI, args);
    int rc = system(cmd);
    free(cmd);
    char *p = lmc_path_join(dir, "out.txt");
    assert_int_equal(lmc_read_file(p, out, NULL), LMC_OK);
    free(p);
    p = lmc_path_join(dir, "err.txt");
    assert_int_equal(lmc_read_file(p, err, NULL), LMC_OK);
    free(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_cli(void **state) {
    (void)state;
    char *dir = make_dir("cli");
    char *p = lmc_path_join(dir, "tokenizer_config.json");
    write_file(p, "{\"bos_token\": \"<s>\", \"chat_template\": \"{{ bos_token }}{% for m in "
                  "messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ n + 1 }}{{ s }}{{ flag "
                  "}}{{ tools|length }}{% if add_generation_prompt %}>{% endif %}\"}");
    free(p);
    p = lmc_path_join(dir, "messages.json");
    write_file(p, "[{\"role\": \"user\", \"content\": \"hé\"}]");
    free(p);
    p = lmc_path_join(dir, "tools.json");
    write_file(p, "[{\"type\": \"function\"}, {}]");
    free(p);
    char *out, *err;
    int rc =
        run_cli("--model . --messages messages.json --add-generation-prompt --var n=41 --var s=x=y "
                "--var 'flag=[true]' --tools tools.json",
                dir, &out, &err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "<s>[user:hé]42x=y[True]2>");
    assert_string_equal(err, "");
    free(out);
    free(err);
    rc = run_cli("--model . --messages nonexistent.json", dir, &out, &err);
    assert_int_not_equal(rc, 0);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "nonexistent.json"));
    assert_non_null(strchr(err, '\n'));
    assert_true(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
    free(out);
    free(err);
    rc = run_cli("--model . --messages messages.json --var n=x", dir, &out, &err);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err, "line 1"));
    free(out);
    free(err);
    remove_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_language_cases),
        cmocka_unit_test(test_real_templates),
        cmocka_unit_test(test_shared_conformance),
        cmocka_unit_test(test_error_positions),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_language_extras),
        cmocka_unit_test(test_api_lookup),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
