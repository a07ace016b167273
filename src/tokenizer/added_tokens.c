/* Added tokens: tokenizers/src/tokenizer/added_vocabulary.rs. Tokens with
 * normalized=false are found in the raw text, the others in the normalized
 * pieces, each with leftmost-longest matching, then filtered by
 * single_word and widened by lstrip/rstrip as AddedVocabulary::find_matches. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- trie -------------------------------------------------------------- */

static int32_t trie_new_node(tok_trie *t, uint8_t byte) {
    if (t->n == t->cap) {
        size_t c = t->cap ? t->cap * 2 : 256;
        void *v = realloc(t->nodes, c * sizeof *t->nodes);
        if (!v) return -1;
        t->nodes = v;
        t->cap = c;
    }
    t->nodes[t->n] = (struct tok_trie_node){-1, -1, -1, byte};
    return (int32_t)t->n++;
}

static int32_t trie_child(const tok_trie *t, int32_t node, uint8_t b) {
    if (node < 0) return t->root_child[b];
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling)
        if (t->nodes[c].byte == b) return c;
    return -1;
}

static lmc_status trie_insert(tok_trie *t, const char *s, size_t n, int32_t token) {
    int32_t node = -1;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = trie_child(t, node, b);
        if (c < 0) {
            if ((c = trie_new_node(t, b)) < 0)
                return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (added tokens)");
            if (node < 0) {
                t->root_child[b] = c;
            } else {
                t->nodes[c].next_sibling = t->nodes[node].first_child;
                t->nodes[node].first_child = c;
            }
        }
        node = c;
    }
    if (node >= 0) t->nodes[node].token = token;
    return LMC_OK;
}

/* Longest token starting at s[0]; returns its length (0: none). */
static size_t trie_longest(const tok_trie *t, const char *s, size_t n, int32_t *token) {
    int32_t node = -1;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        node = trie_child(t, node, (uint8_t)s[i]);
        if (node < 0) break;
        if (t->nodes[node].token >= 0) {
            best = i + 1;
            *token = t->nodes[node].token;
        }
    }
    return best;
}

/* ---- loading ----------------------------------------------------------- */

void tok_added_free(tok_added *a) {
    for (size_t i = 0; i < a->n; i++) {
        free(a->tokens[i].content);
        free(a->tokens[i].normalized);
    }
    free(a->tokens);
    tok_strtab_free(&a->by_content);
    free(a->raw_trie.nodes);
    free(a->norm_trie.nodes);
    memset(a, 0, sizeof *a);
}

lmc_status tok_added_load(tok_added *a, const json_t *arr, const tok_bpe *bpe,
                          const tok_normalizer *norm) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < 256; i++) a->raw_trie.root_child[i] = a->norm_trie.root_child[i] = -1;
    if (!arr || json_is_null(arr)) return LMC_OK;
    if (!json_is_array(arr)) return lmc_error(LMC_ERR_FORMAT, "added_tokens must be an array");
    size_t n = json_array_size(arr);
    if (n && !(a->tokens = calloc(n, sizeof *a->tokens)))
        return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    /* AddedVocabulary::add_tokens: a token already in the vocabulary keeps
     * its id, others get ids from the model's vocabulary size upwards (the
     * "id" field of the file is only checked by HF, with a warning). */
    int32_t next_id = (int32_t)bpe->vocab.n;
    tok_buf nb = {0};
    pcre2_match_data *md = pcre2_match_data_create(16, NULL);
    if (!md) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    lmc_status st = LMC_OK;
    for (size_t i = 0; i < n && st == LMC_OK; i++) {
        const json_t *t = json_array_get(arr, i);
        const json_t *c = json_object_get(t, "content");
        if (!json_is_object(t) || !json_is_string(c)) {
            st = lmc_error(LMC_ERR_FORMAT, "added_tokens[%zu]: needs a string \"content\"", i);
            break;
        }
        bool bad = false;
        tok_added_token tk = {
            .special = lmc_json_bool(t, "special", false, &bad),
            .lstrip = lmc_json_bool(t, "lstrip", false, &bad),
            .rstrip = lmc_json_bool(t, "rstrip", false, &bad),
            .single_word = lmc_json_bool(t, "single_word", false, &bad),
            .is_normalized = lmc_json_bool(t, "normalized", true, &bad),
        };
        if (bad) {
            st = lmc_error(LMC_ERR_FORMAT, "added_tokens[%zu]: flags must be booleans", i);
            break;
        }
        const char *content = json_string_value(c);
        size_t len = json_string_length(c);
        if (!len) continue; /* HF ignores empty tokens */
        int32_t at = tok_strtab_get(&a->by_content, content, len);
        int32_t id;
        if (at >= 0) {
            id = a->tokens[at].id;
        } else {
            id = tok_strtab_get(&bpe->vocab, content, len);
            if (id < 0) {
                if (next_id == INT32_MAX) {
                    st = lmc_error(LMC_ERR_LIMIT, "added_tokens: too many tokens");
                    break;
                }
                id = next_id++;
            }
            at = (int32_t)a->n++;
            if ((st = tok_strtab_put(&a->by_content, content, len, at)) != LMC_OK) break;
        }
        tok_added_token *dst = &a->tokens[at];
        free(dst->content);
        free(dst->normalized);
        tk.id = id;
        tk.len = len;
        tk.content = malloc(len + 1);
        if (!tk.content) {
            *dst = (tok_added_token){0};
            st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
            break;
        }
        memcpy(tk.content, content, len + 1);
        if (tk.is_normalized) {
            /* The trie holds the normalized form (normalized_cache). */
            if ((st = tok_normalize(norm, content, len, &nb, md)) != LMC_OK) {
                free(tk.content);
                *dst = (tok_added_token){0};
                break;
            }
            tk.normalized = malloc(nb.len + 1);
            if (!tk.normalized) {
                free(tk.content);
                *dst = (tok_added_token){0};
                st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
                break;
            }
            memcpy(tk.normalized, nb.data, nb.len + 1);
            tk.normalized_len = nb.len;
        }
        *dst = tk;
    }
    tok_buf_free(&nb);
    pcre2_match_data_free(md);
    for (size_t i = 0; st == LMC_OK && i < a->n; i++) {
        const tok_added_token *t = &a->tokens[i];
        if (t->is_normalized) {
            if (t->normalized_len)
                st = trie_insert(&a->norm_trie, t->normalized, t->normalized_len, (int32_t)i);
            a->has_norm = true;
        } else {
            st = trie_insert(&a->raw_trie, t->content, t->len, (int32_t)i);
            a->has_raw = true;
        }
    }
    return st;
}

