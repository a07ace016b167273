/* The embedding API: registry, factories, container, processor, generate
 * with stops and processors, the prompt cache (reuse, save, load), and many
 * threads on one container. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/random_model.h"
#include "helpers/skip.h"
#include "lmc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32"
#define QWEN3_TOK LMC_BINARY_DIR "/tokenizers/qwen3"
#define CHAT_DIR LMC_BINARY_DIR "/tests/api-chat-model"

/* ---- helpers -------------------------------------------------------------------- */

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) assert_int_equal(fwrite(buf, 1, n, b), n);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

/* A tiny random Llama with the Qwen3 tokenizer and its chat template. */
static bool make_chat_model(void) {
    char tj[512];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", QWEN3_TOK);
    if (access(tj, R_OK) != 0) return false;
    char done[512];
    snprintf(done, sizeof done, "%s/tokenizer_config.json", CHAT_DIR);
    if (access(done, R_OK) == 0) return true;
    const int64_t V = 151936, H = 32, I = 64, L = 2;
    random_model *m = random_model_create(7);
    random_model_add(m, "model.embed_tokens.weight", V, H, 1.0f, 0);
    random_model_add(m, "model.norm.weight", H, 0, 0.1f, 1.0f);
    for (int64_t l = 0; l < L; l++) {
        random_model_addf(m, H, 0, 0.1f, 1.0f, "model.layers.%lld.input_layernorm.weight",
                          (long long)l);
        random_model_addf(m, H, 0, 0.1f, 1.0f, "model.layers.%lld.post_attention_layernorm.weight",
                          (long long)l);
        random_model_addf(m, H, H, 0.3f, 0, "model.layers.%lld.self_attn.q_proj.weight",
                          (long long)l);
        random_model_addf(m, H / 2, H, 0.3f, 0, "model.layers.%lld.self_attn.k_proj.weight",
                          (long long)l);
        random_model_addf(m, H / 2, H, 0.3f, 0, "model.layers.%lld.self_attn.v_proj.weight",
                          (long long)l);
        random_model_addf(m, H, H, 0.3f, 0, "model.layers.%lld.self_attn.o_proj.weight",
                          (long long)l);
        random_model_addf(m, I, H, 0.3f, 0, "model.layers.%lld.mlp.gate_proj.weight", (long long)l);
        random_model_addf(m, I, H, 0.3f, 0, "model.layers.%lld.mlp.up_proj.weight", (long long)l);
        random_model_addf(m, H, I, 0.3f, 0, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
    }
    mkdir(CHAT_DIR, 0755);
    const char *cfg = "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 151936,"
                      " \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6,"
                      " \"rope_theta\": 10000.0, \"tie_word_embeddings\": true,"
                      " \"bos_token_id\": 151643, \"eos_token_id\": 151645}";
    if (random_model_write(m, CHAT_DIR, cfg) != 0) return false;
    char to[512];
    snprintf(to, sizeof to, "%s/tokenizer.json", CHAT_DIR);
    copy_file(tj, to);
    snprintf(tj, sizeof tj, "%s/tokenizer_config.json", QWEN3_TOK);
    copy_file(tj, done);
    return true;
}

#define NEED_CHAT_MODEL()                                                                          \
    do {                                                                                           \
        if (!make_chat_model())                                                                    \
            TEST_SKIP_UNLESS_CI("no Qwen3 tokenizer in %s (make test fetches it)", QWEN3_TOK);     \
    } while (0)

/* ---- registry --------------------------------------------------------------------- */

static void test_registry(void **state) {
    (void)state;
    static const char *hubs[] = {"mlx-community/Llama-3.2-1B-Instruct-4bit",
                                 "mlx-community/Meta-Llama-3.1-8B-Instruct-4bit",
                                 "mlx-community/Mistral-7B-Instruct-v0.3-4bit",
                                 "mlx-community/Phi-3.5-mini-instruct-4bit",
                                 "mlx-community/Phi-3.5-MoE-instruct-4bit",
                                 "mlx-community/Qwen2.5-1.5B-Instruct-4bit",
                                 "mlx-community/Qwen3-4B-4bit",
                                 "mlx-community/OpenELM-270M-Instruct",
                                 "mlx-community/gemma-2-2b-it-4bit",
                                 "mlx-community/SmolLM2-1.7B-Instruct",
                                 "mlx-community/paligemma-3b-mix-448-8bit"};
    for (size_t i = 0; i < sizeof hubs / sizeof hubs[0]; i++) {
        const lmc_model_preset *p = lmc_registry_find(hubs[i]);
        assert_non_null(p);
        assert_ptr_equal(lmc_registry_find(p->name), p);
    }
    assert_int_equal(lmc_registry_find("mlx-community/paligemma-3b-mix-448-8bit")->kind,
                     LMC_MODEL_VLM);
    assert_string_equal(lmc_registry_find("phi3.5")->extra_eos[0], "<|end|>");
    int32_t n = lmc_registry_count();
    const char *eos[] = {"<|x|>", NULL};
    lmc_model_preset mine = {"my-model", FIXTURE, "hi", eos, LMC_MODEL_LLM};
    assert_int_equal(lmc_registry_add(&mine), LMC_OK);
    assert_int_equal(lmc_registry_count(), n + 1);
    const lmc_model_preset *got = lmc_registry_find("my-model");
    assert_non_null(got);
    assert_ptr_not_equal(got->name, mine.name); /* copied */
    assert_string_equal(got->extra_eos[0], "<|x|>");
    assert_ptr_equal(lmc_registry_get(n), got);
    assert_null(lmc_registry_get(n + 1));
    assert_null(lmc_registry_get(-1));
    assert_null(lmc_registry_find("no-such-model"));
    lmc_model_preset bad = {NULL, "x", NULL, NULL, LMC_MODEL_LLM};
    assert_int_equal(lmc_registry_add(&bad), LMC_ERR_INVALID_ARG);
    /* a registered name loads through the factory (its hub_id is a folder) */
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load("my-model", NULL, &k), LMC_OK);
    lmc_container_free(k);
}

