/*
 * lmc: run Hugging Face and mlx-community language models from their folders.
 *
 * The only public header. Conventions:
 * - Every fallible function returns an lmc_status; on failure lmc_last_error()
 *   holds a one-line message (thread-local, valid until the next failing call
 *   on the same thread).
 * - Memory returned through an out-pointer is owned by the caller and freed
 *   with lmc_free() unless the function says otherwise.
 * - The library never prints, exits or aborts; logging goes to the callback
 *   set with lmc_set_log_callback() (silent by default).
 */
#ifndef LMC_H
#define LMC_H

#include <stddef.h>
#include <stdint.h>

/* The library's exported functions: built with hidden visibility, only
 * these are visible outside liblmc.so. */
#if defined(__GNUC__)
#define LMC_API __attribute__((visibility("default")))
#else
#define LMC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ------------------------------------------------- */

typedef enum lmc_status {
    LMC_OK = 0,
    LMC_ERR_INVALID_ARG, /* a caller passed a bad value */
    LMC_ERR_IO,          /* a file could not be opened, read, mapped or written */
    LMC_ERR_FORMAT,      /* a file's contents are malformed */
    LMC_ERR_UNSUPPORTED, /* well-formed but not supported (dtype, model_type, ...) */
    LMC_ERR_NOMEM,       /* allocation failed */
    LMC_ERR_NOT_FOUND,   /* a named tensor, key or file is missing */
    LMC_ERR_SHAPE,       /* a tensor has the wrong shape */
    LMC_ERR_RANGE,       /* an index (token id, position) is out of range */
    LMC_ERR_LIMIT,       /* a sandbox or size limit was reached */
    LMC_ERR_STOPPED,     /* a callback asked to stop (not an error for generate) */
} lmc_status;

/* Message of the last failure on this thread; never NULL ("" when none). */
LMC_API const char *lmc_last_error(void);
/* Short constant name of a status, e.g. "format error". */
LMC_API const char *lmc_status_string(lmc_status status);

/* Frees memory the library handed to the caller. NULL is fine. */
LMC_API void lmc_free(void *ptr);

typedef enum lmc_log_level {
    LMC_LOG_DEBUG = 0,
    LMC_LOG_INFO = 1,
    LMC_LOG_WARN = 2,
    LMC_LOG_ERROR = 3,
} lmc_log_level;

typedef void (*lmc_log_fn)(lmc_log_level level, const char *message, void *user_data);
/* Sets the process-wide log sink; NULL silences logging (the default). */
LMC_API void lmc_set_log_callback(lmc_log_fn fn, void *user_data);

/* Number of threads of the kernels' pool, the calling thread included; 0 =
 * LMC_NUM_THREADS, else the number of cores (default). Safe to call while
 * other threads run sessions: it waits for the pool's current job. */
LMC_API void lmc_set_num_threads(int n);
LMC_API int lmc_get_num_threads(void);

/* Numerics of MLX-quantized matmuls, process-wide. exact = 1: activations
 * stay f32 everywhere (the reference path: each group's s*dot(q, x) +
 * b*sum(x) in f32). exact = 0 (the default): for 4- and 8-bit weights the
 * activations are rounded per block of 32 to 16-bit integers d*v (d =
 * max|x|/32385, held as two int8 digits) and the dot products run in
 * integer SIMD; a row's error is at most sum over blocks of d/2 * sum|w|
 * (relative ~1e-5 per matmul, ~1e-4 on whole models). Other bit widths and
 * dense weights always take the f32 path. The environment variable
 * LMC_EXACT=1 selects exact until lmc_set_exact is called. Not to be changed
 * while a forward pass runs. */
LMC_API void lmc_set_exact(int exact);
LMC_API int lmc_get_exact(void);

/* Storage of keys and values in the KV caches made after the call
 * (sessions, containers), process-wide. f16 = 0 (the default): f32, as
 * transformers computes them. f16 = 1: f16, as llama.cpp's default cache
 * type: half the memory, and half the memory traffic of attention at long
 * context; logits move by a few 1e-4 (rel L2; values past 65504 become
 * infinite). Prompt-cache files load into either (converted). The
 * environment variable LMC_KV_F16=1 selects f16 until this is called. */
LMC_API void lmc_set_kv_f16(int f16);
LMC_API int lmc_get_kv_f16(void);

/* ---- models ------------------------------------------------------------ */

typedef struct lmc_model lmc_model;

/* Loads a model folder (config.json + safetensors, single or sharded).
 * Weights stay memory-mapped. *out is freed with lmc_model_free. */
LMC_API lmc_status lmc_model_load(const char *dir, lmc_model **out);
LMC_API void lmc_model_free(lmc_model *model);

