/* The Hugging Face hub cache (api/hub.c): the cache folder from HF_HUB_CACHE,
 * HF_HOME and HOME; lmc_hub_find on a fake cache laid out as huggingface_hub
 * writes it (blobs/<hash>, snapshots/<rev>/<file> -> ../../blobs/<hash>,
 * refs/main), built from tests/fixtures/models/llama-f32 plus a tiny
 * tokenizer and chat template; the model, tokenizer and chat template load
 * from the snapshot of symlinks, with the same logits as from the fixture
 * folder itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api/hub.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIXTURE LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32"
#define REV_MAIN "0123456789abcdef0123456789abcdef01234567"
#define REV_OLD "89abcdef0123456789abcdef0123456789abcdef"
#define REV_PARTIAL "fedcba9876543210fedcba9876543210fedcba98"

static const char *tiny_tokenizer =
    "{\"model\": {\"type\": \"BPE\", \"vocab\": "
    "{\"a\":0,\"b\":1,\"ab\":2,\"c\":3,\"<unk>\":4}, \"merges\": [\"a b\"]}}";
static const char *tiny_tokenizer_config =
    "{\"bos_token\": \"<s>\", \"chat_template\": \"{{ bos_token }}{% for m in messages %}"
    "{{ m['role'] }}: {{ m['content'] }}\\n{% endfor %}\"}";

/* ---- environment ------------------------------------------------------------ */

/* The variables the tests change, as they were before (restored at the end). */
static const char *env_names[] = {"HF_HUB_CACHE", "HF_HOME", "HOME"};
static char *saved_env[3];

static void set_or_unset(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void save_env(void) {
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(env_names[i]);
        saved_env[i] = v ? strdup(v) : NULL;
    }
}

static void restore_env(void) {
    for (int i = 0; i < 3; i++) {
        set_or_unset(env_names[i], saved_env[i]);
        free(saved_env[i]);
        saved_env[i] = NULL;
    }
}

/* ---- a fake cache ------------------------------------------------------------ */

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/lmc-hf-cache-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return strdup(tmpl);
}

static void mkdirs(const char *path) {
    char *p = strdup(path);
    assert_non_null(p);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    if (mkdir(p, 0755) != 0) assert_true(lmc_dir_exists(p));
    free(p);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A hash-like blob name (64 hex digits, as the hub names LFS blobs) for the
 * content: four FNV-1a passes with different seeds. */
static void blob_name(const char *data, size_t n, char out[65]) {
    for (int k = 0; k < 4; k++) {
        uint64_t h = 1469598103934665603ull ^ (uint64_t)(k + 1) * 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)data[i]) * 1099511628211ull;
        snprintf(out + 16 * k, 17, "%016llx", (unsigned long long)h);
    }
}

/* repo/blobs/<hash> holding data, and repo/snapshots/rev/name a relative
 * link to it. */
static void add_file(const char *repo, const char *rev, const char *name, const char *data,
                     size_t n) {
    char hash[65];
    blob_name(data, n, hash);
    char *blobs = lmc_path_join(repo, "blobs"), *blob = lmc_sprintf("%s/blobs/%s", repo, hash);
    char *snap = lmc_sprintf("%s/snapshots/%s", repo, rev);
    char *link = lmc_path_join(snap, name), *target = lmc_sprintf("../../blobs/%s", hash);
    mkdirs(blobs);
    mkdirs(snap);
    write_file(blob, data, n);
    assert_int_equal(symlink(target, link), 0);
    free(blobs);
    free(blob);
    free(snap);
    free(link);
    free(target);
}

static void add_fixture_file(const char *repo, const char *rev, const char *name) {
    char *src = lmc_path_join(FIXTURE, name), *data = NULL;
    size_t n = 0;
    assert_int_equal(lmc_read_file(src, &data, &n), LMC_OK);
    add_file(repo, rev, name, data, n);
    free(data);
    free(src);
}