/* ---- factories ---------------------------------------------------------------------- */

typedef struct stages {
    char seen[16][16];
    int n;
    int cancel_at; /* -1: never */
} stages;

static int on_progress(const char *stage, double f, void *ud) {
    stages *s = ud;
    assert_true(f >= 0 && f <= 1);
    if (s->n < 16 && (s->n == 0 || strcmp(s->seen[s->n - 1], stage)))
        snprintf(s->seen[s->n++], 16, "%s", stage);
    return s->cancel_at >= 0 && s->n > s->cancel_at;
}

static void test_factories(void **state) {
    (void)state;
    stages s = {.cancel_at = -1};
    lmc_load_options o = {on_progress, &s, 64};
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load(FIXTURE, &o, &k), LMC_OK);
    assert_string_equal(s.seen[0], "resolve");
    assert_string_equal(s.seen[s.n - 1], "done");
    lmc_container_free(k);
    stages c = {.cancel_at = 2};
    o.user_data = &c;
    k = (lmc_container *)&c;
    assert_int_equal(lmc_llm_load(FIXTURE, &o, &k), LMC_ERR_STOPPED);
    assert_null(k);
    /* the VLM factory: same calls, vision not there yet */
    assert_int_equal(lmc_vlm_load(FIXTURE, NULL, &k), LMC_ERR_UNSUPPORTED);
    assert_non_null(strstr(lmc_last_error(), "not a vision-language model"));
    /* a missing model says where it looked */
    setenv("HF_HUB_CACHE", "/nonexistent/hub-cache", 1);
    assert_int_equal(lmc_llm_load("org/missing-model", NULL, &k), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(lmc_last_error(), "/nonexistent/hub-cache/models--org--missing-model"));
    assert_int_equal(lmc_llm_load("qwen3:4b", NULL, &k), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(lmc_last_error(), "mlx-community/Qwen3-4B-4bit"));
    assert_non_null(strstr(lmc_last_error(), "models--mlx-community--Qwen3-4B-4bit"));
    unsetenv("HF_HUB_CACHE");
}