typedef struct lmc_model_info {
    const char *model_type; /* e.g. "llama"; owned by the model */
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t num_layers;
    int32_t max_position_embeddings;
    int32_t bos_token_id;         /* -1 when absent */
    const int32_t *eos_token_ids; /* owned by the model */
    int32_t num_eos_token_ids;
    uint64_t weight_bytes; /* bytes of all tensors the model reads */
    uint64_t decode_bytes; /* bytes of weights one decode step reads (MoE: the chosen
                              experts only); 0 when unknown */
    /* vision-language models (PaliGemma): the placeholder token of image
     * positions, the positions one image takes, and the side in pixels of
     * the square images the vision tower takes; -1, 0, 0 for LLMs */
    int32_t image_token_id;
    int32_t image_tokens;
    int32_t image_size;
} lmc_model_info;

/* Fills info (all zero when model is NULL). */
LMC_API void lmc_model_get_info(const lmc_model *model, lmc_model_info *info);

/* A session: a KV cache and scratch buffers over a model.
 *
 * Threads: one thread at a time may use a session; several sessions may
 * share one model and run on different threads at once (forward passes only
 * read the model; per-call state such as MoE expert counts lives in the
 * session). A loaded model and its tokenizer are read-only after loading;
 * lmc_model_free must wait until no session of the model is in use.
 *
 * The kernels' worker threads are one process-wide pool that serves one
 * caller at a time. A session that calls into it while another thread's
 * session holds it runs that loop on its own thread instead of waiting, so
 * N sessions working at once use the pool's threads plus up to N - 1
 * application threads, and results are identical to one session running
 * alone (each output element is computed the same way whoever computes it).
 * The cost: while one caller holds the pool the others run single-threaded;
 * with at least as many busy sessions as cores the cores stay busy. */
typedef struct lmc_session lmc_session;

/* max_tokens: capacity of the KV cache; 0 = max_position_embeddings. */
LMC_API lmc_status lmc_session_create(lmc_model *model, int32_t max_tokens, lmc_session **out);
LMC_API void lmc_session_free(lmc_session *session);
/* Forgets all tokens (the KV cache is emptied). */
LMC_API void lmc_session_reset(lmc_session *session);
/* Number of tokens held in the cache. */
LMC_API int32_t lmc_session_position(const lmc_session *session);
/* The tokens the cache holds, in order (lmc_session_position of them);
 * owned by the session, valid until its next change. */
LMC_API const int32_t *lmc_session_tokens(const lmc_session *session);
/* Bytes of memory the session's KV cache has allocated (its buffers grow
 * with the tokens it holds and stay allocated across reset and truncate
 * until the session is freed); 0 for NULL. For callers that bound the
 * memory of many sessions, e.g. a server's prompt cache. */
LMC_API size_t lmc_session_memory_bytes(const lmc_session *session);
/* Keeps only the first n tokens. LMC_ERR_UNSUPPORTED when the cache cannot
 * go back to n (a rotating sliding-window layer has already overwritten a
 * key that position n still needs, or a longrope model); then reset it. */
LMC_API lmc_status lmc_session_truncate(lmc_session *session, int32_t n);

/* Runs tokens[0..n) after what the session holds, in one batch, appending
 * them to the KV cache. logits_out (may be NULL) receives float32 logits:
 * with all_positions, n x vocab_size (row i after token i); otherwise only
 * the last position's vocab_size values. */
LMC_API lmc_status lmc_session_forward(lmc_session *session, const int32_t *tokens, int32_t n,
                                       int all_positions, float *logits_out);

/* Prompt cache files (mlx-lm's save_prompt_cache / load_prompt_cache): the
 * session's tokens and keys/values, in a versioned binary format tied to the
 * model (architecture, shapes and a fingerprint of the weights). Save writes
 * path.tmp-PID and renames it, so a failure leaves no file behind. Load
 * replaces what the session holds; a file of another model, another format
 * version, a truncated or corrupt file, or more tokens than the session's
 * capacity is refused (LMC_ERR_FORMAT, LMC_ERR_UNSUPPORTED, LMC_ERR_RANGE)
 * and leaves the session empty. */
LMC_API lmc_status lmc_session_save(const lmc_session *session, const char *path);
LMC_API lmc_status lmc_session_load(lmc_session *session, const char *path);

/* ---- generation ---------------------------------------------------------- */

/* Logit processors and samplers are interfaces: a function and its state.
 * A processor changes logits[0..vocab_size) in place; tokens[0..n_tokens)
 * are the prompt and the tokens generated so far (the first n_prompt are the
 * prompt). A sampler picks the next token. Built-ins and user code implement
 * the same types. A non-LMC_OK status ends generation with that status. */
typedef struct lmc_logits_processor {
    lmc_status (*apply)(void *state, float *logits, int32_t vocab_size, const int32_t *tokens,
                        int32_t n_tokens, int32_t n_prompt);
    void *state;
} lmc_logits_processor;

