/* Internal types of the tokenizer module: a port of the parts of Hugging Face
 * `tokenizers` (tokenizers/src/) that language models ship in tokenizer.json.
 * The pipeline is the one of TokenizerImpl::encode_single_sequence:
 * added tokens -> normalizer -> pre-tokenizer -> model (BPE) -> post-processor,
 * and TokenizerImpl::decode: ids -> token strings -> decoder chain -> text.
 * Offsets are not tracked: lmc needs ids only. */
#ifndef LMC_TOK_INTERNAL_H
#define LMC_TOK_INTERNAL_H

#include "base/base.h"
#include "base/json.h"
#include "base/text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ---- growable buffers and lists of string pieces ---------------------- */

typedef struct tok_buf {
    char *data;
    size_t len, cap;
} tok_buf;

lmc_status tok_buf_reserve(tok_buf *b, size_t extra);
lmc_status tok_buf_append(tok_buf *b, const void *s, size_t n);
static inline void tok_buf_clear(tok_buf *b) {
    b->len = 0;
}
void tok_buf_free(tok_buf *b);

/* A piece of text (id < 0) or an already known token (id >= 0, e.g. an added
 * token). `at_start` marks a piece that begins at offset 0 of the original
 * input (HF's offsets_original().0 == 0, used by Metaspace prepend "first"). */
typedef struct tok_span {
    size_t off, len;
    int32_t id;
    uint8_t at_start;
} tok_span;

typedef struct tok_list {
    tok_buf text;
    tok_span *v;
    size_t n, cap;
} tok_list;

lmc_status tok_list_push(tok_list *l, const char *s, size_t n, int32_t id, bool at_start);
/* Appends bytes to the last piece (which must exist). */
lmc_status tok_list_extend(tok_list *l, const char *s, size_t n);
static inline void tok_list_clear(tok_list *l) {
    l->n = 0;
    l->text.len = 0;
}
static inline const char *tok_list_str(const tok_list *l, size_t i) {
    return l->text.data + l->v[i].off;
}
void tok_list_free(tok_list *l);
void tok_list_swap(tok_list *a, tok_list *b);

/* ---- string -> id table ------------------------------------------------ */

typedef struct tok_strtab {
    tok_buf pool; /* key bytes */
    struct tok_strent {
        uint32_t off, len;
        int32_t id;
        uint32_t hash;
    } * ents;
    size_t n, cap;
    /* Lookups of keys up to 16 bytes touch only the slot (half a cache
     * line): the key sits in it zero-padded, compared as two words. */
    struct tok_strslot {
        uint64_t w0, w1; /* first 16 key bytes, zero-padded */
        uint32_t hash, len;
        int32_t ent; /* entry index, -1 = empty */
        int32_t id;  /* copy of ents[ent].id */
    } * slots;
    size_t nslots; /* power of two */
} tok_strtab;

/* A key prepared for lookups: its hash and its first 16 bytes as words. */
typedef struct tok_key {
    uint64_t w0, w1;
    uint32_t hash, len;
    const char *s; /* the bytes (read only for keys over 16 bytes) */
} tok_key;

void tok_key_make(tok_key *k, const char *s, size_t n);
/* Sets k->hash from k->w0, k->w1 and k->len (len <= 16 only): the hash
 * tok_key_make gives the same bytes. */
void tok_key_rehash_short(tok_key *k);
/* Inserts or overwrites (HF builds HashMaps, where a later key wins). */
lmc_status tok_strtab_put(tok_strtab *t, const char *s, size_t n, int32_t id);
int32_t tok_strtab_get(const tok_strtab *t, const char *s, size_t n); /* -1 when absent */
/* The same in steps, so that batches of lookups can prefetch their slots. */
static inline void tok_strtab_prefetch(const tok_strtab *t, uint32_t hash) {
    if (t->nslots) __builtin_prefetch(&t->slots[hash & (t->nslots - 1)]);
}
int32_t tok_strtab_get_key(const tok_strtab *t, const tok_key *k);
/* Inserts a key whose bytes were already appended to t->pool at `off`
 * (k->s may point there); a repeated key only takes the new id. */