/* A hub cache as huggingface_hub writes it: blobs, snapshot symlinks, refs. */
static void test_load_by_hub_id(void **state) {
    (void)state;
    char root[] = "/tmp/lmc-hub-XXXXXX";
    assert_non_null(mkdtemp(root));
    char path[1024], target[1024];
    snprintf(path, sizeof path, "%s/models--test-org--tiny-llama", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/models--test-org--tiny-llama/blobs", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/models--test-org--tiny-llama/refs", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/models--test-org--tiny-llama/snapshots", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/models--test-org--tiny-llama/snapshots/abc123", root);
    assert_int_equal(mkdir(path, 0755), 0);
    const char *files[] = {"config.json", "model.safetensors", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(target, sizeof target, "%s/models--test-org--tiny-llama/blobs/blob%d", root, i);
        snprintf(path, sizeof path, "%s/%s", FIXTURE, files[i]);
        copy_file(path, target);
        snprintf(target, sizeof target, "../../blobs/blob%d", i);
        snprintf(path, sizeof path, "%s/models--test-org--tiny-llama/snapshots/abc123/%s", root,
                 files[i]);
        assert_int_equal(symlink(target, path), 0);
    }
    snprintf(path, sizeof path, "%s/models--test-org--tiny-llama/refs/main", root);
    FILE *f = fopen(path, "w");
    fputs("abc123\n", f);
    fclose(f);
    setenv("HF_HUB_CACHE", root, 1);
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load("test-org/tiny-llama", NULL, &k), LMC_OK);
    char *dir = NULL;
    assert_int_equal(lmc_model_locate("test-org/tiny-llama", &dir), LMC_OK);
    assert_non_null(strstr(dir, "snapshots/abc123"));
    lmc_free(dir);
    lmc_container_free(k);
    unsetenv("HF_HUB_CACHE");
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* ---- generate: stops, processors, seeds ---------------------------------------------- */

typedef struct collected {
    int32_t ids[512];
    int n;
    char text[8192];
    size_t len;
    int stop_after; /* 0: never */
} collected;

static int collect(int32_t token, const char *text, size_t len, void *ud) {
    collected *c = ud;
    if (token >= 0 && c->n < 512) c->ids[c->n++] = token;
    if (text && c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    return c->stop_after && c->n >= c->stop_after;
}

static void run_tokens(lmc_model *m, int threads, const lmc_generate_params *p, collected *out) {
    lmc_set_num_threads(threads);
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(m, 0, &s), LMC_OK);
    int32_t prompt[] = {1, 15, 27, 100, 7};
    memset(out, 0, sizeof *out);
    assert_int_equal(lmc_generate(s, NULL, prompt, 5, p, collect, out, NULL), LMC_OK);
    lmc_session_free(s);
}

/* lmc_session_memory_bytes: 0 for NULL, little for a fresh session; grows
 * with the tokens held (the shipped model: 1024 positions, cache blocks of
 * 256) and stays through reset (the buffers are kept): what lmc serve's
 * prompt cache adds up to bound its memory. */
static void test_session_memory_bytes(void **state) {
    (void)state;
    assert_int_equal(lmc_session_memory_bytes(NULL), 0);
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(LMC_SOURCE_DIR "/models/kjv-llama-11m-4bit", &m), LMC_OK);
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(m, 0, &s), LMC_OK);
    assert_true(lmc_session_memory_bytes(s) < 1024); /* nothing held yet */
    int32_t prompt[] = {1, 15, 27, 100, 7};
    assert_int_equal(lmc_session_forward(s, prompt, 5, 0, NULL), LMC_OK);
    size_t a = lmc_session_memory_bytes(s);
    assert_true(a > 0);
    int32_t more[300]; /* past the first 256-position block of the cache */
    for (int i = 0; i < 300; i++) more[i] = 1 + i % 50;
    assert_int_equal(lmc_session_forward(s, more, 300, 0, NULL), LMC_OK);
    size_t b = lmc_session_memory_bytes(s);
    assert_true(b > a);
    lmc_session_reset(s);
    assert_int_equal(lmc_session_memory_bytes(s), b);
    lmc_session_free(s);
    lmc_model_free(m);
}

static void test_seeded_across_threads(void **state) {
    (void)state;
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(FIXTURE, &m), LMC_OK);
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.max_tokens = 40;
    p.temperature = 1.5f;
    p.top_p = 0.95f;
    p.seed = 1234;
    p.ignore_eos = 1;
    collected a, b;
    run_tokens(m, 1, &p, &a);
    assert_int_equal(a.n, 40);
    int distinct = 0;
    for (int i = 1; i < a.n; i++) distinct += a.ids[i] != a.ids[0];
    assert_true(distinct > 0); /* really sampling */
    int threads[] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        run_tokens(m, threads[t], &p, &b);
        assert_int_equal(b.n, a.n);
        assert_memory_equal(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n);
    }
    p.seed = 99;
    run_tokens(m, 2, &p, &b);
    assert_memory_not_equal(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n);
    lmc_set_num_threads(0);
    lmc_model_free(m);
}