typedef struct lmc_sampler {
    lmc_status (*sample)(void *state, const float *logits, int32_t vocab_size, int32_t *token);
    void *state;
} lmc_sampler;

typedef struct lmc_logit_bias {
    int32_t token;
    float bias; /* added to the token's logit */
} lmc_logit_bias;

/* Generation parameters. Each step runs, in this order (mlx-lm's
 * make_logits_processors, then transformers' warpers):
 *   1. logit_bias                 logits[t] += bias
 *   2. repetition_penalty         transformers' RepetitionPenaltyLogitsProcessor
 *                                 over the last repetition_context tokens
 *   3. presence_penalty           logits[t] -= p for each distinct t of the last
 *                                 presence_context tokens (mlx-lm)
 *   4. frequency_penalty          logits[t] -= p * count(t) over the last
 *                                 frequency_context tokens (mlx-lm)
 *   5. processors[0..n_processors) (yours)
 *   6. sampler, or the built-in one: temperature 0 = argmax (lowest id on
 *      ties); else softmax(logits / temperature), then top_k, top_p (the
 *      smallest set of most likely tokens whose probability reaches top_p),
 *      min_p (drop tokens below min_p times the most likely one), and a draw
 *      from what is left, from a generator seeded with seed: the same seed
 *      gives the same tokens on every run and at every thread count.
 * Stops, checked after each token: an EOS id (the model's eos_token_id of
 * config.json and generation_config.json, eos_tokens, and ids of
 * eos_strings that are single tokens; not emitted), a stop string matched
 * on the generated text (the text up to it is emitted, the stop string and
 * what follows are not; text that could begin a stop string is held back
 * until it cannot), max_tokens, the session's capacity, or the callback. */
typedef struct lmc_generate_params {
    int32_t max_tokens;         /* tokens to generate (default 256) */
    float temperature;          /* 0 = greedy (default 0.8) */
    int32_t top_k;              /* 0 = off */
    float top_p;                /* 1 = off */
    float min_p;                /* 0 = off */
    float repetition_penalty;   /* 1 = off; > 0 */
    int32_t repetition_context; /* tokens the penalty sees (default 64) */
    float presence_penalty;     /* 0 = off */
    int32_t presence_context;   /* default 20, as mlx-lm */
    float frequency_penalty;    /* 0 = off */
    int32_t frequency_context;  /* default 20, as mlx-lm */
    const lmc_logit_bias *logit_bias;
    int32_t n_logit_bias;
    uint64_t seed;             /* sampling seed */
    int ignore_eos;            /* keep going after an end-of-sequence token */
    const int32_t *eos_tokens; /* extra EOS ids */
    int32_t n_eos_tokens;
    const char *const *eos_strings; /* extra EOS token texts, e.g. "<|im_end|>" */
    int32_t n_eos_strings;
    const char *const *stop; /* stop strings (need a tokenizer) */
    int32_t n_stop;
    int32_t prefill_step; /* prompt tokens per forward batch (default 512) */
    /* 0 = off; else the session's cache keeps the first 4 positions and the
     * most recent max_kv_size - 4, and attention sees just those, as
     * mlx-lm's RotatingKVCache(max_kv_size, keep=4) (in prefill too, where
     * mlx-lm's sees a little more): memory stays bounded however long the
     * generation (up to the session's max_tokens positions). A session laid
     * out otherwise is emptied first. Not for models with sliding-window
     * layers or longrope (LMC_ERR_UNSUPPORTED); a session made with it
     * cannot be saved yet. */
    int32_t max_kv_size;
    const lmc_logits_processor *processors;
    int32_t n_processors;
    const lmc_sampler *sampler; /* NULL = the built-in sampler */
} lmc_generate_params;

LMC_API void lmc_generate_params_default(lmc_generate_params *p);

/* Called with each generated token and the text it completes (UTF-8, maybe
 * empty, NULL without a tokenizer; valid during the call); return non-zero
 * to stop. */
typedef int (*lmc_token_fn)(int32_t token, const char *text, size_t len, void *user_data);

typedef enum lmc_stop_reason {
    LMC_STOP_LENGTH = 0, /* max_tokens or the session's capacity */
    LMC_STOP_EOS,
    LMC_STOP_STRING,
    LMC_STOP_CALLBACK,
} lmc_stop_reason;

