/* Streaming detokenizer, after DecodeStream / step_decode_stream of
 * tokenizers/src/tokenizer/mod.rs: keep a small window of ids, decode it
 * with and without the newest id, and emit the difference once it is stable
 * (longer than before, not ending in U+FFFD, i.e. no incomplete UTF-8, and
 * not ending in a <0xHH> byte token whose group may still turn invalid).
 * After each emission the window restarts at the ids that produced it, so
 * the work per id is O(window), and context-dependent rules (Strip removing
 * the first space, Metaspace dropping the first "▁") cancel out in the
 * difference. The concatenation of the pieces equals the full decode.
 *
 * Waiting is bounded: after DETOK_MAX_WAIT ids without an emission the
 * window's text goes out as it is (a completed UTF-8 character needs at
 * most 4 byte tokens; what else keeps a window open, a model emitting
 * invalid bytes or tokens that decode to nothing, would otherwise make each
 * push decode an ever longer window, O(n^2) over a reply). Only then may the
 * pieces differ from the full decode: where a later byte token turns a
 * longer run of byte tokens invalid. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define DETOK_MAX_WAIT 32

struct lmc_detokenizer {
    const lmc_tokenizer *tok;
    int skip_special;
    int32_t *ids;
    size_t n, cap;
    size_t ctx;     /* leading ids of the window whose text was emitted */
    tok_buf prefix; /* decode of ids[0..ctx) */
    tok_buf full;   /* decode of the whole window */
    tok_buf out;    /* text handed to the caller */
    tok_decode_ctx dec;
};

lmc_status lmc_detokenizer_create(const lmc_tokenizer *tok, int skip_special,
                                  lmc_detokenizer **out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_detokenizer_create: out is NULL");
    *out = NULL;
    if (!tok) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_detokenizer_create: tokenizer is NULL");
    lmc_detokenizer *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    d->tok = tok;
    d->skip_special = skip_special;
    *out = d;
    return LMC_OK;
}

void lmc_detokenizer_free(lmc_detokenizer *d) {
    if (!d) return;
    free(d->ids);
    tok_decode_ctx_free(&d->dec);
    tok_buf_free(&d->prefix);
    tok_buf_free(&d->full);
    tok_buf_free(&d->out);
    free(d);
}

static bool is_byte_token(const lmc_tokenizer *tok, int32_t id) {
    if (id < 0 || id >= tok->n_ids || !tok->id_str[id] || tok->id_len[id] != 6) return false;
    const char *s = tok->id_str[id];
    return !memcmp(s, "<0x", 3) && s[5] == '>';
}

/* Whether decode keeps this id (it has a token and is not a skipped special). */
static bool decodes(const lmc_detokenizer *d, int32_t id) {
    const lmc_tokenizer *tok = d->tok;
    if (id < 0 || id >= tok->n_ids || !tok->id_str[id]) return false;
    return !(d->skip_special && tok->id_special[id]);
}

/* Whether the last token the decoder sees (ids without a token and skipped
 * special tokens are dropped by decode) is a byte-fallback token. */
static bool last_is_byte_token(const lmc_detokenizer *d) {
    const lmc_tokenizer *tok = d->tok;
    for (size_t i = d->n; i-- > 0;)
        if (decodes(d, d->ids[i])) return is_byte_token(tok, d->ids[i]);
    return false;
}

static bool ends_with_replacement(const tok_buf *b) {
    return b->len >= 3 && !memcmp(b->data + b->len - 3, "\xEF\xBF\xBD", 3);
}

/* Emits full[prefix.len..] when the window's decode extends the prefix. */
static lmc_status emit_tail(lmc_detokenizer *d, const char **text, size_t *len) {
    tok_buf_clear(&d->out);
    lmc_status st = tok_buf_append(&d->out, "", 0);
    if (st != LMC_OK) return st;
    size_t p = d->prefix.len;
    if (d->full.len >= p && !memcmp(d->full.data, d->prefix.data ? d->prefix.data : "", p)) {
        st = tok_buf_append(&d->out, d->full.data + p, d->full.len - p);
    } else {
        /* The decode is not prefix-stable here (HF raises InvalidPrefix):
         * emit what differs after the common part. */
        size_t c = 0;
        while (c < p && c < d->full.len && d->full.data[c] == d->prefix.data[c]) c++;
        while (c > 0 && ((uint8_t)d->full.data[c] & 0xC0) == 0x80) c--;
        st = tok_buf_append(&d->out, d->full.data + c, d->full.len - c);
    }
    *text = d->out.data;
    *len = d->out.len;
    return st;
}

lmc_status lmc_detokenizer_push(lmc_detokenizer *d, int32_t id, const char **text, size_t *len) {
    if (!d || !text || !len)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_detokenizer_push: NULL argument");
    *text = "";
    *len = 0;
    if (d->n == d->cap) {
        size_t c = d->cap ? d->cap * 2 : 16;
        int32_t *v = realloc(d->ids, c * sizeof *v);
        if (!v) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
        d->ids = v;
        d->cap = c;
    }
    d->ids[d->n++] = id;
    lmc_status st = tok_decode_with(d->tok, &d->dec, d->ids, d->n, d->skip_special, &d->full);
    if (st != LMC_OK) return st;
    if ((d->full.len <= d->prefix.len || ends_with_replacement(&d->full) ||
         last_is_byte_token(d)) &&
        d->n - d->ctx < DETOK_MAX_WAIT)
        return LMC_OK;
    if ((st = emit_tail(d, text, len)) != LMC_OK) return st;
    /* Slide. HF keeps only the ids of this emission; we keep one more
     * decoded token before them, so that the window never starts with a
     * token whose text is still pending (a Strip decoder with stop > 0
     * withholds the last token's trailing space until the next one comes). */
    size_t keep = d->ctx;
    for (size_t i = d->ctx; i-- > 0;)
        if (decodes(d, d->ids[i])) {
            keep = i;
            break;
        }
    memmove(d->ids, d->ids + keep, (d->n - keep) * sizeof *d->ids);
    d->n -= keep;
    d->ctx = d->n;
    return tok_decode_with(d->tok, &d->dec, d->ids, d->n, d->skip_special, &d->prefix);
}

lmc_status lmc_detokenizer_flush(lmc_detokenizer *d, const char **text, size_t *len) {
    if (!d || !text || !len)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_detokenizer_flush: NULL argument");
    *text = "";
    *len = 0;
    lmc_status st = LMC_OK;
    if (d->n > d->ctx) {
        if ((st = tok_decode_with(d->tok, &d->dec, d->ids, d->n, d->skip_special, &d->full)) !=
            LMC_OK)
            return st;
        if (d->full.len > d->prefix.len ||
            memcmp(d->full.data, d->prefix.data ? d->prefix.data : "", d->prefix.len))
            st = emit_tail(d, text, len);
    }
    d->n = d->ctx = 0;
    tok_buf_clear(&d->prefix);
    return st;
}