/* A user processor and sampler of the public interfaces. */
static lmc_status ban_even(void *state, float *logits, int32_t V, const int32_t *tokens, int32_t n,
                           int32_t n_prompt) {
    (void)tokens;
    int *calls = state;
    assert_true(n >= n_prompt);
    for (int32_t i = 0; i < V; i += 2) logits[i] = -1e30f;
    (*calls)++;
    return LMC_OK;
}

static lmc_status pick_last_max(void *state, const float *logits, int32_t V, int32_t *token) {
    (void)state;
    int32_t best = 0;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] >= logits[best]) best = i;
    *token = best;
    return LMC_OK;
}

static void test_user_processor_and_sampler(void **state) {
    (void)state;
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(FIXTURE, &m), LMC_OK);
    int calls = 0;
    lmc_logits_processor proc = {ban_even, &calls};
    lmc_sampler samp = {pick_last_max, NULL};
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.max_tokens = 10;
    p.ignore_eos = 1;
    p.processors = &proc;
    p.n_processors = 1;
    p.sampler = &samp;
    collected c;
    run_tokens(m, 1, &p, &c);
    assert_int_equal(c.n, 10);
    assert_int_equal(calls, 10);
    for (int i = 0; i < c.n; i++) assert_int_equal(c.ids[i] % 2, 1);
    /* logit_bias forces a token through the built-in chain */
    lmc_logit_bias lb = {42, 1e9f};
    lmc_generate_params q;
    lmc_generate_params_default(&q);
    q.max_tokens = 5;
    q.ignore_eos = 1;
    q.logit_bias = &lb;
    q.n_logit_bias = 1;
    run_tokens(m, 1, &q, &c);
    for (int i = 0; i < c.n; i++) assert_int_equal(c.ids[i], 42);
    lmc_model_free(m);
}

/* perform's function for a whole request: prepare + generate */
typedef struct request {
    lmc_user_input in;
    lmc_generate_params p;
    collected c;
    lmc_generate_result r;
    lmc_status st;
    lmc_session *fresh; /* when set, generate there (recompute) instead */
} request;

static lmc_status do_request(lmc_context *ctx, void *ud) {
    request *q = ud;
    int stop_after = q->c.stop_after;
    memset(&q->c, 0, sizeof q->c);
    q->c.stop_after = stop_after;
    if (q->fresh) {
        lmc_model_input mi;
        lmc_status st = lmc_context_prepare(ctx, &q->in, &mi);
        if (st != LMC_OK) return q->st = st;
        q->st = lmc_generate(q->fresh, lmc_context_tokenizer(ctx), mi.tokens, mi.n_tokens, &q->p,
                             collect, &q->c, &q->r);
        lmc_model_input_clear(&mi);
        return q->st;
    }
    return q->st = lmc_context_generate(ctx, &q->in, &q->p, collect, &q->c, &q->r);
}