typedef struct lmc_generate_stats {
    int32_t prompt_tokens;      /* the prompt's length */
    int32_t cached_tokens;      /* of them, reused from the session (prompt cache) */
    int32_t prefill_tokens;     /* of them, computed: prompt_tokens - cached_tokens */
    int32_t generated_tokens;   /* tokens sampled (an EOS that stopped is not counted) */
    double prompt_seconds;      /* prefill time */
    double prompt_tps;          /* prefill_tokens / prompt_seconds */
    double generate_seconds;    /* first token to the end */
    double generate_tps;        /* (generated_tokens - 1) / generate_seconds */
    double first_token_seconds; /* start of the call to the first token */
    uint64_t peak_memory_bytes; /* the process's peak resident memory */
} lmc_generate_stats;

/* What a generation produced; lmc_generate_result_clear frees its parts. */
typedef struct lmc_generate_result {
    int32_t *tokens; /* generated tokens */
    int32_t n_tokens;
    char *text; /* their text (empty without a tokenizer), NUL-terminated */
    size_t text_len;
    lmc_stop_reason stop_reason;
    lmc_generate_stats stats;
} lmc_generate_result;

LMC_API void lmc_generate_result_clear(lmc_generate_result *result);

typedef struct lmc_tokenizer lmc_tokenizer;

/* Continues the token sequence prompt[0..n): the session is a prompt cache,
 * so the longest common prefix of what it holds and prompt is kept and only
 * the rest is computed (at least the last prompt token; all of it when the
 * cache cannot go back, see lmc_session_truncate). Then samples up to
 * params->max_tokens tokens, calling cb (may be NULL) for each. tok (may be
 * NULL) gives text, stop strings and eos_strings. result (may be NULL) is
 * filled even on failure (what was generated until then); clear it with
 * lmc_generate_result_clear. A stop is not an error. A prompt that does not
 * fit the session is LMC_ERR_RANGE; bad parameters (NaN, negative
 * penalties, top_p outside (0, 1], ...) are LMC_ERR_INVALID_ARG naming the
 * field. params NULL = defaults. */
LMC_API lmc_status lmc_generate(lmc_session *session, const lmc_tokenizer *tok,
                                const int32_t *prompt, int32_t n, const lmc_generate_params *params,
                                lmc_token_fn cb, void *user_data, lmc_generate_result *result);

/* ---- tokenizer --------------------------------------------------------- */

/* Loads dir/tokenizer.json (a BPE model; WordLevel, WordPiece and Unigram
 * give LMC_ERR_UNSUPPORTED). Encoding follows tokenizer.json exactly as
 * Hugging Face `tokenizers` does; tokenizer_config.json is not read.
 * Errors: LMC_ERR_NOT_FOUND (no tokenizer.json), LMC_ERR_FORMAT (bad JSON,
 * merges naming unknown tokens, ...), LMC_ERR_UNSUPPORTED. */
LMC_API lmc_status lmc_tokenizer_load(const char *dir, lmc_tokenizer **out);
LMC_API void lmc_tokenizer_free(lmc_tokenizer *tok);

enum {
    LMC_ENCODE_ADD_SPECIAL = 1u << 0,     /* run the post-processor (BOS etc.) */
    LMC_ENCODE_SPECIAL_AS_TEXT = 1u << 1, /* special-token text in input is plain text */
};

/* The most bytes one lmc_tokenizer_encode call takes: more is LMC_ERR_LIMIT
 * (split the text). Memory is linear in the input: about 21 bytes a byte
 * at most beyond the tokenizer, for a single word without spaces too. */
#define LMC_TOKENIZER_MAX_INPUT ((size_t)1 << 30)

/* Encodes UTF-8 text; *ids (freed with lmc_free) gets *n_ids ids. Text that
 * is not valid UTF-8 gives LMC_ERR_INVALID_ARG. Thread-safe on one tok. */
LMC_API lmc_status lmc_tokenizer_encode(const lmc_tokenizer *tok, const char *text, size_t len,
                                        unsigned flags, int32_t **ids, size_t *n_ids);
/* Decodes ids to UTF-8 text; *text is NUL-terminated, freed with lmc_free.
 * As HF, ids without a token are skipped, and with skip_special the special
 * added tokens too; invalid UTF-8 from byte tokens becomes U+FFFD. */
LMC_API lmc_status lmc_tokenizer_decode(const lmc_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                        int skip_special, char **text, size_t *len);
LMC_API int32_t lmc_tokenizer_vocab_size(const lmc_tokenizer *tok);
/* Id of a token's exact text (added tokens included), or -1. */
LMC_API int32_t lmc_tokenizer_token_to_id(const lmc_tokenizer *tok, const char *token);

/* Streaming detokenizer: feed ids one at a time, get complete UTF-8 only.
 * The concatenation of all pushes and the flush equals lmc_tokenizer_decode
 * of all ids; work per id is bounded by a small window of recent ids. */
typedef struct lmc_detokenizer lmc_detokenizer;
LMC_API lmc_status lmc_detokenizer_create(const lmc_tokenizer *tok, int skip_special,
                                          lmc_detokenizer **out);