lmc_status tok_strtab_put_pooled(tok_strtab *t, const tok_key *k, uint32_t off, int32_t id);
lmc_status tok_strtab_reserve(tok_strtab *t, size_t n_keys, size_t n_bytes);
void tok_strtab_free(tok_strtab *t);

/* ---- unicode helpers (unicode.c) --------------------------------------- */

/* The UTF-8 codec is base/text.h's. */
/* Appends s with invalid sequences replaced as Rust's String::from_utf8_lossy
 * does (one U+FFFD per maximal invalid subpart). */
lmc_status tok_utf8_lossy_append(tok_buf *out, const char *s, size_t n);
/* Rust char::is_whitespace (Unicode White_Space). */
bool tok_is_whitespace(int32_t cp);
/* Regex \w of the Rust regex crate (alphabetic, marks, digits, connectors). */
bool tok_is_word_char(int32_t cp);
/* Rust char::is_numeric (Nd, Nl, No). */
bool tok_is_numeric(int32_t cp);
/* HF pre_tokenizers::bert::is_bert_punc: ASCII punctuation or Unicode P*. */
bool tok_is_punctuation(int32_t cp);

/* GPT-2's bytes_to_unicode table: byte -> UTF-8 of its char, and back. */
typedef struct tok_byte_char_t {
    char s[2];
    uint8_t n;
} tok_byte_char_t;
const tok_byte_char_t *tok_byte_chars(void);
int tok_char_byte(int32_t cp); /* -1 when cp is not a byte-level char */

/* ---- regex (regex.c) --------------------------------------------------- */

typedef struct tok_regex {
    pcre2_code *code;
} tok_regex;

/* Compiles a pattern (UTF + UCP, JIT when available). literal: match the
 * text as-is (HF's String patterns, which it regex-escapes). */
lmc_status tok_regex_compile(tok_regex *re, const char *pattern, size_t len, bool literal);
void tok_regex_free(tok_regex *re);
/* Finds the next non-empty match in s[0..n) at or after `from`.
 * Returns 1 (match in [*ms, *me)), 0 (none) or an lmc_status error as -status. */
int tok_regex_next(const tok_regex *re, pcre2_match_data *md, const char *s, size_t n, size_t from,
                   size_t *ms, size_t *me);
/* A String or Regex pattern object: {"String": s} or {"Regex": r}. */
lmc_status tok_regex_from_json(tok_regex *re, const json_t *pattern, const char *what);

/* ---- normalizers (normalizer.c) ---------------------------------------- */

typedef struct tok_normalizer tok_normalizer;
/* NULL json (or JSON null) gives *out = NULL: no normalization. */
lmc_status tok_normalizer_load(const json_t *j, tok_normalizer **out);
void tok_normalizer_free(tok_normalizer *n);
/* Normalizes s into out (cleared first). md: match data for Replace regexes. */
lmc_status tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out,
                         pcre2_match_data *md);

/* ---- pre-tokenizers (pretokenizer.c) ----------------------------------- */

typedef struct tok_pretok tok_pretok;
lmc_status tok_pretok_load(const json_t *j, tok_pretok **out);
void tok_pretok_free(tok_pretok *p);
/* Splits the text pieces of *pieces further (token pieces pass through);
 * *scratch is a spare list the result may be swapped with. */
lmc_status tok_pretokenize(const tok_pretok *p, tok_list *pieces, tok_list *scratch,
                           pcre2_match_data *md);

/* ---- BPE model (bpe.c) ------------------------------------------------- */

typedef struct tok_merge_map {
    struct tok_merge_slot {
        uint64_t key; /* (left << 32 | right); UINT64_MAX = empty */
        uint32_t rank;
        int32_t new_id;
    } * slots;
    size_t nslots;
    size_t n;
    uint32_t max_rank; /* the largest rank put */
} tok_merge_map;

static inline uint64_t tok_pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static inline size_t tok_pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

/* The rank and result of merging (a, b); false when the pair has no merge. */
static inline bool tok_merges_get(const tok_merge_map *m, int32_t a, int32_t b, uint32_t *rank,
                                  int32_t *id) {
    uint64_t k = tok_pair_key(a, b);
    size_t mask = m->nslots - 1, j = tok_pair_hash(k) & mask;
    for (;;) {
        const struct tok_merge_slot *x = &m->slots[j];
        if (x->key == k) {
            *rank = x->rank;
            *id = x->new_id;
            return true;
        }
        if (x->key == UINT64_MAX) return false;
        j = (j + 1) & mask;
    }
}

