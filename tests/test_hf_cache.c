/* The Hugging Face hub cache (api/hub.c): the cache folder from HF_HUB_CACHE,
 * HF_HOME and HOME; lmc_hub_find on a fake cache laid out as huggingface_hub
 * writes it (blobs/<hash>, snapshots/<rev>/<file> -> ../../blobs/<hash>,
 * refs/main), built from tests/fixtures/models/llama-f32 plus a tiny
 * tokenizer and chat template; the model, tokenizer and chat template load
 * from the snapshot of symlinks, with the same logits as from the fixture
 * folder itself. lmc_model_summarize on fixture folders, snapshots and
 * hand-written configs (quantized, mixed, dense, other methods, bad ones);
 * lmc_hub_list on fake caches with several models, a broken entry, an
 * interrupted download, a missing and an unreadable cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api/hub.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* ---- summaries ----------------------------------------------------------- */

/* The bytes of the files of a flat folder, links followed (dangling: 0). */
static uint64_t flat_folder_bytes(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || !strcmp(e->d_name, ".."))) continue;
        char *p = lmc_path_join(dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) total += (uint64_t)sb.st_size;
        free(p);
    }
    closedir(d);
    return total;
}

static void expect_summary(const char *dir, const char *hub_id, const char *model_type,
                           const char *quantization, lmc_model_kind kind) {
    lmc_model_summary s;
    lmc_status st = lmc_model_summarize(dir, &s);
    if (st != LMC_OK) fail_msg("lmc_model_summarize(%s): %s", dir, lmc_last_error());
    assert_string_equal(s.dir, dir);
    if (hub_id)
        assert_string_equal(s.hub_id, hub_id);
    else
        assert_null(s.hub_id);
    if (model_type)
        assert_string_equal(s.model_type, model_type);
    else
        assert_null(s.model_type);
    if (quantization) {
        if (!s.quantization || strcmp(s.quantization, quantization))
            fail_msg("%s: quantization \"%s\", want \"%s\"", dir,
                     s.quantization ? s.quantization : "(null)", quantization);
    } else {
        assert_null(s.quantization);
    }
    assert_int_equal(s.kind, kind);
    lmc_model_summary_clear(&s);
    assert_null(s.dir);
    assert_null(s.quantization);
}

static void test_summarize_folders(void **state) {
    fake_cache *c = *state;
    expect_summary(FIXTURE, NULL, "llama", "f32", LMC_MODEL_LLM);
    lmc_model_summary s;
    assert_int_equal(lmc_model_summarize(FIXTURE, &s), LMC_OK);
    assert_int_equal(s.size_bytes, flat_folder_bytes(FIXTURE));
    assert_true(s.size_bytes > 400000);
    lmc_model_summary_clear(&s);
    const char *q = LMC_SOURCE_DIR "/tests/fixtures/quant-models/";
    char *dir = lmc_sprintf("%sllama-q4-g64-f16", q);
    expect_summary(dir, NULL, "llama", "4-bit g64", LMC_MODEL_LLM);
    free(dir);
    dir = lmc_sprintf("%sllama-mixed-f16", q); /* 8-bit g32 layers, a 6-bit lm_head, one dense */
    expect_summary(dir, NULL, "llama", "mixed 4/6/8-bit g32/64", LMC_MODEL_LLM);
    free(dir);
    dir = lmc_sprintf("%sllama-q2-g32-f16", q);
    expect_summary(dir, NULL, "llama", "2-bit g32", LMC_MODEL_LLM);
    free(dir);

    /* a snapshot of the cache: its hub id, the bytes of the blobs it links to */
    char *snap = snapshot_path(c->repo, REV_MAIN);
    expect_summary(snap, "org/tiny-llama", "llama", "f32", LMC_MODEL_LLM);
    assert_int_equal(lmc_model_summarize(snap, &s), LMC_OK);
    assert_int_equal(s.size_bytes, flat_folder_bytes(snap));
    assert_int_equal(s.size_bytes, flat_folder_bytes(FIXTURE) - 886 - 24576 +
                                       strlen(tiny_tokenizer) + strlen(tiny_tokenizer_config));
    lmc_model_summary_clear(&s);
    char *slashed = lmc_sprintf("%s//", snap);
    expect_summary(slashed, "org/tiny-llama", "llama", "f32", LMC_MODEL_LLM);
    free(slashed);
    free(snap);
    snap = snapshot_path(c->repo_no_org, REV_MAIN);
    expect_summary(snap, "tiny-llama", "llama", "f32", LMC_MODEL_LLM);
    free(snap);
    lmc_model_summary_clear(NULL);
    lmc_model_summaries_free(NULL, 3);
}