/* Appends id; *text (owned by the detokenizer, valid until the next call)
 * gets the newly completed text, possibly empty. */
LMC_API lmc_status lmc_detokenizer_push(lmc_detokenizer *d, int32_t id, const char **text,
                                        size_t *len);
/* Returns whatever is still held back (e.g. an incomplete UTF-8 tail). */
LMC_API lmc_status lmc_detokenizer_flush(lmc_detokenizer *d, const char **text, size_t *len);
LMC_API void lmc_detokenizer_free(lmc_detokenizer *d);

/* ---- chat templates ---------------------------------------------------- */

/* Renders the chat template of the model folder dir for messages_json, a JSON
 * array of messages as transformers takes them (content a string or a list of
 * parts), byte for byte as transformers' apply_chat_template(tokenize=False).
 * The template comes from chat_template.jinja, else tokenizer_config.json's
 * chat_template (a string, or a list of {name, template}: the extra variable
 * "template_name" picks one, else "tool_use" when tools are given, else
 * "default"), else chat_template.json. Variables: messages, tools and
 * documents (none unless given), add_generation_prompt, the special tokens of
 * tokenizer_config.json (bos_token, eos_token, ...; strings or AddedToken
 * dicts), then every entry of extra_vars_json (may be NULL), a JSON object
 * (e.g. tools, date_string, enable_thinking). strftime_now() uses the clock,
 * or the date in the environment variable LMC_FIXED_DATE (YYYY-MM-DD[THH:MM:SS]).
 * Errors: LMC_ERR_FORMAT for template syntax/runtime errors and
 * raise_exception() (the message carries the template's text and its line and
 * column), LMC_ERR_LIMIT when the sandbox's step/output/memory/recursion
 * limits are hit, LMC_ERR_NOT_FOUND when there is no template,
 * LMC_ERR_INVALID_ARG for bad JSON arguments. *out (NUL-terminated, *len
 * bytes) is freed with lmc_free. */
LMC_API lmc_status lmc_chat_template_render(const char *dir, const char *messages_json,
                                            int add_generation_prompt, const char *extra_vars_json,
                                            char **out, size_t *len);

/* ---- registry: named models ---------------------------------------------- */

typedef enum lmc_model_kind {
    LMC_MODEL_LLM = 0, /* text in, text out */
    LMC_MODEL_VLM = 1, /* images and text in, text out */
} lmc_model_kind;

/* A named preset (mlx-swift-examples' ModelConfiguration). */
typedef struct lmc_model_preset {
    const char *name;             /* short name, e.g. "llama3.2:1b" */
    const char *hub_id;           /* e.g. "mlx-community/Llama-3.2-1B-Instruct-4bit", or a folder */
    const char *default_prompt;   /* may be NULL */
    const char *const *extra_eos; /* EOS token texts beyond the model's own; NULL-terminated,
                                     may be NULL */
    lmc_model_kind kind;
} lmc_model_preset;

/* Adds a preset (everything is copied), or replaces the one of the same
 * name. Thread-safe; presets are never removed, so what lmc_registry_get
 * and lmc_registry_find return stays valid until the process ends. */
LMC_API lmc_status lmc_registry_add(const lmc_model_preset *preset);
/* Number of presets (built-in ones first, then those added, in order). */
LMC_API int32_t lmc_registry_count(void);
/* The i-th preset, or NULL when i is out of range. */
LMC_API const lmc_model_preset *lmc_registry_get(int32_t i);
/* The preset whose name or hub_id is name (hub ids ignore case), or NULL. */
LMC_API const lmc_model_preset *lmc_registry_find(const char *name);

/* ---- local models: what a folder holds, what the hub cache has ------------ */

/* A model folder at a glance, from its config.json and the sizes of its
 * files; nothing is loaded. The strings are owned by the summary
 * (lmc_model_summary_clear frees them). */
typedef struct lmc_model_summary {
    char *dir;        /* the folder, as given (lmc_hub_list: the snapshot) */
    char *hub_id;     /* "ORG/NAME" (or "NAME") when dir is a snapshot of the hub cache,
                         CACHE/models--ORG--NAME/snapshots/REV; else NULL */
    char *model_type; /* config.json's model_type, e.g. "llama"; for a VLM the top-level
                         one, e.g. "paligemma"; NULL when absent */
    /* How the weights are stored, from config.json: MLX "quantization" (else
     * "quantization_config") as "4-bit g64", per-layer overrides of other
     * widths or groups as "mixed 4/8-bit g64" (or "g32/64"), a mode other
     * than affine first ("mxfp4 4-bit g32"), another quant_method first
     * ("gptq 4-bit g128", "bitsandbytes 4-bit", "fp8"); else the dense
     * dtype of torch_dtype / dtype (text_config's for a VLM): "bf16",
     * "f16", "f32", or the name as written; NULL when none of these. */
    char *quantization;
    uint64_t size_bytes; /* the bytes of every file under dir, through symlinks (the hub
                            cache's links to its blobs; a dangling link counts 0) */
    lmc_model_kind kind; /* LMC_MODEL_VLM when config.json has a vision_config */
} lmc_model_summary;