static void test_stops_and_text(void **state) {
    (void)state;
    NEED_CHAT_MODEL();
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load(CHAT_DIR, NULL, &k), LMC_OK);
    request q = {.in = {.prompt = "Tell me a story."}};
    lmc_generate_params_default(&q.p);
    q.p.temperature = 0;
    q.p.max_tokens = 24;
    q.p.ignore_eos = 1;
    assert_int_equal(lmc_container_perform(k, do_request, &q), LMC_OK);
    assert_int_equal(q.r.stop_reason, LMC_STOP_LENGTH);
    assert_int_equal(q.r.n_tokens, 24);
    /* the streamed pieces add up to the result's text */
    assert_int_equal(q.c.len, q.r.text_len);
    assert_memory_equal(q.c.text, q.r.text, q.r.text_len);
    assert_true(q.r.text_len > 4);
    char full[8192];
    memcpy(full, q.r.text, q.r.text_len + 1);
    size_t cut = q.r.text_len / 2;
    while (cut > 0 && ((unsigned char)full[cut] & 0xC0) == 0x80) cut--; /* a character start */
    char stop[32];
    size_t sl = q.r.text_len - cut < 6 ? q.r.text_len - cut : 6;
    memcpy(stop, full + cut, sl);
    stop[sl] = '\0';
    const char *stops[] = {stop};
    lmc_generate_result_clear(&q.r);
    q.p.stop = stops;
    q.p.n_stop = 1;
    assert_int_equal(lmc_container_perform(k, do_request, &q), LMC_OK);
    assert_int_equal(q.r.stop_reason, LMC_STOP_STRING);
    const char *first = strstr(full, stop);
    assert_non_null(first);
    size_t want = (size_t)(first - full);
    assert_int_equal(q.r.text_len, want); /* the text up to the stop string, not it */
    assert_memory_equal(q.r.text, full, want);
    assert_int_equal(q.c.len, want);
    assert_memory_equal(q.c.text, full, want);
    lmc_generate_result_clear(&q.r);
    /* a callback stop */
    q.p.n_stop = 0;
    q.c.stop_after = 3;
    assert_int_equal(lmc_container_perform(k, do_request, &q), LMC_OK);
    assert_int_equal(q.r.stop_reason, LMC_STOP_CALLBACK);
    assert_int_equal(q.r.n_tokens, 3);
    int32_t toks[24];
    memcpy(toks, q.r.tokens, sizeof(int32_t) * 3);
    lmc_generate_result_clear(&q.r);
    /* an extra EOS id: generation ends before it, and it is not emitted */
    q.c.stop_after = 0;
    q.p.ignore_eos = 0;
    int at = 0;
    while (at < 2 && toks[at] != toks[2]) at++;
    q.p.eos_tokens = &toks[2];
    q.p.n_eos_tokens = 1;
    assert_int_equal(lmc_container_perform(k, do_request, &q), LMC_OK);
    assert_int_equal(q.r.stop_reason, LMC_STOP_EOS);
    assert_int_equal(q.r.n_tokens, at);
    assert_int_equal(q.r.stats.generated_tokens, at);
    assert_true(q.r.stats.first_token_seconds > 0);
    assert_true(q.r.stats.peak_memory_bytes > 0);
    lmc_generate_result_clear(&q.r);
    /* an EOS string that is one token ("<|im_end|>") ends generation the same way */
    q.p.n_eos_tokens = 0;
    const char *eos_s[] = {"<|im_end|>"};
    q.p.eos_strings = eos_s;
    q.p.n_eos_strings = 1;
    q.p.logit_bias = &(lmc_logit_bias){151645, 1e9f}; /* force it */
    q.p.n_logit_bias = 1;
    assert_int_equal(lmc_container_perform(k, do_request, &q), LMC_OK);
    assert_int_equal(q.r.stop_reason, LMC_STOP_EOS);
    assert_int_equal(q.r.n_tokens, 0);
    lmc_generate_result_clear(&q.r);
    lmc_container_free(k);
}

/* A 3-turn chat through the container's prompt cache equals recomputing
 * every turn, and computes only what the cache does not hold. */
static void test_chat_prompt_cache(void **state) {
    (void)state;
    NEED_CHAT_MODEL();
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load(CHAT_DIR, NULL, &k), LMC_OK);
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(CHAT_DIR, &m), LMC_OK);
    const char *users[3] = {"Hello there.", "What is the capital of France?", "And of Spain?"};
    lmc_message msgs[6];
    char replies[3][8192];
    int n_msgs = 0;
    int32_t prev_total = 0;
    for (int turn = 0; turn < 3; turn++) {
        msgs[n_msgs++] = (lmc_message){"user", users[turn], NULL, 0};
        request q = {.in = {.messages = msgs, .n_messages = n_msgs}};
        lmc_generate_params_default(&q.p);
        q.p.temperature = 0.7f;
        q.p.seed = 5 + (uint64_t)turn;
        q.p.max_tokens = 12;
        q.p.ignore_eos = 1;
        assert_int_equal(lmc_container_perform(k, do_request, &q), LMC_OK);
        /* recompute the whole conversation in a fresh session */
        request f = q;
        memset(&f.r, 0, sizeof f.r);
        assert_int_equal(lmc_session_create(m, 0, &f.fresh), LMC_OK);
        assert_int_equal(lmc_container_perform(k, do_request, &f), LMC_OK);
        assert_int_equal(f.r.stats.cached_tokens, 0);
        assert_int_equal(q.r.n_tokens, f.r.n_tokens);
        assert_memory_equal(q.r.tokens, f.r.tokens, sizeof(int32_t) * (size_t)q.r.n_tokens);
        assert_int_equal(q.r.stats.prompt_tokens, f.r.stats.prompt_tokens);
        assert_int_equal(q.r.stats.prefill_tokens,
                         q.r.stats.prompt_tokens - q.r.stats.cached_tokens);
        if (turn > 0) { /* at least the previous turn's prompt came from the cache */
            assert_true(q.r.stats.cached_tokens >= prev_total);
            assert_true(q.r.stats.prefill_tokens <= q.r.stats.prompt_tokens - prev_total);
        }
        prev_total = q.r.stats.prompt_tokens;
        memcpy(replies[turn], q.r.text, q.r.text_len + 1);
        msgs[n_msgs++] = (lmc_message){"assistant", replies[turn], NULL, 0};
        lmc_session_free(f.fresh);
        lmc_generate_result_clear(&q.r);
        lmc_generate_result_clear(&f.r);
    }
    lmc_model_free(m);
    lmc_container_free(k);
}