static void test_hub_id_of_snapshot(void **state) {
    (void)state;
    static const struct {
        const char *dir, *id;
    } cases[] = {
        {"/c/models--org--name/snapshots/abc", "org/name"},
        {"/c/models--org--name/snapshots/abc/", "org/name"},
        {"models--name/snapshots/abc", "name"},
        {"/models--Org_1--Name-2.5/snapshots/x", "Org_1/Name-2.5"},
        {"/c/models--org--name/snapshots", NULL},
        {"/c/models--org--name/snapshots/", NULL},
        {"/c/models--org--name/refs/abc", NULL},
        {"/c/models--org--name/snapshots/..", NULL},
        {"/c/models--org--name/snapshots/.", NULL},
        {"/c/models--a--b--c/snapshots/abc", NULL}, /* "a/b--c" is no hub id */
        {"/c/models--/snapshots/abc", NULL},
        {"/c/datasets--org--name/snapshots/abc", NULL},
        {"/c/snapshots/abc", NULL},
        {"snapshots/abc", NULL},
        {"abc", NULL},
        {"/", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *id = (char *)1;
        assert_int_equal(lmc_hub_id_of_snapshot(cases[i].dir, &id), LMC_OK);
        if (!cases[i].id != !id || (id && strcmp(id, cases[i].id)))
            fail_msg("lmc_hub_id_of_snapshot(\"%s\"): \"%s\", want \"%s\"", cases[i].dir,
                     id ? id : "(null)", cases[i].id ? cases[i].id : "(null)");
        free(id);
    }
}

/* A scratch folder holding config.json = text (NULL: none) and a 1000-byte file. */
static char *config_folder(const char *root, const char *name, const char *text) {
    char *dir = lmc_path_join(root, name), *cfg = lmc_path_join(dir, "config.json");
    char *weights = lmc_path_join(dir, "model.safetensors");
    mkdirs(dir);
    char zeros[1000] = {0};
    write_file(weights, zeros, sizeof zeros);
    if (text) write_file(cfg, text, strlen(text));
    free(cfg);
    free(weights);
    return dir;
}

static void test_summarize_configs(void **state) {
    (void)state;
    char *root = make_tmpdir();
    static const struct {
        const char *config, *model_type, *quantization;
        lmc_model_kind kind;
    } cases[] = {
        {"{\"model_type\": \"qwen3\", \"quantization\": {\"group_size\": 64, \"bits\": 4}, "
         "\"torch_dtype\": \"bfloat16\"}",
         "qwen3", "4-bit g64", LMC_MODEL_LLM},
        /* per-layer overrides: other bits, other groups, the same, or left dense */
        {"{\"model_type\": \"llama\", \"quantization\": {\"group_size\": 64, \"bits\": 4, "
         "\"mode\": \"affine\", \"lm_head\": {\"group_size\": 64, \"bits\": 6}, "
         "\"model.embed_tokens\": false}}",
         "llama", "mixed 4/6-bit g64", LMC_MODEL_LLM},
        {"{\"model_type\": \"llama\", \"quantization\": {\"group_size\": 64, \"bits\": 4, "
         "\"lm_head\": {\"group_size\": 32, \"bits\": 4}}}",
         "llama", "mixed 4-bit g32/64", LMC_MODEL_LLM},
        {"{\"model_type\": \"llama\", \"quantization\": {\"group_size\": 64, \"bits\": 4, "
         "\"lm_head\": {\"group_size\": 64, \"bits\": 4}}}",
         "llama", "4-bit g64", LMC_MODEL_LLM},
        /* mlx's defaults; another mode */
        {"{\"model_type\": \"llama\", \"quantization\": {}}", "llama", "4-bit g64", LMC_MODEL_LLM},
        {"{\"model_type\": \"llama\", \"quantization\": {\"mode\": \"mxfp4\", \"bits\": 4, "
         "\"group_size\": 32}}",
         "llama", "mxfp4 4-bit g32", LMC_MODEL_LLM},
        /* only quantization_config: MLX's, or transformers' methods */
        {"{\"model_type\": \"phi3\", \"quantization_config\": {\"group_size\": 32, \"bits\": 8}}",
         "phi3", "8-bit g32", LMC_MODEL_LLM},
        {"{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"gptq\", "
         "\"bits\": 4, \"group_size\": 128}, \"torch_dtype\": \"float16\"}",
         "llama", "gptq 4-bit g128", LMC_MODEL_LLM},
        {"{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"gptq\", "
         "\"bits\": 4, \"group_size\": -1}}",
         "llama", "gptq 4-bit", LMC_MODEL_LLM},
        {"{\"model_type\": \"mistral\", \"quantization_config\": {\"quant_method\": \"awq\", "
         "\"w_bit\": 4, \"q_group_size\": 128}}",
         "mistral", "awq 4-bit g128", LMC_MODEL_LLM},
        {"{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": "
         "\"bitsandbytes\", \"load_in_4bit\": true}}",
         "llama", "bitsandbytes 4-bit", LMC_MODEL_LLM},
        {"{\"model_type\": \"qwen3\", \"quantization_config\": {\"quant_method\": \"fp8\", "
         "\"weight_block_size\": [128, 128]}}",
         "qwen3", "fp8", LMC_MODEL_LLM},
        /* dense: torch_dtype, transformers 5's dtype, a VLM's text_config */
        {"{\"model_type\": \"gemma2\", \"torch_dtype\": \"bfloat16\"}", "gemma2", "bf16",
         LMC_MODEL_LLM},
        {"{\"model_type\": \"qwen2\", \"torch_dtype\": \"float16\"}", "qwen2", "f16",
         LMC_MODEL_LLM},
        {"{\"model_type\": \"qwen2\", \"dtype\": \"float32\"}", "qwen2", "f32", LMC_MODEL_LLM},
        {"{\"model_type\": \"qwen2\", \"torch_dtype\": \"float8_e4m3fn\"}", "qwen2",
         "float8_e4m3fn", LMC_MODEL_LLM},
        {"{\"model_type\": \"paligemma\", \"vision_config\": {\"hidden_size\": 8}, "
         "\"text_config\": {\"model_type\": \"gemma\", \"torch_dtype\": \"bfloat16\"}}",
         "paligemma", "bf16", LMC_MODEL_VLM},
        {"{\"model_type\": \"paligemma\", \"vision_config\": {}, \"quantization\": "
         "{\"group_size\": 64, \"bits\": 8}}",
         "paligemma", "8-bit g64", LMC_MODEL_VLM},
        /* nothing known */
        {"{\"vision_config\": null, \"quantization\": null}", NULL, NULL, LMC_MODEL_LLM},
        {"{}", NULL, NULL, LMC_MODEL_LLM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "case-%zu", i);
        char *dir = config_folder(root, name, cases[i].config);
        expect_summary(dir, NULL, cases[i].model_type, cases[i].quantization, cases[i].kind);
        lmc_model_summary s;
        assert_int_equal(lmc_model_summarize(dir, &s), LMC_OK);
        assert_int_equal(s.size_bytes, 1000 + strlen(cases[i].config));
        lmc_model_summary_clear(&s);
        free(dir);
    }

    /* bad configs: a status and a message naming the problem, *out zeroed */
    static const struct {
        const char *config;
        lmc_status status;
        const char *want;
    } bad[] = {
        {"{\"model_type\": ,}", LMC_ERR_FORMAT, "invalid JSON"},
        {"[1, 2]", LMC_ERR_FORMAT, "not a JSON object"},
        {"{\"model_type\": 5}", LMC_ERR_FORMAT, "model_type is not a string"},
        {"{\"quantization\": \"4bit\"}", LMC_ERR_FORMAT, "quantization is not an object"},
        {"{\"quantization\": {\"bits\": \"4\", \"group_size\": 64}}", LMC_ERR_FORMAT, "bits"},
        {"{\"quantization\": {\"bits\": 4, \"group_size\": 0}}", LMC_ERR_FORMAT, "group_size"},
        {"{\"quantization\": {\"bits\": 4, \"group_size\": 64, \"lm_head\": {\"bits\": 99}}}",
         LMC_ERR_FORMAT, "quantization of lm_head bits"},
        {"{\"quantization\": {\"mode\": 1}}", LMC_ERR_FORMAT, "mode"},
        {NULL, LMC_ERR_NOT_FOUND, "no config.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad-%zu", i);
        char *dir = config_folder(root, name, bad[i].config);
        lmc_model_summary s;
        memset(&s, 0x5a, sizeof s);
        lmc_status st = lmc_model_summarize(dir, &s);
        if (st != bad[i].status || !strstr(lmc_last_error(), bad[i].want))
            fail_msg("%s: %s \"%s\", want %s with \"%s\"", bad[i].config ? bad[i].config : "-",
                     lmc_status_string(st), lmc_last_error(), lmc_status_string(bad[i].status),
                     bad[i].want);
        assert_null(s.dir);
        assert_null(s.model_type);
        assert_int_equal(s.size_bytes, 0);
        free(dir);
    }
    /* no folder; a file */
    lmc_model_summary s;
    char *absent = lmc_path_join(root, "absent");
    assert_int_equal(lmc_model_summarize(absent, &s), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(lmc_last_error(), "no folder"));
    free(absent);
    char *file = lmc_path_join(root, "case-0/config.json");
    assert_int_equal(lmc_model_summarize(file, &s), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(lmc_last_error(), "is not a folder"));
    free(file);
    assert_int_equal(lmc_remove_tree(root), LMC_OK);
    free(root);
}

/* ---- listing the cache -------------------------------------------------------- */

static void add_text(const char *repo, const char *rev, const char *name, const char *text) {
    add_file(repo, rev, name, text, strlen(text));
}

static const lmc_model_summary *listed(const lmc_model_summary *list, int32_t n, const char *id) {
    for (int32_t i = 0; i < n; i++)
        if (!strcmp(list[i].hub_id, id)) return &list[i];
    return NULL;
}

static void test_list_cache(void **state) {
    fake_cache *c = *state;
    char *root = make_tmpdir(), *cache = lmc_path_join(root, "hub");
    setenv("HF_HUB_CACHE", cache, 1);
    char *got = NULL;
    assert_int_equal(lmc_hub_cache_path(&got), LMC_OK);
    assert_string_equal(got, cache);
    lmc_free(got);

    /* no cache folder yet: no models */
    lmc_model_summary *list = (lmc_model_summary *)1;
    int32_t n = -1;
    assert_int_equal(lmc_hub_list(&list, &n), LMC_OK);
    assert_null(list);
    assert_int_equal(n, 0);
    mkdirs(cache);
    assert_int_equal(lmc_hub_list(&list, &n), LMC_OK);
    assert_int_equal(n, 0);

    /* a quantized model with refs/main (an older snapshot, touched later, is not it) */
    char *q4 = lmc_path_join(cache, "models--mlx-community--Tiny-4bit");
    add_text(q4, REV_MAIN, "config.json",
             "{\"model_type\": \"qwen3\", \"quantization\": {\"group_size\": 64, \"bits\": 4}}");
    char weights[3000];
    memset(weights, 7, sizeof weights);
    add_file(q4, REV_MAIN, "model.safetensors", weights, sizeof weights);
    add_text(q4, REV_OLD, "config.json", "{\"model_type\": \"qwen2\"}");
    write_ref(q4, REV_MAIN);
    touch_snapshot(q4, REV_MAIN, -100);
    touch_snapshot(q4, REV_OLD, -10);
    /* a dense one, no refs: the newest snapshot; a plain file beside the links */
    char *dense = lmc_path_join(cache, "models--Org2--Dense");
    add_text(dense, REV_OLD, "config.json", "{\"model_type\": \"llama\", \"dtype\": \"float32\"}");
    add_text(dense, REV_MAIN, "config.json",
             "{\"model_type\": \"llama\", \"torch_dtype\": \"bfloat16\"}");
    add_file(dense, REV_MAIN, "model.safetensors", weights, 2000);
    char *plain = lmc_sprintf("%s/snapshots/" REV_MAIN "/README.md", dense);
    write_file(plain, "hello", 5);
    touch_snapshot(dense, REV_OLD, -100);
    touch_snapshot(dense, REV_MAIN, -10);
    /* an id without an organization; a VLM */
    char *vlm = lmc_path_join(cache, "models--tiny-vlm");
    add_text(vlm, REV_MAIN, "config.json",
             "{\"model_type\": \"paligemma\", \"vision_config\": {}, "
             "\"text_config\": {\"torch_dtype\": \"float16\"}}");
    /* broken: config.json that is not JSON (listed), a dangling link (counts 0) */
    char *broken = lmc_path_join(cache, "models--org--broken");
    add_text(broken, REV_MAIN, "config.json", "{\"model_type\": ");
    char *dangling = lmc_sprintf("%s/snapshots/" REV_MAIN "/model.safetensors", broken);
    assert_int_equal(symlink("../../blobs/0000", dangling), 0);
    /* not listed: an interrupted download, a dataset, a bad folder name, a file */
    char *partial = lmc_path_join(cache, "models--org--partial");
    add_file(partial, REV_MAIN, "model.safetensors", weights, 10);
    write_ref(partial, REV_MAIN);
    char *dataset = lmc_path_join(cache, "datasets--org--data");
    add_text(dataset, REV_MAIN, "config.json", "{}");
    char *bad_name = lmc_path_join(cache, "models--a--b--c");
    add_text(bad_name, REV_MAIN, "config.json", "{}");
    char *a_file = lmc_path_join(cache, "models--file");
    write_file(a_file, "x", 1);
    char *locks = lmc_path_join(cache, ".locks/models--org--partial");
    mkdirs(locks);

    assert_int_equal(lmc_hub_list(&list, &n), LMC_OK);
    assert_int_equal(n, 4);
    /* sorted by hub id, ignoring case */
    assert_string_equal(list[0].hub_id, "mlx-community/Tiny-4bit");
    assert_string_equal(list[1].hub_id, "org/broken");
    assert_string_equal(list[2].hub_id, "Org2/Dense");
    assert_string_equal(list[3].hub_id, "tiny-vlm");

    const lmc_model_summary *s = listed(list, n, "mlx-community/Tiny-4bit");
    char *snap = snapshot_path(q4, REV_MAIN);
    assert_string_equal(s->dir, snap);
    assert_string_equal(s->model_type, "qwen3");
    assert_string_equal(s->quantization, "4-bit g64");
    assert_int_equal(s->kind, LMC_MODEL_LLM);
    assert_int_equal(s->size_bytes, 3000 + strlen("{\"model_type\": \"qwen3\", \"quantization\": "
                                                  "{\"group_size\": 64, \"bits\": 4}}"));
    free(snap);
    s = listed(list, n, "Org2/Dense");
    snap = snapshot_path(dense, REV_MAIN);
    assert_string_equal(s->dir, snap);
    assert_string_equal(s->quantization, "bf16");
    assert_int_equal(s->size_bytes,
                     2000 + 5 +
                         strlen("{\"model_type\": \"llama\", \"torch_dtype\": \"bfloat16\"}"));
    free(snap);
    s = listed(list, n, "tiny-vlm");
    assert_string_equal(s->model_type, "paligemma");
    assert_string_equal(s->quantization, "f16");
    assert_int_equal(s->kind, LMC_MODEL_VLM);
    s = listed(list, n, "org/broken");
    assert_null(s->model_type);
    assert_null(s->quantization);
    assert_int_equal(s->size_bytes, strlen("{\"model_type\": "));
    lmc_model_summaries_free(list, n);

    /* the cache a file (not a folder): no models; one that cannot be listed: an error */
    setenv("HF_HUB_CACHE", a_file, 1);
    assert_int_equal(lmc_hub_list(&list, &n), LMC_OK);
    assert_int_equal(n, 0);
    char *loop = lmc_path_join(root, "loop");
    assert_int_equal(symlink("loop", loop), 0);
    setenv("HF_HUB_CACHE", loop, 1);
    list = (lmc_model_summary *)1;
    n = 5;
    assert_int_equal(lmc_hub_list(&list, &n), LMC_ERR_IO);
    assert_null(list);
    assert_int_equal(n, 0);
    assert_non_null(strstr(lmc_last_error(), "cannot list the hub cache"));
    assert_non_null(strstr(lmc_last_error(), loop));

    /* the test group's cache: the fixture's two repositories; org/partial, which
     * test_missing_model left with a dangling config.json link, is no model */
    setenv("HF_HUB_CACHE", c->cache, 1);
    assert_int_equal(lmc_hub_list(&list, &n), LMC_OK);
    const lmc_model_summary *tiny = listed(list, n, "org/tiny-llama");
    assert_non_null(tiny);
    snap = snapshot_path(c->repo, REV_MAIN);
    assert_string_equal(tiny->dir, snap);
    free(snap);
    assert_non_null(listed(list, n, "tiny-llama"));
    assert_null(listed(list, n, "org/partial"));
    for (int32_t i = 1; i < n; i++) assert_true(strcasecmp(list[i - 1].hub_id, list[i].hub_id) < 0);
    lmc_model_summaries_free(list, n);

    free(loop);
    free(locks);
    free(a_file);
    free(bad_name);
    free(dataset);
    free(partial);
    free(dangling);
    free(broken);
    free(vlm);
    free(plain);
    free(dense);
    free(q4);
    assert_int_equal(lmc_remove_tree(root), LMC_OK);
    free(root);
    free(cache);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_dir_precedence),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_find_follows_refs_main),
        cmocka_unit_test(test_load_from_snapshot),
        cmocka_unit_test(test_missing_model),
        cmocka_unit_test(test_summarize_folders),
        cmocka_unit_test(test_hub_id_of_snapshot),
        cmocka_unit_test(test_summarize_configs),
        cmocka_unit_test(test_list_cache),
    };
    return cmocka_run_group_tests(tests, setup_cache, teardown_cache);
}