/* Summarizes the model folder dir into *out (zeroed first; clear it with
 * lmc_model_summary_clear, also after a failure). Errors:
 * LMC_ERR_INVALID_ARG (NULL arguments), LMC_ERR_NOT_FOUND (no folder dir,
 * or no config.json in it), LMC_ERR_FORMAT (config.json is not a JSON
 * object, or model_type, quantization's bits or group_size has the wrong
 * type), LMC_ERR_IO (a folder or config.json that cannot be read). */
LMC_API lmc_status lmc_model_summarize(const char *dir, lmc_model_summary *out);
/* Frees the summary's strings and zeroes it. NULL is fine. */
LMC_API void lmc_model_summary_clear(lmc_model_summary *s);
/* Clears list[0..n) and frees list (what lmc_hub_list returns). NULL is fine. */
LMC_API void lmc_model_summaries_free(lmc_model_summary *list, int32_t n);

/* The local Hugging Face hub cache folder: $HF_HUB_CACHE, else
 * $HF_HOME/hub, else ~/.cache/huggingface/hub (a leading ~ expanded), as
 * huggingface_hub has it; whether it exists or not. *dir is freed with
 * lmc_free. Errors: LMC_ERR_INVALID_ARG, LMC_ERR_NOMEM. */
LMC_API lmc_status lmc_hub_cache_path(char **dir);

/* Every model of the local hub cache: each CACHE/models--ORG--NAME whose
 * snapshot (the one refs/main names, else the most recently modified one)
 * has config.json, summarized as lmc_model_summarize does, sorted by hub
 * id (ignoring case). A snapshot that cannot be summarized (config.json
 * unreadable or malformed, a subfolder that cannot be read) is listed all
 * the same, with what could be read: model_type and quantization NULL.
 * Repositories without such a snapshot (an interrupted download),
 * datasets--, spaces-- and other entries are left out. An absent cache is
 * no models (*out NULL, *n 0), not an error. *out is freed with
 * lmc_model_summaries_free(*out, *n). Errors: LMC_ERR_INVALID_ARG (NULL
 * arguments), LMC_ERR_IO (the cache folder cannot be read), LMC_ERR_NOMEM. */
LMC_API lmc_status lmc_hub_list(lmc_model_summary **out, int32_t *n);

/* ---- factories and the model container ------------------------------------ */

/* Load progress: stage is "resolve", "config", "weights", "tokenizer",
 * "template" or "done"; fraction in [0, 1]. Return non-zero to cancel (the
 * load fails with LMC_ERR_STOPPED). */
typedef int (*lmc_load_progress_fn)(const char *stage, double fraction, void *user_data);

typedef struct lmc_load_options {
    lmc_load_progress_fn progress; /* may be NULL */
    void *user_data;
    int32_t max_kv_tokens; /* capacity of the container's KV cache; 0 = the model's context */
} lmc_load_options;

/* Where a model is, from a spec: an existing folder; else a registry name
 * or hub id, looked up in the local Hugging Face cache ($HF_HUB_CACHE, else
 * $HF_HOME/hub, else ~/.cache/huggingface/hub; models--ORG--NAME/snapshots/
 * REV with REV from refs/main). *dir is freed with lmc_free. When it is
 * nowhere, LMC_ERR_NOT_FOUND and the message lists every place looked. */
LMC_API lmc_status lmc_model_locate(const char *spec, char **dir);

/* A loaded model with its tokenizer, chat template, configuration and a KV
 * cache (the prompt cache of its conversation), behind a lock. */
typedef struct lmc_container lmc_container;
/* What lmc_container_perform hands to its function: exclusive access to
 * the container's parts until the function returns. */
typedef struct lmc_context lmc_context;

/* The LLM factory: loads a text model from a folder, a registry name or a
 * hub id in the local cache. A VLM's folder gives LMC_ERR_UNSUPPORTED. The
 * tokenizer (tokenizer.json) is optional; without it only token input works.
 * options may be NULL. *out is freed with lmc_container_free. */
LMC_API lmc_status lmc_llm_load(const char *spec, const lmc_load_options *options,
                                lmc_container **out);
/* The VLM factory: the same calls for vision-language models (PaliGemma,
 * Hugging Face or mlx-vlm layouts, dense or MLX-quantized); the folder
 * also needs preprocessor_config.json (the image processor). An LLM's
 * folder gives LMC_ERR_UNSUPPORTED. The container is driven exactly as an
 * LLM's: lmc_context_generate with images in the user input. */