/* Token-level: the next turn re-sends what the cache holds plus new
 * tokens; exactly the new ones are computed. Then save, load, continue. */
static void test_prompt_cache_counter_and_files(void **state) {
    (void)state;
    lmc_model *m = NULL, *other = NULL;
    assert_int_equal(lmc_model_load(FIXTURE, &m), LMC_OK);
    lmc_session *s = NULL, *t = NULL;
    assert_int_equal(lmc_session_create(m, 0, &s), LMC_OK);
    assert_int_equal(lmc_session_create(m, 0, &t), LMC_OK);
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.temperature = 0.9f;
    p.max_tokens = 6;
    p.ignore_eos = 1;
    int32_t conv[256] = {1, 15, 27, 100, 7};
    int32_t n = 5;
    lmc_generate_result r;
    assert_int_equal(lmc_generate(s, NULL, conv, n, &p, NULL, NULL, &r), LMC_OK);
    assert_int_equal(r.stats.cached_tokens, 0);
    assert_int_equal(lmc_session_position(s), n + r.n_tokens - 1);
    memcpy(conv + n, r.tokens, sizeof(int32_t) * (size_t)r.n_tokens);
    n += r.n_tokens;
    lmc_generate_result_clear(&r);
    conv[n++] = 33;
    conv[n++] = 44;
    int32_t held = lmc_session_position(s);
    assert_memory_equal(lmc_session_tokens(s), conv, sizeof(int32_t) * (size_t)held);
    assert_int_equal(lmc_generate(s, NULL, conv, n, &p, NULL, NULL, &r), LMC_OK);
    assert_int_equal(r.stats.cached_tokens, held);
    assert_int_equal(r.stats.prefill_tokens, n - held); /* only the new tokens */
    lmc_generate_result first = r;
    /* save after the prompt, then continue from the loaded copy */
    char path[] = "/tmp/lmc-cache-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(lmc_session_truncate(s, n), LMC_OK);
    assert_int_equal(lmc_session_save(s, path), LMC_OK);
    assert_int_equal(lmc_session_load(t, path), LMC_OK);
    assert_int_equal(lmc_session_position(t), n);
    assert_memory_equal(lmc_session_tokens(t), conv, sizeof(int32_t) * (size_t)n);
    lmc_generate_result again;
    assert_int_equal(lmc_generate(t, NULL, conv, n, &p, NULL, NULL, &again), LMC_OK);
    assert_int_equal(again.stats.cached_tokens, n - 1);
    assert_int_equal(again.n_tokens, first.n_tokens);
    assert_memory_equal(again.tokens, first.tokens, sizeof(int32_t) * (size_t)first.n_tokens);
    lmc_generate_result_clear(&again);
    lmc_generate_result_clear(&first);
    /* a corrupt file and another model's cache are refused */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    assert_int_equal(lmc_session_load(t, path), LMC_ERR_FORMAT);
    assert_int_equal(lmc_session_position(t), 0);
    assert_int_equal(truncate(path, 30), 0);
    assert_int_equal(lmc_session_load(t, path), LMC_ERR_FORMAT);
    assert_int_not_equal(lmc_session_load(t, "/nonexistent/cache"), LMC_OK);
    assert_int_equal(lmc_model_load(LMC_SOURCE_DIR "/tests/fixtures/models/llama-bias", &other),
                     LMC_OK);
    lmc_session *u = NULL;
    assert_int_equal(lmc_session_create(other, 0, &u), LMC_OK);
    assert_int_equal(lmc_session_save(u, path), LMC_OK); /* empty, of the other model */
    assert_int_equal(lmc_session_load(t, path), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "another model"));
    assert_int_equal(lmc_session_save(s, "/nonexistent/dir/cache"), LMC_ERR_IO);
    unlink(path);
    lmc_session_free(u);
    lmc_model_free(other);
    lmc_session_free(s);
    lmc_session_free(t);
    lmc_model_free(m);
}