/* A whole snapshot: the fixture's files, a tokenizer and a chat template. */
static void add_snapshot(const char *repo, const char *rev) {
    add_fixture_file(repo, rev, "config.json");
    add_fixture_file(repo, rev, "model.safetensors");
    add_fixture_file(repo, rev, "generation_config.json");
    add_file(repo, rev, "tokenizer.json", tiny_tokenizer, strlen(tiny_tokenizer));
    add_file(repo, rev, "tokenizer_config.json", tiny_tokenizer_config,
             strlen(tiny_tokenizer_config));
}

static void write_ref(const char *repo, const char *text) {
    char *refs = lmc_path_join(repo, "refs"), *main_ref = lmc_path_join(repo, "refs/main");
    mkdirs(refs);
    write_file(main_ref, text, strlen(text));
    free(refs);
    free(main_ref);
}

static void remove_ref(const char *repo) {
    char *main_ref = lmc_path_join(repo, "refs/main");
    unlink(main_ref);
    free(main_ref);
}

/* Sets the snapshot folder's modification time to now + offset seconds. */
static void touch_snapshot(const char *repo, const char *rev, int offset) {
    char *snap = lmc_sprintf("%s/snapshots/%s", repo, rev);
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec += offset;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, snap, t, 0), 0);
    free(snap);
}

static char *snapshot_path(const char *repo, const char *rev) {
    return lmc_sprintf("%s/snapshots/%s", repo, rev);
}

/* The fake cache: models--org--tiny-llama with the snapshots REV_MAIN (the
 * one refs/main names), REV_OLD (an older revision, its folder touched
 * later) and REV_PARTIAL (no config.json: an interrupted download), and
 * models--tiny-llama (an id without an organization) with one snapshot and
 * no refs. */
typedef struct fake_cache {
    char *root, *cache, *repo, *repo_no_org;
} fake_cache;

static int setup_cache(void **state) {
    fake_cache *c = calloc(1, sizeof *c);
    c->root = make_tmpdir();
    c->cache = lmc_path_join(c->root, "hub");
    c->repo = lmc_path_join(c->cache, "models--org--tiny-llama");
    c->repo_no_org = lmc_path_join(c->cache, "models--tiny-llama");
    add_snapshot(c->repo, REV_MAIN);
    add_snapshot(c->repo, REV_OLD);
    add_file(c->repo, REV_PARTIAL, "generation_config.json", "{}", 2);
    write_ref(c->repo, REV_MAIN "\n");
    touch_snapshot(c->repo, REV_MAIN, -100);
    touch_snapshot(c->repo, REV_OLD, -50);
    touch_snapshot(c->repo, REV_PARTIAL, -10);
    add_snapshot(c->repo_no_org, REV_MAIN);
    save_env();
    setenv("HF_HUB_CACHE", c->cache, 1);
    unsetenv("HF_HOME");
    *state = c;
    return 0;
}

static int teardown_cache(void **state) {
    fake_cache *c = *state;
    restore_env();
    assert_int_equal(lmc_remove_tree(c->root), LMC_OK);
    free(c->root);
    free(c->cache);
    free(c->repo);
    free(c->repo_no_org);
    free(c);
    return 0;
}

/* ---- tests ------------------------------------------------------------------ */