LMC_API lmc_status lmc_vlm_load(const char *spec, const lmc_load_options *options,
                                lmc_container **out);
/* Waits for a running perform to end, then frees everything. */
LMC_API void lmc_container_free(lmc_container *container);

/* Runs fn(context, user_data) holding the container's lock: a whole request
 * (prepare, generate, read the cache) is one transaction even when many
 * threads share the container; calls from other threads wait their turn.
 * Returns what fn returns. fn must not call perform on the same container.
 *
 * Thread safety without the container: lmc_model, once loaded, and
 * lmc_tokenizer are read-only and may be used from any number of threads;
 * an lmc_session, lmc_detokenizer or lmc_context is used by one thread at a
 * time; the registry is thread-safe; lmc_set_num_threads and lmc_set_exact
 * are process-wide (see above). */
typedef lmc_status (*lmc_perform_fn)(lmc_context *context, void *user_data);
LMC_API lmc_status lmc_container_perform(lmc_container *container, lmc_perform_fn fn,
                                         void *user_data);

/* The context's parts, owned by the container. The tokenizer is NULL when
 * the folder has none; the session is the container's KV cache. */
LMC_API lmc_model *lmc_context_model(lmc_context *context);
LMC_API const lmc_tokenizer *lmc_context_tokenizer(lmc_context *context);
LMC_API lmc_session *lmc_context_session(lmc_context *context);
LMC_API const lmc_model_preset *lmc_context_preset(lmc_context *context); /* NULL when none */
LMC_API const char *lmc_context_dir(lmc_context *context);

/* ---- user input -> model input -> generate --------------------------------- */

typedef struct lmc_message {
    const char *role;          /* "system", "user", "assistant", "tool" */
    const char *content;       /* UTF-8 text */
    const char *const *images; /* image file paths (VLMs), n_images of them */
    int32_t n_images;
} lmc_message;

/* What a user gives: exactly one of prompt, messages or tokens. A prompt is
 * one user message (after system, if given) and goes through the chat
 * template when the model has one and no_template is 0; otherwise it is
 * encoded as text with the tokenizer's special tokens (BOS) added. Chat
 * messages are rendered by the template (add_generation_prompt), then
 * encoded without adding special tokens, as transformers'
 * apply_chat_template(tokenize=True) does. */
typedef struct lmc_user_input {
    const char *prompt;
    const char *system;        /* with prompt: a system message first; may be NULL */
    const char *const *images; /* with prompt: image file paths (VLMs), n_images of them */
    int32_t n_images;
    const lmc_message *messages;
    int32_t n_messages;
    const int32_t *tokens;
    int32_t n_tokens;
    const char *tools_json;      /* a JSON array of tool schemas, or NULL */
    const char *extra_vars_json; /* a JSON object of more template variables, or NULL */
    int no_template;
    int continue_final_message; /* no generation prompt: the last message is continued */
} lmc_user_input;

typedef struct lmc_model_input {
    int32_t *tokens; /* freed by lmc_model_input_clear */
    int32_t n_tokens;
    char *rendered; /* the template's text, NULL when no template was used */
    /* Images (VLMs), as the model's image processor made them: float32
     * pixel values [n_images, 3, image_height, image_width], channels first,
     * rescaled and normalized; NULL and 0 for text. The tokens hold
     * lmc_model_info.image_tokens image_token_id placeholders per image, in
     * order. Owned by the input (lmc_model_input_clear frees it); a caller
     * that builds an input itself may point it at its own data. */
    float *pixel_values;
    int32_t n_images, image_height, image_width;
} lmc_model_input;

/* The processor: user input -> model input (token ids, and pixel values for
 * images). For an LLM, the chat template and tokenizer as described at
 * lmc_user_input. For a VLM (PaliGemma), as transformers'
 * PaliGemmaProcessor: each image is decoded (PNG, JPEG and what stb_image
 * reads), converted to RGB, resized with PIL's bicubic filter (its
 * antialiasing when shrinking) to preprocessor_config.json's size,
 * rescaled and normalized; the tokens are image_tokens placeholders per
 * image, BOS, then the text (the prompt, or the last message's content)
 * and "\n" through the tokenizer without the chat template. Errors:
 * LMC_ERR_INVALID_ARG (none or several of prompt, messages, tokens; text
 * input without a tokenizer; images for an LLM; a VLM prompt without an
 * image; bad JSON), template errors as lmc_chat_template_render, and for
 * images LMC_ERR_IO (unreadable file), LMC_ERR_FORMAT (not an image,
 * truncated, zero-sized), LMC_ERR_LIMIT (over 100 million pixels), each
 * naming the file. */
LMC_API lmc_status lmc_context_prepare(lmc_context *context, const lmc_user_input *input,
                                       lmc_model_input *out);