/* ---- many threads, one container ------------------------------------------------------ */

#define STRESS_THREADS 8
#define STRESS_REQUESTS 50

static void stress_request(int th, int j, request *q) {
    memset(q, 0, sizeof *q);
    static _Thread_local int32_t toks[8];
    for (int i = 0; i < 8; i++) toks[i] = (int32_t)((th * 31 + j * 7 + i * 13) % 250 + 1);
    q->in.tokens = toks;
    q->in.n_tokens = 3 + (th + j) % 6;
    lmc_generate_params_default(&q->p);
    q->p.max_tokens = 4 + (j % 3);
    q->p.temperature = (j % 2) ? 0.8f : 0.0f;
    q->p.seed = (uint64_t)(th * 1000 + j);
    q->p.ignore_eos = 1;
}

typedef struct stress_arg {
    lmc_container *k;
    int th;
    int32_t (*expect)[STRESS_REQUESTS][8];
    int failures;
} stress_arg;

static void *stress_thread(void *ud) {
    stress_arg *a = ud;
    for (int j = 0; j < STRESS_REQUESTS; j++) {
        request q;
        stress_request(a->th, j, &q);
        if (lmc_container_perform(a->k, do_request, &q) != LMC_OK ||
            memcmp(q.r.tokens, a->expect[a->th][j], sizeof(int32_t) * (size_t)q.r.n_tokens))
            a->failures++;
        lmc_generate_result_clear(&q.r);
    }
    return NULL;
}

static void test_stress_one_container(void **state) {
    (void)state;
    lmc_container *k = NULL;
    assert_int_equal(lmc_llm_load(FIXTURE, NULL, &k), LMC_OK);
    static int32_t expect[STRESS_THREADS][STRESS_REQUESTS][8];
    /* each request alone, in a fresh container */
    for (int th = 0; th < STRESS_THREADS; th++)
        for (int j = 0; j < STRESS_REQUESTS; j++) {
            request q;
            stress_request(th, j, &q);
            lmc_container *alone = NULL;
            if (j % 10 == 0) assert_int_equal(lmc_llm_load(FIXTURE, NULL, &alone), LMC_OK);
            assert_int_equal(lmc_container_perform(alone ? alone : k, do_request, &q), LMC_OK);
            memcpy(expect[th][j], q.r.tokens, sizeof(int32_t) * (size_t)q.r.n_tokens);
            lmc_generate_result_clear(&q.r);
            lmc_container_free(alone);
        }
    pthread_t t[STRESS_THREADS];
    stress_arg args[STRESS_THREADS];
    for (int th = 0; th < STRESS_THREADS; th++) {
        args[th] = (stress_arg){k, th, expect, 0};
        assert_int_equal(pthread_create(&t[th], NULL, stress_thread, &args[th]), 0);
    }
    int failures = 0;
    for (int th = 0; th < STRESS_THREADS; th++) {
        pthread_join(t[th], NULL);
        failures += args[th].failures;
    }
    assert_int_equal(failures, 0);
    lmc_container_free(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_factories),
        cmocka_unit_test(test_load_by_hub_id),
        cmocka_unit_test(test_session_memory_bytes),
        cmocka_unit_test(test_seeded_across_threads),
        cmocka_unit_test(test_user_processor_and_sampler),
        cmocka_unit_test(test_stops_and_text),
        cmocka_unit_test(test_chat_prompt_cache),
        cmocka_unit_test(test_prompt_cache_counter_and_files),
        cmocka_unit_test(test_stress_one_container),
    };
    /* LMC_TEST_ONLY=name runs one test (make tsan runs the stress test) */
    if (getenv("LMC_TEST_ONLY")) cmocka_set_test_filter(getenv("LMC_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
