/* The tokenizer: loading tokenizer.json and the encode/decode pipelines of
 * TokenizerImpl (tokenizers/src/tokenizer/mod.rs, serialization.rs). */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

void lmc_tokenizer_free(lmc_tokenizer *tok) {
    if (!tok) return;
    tok_bpe_free(&tok->bpe);
    tok_added_free(&tok->added);
    tok_normalizer_free(tok->normalizer);
    tok_pretok_free(tok->pretok);
    tok_decoder_free(tok->decoder);
    tok_postproc_free(&tok->post);
    free(tok->id_str);
    free(tok->id_len);
    free(tok->id_special);
    free(tok);
}

static lmc_status check_model_type(const json_t *model, const tok_model_json *raw) {
    if (!json_is_object(model))
        return lmc_error(LMC_ERR_FORMAT, "tokenizer.json: missing \"model\" object");
    const char *type = lmc_json_string(model, "type", NULL, NULL);
    if (!type) {
        /* Old files omit the tag; serde then picks the model by its fields. */
        if (raw->merges) return LMC_OK;
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "tokenizer model without \"type\" and merges is not supported (only BPE)");
    }
    if (!strcmp(type, "BPE")) return LMC_OK;
    return lmc_error(LMC_ERR_UNSUPPORTED, "tokenizer model type \"%s\" is not supported (only BPE)",
                     type);
}

/* id -> token string, added tokens over the model's (TokenizerImpl::id_to_token). */
static lmc_status build_id_table(lmc_tokenizer *tok) {
    int32_t max_id = tok->bpe.max_id;
    for (size_t i = 0; i < tok->added.n; i++)
        if (tok->added.tokens[i].content && tok->added.tokens[i].id > max_id)
            max_id = tok->added.tokens[i].id;
    /* The table is dense (13 bytes an id): ids far past the number of
     * tokens would make a small file cost gigabytes (found by fuzzing). */
    uint64_t defined = (uint64_t)tok->bpe.vocab.n + tok->added.n, allowed = 4 * defined + 65536;
    if (max_id >= 0 && (uint64_t)max_id >= allowed)
        return lmc_error(LMC_ERR_FORMAT,
                         "tokenizer: token id %d is far past the %llu tokens defined (ids below "
                         "%llu are accepted)",
                         max_id, (unsigned long long)defined, (unsigned long long)allowed);
    tok->n_ids = max_id + 1;
    size_t n = (size_t)tok->n_ids ? (size_t)tok->n_ids : 1;
    tok->id_str = calloc(n, sizeof *tok->id_str);
    tok->id_len = calloc(n, sizeof *tok->id_len);
    tok->id_special = calloc(n, 1);
    if (!tok->id_str || !tok->id_len || !tok->id_special)
        return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    const tok_strtab *v = &tok->bpe.vocab;
    for (size_t i = 0; i < v->n; i++) {
        int32_t id = v->ents[i].id;
        if (tok->id_str[id]) continue;
        tok->id_str[id] = v->pool.data + v->ents[i].off;
        tok->id_len[id] = v->ents[i].len;
    }
    for (size_t i = 0; i < tok->added.n; i++) {
        const tok_added_token *t = &tok->added.tokens[i];
        if (!t->content) continue;
        tok->id_str[t->id] = t->content;
        tok->id_len[t->id] = (uint32_t)t->len;
        tok->id_special[t->id] = t->special;
    }
    return LMC_OK;
}

lmc_status tok_load_json_text(const char *text, size_t len, const char *what, lmc_tokenizer **out) {
    *out = NULL;
    tok_model_json raw;
    char *rest = NULL;
    size_t rest_len = 0;
    json_t *root = NULL;
    lmc_tokenizer *tok = NULL;
    double t0 = lmc_time_now();
    lmc_status st = tok_json_cut_model(text, len, &raw, &rest, &rest_len);
    if (st != LMC_OK) goto fail;
    double t1 = lmc_time_now();
    if ((st = lmc_json_parse(rest, rest_len, what, &root)) != LMC_OK) goto fail;
    double t2 = lmc_time_now();
    if (!json_is_object(root)) {
        st = lmc_error(LMC_ERR_FORMAT, "tokenizer.json must hold an object");
        goto fail;
    }
    const json_t *model = json_object_get(root, "model");
    if ((st = check_model_type(model, &raw)) != LMC_OK) goto fail;
    if (!(tok = calloc(1, sizeof *tok))) {
        st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
        goto fail;
    }
    if ((st = tok_normalizer_load(json_object_get(root, "normalizer"), &tok->normalizer)) !=
            LMC_OK ||
        (st = tok_pretok_load(json_object_get(root, "pre_tokenizer"), &tok->pretok)) != LMC_OK ||
        (st = tok_bpe_load(&tok->bpe, model, &raw)) != LMC_OK ||
        (st = tok_added_load(&tok->added, json_object_get(root, "added_tokens"), &tok->bpe,
                             tok->normalizer)) != LMC_OK ||
        (st = tok_postproc_load(&tok->post, json_object_get(root, "post_processor"), tok)) !=
            LMC_OK ||
        (st = tok_decoder_load(json_object_get(root, "decoder"), &tok->decoder)) != LMC_OK ||
        (st = build_id_table(tok)) != LMC_OK)
        goto fail;
    lmc_log(LMC_LOG_DEBUG, "tokenizer: %s: scan %.1f ms, json %.1f ms, build %.1f ms", what,
            (t1 - t0) * 1e3, (t2 - t1) * 1e3, (lmc_time_now() - t2) * 1e3);
    json_decref(root);
    free(rest);
    *out = tok;
    return LMC_OK;
fail:
    lmc_tokenizer_free(tok);
    json_decref(root);
    free(rest);
    return lmc_error_prefix(st, "%s", what);
}