static void expect_cache_dir(const char *want) {
    char *got = lmc_hub_cache_dir();
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_cache_dir_precedence(void **state) {
    fake_cache *c = *state;
    setenv("HF_HUB_CACHE", "/c/hub-cache", 1);
    setenv("HF_HOME", "/h/hf-home", 1);
    setenv("HOME", "/u/me", 1);
    expect_cache_dir("/c/hub-cache");
    unsetenv("HF_HUB_CACHE");
    expect_cache_dir("/h/hf-home/hub");
    unsetenv("HF_HOME");
    expect_cache_dir("/u/me/.cache/huggingface/hub");
    /* empty counts as unset; a leading ~ is the home, as expanduser does */
    setenv("HF_HUB_CACHE", "", 1);
    setenv("HF_HOME", "~/hf", 1);
    expect_cache_dir("/u/me/hf/hub");
    setenv("HF_HUB_CACHE", "~", 1);
    expect_cache_dir("/u/me");
    setenv("HF_HUB_CACHE", "~other/x", 1);
    expect_cache_dir("~other/x");
    setenv("HF_HOME", "/h/trailing/", 1);
    unsetenv("HF_HUB_CACHE");
    expect_cache_dir("/h/trailing/hub");
    /* no HOME: the password database's home, as expanduser("~") */
    unsetenv("HF_HOME");
    unsetenv("HOME");
    char *got = lmc_hub_cache_dir();
    assert_non_null(got);
    const char *tail = ".cache/huggingface/hub";
    assert_true(strlen(got) >= strlen(tail));
    assert_string_equal(got + strlen(got) - strlen(tail), tail);
    free(got);
    /* back to the fake cache */
    setenv("HF_HUB_CACHE", c->cache, 1);
    unsetenv("HF_HOME");
    set_or_unset("HOME", saved_env[2]);
}

static void expect_found(const char *id, const char *want) {
    char *dir = NULL, *looked = NULL;
    lmc_status st = lmc_hub_find(id, &dir, &looked);
    if (st != LMC_OK) fail_msg("lmc_hub_find(%s): %s", id, lmc_last_error());
    assert_non_null(dir);
    assert_string_equal(dir, want);
    assert_null(looked);
    free(dir);
}

static void test_find_follows_refs_main(void **state) {
    fake_cache *c = *state;
    char *main_snap = snapshot_path(c->repo, REV_MAIN), *old_snap = snapshot_path(c->repo, REV_OLD);
    /* REV_OLD's folder is newer, yet refs/main names REV_MAIN */
    expect_found("org/tiny-llama", main_snap);
    /* no newline, or any trailing whitespace */
    write_ref(c->repo, REV_MAIN);
    expect_found("org/tiny-llama", main_snap);
    write_ref(c->repo, REV_MAIN " \r\n\t\n");
    expect_found("org/tiny-llama", main_snap);
    /* the snapshot's config.json is a link into blobs/ */
    char *cfg = lmc_path_join(main_snap, "config.json");
    struct stat sb;
    assert_int_equal(lstat(cfg, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    free(cfg);
    /* without refs/main: the most recently modified snapshot with config.json */
    remove_ref(c->repo);
    expect_found("org/tiny-llama", old_snap);
    touch_snapshot(c->repo, REV_MAIN, 0);
    expect_found("org/tiny-llama", main_snap);
    /* refs/main naming no snapshot, or one without config.json: the newest */
    touch_snapshot(c->repo, REV_MAIN, -100);
    write_ref(c->repo, "0000000000000000000000000000000000000000\n");
    expect_found("org/tiny-llama", old_snap);
    write_ref(c->repo, REV_PARTIAL "\n");
    expect_found("org/tiny-llama", old_snap);
    write_ref(c->repo, "../../../etc\n");
    expect_found("org/tiny-llama", old_snap);
    write_ref(c->repo, REV_MAIN "\n");
    expect_found("org/tiny-llama", main_snap);
    /* an id without an organization */
    char *no_org = snapshot_path(c->repo_no_org, REV_MAIN);
    expect_found("tiny-llama", no_org);
    free(no_org);
    /* the cache found through HF_HOME */
    unsetenv("HF_HUB_CACHE");
    setenv("HF_HOME", c->root, 1);
    expect_found("org/tiny-llama", main_snap);
    setenv("HF_HUB_CACHE", c->cache, 1);
    unsetenv("HF_HOME");
    free(main_snap);
    free(old_snap);
}

static float *forward_logits(const char *dir, const int32_t *tokens, int32_t n, int32_t *vocab,
                             lmc_model_info *info_out, lmc_model **model_out) {
    lmc_model *m = NULL;
    lmc_status st = lmc_model_load(dir, &m);
    if (st != LMC_OK) fail_msg("lmc_model_load(%s): %s", dir, lmc_last_error());
    lmc_model_get_info(m, info_out);
    *vocab = info_out->vocab_size;
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(m, 64, &s), LMC_OK);
    float *logits = malloc((size_t)n * (size_t)*vocab * sizeof(float));
    assert_non_null(logits);
    assert_int_equal(lmc_session_forward(s, tokens, n, 1, logits), LMC_OK);
    lmc_session_free(s);
    *model_out = m;
    return logits;
}

static void test_load_from_snapshot(void **state) {
    fake_cache *c = *state;
    char *dir = NULL, *looked = NULL;
    assert_int_equal(lmc_hub_find("org/tiny-llama", &dir, &looked), LMC_OK);
    const int32_t tokens[] = {1, 15, 27, 100, 7};
    const int32_t n = 5;
    int32_t v_hub = 0, v_dir = 0;
    lmc_model_info info_hub, info_dir;
    lmc_model *m_hub = NULL, *m_dir = NULL;
    float *hub = forward_logits(dir, tokens, n, &v_hub, &info_hub, &m_hub);
    float *ref = forward_logits(FIXTURE, tokens, n, &v_dir, &info_dir, &m_dir);
    assert_int_equal(v_hub, v_dir);
    assert_true(v_hub > 0);
    assert_memory_equal(hub, ref, (size_t)n * (size_t)v_hub * sizeof(float));
    /* generation_config.json (a link too) was read alike */
    assert_int_equal(info_hub.num_eos_token_ids, info_dir.num_eos_token_ids);
    for (int32_t i = 0; i < info_hub.num_eos_token_ids; i++)
        assert_int_equal(info_hub.eos_token_ids[i], info_dir.eos_token_ids[i]);
    assert_int_equal(info_hub.weight_bytes, info_dir.weight_bytes);
    lmc_model_free(m_hub);
    lmc_model_free(m_dir);
    free(hub);
    free(ref);

    lmc_tokenizer *tok = NULL;
    if (lmc_tokenizer_load(dir, &tok) != LMC_OK)
        fail_msg("lmc_tokenizer_load(%s): %s", dir, lmc_last_error());
    int32_t *ids = NULL;
    size_t n_ids = 0;
    assert_int_equal(lmc_tokenizer_encode(tok, "abcab", 5, 0, &ids, &n_ids), LMC_OK);
    const int32_t want[] = {2, 3, 2};
    assert_int_equal(n_ids, 3);
    assert_memory_equal(ids, want, sizeof want);
    lmc_free(ids);
    lmc_tokenizer_free(tok);

    char *text = NULL;
    size_t len = 0;
    lmc_status st = lmc_chat_template_render(dir, "[{\"role\": \"user\", \"content\": \"hi\"}]", 0,
                                             NULL, &text, &len);
    if (st != LMC_OK) fail_msg("lmc_chat_template_render(%s): %s", dir, lmc_last_error());
    assert_string_equal(text, "<s>user: hi\n");
    assert_int_equal(len, strlen(text));
    lmc_free(text);
    free(dir);
    (void)c;
}

static void test_missing_model(void **state) {
    fake_cache *c = *state;
    char *dir = (char *)1, *looked = NULL;
    assert_int_equal(lmc_hub_find("org/absent", &dir, &looked), LMC_ERR_NOT_FOUND);
    assert_null(dir);
    assert_non_null(looked);
    char *refs = lmc_sprintf("%s/models--org--absent/refs/main (missing)", c->cache);
    char *snaps = lmc_sprintf("%s/models--org--absent/snapshots (missing)", c->cache);
    char *both = lmc_sprintf("%s, %s", refs, snaps);
    assert_string_equal(looked, both);
    assert_non_null(strstr(lmc_last_error(), "org/absent"));
    assert_non_null(strstr(lmc_last_error(), refs));
    free(looked);
    free(refs);
    free(snaps);
    free(both);

    /* a repo folder whose only snapshot lacks config.json; refs/main names nothing there */
    char *repo = lmc_path_join(c->cache, "models--org--partial");
    add_file(repo, REV_PARTIAL, "generation_config.json", "{}", 2);
    write_ref(repo, REV_MAIN "\n");
    assert_int_equal(lmc_hub_find("org/partial", &dir, &looked), LMC_ERR_NOT_FOUND);
    assert_null(dir);
    char *want = lmc_sprintf("%s/refs/main (names " REV_MAIN ": no such snapshot), "
                             "%s/snapshots (no snapshot with config.json)",
                             repo, repo);
    assert_string_equal(looked, want);
    free(looked);
    free(want);
    /* refs/main naming that snapshot */
    write_ref(repo, REV_PARTIAL);
    assert_int_equal(lmc_hub_find("org/partial", &dir, &looked), LMC_ERR_NOT_FOUND);
    want = lmc_sprintf("%s/refs/main (names " REV_PARTIAL
                       ": no config.json in %s/snapshots/" REV_PARTIAL
                       "), %s/snapshots (no snapshot with config.json)",
                       repo, repo, repo);
    assert_string_equal(looked, want);
    free(looked);
    free(want);
    /* a dangling config.json link (its blob gone) is no config.json */
    add_snapshot(repo, REV_MAIN);
    remove_ref(repo);
    char *found = NULL;
    assert_int_equal(lmc_hub_find("org/partial", &found, NULL), LMC_OK);
    free(found);
    char *link = lmc_sprintf("%s/snapshots/" REV_MAIN "/config.json", repo);
    char target[256];
    ssize_t tn = readlink(link, target, sizeof target - 1);
    assert_true(tn > 0);
    target[tn] = '\0';
    char *blob = lmc_sprintf("%s/snapshots/" REV_MAIN "/%s", repo, target);
    assert_int_equal(unlink(blob), 0);
    assert_int_equal(lmc_hub_find("org/partial", &found, NULL), LMC_ERR_NOT_FOUND);
    assert_null(found);
    free(blob);
    free(link);
    free(repo);
}

static void test_bad_ids(void **state) {
    (void)state;
    static const char *bad[] = {
        "",        "..",        ".",        "a/b/c",   "org/",        "/name",  "org/..",
        "../name", "org/na me", "a$b",      "org/n\n", "ö",           "org//n", "-org/n",
        "org/n.",  "a--b",      "org/a..b", "x.git",   "org/.hidden",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *dir = (char *)1, *looked = (char *)1;
        lmc_status st = lmc_hub_find(bad[i], &dir, &looked);
        if (st != LMC_ERR_INVALID_ARG)
            fail_msg("lmc_hub_find(\"%s\"): %s, want invalid argument", bad[i],
                     lmc_status_string(st));
        assert_null(dir);
        assert_null(looked);
        assert_null(strchr(lmc_last_error(), '\n'));
    }
    char *dir = NULL, *looked = NULL;
    assert_int_equal(lmc_hub_find(NULL, &dir, &looked), LMC_ERR_INVALID_ARG);
    assert_int_equal(lmc_hub_find("org/name", NULL, &looked), LMC_ERR_INVALID_ARG);
    /* a long id: at most 96 characters, as the hub allows */
    char long_id[100];
    memset(long_id, 'a', 97);
    long_id[97] = '\0';
    assert_int_equal(lmc_hub_find(long_id, &dir, &looked), LMC_ERR_INVALID_ARG);
    /* valid ids that are just absent */
    static const char *good[] = {"gpt2", "Org_1/Name-2.5", "a/b", "meta-llama/Llama-3.2-1B"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        lmc_status st = lmc_hub_find(good[i], &dir, &looked);
        if (st != LMC_ERR_NOT_FOUND)
            fail_msg("lmc_hub_find(\"%s\"): %s, want not found", good[i], lmc_status_string(st));
        free(looked);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_dir_precedence),   cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_find_follows_refs_main), cmocka_unit_test(test_load_from_snapshot),
        cmocka_unit_test(test_missing_model),
    };
    return cmocka_run_group_tests(tests, setup_cache, teardown_cache);
}