LMC_API void lmc_model_input_clear(lmc_model_input *input);

/* lmc_generate over a model input: its tokens, and for a VLM its images.
 * With images the prompt cache is not reused (the session is emptied
 * first: an image's positions are not told apart by their tokens) and the
 * prompt runs as one batch, PaliGemma's bidirectional prefix (prefill_step
 * does not apply); max_kv_size must then be 0 (LMC_ERR_UNSUPPORTED).
 * Otherwise exactly lmc_generate. Callback, result and stats as there. */
LMC_API lmc_status lmc_generate_input(lmc_session *session, const lmc_tokenizer *tok,
                                      const lmc_model_input *input,
                                      const lmc_generate_params *params, lmc_token_fn cb,
                                      void *user_data, lmc_generate_result *result);
/* lmc_session_forward over a model input (one batch; with images their
 * features fill the image positions and the batch is a bidirectional
 * prefix). LMC_ERR_INVALID_ARG when images are given to an LLM or the
 * image tokens do not match the images. */
LMC_API lmc_status lmc_session_forward_input(lmc_session *session, const lmc_model_input *input,
                                             int all_positions, float *logits_out);

/* lmc_context_prepare + lmc_generate_input on the context's session (its prompt cache: a
 * conversation re-sent with one more turn computes only the new tokens) and
 * tokenizer, with the preset's extra EOS tokens added to params'. */
LMC_API lmc_status lmc_context_generate(lmc_context *context, const lmc_user_input *input,
                                        const lmc_generate_params *params, lmc_token_fn cb,
                                        void *user_data, lmc_generate_result *result);

/* ---- convert (mlx_lm.convert) ------------------------------------------ */

typedef enum lmc_convert_dtype {
    LMC_CONVERT_DTYPE_AUTO = 0, /* config.json's torch_dtype (or dtype) when it is one of
                                   float16/bfloat16/float32, else each tensor's own dtype */
    LMC_CONVERT_DTYPE_F16,
    LMC_CONVERT_DTYPE_BF16,
    LMC_CONVERT_DTYPE_F32,
} lmc_convert_dtype;

typedef struct lmc_convert_params {
    const char *input_dir;  /* a model folder (Hugging Face or MLX layout) */
    const char *output_dir; /* must not exist unless force */
    int quantize;           /* MLX affine quantization (mlx_lm.convert -q) */
    int q_bits;             /* 2, 3, 4, 5, 6 or 8; 0 = 4 */
    int q_group_size;       /* 32, 64 or 128; 0 = 64 */
    /* NULL, or a mixed-bit recipe of mlx-lm: "mixed_2_6", "mixed_3_4",
     * "mixed_3_6", "mixed_4_6" (needs quantize). */
    const char *quant_predicate;
    lmc_convert_dtype dtype;  /* of the floating tensors that stay dense, scales and biases */
    int dequantize;           /* an MLX-quantized folder back to dense */
    uint64_t max_shard_bytes; /* 0 = 5 GiB, as mlx-lm */
    int force;                /* replace an existing output model folder */
} lmc_convert_params;

LMC_API void lmc_convert_params_default(lmc_convert_params *p);

/* Progress: bytes of output tensors written so far of total; tensor names
 * the one just done (NULL for the final call). Return non-zero to stop. */
typedef int (*lmc_convert_progress_fn)(uint64_t done_bytes, uint64_t total_bytes,
                                       const char *tensor, void *user_data);

/* Writes output_dir the way mlx_lm.convert does: mlx-lm's key names
 * (stacked MoE experts, no rotary inv_freq, no lm_head when tied), floating
 * tensors in the chosen dtype, with quantize every Linear / Embedding /
 * stacked-expert weight whose input dimension divides the group size
 * quantized bit-identically to mlx's CPU quantizer, config.json with
 * "quantization" and "quantization_config", safetensors shards with
 * {"format": "mlx"} metadata and model.safetensors.index.json, and the
 * tokenizer and generation files copied. The folder is built as
 * output_dir.tmp-XXXXXX beside it and renamed at the end: on any failure
 * (or a stop from progress, LMC_ERR_STOPPED) nothing is left behind.
 * Errors: LMC_ERR_INVALID_ARG (bad bits, group, predicate, dtype, both
 * quantize and dequantize, output exists), LMC_ERR_NOT_FOUND / LMC_ERR_IO /
 * LMC_ERR_FORMAT for the input, LMC_ERR_UNSUPPORTED (quantizing an
 * already-quantized model), LMC_ERR_IO for writes. progress may be NULL. */
LMC_API lmc_status lmc_convert(const lmc_convert_params *params, lmc_convert_progress_fn progress,
                               void *user_data);

#ifdef __cplusplus
}
#endif
#endif