lmc_status lmc_tokenizer_load(const char *dir, lmc_tokenizer **out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_tokenizer_load: out is NULL");
    *out = NULL;
    if (!dir) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_tokenizer_load: dir is NULL");
    char *path = lmc_path_join(dir, "tokenizer.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    if (!lmc_file_exists(path)) {
        lmc_status st = lmc_error(LMC_ERR_NOT_FOUND, "%s: no tokenizer.json in this folder", path);
        free(path);
        return st;
    }
    char *text = NULL;
    size_t len = 0;
    lmc_status st = lmc_read_file(path, &text, &len);
    if (st == LMC_OK) st = tok_load_json_text(text, len, path, out);
    free(text);
    free(path);
    return st;
}

/* ---- encoding ---------------------------------------------------------- */

typedef struct encode_ctx {
    tok_list a, b, c;
    tok_buf norm;
    pcre2_match_data *md;
    tok_bpe_scratch bpe;
} encode_ctx;

static void encode_ctx_free(encode_ctx *x) {
    tok_list_free(&x->a);
    tok_list_free(&x->b);
    tok_list_free(&x->c);
    tok_buf_free(&x->norm);
    if (x->md) pcre2_match_data_free(x->md);
    tok_bpe_scratch_free(&x->bpe);
}

static lmc_status encode_pieces(const lmc_tokenizer *tok, const char *text, size_t len,
                                unsigned flags, encode_ctx *x, int32_t **ids, size_t *n_ids,
                                size_t *cap) {
    bool as_text = (flags & LMC_ENCODE_SPECIAL_AS_TEXT) != 0;
    lmc_status st;
    /* AddedVocabulary::extract_and_normalize: raw tokens first, then each
     * remaining piece is normalized and searched for normalized tokens. */
    if ((st = tok_added_split(&tok->added, false, text, len, true, as_text, &x->a)) != LMC_OK)
        return st;
    for (size_t i = 0; i < x->a.n; i++) {
        const tok_span *sp = &x->a.v[i];
        if (sp->id >= 0) {
            st = tok_list_push(&x->b, "", 0, sp->id, sp->at_start);
        } else if (!tok->normalizer && !tok->added.has_norm) {
            st = tok_list_push(&x->b, tok_list_str(&x->a, i), sp->len, -1, sp->at_start);
        } else {
            st = tok_normalize(tok->normalizer, tok_list_str(&x->a, i), sp->len, &x->norm, x->md);
            if (st == LMC_OK)
                st = tok_added_split(&tok->added, true, x->norm.data, x->norm.len, sp->at_start,
                                     as_text, &x->b);
        }
        if (st != LMC_OK) return st;
    }
    /* Each list holds a copy of the text: give back the ones done with
     * before the merges of a long input need their memory. */
    tok_list_free(&x->a);
    tok_buf_free(&x->norm);
    if ((st = tok_pretokenize(tok->pretok, &x->b, &x->c, x->md)) != LMC_OK) return st;
    tok_list_free(&x->c);
    for (size_t i = 0; i < x->b.n; i++) {
        const tok_span *sp = &x->b.v[i];
        if (sp->id >= 0) {
            if (*n_ids == *cap) {
                size_t c = *cap ? *cap * 2 : 64;
                int32_t *v = realloc(*ids, c * sizeof *v);
                if (!v) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
                *ids = v;
                *cap = c;
            }
            (*ids)[(*n_ids)++] = sp->id;
        } else if ((st = tok_bpe_encode_word(&tok->bpe, tok_list_str(&x->b, i), sp->len, &x->bpe,
                                             ids, n_ids, cap)) != LMC_OK) {
            return st;
        }
    }
    return LMC_OK;
}