typedef struct tok_bpe {
    tok_strtab vocab;
    tok_merge_map merges;
    int32_t unk_id; /* -1 when no unk_token */
    bool byte_fallback, fuse_unk, ignore_merges;
    char *prefix, *suffix; /* continuing_subword_prefix, end_of_word_suffix; NULL = None */
    int32_t byte_ids[256]; /* ids of <0xHH>, -1 when absent */
    /* SentencePiece-style vocabularies: a word may be cut before each "▁"
     * that follows a character other than "▁" and the blockers, because no
     * token (hence no merge) spans such a boundary. */
    bool split_meta;
    int32_t meta_blockers[16];
    int n_meta_blockers;
    int32_t max_id;
} tok_bpe;

/* Raw vocab/merges ranges cut out of tokenizer.json by the fast scanner. */
typedef struct tok_model_json {
    const char *vocab, *merges; /* JSON text of model.vocab / model.merges, or NULL */
    size_t vocab_len, merges_len;
} tok_model_json;

lmc_status tok_bpe_load(tok_bpe *bpe, const json_t *model, const tok_model_json *raw);
void tok_bpe_free(tok_bpe *bpe);

/* Scratch of one encode call (not shared between threads). */
typedef struct tok_sym {
    int32_t id;
    uint16_t span, prev;
} tok_sym;

typedef struct tok_bpe_scratch {
    /* The symbols of the word being merged, 8 bytes each, in one array so
     * that a merge at a random position misses the cache once: a live
     * symbol at i spans the initial symbols [i, i + span) (its right
     * neighbour is at i + span) and prev is the span of its left neighbour. */
    tok_sym *sym;
    size_t sym_cap;
    /* Pending merges as rank << 32 | position, in an 8-ary min-heap. */
    uint64_t *heap;
    size_t heap_cap;
    /* Long words: one bucket per rank, each a min-heap of positions, and
     * two levels of bitmaps of the non-empty buckets. */
    struct tok_bucket {
        uint32_t *pos;
        uint32_t n, cap;
    } * buckets;
    uint64_t *bits1, *bits2;
    size_t n_buckets;
    tok_buf tmp;
    /* per-call word cache: word bytes -> ids */
    tok_strtab cache;
    int32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
} tok_bpe_scratch;

void tok_bpe_scratch_free(tok_bpe_scratch *s);
/* Words of at least this many symbols merge through the rank buckets
 * instead of the heap (both give HF's order; tests lower it). */
extern size_t tok_bpe_bucket_threshold;
/* merge_all over the ns symbols in s->sym (their ids set) for a word of at
 * least tok_bpe_bucket_threshold symbols (bpe_buckets.c). */
lmc_status tok_bpe_merge_buckets(const tok_bpe *bpe, tok_bpe_scratch *s, size_t ns);
/* Appends the ids of one pre-tokenized word to *ids. */
lmc_status tok_bpe_encode_word(const tok_bpe *bpe, const char *w, size_t n, tok_bpe_scratch *s,
                               int32_t **ids, size_t *n_ids, size_t *cap_ids);

/* Fast extraction of model.vocab / model.merges (json_scan.c). */
lmc_status tok_json_cut_model(const char *text, size_t len, tok_model_json *raw, char **rest,
                              size_t *rest_len);
/* Iterates a JSON object of "string": integer. fn returns LMC_OK to go on. */
typedef lmc_status (*tok_json_kv_fn)(void *ctx, const char *key, size_t key_len, int64_t value);
lmc_status tok_json_scan_vocab(const char *s, size_t n, tok_json_kv_fn fn, void *ctx);
/* Iterates a JSON array of merges, "a b" strings or ["a", "b"] pairs;
 * fn gets the two parts (for strings: split on the single space; a string
 * without exactly one space is reported with b == NULL). */
typedef lmc_status (*tok_json_merge_fn)(void *ctx, size_t index, const char *a, size_t a_len,
                                        const char *b, size_t b_len);
lmc_status tok_json_scan_merges(const char *s, size_t n, tok_json_merge_fn fn, void *ctx);

/* ---- added tokens (added_tokens.c) ------------------------------------- */