/* ---- matching ---------------------------------------------------------- */

static int32_t last_char(const char *s, size_t n) {
    if (!n) return -1;
    size_t k = n - 1;
    while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
    int32_t cp;
    lmc_utf8_decode(s + k, n - k, &cp);
    return cp;
}

static int32_t first_char(const char *s, size_t n) {
    if (!n) return -1;
    int32_t cp;
    lmc_utf8_decode(s, n, &cp);
    return cp;
}

lmc_status tok_added_split(const tok_added *a, bool normalized_trie, const char *s, size_t n,
                           bool at_start, bool special_as_text, tok_list *out) {
    const tok_trie *t = normalized_trie ? &a->norm_trie : &a->raw_trie;
    bool any = normalized_trie ? a->has_norm : a->has_raw;
    if (!n) return LMC_OK;
    if (!any || !t->n) return tok_list_push(out, s, n, -1, at_start);
    size_t start_offset = 0, i = 0;
    lmc_status st;
    while (i < n) {
        int32_t ti = -1;
        size_t len = t->root_child[(uint8_t)s[i]] >= 0 ? trie_longest(t, s + i, n - i, &ti) : 0;
        if (!len) {
            i++;
            continue;
        }
        size_t start = i, stop = i + len;
        i = stop;
        const tok_added_token *tk = &a->tokens[ti];
        if (special_as_text && tk->special) continue;
        if (tk->single_word) {
            int32_t before = last_char(s, start), after = first_char(s + stop, n - stop);
            bool start_space = start == 0 || !tok_is_word_char(before);
            bool stop_space = stop == n || !tok_is_word_char(after);
            if (!start_space || !stop_space) continue;
        }
        if (tk->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t k = ns - 1;
                while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
                int32_t cp;
                lmc_utf8_decode(s + k, ns - k, &cp);
                if (!tok_is_whitespace(cp)) break;
                ns = k;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (tk->rstrip) {
            while (stop < n) {
                int32_t cp;
                size_t cl = lmc_utf8_decode(s + stop, n - stop, &cp);
                if (!tok_is_whitespace(cp)) break;
                stop += cl;
            }
        }
        if (start < start_offset) start = start_offset; /* overlap after an rstrip */
        if (stop <= start) continue;
        if (start_offset < start &&
            (st = tok_list_push(out, s + start_offset, start - start_offset, -1,
                                at_start && start_offset == 0)) != LMC_OK)
            return st;
        if ((st = tok_list_push(out, "", 0, tk->id, at_start && start == 0)) != LMC_OK) return st;
        start_offset = stop;
        if (i < stop) i = stop;
    }
    if (start_offset < n)
        return tok_list_push(out, s + start_offset, n - start_offset, -1,
                             at_start && start_offset == 0);
    return LMC_OK;
}