lmc_status lmc_tokenizer_encode(const lmc_tokenizer *tok, const char *text, size_t len,
                                unsigned flags, int32_t **ids, size_t *n_ids) {
    if (!ids || !n_ids) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_tokenizer_encode: NULL output");
    *ids = NULL;
    *n_ids = 0;
    if (!tok || (!text && len))
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_tokenizer_encode: NULL argument");
    if (!text) text = "";
    if (len > LMC_TOKENIZER_MAX_INPUT)
        return lmc_error(LMC_ERR_LIMIT,
                         "tokenizer: an input of %zu bytes is over the limit of %zu bytes a call",
                         len, (size_t)LMC_TOKENIZER_MAX_INPUT);
    size_t valid = lmc_utf8_valid_prefix(text, len);
    if (valid != len)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "tokenizer: input is not valid UTF-8 (bad byte 0x%02X at offset %zu)",
                         (unsigned)(uint8_t)text[valid], valid);
    encode_ctx x = {0};
    x.md = pcre2_match_data_create(32, NULL);
    int32_t *out = NULL;
    size_t n = 0, cap = 0;
    lmc_status st = x.md ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    if (st == LMC_OK) st = encode_pieces(tok, text, len, flags, &x, &out, &n, &cap);
    if (st == LMC_OK && (flags & LMC_ENCODE_ADD_SPECIAL))
        st = tok_postproc_apply(&tok->post, &out, &n);
    encode_ctx_free(&x);
    if (st != LMC_OK) {
        free(out);
        return st;
    }
    if (!out && !(out = malloc(sizeof *out)))
        return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    *ids = out;
    *n_ids = n;
    return LMC_OK;
}

/* ---- decoding ---------------------------------------------------------- */

lmc_status tok_decode_with(const lmc_tokenizer *tok, tok_decode_ctx *ctx, const int32_t *ids,
                           size_t n_ids, int skip_special, tok_buf *out) {
    if (!ctx->md) ctx->md = pcre2_match_data_create(32, NULL);
    lmc_status st = ctx->md ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    tok_list *tokens = &ctx->tokens;
    tok_list_clear(tokens);
    tok_list_clear(&ctx->scratch);
    /* TokenizerImpl::decode drops ids without a token and, with
     * skip_special_tokens, the special added tokens. */
    for (size_t i = 0; st == LMC_OK && i < n_ids; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->n_ids || !tok->id_str[id]) continue;
        if (skip_special && tok->id_special[id]) continue;
        st = tok_list_push(tokens, tok->id_str[id], tok->id_len[id], -1, false);
    }
    if (st == LMC_OK)
        st = tok_decode_chain(tok->decoder, tokens, &ctx->scratch, &ctx->tmp, ctx->md);
    tok_buf_clear(out);
    if (st == LMC_OK) st = tok_buf_append(out, "", 0);
    for (size_t i = 0; st == LMC_OK && i < tokens->n; i++)
        st = tok_buf_append(out, tok_list_str(tokens, i), tokens->v[i].len);
    return st;
}

void tok_decode_ctx_free(tok_decode_ctx *ctx) {
    tok_list_free(&ctx->tokens);
    tok_list_free(&ctx->scratch);
    tok_buf_free(&ctx->tmp);
    if (ctx->md) pcre2_match_data_free(ctx->md);
    ctx->md = NULL;
}

lmc_status tok_decode_to_buf(const lmc_tokenizer *tok, const int32_t *ids, size_t n_ids,
                             int skip_special, tok_buf *out) {
    tok_decode_ctx ctx = {0};
    lmc_status st = tok_decode_with(tok, &ctx, ids, n_ids, skip_special, out);
    tok_decode_ctx_free(&ctx);
    return st;
}

lmc_status lmc_tokenizer_decode(const lmc_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                int skip_special, char **text, size_t *len) {
    if (!text) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_tokenizer_decode: NULL output");
    *text = NULL;
    if (len) *len = 0;
    if (!tok || (!ids && n_ids))
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_tokenizer_decode: NULL argument");
    tok_buf out = {0};
    lmc_status st = tok_decode_to_buf(tok, ids, n_ids, skip_special, &out);
    if (st != LMC_OK) {
        tok_buf_free(&out);
        return st;
    }
    *text = out.data;
    if (len) *len = out.len;
    return LMC_OK;
}

int32_t lmc_tokenizer_vocab_size(const lmc_tokenizer *tok) {
    return tok ? tok->n_ids : 0;
}

int32_t lmc_tokenizer_token_to_id(const lmc_tokenizer *tok, const char *token) {
    if (!tok || !token) return -1;
    size_t n = strlen(token);
    int32_t at = tok_strtab_get(&tok->added.by_content, token, n);
    if (at >= 0) return tok->added.tokens[at].id;
    return tok_strtab_get(&tok->bpe.vocab, token, n);
}