typedef struct tok_added_token {
    char *content;
    size_t len;
    char *normalized; /* content after the normalizer (normalized tokens) */
    size_t normalized_len;
    int32_t id;
    bool special, lstrip, rstrip, single_word, is_normalized;
} tok_added_token;

/* A byte trie over token contents for leftmost-longest matching, as the
 * DoubleArrayAhoCorasick with MatchKind::LeftmostLongest that HF uses. */
typedef struct tok_trie {
    struct tok_trie_node {
        int32_t first_child, next_sibling;
        int32_t token; /* index into added tokens, -1 */
        uint8_t byte;
    } * nodes;
    size_t n, cap;
    int32_t root_child[256];
} tok_trie;

typedef struct tok_added {
    tok_added_token *tokens;
    size_t n;
    tok_strtab by_content; /* content -> index into tokens */
    tok_trie raw_trie, norm_trie;
    bool has_raw, has_norm;
} tok_added;

lmc_status tok_added_load(tok_added *a, const json_t *arr, const tok_bpe *bpe,
                          const tok_normalizer *norm);
void tok_added_free(tok_added *a);
/* Splits text piece `s` on the added tokens of the raw (normalized=false) or
 * normalized trie, pushing text and token pieces to out (HF
 * AddedVocabulary::find_matches). */
lmc_status tok_added_split(const tok_added *a, bool normalized_trie, const char *s, size_t n,
                           bool at_start, bool special_as_text, tok_list *out);

/* ---- decoders (decoder.c) ---------------------------------------------- */

typedef struct tok_decoder tok_decoder;
lmc_status tok_decoder_load(const json_t *j, tok_decoder **out);
void tok_decoder_free(tok_decoder *d);
/* Runs the decoder chain over the token strings in *tokens (replaced by the
 * result); with d == NULL tokens are joined with " " as HF does. scratch and
 * tmp are working space (their capacity kept for the next call). */
lmc_status tok_decode_chain(const tok_decoder *d, tok_list *tokens, tok_list *scratch, tok_buf *tmp,
                            pcre2_match_data *md);

/* ---- post-processors (postprocessor.c) --------------------------------- */

/* A flattened single-sequence template: ids, with TOK_SEQ marking where the
 * encoded sequence goes. Sequence processors are applied in order. */
#define TOK_SEQ INT32_MIN
typedef struct tok_postproc {
    int32_t **templates;
    size_t *lens;
    size_t n;
} tok_postproc;

lmc_status tok_postproc_load(tok_postproc *p, const json_t *j, const lmc_tokenizer *tok);
void tok_postproc_free(tok_postproc *p);
lmc_status tok_postproc_apply(const tok_postproc *p, int32_t **ids, size_t *n_ids);

/* ---- the tokenizer ----------------------------------------------------- */

struct lmc_tokenizer {
    tok_bpe bpe;
    tok_added added;
    tok_normalizer *normalizer;
    tok_pretok *pretok;
    tok_decoder *decoder;
    tok_postproc post;
    /* id -> token string (added tokens win, as TokenizerImpl::id_to_token) */
    char **id_str;
    uint32_t *id_len;
    uint8_t *id_special;
    int32_t n_ids; /* max id + 1 */
};

/* Decodes ids into out (cleared first; NUL-terminated). */
lmc_status tok_decode_to_buf(const lmc_tokenizer *tok, const int32_t *ids, size_t n_ids,
                             int skip_special, tok_buf *out);
/* The same with the lists and match data of ctx, kept between calls (the
 * streaming detokenizer's: no allocation per token once they have grown);
 * ctx starts zeroed and is freed with tok_decode_ctx_free. */
typedef struct tok_decode_ctx {
    tok_list tokens, scratch;
    tok_buf tmp;
    pcre2_match_data *md;
} tok_decode_ctx;
lmc_status tok_decode_with(const lmc_tokenizer *tok, tok_decode_ctx *ctx, const int32_t *ids,
                           size_t n_ids, int skip_special, tok_buf *out);
void tok_decode_ctx_free(tok_decode_ctx *ctx);
/* Loads from the text of a tokenizer.json (used by the fuzzers). */
lmc_status tok_load_json_text(const char *text, size_t len, const char *what, lmc_tokenizer **out);

#endif
