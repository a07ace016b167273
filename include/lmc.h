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
} lmc_model_info;

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

/* Runs tokens[0..n) after what the session holds, in one batch, appending
 * them to the KV cache. logits_out (may be NULL) receives float32 logits:
 * with all_positions, n x vocab_size (row i after token i); otherwise only
 * the last position's vocab_size values. */
LMC_API lmc_status lmc_session_forward(lmc_session *session, const int32_t *tokens, int32_t n,
                                       int all_positions, float *logits_out);

/* ---- generation ---------------------------------------------------------- */

typedef struct lmc_generate_params {
    int32_t max_tokens;         /* tokens to generate (default 256) */
    float temperature;          /* 0 = greedy (default 0.8) */
    int32_t top_k;              /* 0 = off */
    float top_p;                /* 1 = off */
    float min_p;                /* 0 = off */
    float repetition_penalty;   /* 1 = off; as transformers' RepetitionPenaltyLogitsProcessor */
    int32_t repetition_context; /* how many recent tokens the penalty sees (default 64) */
    uint64_t seed;              /* sampling seed */
    int ignore_eos;             /* keep going after an end-of-sequence token */
} lmc_generate_params;

LMC_API void lmc_generate_params_default(lmc_generate_params *p);

/* Called with each generated token; return non-zero to stop. */
typedef int (*lmc_token_fn)(int32_t token, void *user_data);

typedef struct lmc_generate_stats {
    int32_t prompt_tokens;
    int32_t generated_tokens;
    double prompt_seconds;   /* prefill time */
    double generate_seconds; /* decode time, first token after prefill to the end */
    int stopped_by_eos;
    int stopped_by_callback;
} lmc_generate_stats;

/* Prefills prompt[0..n) in one batch after what the session holds, then
 * samples up to params->max_tokens tokens, calling cb for each. stats may
 * be NULL. A stop from the callback is not an error. */
LMC_API lmc_status lmc_generate(lmc_session *session, const int32_t *prompt, int32_t n,
                                const lmc_generate_params *params, lmc_token_fn cb, void *user_data,
                                lmc_generate_stats *stats);

/* ---- tokenizer --------------------------------------------------------- */

typedef struct lmc_tokenizer lmc_tokenizer;

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
