/* Sessions: a KV cache over a model, the tokens it holds, going back to a
 * prefix (the prompt cache), and saving/loading it to a file. */
#include "models/model.h"
#include "nn/decoder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sliding-window layers of decoder models get rotating caches, bounded by
 * their window; full-attention layers keep every position, or with
 * max_kv > 0 every layer keeps the first LMC_KV_SINKS positions and the
 * most recent max_kv - LMC_KV_SINKS (mlx-lm's RotatingKVCache(max_kv,
 * keep=4)). Not with longrope: its switch to the long factors re-runs the
 * whole sequence in one batch, which needs every position kept. */
lmc_status lmc_session_set_max_kv(lmc_session *s, int32_t max_kv) {
    lmc_model *model = s->model;
    const lmc_decoder *d = model->arch->decoder ? model->arch->decoder(model) : NULL;
    bool sliding = false;
    for (int64_t l = 0; d && l < d->n_layers; l++) sliding |= d->layers[l].sliding_window > 0;
    if (max_kv > 0 && (!d || d->rope.long_inv_freq || sliding))
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "max_kv_size: %s models (sliding-window layers or longrope) keep their "
                         "own cache layout",
                         model->cfg.model_type);
    if (max_kv > 0 && max_kv <= LMC_KV_SINKS)
        return lmc_error(LMC_ERR_INVALID_ARG, "max_kv_size = %d must exceed %d", max_kv,
                         LMC_KV_SINKS);
    lmc_session_reset(s);
    lmc_status st = LMC_OK;
    for (int64_t l = 0; l < s->kv.n_layers && st == LMC_OK; l++) {
        int64_t w = d && !d->rope.long_inv_freq ? d->layers[l].sliding_window : 0;
        st = max_kv > 0 ? lmc_kv_cache_set_rotating(&s->kv, l, max_kv - LMC_KV_SINKS, LMC_KV_SINKS)
                        : lmc_kv_cache_set_window(&s->kv, l, w > 0 ? w : 0);
    }
    s->max_kv = st == LMC_OK ? max_kv : 0;
    return st;
}

lmc_status lmc_session_create(lmc_model *model, int32_t max_tokens, lmc_session **out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_create: out is NULL");
    *out = NULL;
    if (!model) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_create: model is NULL");
    if (max_tokens < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_create: max_tokens = %d is negative",
                         max_tokens);
    lmc_session *s = calloc(1, sizeof *s);
    if (!s) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    s->model = model;
    s->max_tokens = max_tokens > 0 ? max_tokens : model->cfg.max_position_embeddings;
    const lmc_model_config *c = &model->cfg;
    lmc_status st = lmc_kv_cache_init(&s->kv, c->num_hidden_layers, c->num_key_value_heads,
                                      c->head_dim, s->max_tokens);
    if (st == LMC_OK) st = lmc_session_set_max_kv(s, 0);
    if (st != LMC_OK) {
        lmc_kv_cache_free(&s->kv);
        free(s);
        return st;
    }
    *out = s;
    return LMC_OK;
}

void lmc_session_free(lmc_session *s) {
    if (!s) return;
    lmc_kv_cache_free(&s->kv);
    free(s);
}

void lmc_session_reset(lmc_session *s) {
    if (s) s->kv.length = 0;
}

int32_t lmc_session_position(const lmc_session *s) {
    return s ? (int32_t)s->kv.length : 0;
}

const int32_t *lmc_session_tokens(const lmc_session *s) {
    return s ? s->kv.tokens : NULL;
}

size_t lmc_session_memory_bytes(const lmc_session *s) {
    if (!s) return 0;
    return lmc_kv_cache_bytes(&s->kv) + (size_t)s->kv.tokens_cap * sizeof(int32_t);
}

/* Whether the cache can go back to n tokens (see lmc_session_truncate). */
static bool can_truncate(const lmc_session *s, int64_t n) {
    const lmc_kv_cache *c = &s->kv;
    if (n >= c->length) return true;
    for (int64_t l = 0; l < c->n_layers; l++) {
        const lmc_kv_layer *L = &c->layers[l];
        int64_t ring = L->capacity - L->keep;
        if (!L->window || c->length - L->keep <= ring) continue;
        /* position n attends back to n - window + 1 (and to the sinks); the
         * ring holds the positions from length - ring on */
        int64_t need = n - L->window + 1;
        if (need < L->keep) need = L->keep;
        if (need < c->length - ring) return false;
    }
    const lmc_decoder *d = s->model->arch->decoder ? s->model->arch->decoder(s->model) : NULL;
    if (d && d->rope.long_inv_freq && lmc_rope_uses_long(&d->rope, c->length) &&
        !lmc_rope_uses_long(&d->rope, n))
        return false; /* the cache was rotated with the long factors */
    return true;
}

lmc_status lmc_session_truncate(lmc_session *s, int32_t n) {
    if (!s) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_truncate: session is NULL");
    if (n < 0 || n > s->kv.length)
        return lmc_error(LMC_ERR_RANGE, "lmc_session_truncate: %d is outside 0..%lld", n,
                         (long long)s->kv.length);
    if (!can_truncate(s, n))
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "the KV cache cannot go back from %lld to %d tokens (a rotating "
                         "sliding-window layer has dropped keys, or the rope factors changed)",
                         (long long)s->kv.length, n);
    s->kv.length = n;
    return LMC_OK;
}

lmc_status lmc_session_forward(lmc_session *s, const int32_t *tokens, int32_t n, int all_positions,
                               float *logits_out) {
    if (!s || (!tokens && n > 0) || n < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward: bad arguments");
    if (n == 0) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward: no tokens");
    int64_t V = s->model->cfg.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return lmc_error(LMC_ERR_RANGE,
                             "token id %d at position %d is outside the vocabulary (0..%lld)",
                             tokens[i], i, (long long)V - 1);
    if (s->kv.length + n > s->max_tokens)
        return lmc_error(LMC_ERR_RANGE, "%lld tokens exceed the session's context of %lld",
                         (long long)(s->kv.length + n), (long long)s->max_tokens);
    /* A rotating cache takes at most max_batch tokens at once; longer inputs
     * run in consecutive batches, which is exact (causal attention over the
     * cache). If a later batch fails, the earlier ones stay in the session. */
    int32_t batch = s->kv.max_batch > 0 && s->kv.max_batch < n ? (int32_t)s->kv.max_batch : n;
    for (int32_t off = 0; off < n; off += batch) {
        int32_t m = n - off < batch ? n - off : batch;
        float *lg = NULL;
        if (logits_out && all_positions)
            lg = logits_out + (size_t)off * (size_t)V;
        else if (logits_out && off + m == n)
            lg = logits_out;
        int64_t start = s->kv.length;
        lmc_status st = lmc_kv_cache_remember(&s->kv, tokens + off, start, m);
        if (st == LMC_OK)
            st = s->model->arch->forward(s->model, &s->kv, tokens + off, m, all_positions != 0, lg);
        if (st != LMC_OK) return st;
    }
    return LMC_OK;
}

/* ---- prompt cache files ------------------------------------------------------
 * Little-endian, version 1:
 *   char magic[8] "LMCKVC\0\1"; u32 version; u32 reserved (0)
 *   u64 fingerprint (model_fingerprint)
 *   u32 n_layers, n_kv_heads, head_dim; u32 n_tokens
 *   i32 tokens[n_tokens]
 *   per layer: u32 first (the first position stored), then K and V of
 *   positions first..n_tokens-1 as f32 [n_kv_heads][n][head_dim] each
 *   u64 FNV-1a of everything before it */
#define KVC_VERSION 1u
#define KVC_F16 1u /* the header's type field: keys and values in f16 (0: f32) */
static const char KVC_MAGIC[8] = {'L', 'M', 'C', 'K', 'V', 'C', 0, 1};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

/* Identifies the model: architecture, shapes, every tensor's name, dtype,
 * shape and its first and last bytes (cheap; different checkpoints differ). */
static uint64_t model_fingerprint(const lmc_model *m) {
    uint64_t h = fnv(FNV0, m->cfg.model_type, strlen(m->cfg.model_type));
    int64_t dims[5] = {m->cfg.vocab_size, m->cfg.hidden_size, m->cfg.num_hidden_layers,
                       m->cfg.num_key_value_heads, m->cfg.head_dim};
    h = fnv(h, dims, sizeof dims);
    for (size_t i = 0; i < m->weights.n_tensors; i++) {
        const lmc_tensor *t = m->weights.index[i];
        h = fnv(h, t->name, strlen(t->name));
        h = fnv(h, &t->dtype, sizeof t->dtype);
        h = fnv(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
        size_t k = t->nbytes < 64 ? (size_t)t->nbytes : 64;
        h = fnv(h, t->data, k);
        h = fnv(h, (const uint8_t *)t->data + t->nbytes - k, k);
    }
    return h;
}

typedef struct wbuf {
    FILE *f;
    uint64_t h;
    bool bad;
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
    if (w->bad) return;
    w->h = fnv(w->h, p, n);
    if (fwrite(p, 1, n, w->f) != n) w->bad = true;
}
static void put_u32(wbuf *w, uint32_t v) {
    put(w, &v, 4);
}

/* The first position a layer still holds (rotating layers keep a ring). */
static int64_t first_held(const lmc_kv_cache *c, const lmc_kv_layer *L) {
    return L->window && c->length > L->capacity ? c->length - L->capacity : 0;
}

lmc_status lmc_session_save(const lmc_session *s, const char *path) {
    if (!s || !path) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_save: bad arguments");
    const lmc_kv_cache *c = &s->kv;
    for (int64_t l = 0; l < c->n_layers; l++)
        if (c->layers[l].keep)
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "saving a session made with max_kv_size is not supported yet");
    char *tmp = lmc_sprintf("%s.tmp-%ld", path, (long)getpid());
    if (!tmp) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    wbuf w = {.f = fopen(tmp, "wb"), .h = FNV0};
    if (!w.f) {
        lmc_status st = lmc_error(LMC_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    uint64_t fp = model_fingerprint(s->model);
    put(&w, KVC_MAGIC, 8);
    put_u32(&w, KVC_VERSION);
    put_u32(&w, c->dtype == LMC_DTYPE_F16 ? KVC_F16 : 0); /* 0: f32 */
    put(&w, &fp, 8);
    put_u32(&w, (uint32_t)c->n_layers);
    put_u32(&w, (uint32_t)c->n_kv_heads);
    put_u32(&w, (uint32_t)c->head_dim);
    put_u32(&w, (uint32_t)c->length);
    if (c->length) put(&w, c->tokens, (size_t)c->length * sizeof(int32_t));
    for (int64_t l = 0; l < c->n_layers; l++) {
        const lmc_kv_layer *L = &c->layers[l];
        int64_t first = first_held(c, L);
        put_u32(&w, (uint32_t)first);
        size_t row = (size_t)c->head_dim * lmc_dtype_size(c->dtype);
        for (int kv = 0; kv < 2; kv++) {
            const uint8_t *base = kv ? L->v : L->k;
            for (int64_t h = 0; h < c->n_kv_heads; h++)
                for (int64_t p = first; p < c->length; p++)
                    put(&w, base + (size_t)(h * L->capacity + p % L->capacity) * row, row);
        }
    }
    uint64_t sum = w.h;
    put(&w, &sum, 8);
    bool ok = !w.bad && fflush(w.f) == 0 && fsync(fileno(w.f)) == 0;
    int err = errno;
    ok = fclose(w.f) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    lmc_status st = LMC_OK;
    if (!ok) {
        st = lmc_error(LMC_ERR_IO, "%s: cannot write: %s", path, strerror(err ? err : EIO));
        unlink(tmp);
    }
    free(tmp);
    return st;
}

typedef struct rbuf {
    const uint8_t *p;
    size_t n, off;
} rbuf;

static bool get(rbuf *r, void *out, size_t n) {
    if (r->n - r->off < n) return false;
    memcpy(out, r->p + r->off, n);
    r->off += n;
    return true;
}

static lmc_status load_body(lmc_session *s, const char *path, rbuf *r) {
    lmc_kv_cache *c = &s->kv;
    char magic[8];
    uint32_t version, reserved, nl, nkv, hd, n;
    uint64_t fp;
    if (!get(r, magic, 8) || memcmp(magic, KVC_MAGIC, 8))
        return lmc_error(LMC_ERR_FORMAT, "%s: not an lmc prompt cache file", path);
    if (!get(r, &version, 4) || !get(r, &reserved, 4))
        return lmc_error(LMC_ERR_FORMAT, "%s: truncated header", path);
    if (version != KVC_VERSION)
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: prompt cache format version %u (this lmc reads version %u)", path,
                         version, KVC_VERSION);
    if (reserved != 0 && reserved != KVC_F16)
        return lmc_error(LMC_ERR_FORMAT, "%s: unknown key/value type %u", path, reserved);
    lmc_dtype file_dt = reserved == KVC_F16 ? LMC_DTYPE_F16 : LMC_DTYPE_F32;
    if (r->n < 8 + 8 || !get(r, &fp, 8) || !get(r, &nl, 4) || !get(r, &nkv, 4) || !get(r, &hd, 4) ||
        !get(r, &n, 4))
        return lmc_error(LMC_ERR_FORMAT, "%s: truncated header", path);
    if (fp != model_fingerprint(s->model) || nl != c->n_layers || nkv != c->n_kv_heads ||
        hd != c->head_dim)
        return lmc_error(LMC_ERR_FORMAT, "%s: the prompt cache is of another model (not %s)", path,
                         s->model->dir);
    uint64_t sum = fnv(FNV0, r->p, r->n - 8), stored;
    memcpy(&stored, r->p + r->n - 8, 8);
    if (sum != stored) return lmc_error(LMC_ERR_FORMAT, "%s: corrupt (checksum mismatch)", path);
    r->n -= 8;
    if (n > s->max_tokens)
        return lmc_error(LMC_ERR_RANGE, "%s: %u tokens exceed the session's context of %lld", path,
                         n, (long long)s->max_tokens);
    if ((uint64_t)n * 4 > r->n - r->off) return lmc_error(LMC_ERR_FORMAT, "%s: truncated", path);
    lmc_status st = lmc_kv_cache_remember(c, (const int32_t *)(const void *)(r->p + r->off), 0, n);
    if (st != LMC_OK) return st;
    r->off += (size_t)n * 4;
    int64_t V = s->model->cfg.vocab_size;
    for (uint32_t i = 0; i < n; i++)
        if (c->tokens[i] < 0 || c->tokens[i] >= V)
            return lmc_error(LMC_ERR_FORMAT, "%s: token %d outside the vocabulary", path,
                             c->tokens[i]);
    /* Fill the cache batch by batch as forwards would (reserve takes at most
     * max_batch new positions at a time), then copy each layer's keys and
     * values into their slots. */
    c->length = 0;
    int64_t step = c->max_batch > 0 ? c->max_batch : (n ? n : 1);
    for (int64_t at = 0; at < n; at += step) {
        int64_t m = n - at < step ? n - at : step;
        if ((st = lmc_kv_cache_reserve(c, at + m)) != LMC_OK) return st;
        c->length = at + m;
    }
    c->length = 0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        lmc_kv_layer *L = &c->layers[l];
        uint32_t first;
        if (!get(r, &first, 4) || first > n)
            return lmc_error(LMC_ERR_FORMAT, "%s: bad layer %lld record", path, (long long)l);
        int64_t held = (int64_t)n - first;
        if (held > L->capacity && n > 0)
            return lmc_error(LMC_ERR_FORMAT, "%s: layer %lld holds more than its cache", path,
                             (long long)l);
        size_t frow = (size_t)hd * lmc_dtype_size(file_dt),
               row = (size_t)hd * lmc_dtype_size(c->dtype);
        uint64_t bytes = 2 * (uint64_t)nkv * (uint64_t)held * frow;
        if (bytes > r->n - r->off) return lmc_error(LMC_ERR_FORMAT, "%s: truncated", path);
        float *conv = NULL;
        if (file_dt != c->dtype && held > 0 && !(conv = malloc((size_t)hd * sizeof(float))))
            return lmc_error(LMC_ERR_NOMEM, "out of memory");
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *base = kv ? L->v : L->k;
            for (int64_t h = 0; h < nkv; h++)
                for (int64_t p = first; p < n; p++) {
                    uint8_t *dst = base + (size_t)(h * L->capacity + p % L->capacity) * row;
                    if (conv) { /* saved as the other type: through f32 */
                        lmc_convert_to_f32(file_dt, r->p + r->off, conv, hd);
                        lmc_convert_from_f32(c->dtype, conv, dst, hd);
                    } else {
                        memcpy(dst, r->p + r->off, row);
                    }
                    r->off += frow;
                }
        }
        free(conv);
    }
    if (r->off != r->n) return lmc_error(LMC_ERR_FORMAT, "%s: trailing bytes", path);
    c->length = n;
    return LMC_OK;
}

lmc_status lmc_session_load(lmc_session *s, const char *path) {
    if (!s || !path) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_load: bad arguments");
    lmc_session_reset(s);
    lmc_mapped_file f;
    lmc_status st = lmc_map_file(path, &f);
    if (st != LMC_OK) return st;
    rbuf r = {.p = f.data, .n = f.size};
    st = load_body(s, path, &r);
    if (st != LMC_OK) lmc_session_reset(s);
    lmc_unmap_file(&f);
    return st;
}

lmc_status lmc_session_forward_images(lmc_session *s, const int32_t *tokens, int32_t n,
                                      const lmc_pixels *images, bool all_positions, float *logits) {
    if (!s || !tokens || n <= 0 || !images || !images->data || images->n <= 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward_images: bad arguments");
    if (!s->model->arch->forward_images)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "images were given, but %s (model_type '%s') is not a vision-language "
                         "model",
                         s->model->dir, s->model->cfg.model_type);
    int64_t V = s->model->cfg.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return lmc_error(LMC_ERR_RANGE,
                             "token id %d at position %d is outside the vocabulary (0..%lld)",
                             tokens[i], i, (long long)V - 1);
    if (s->kv.length + n > s->max_tokens)
        return lmc_error(LMC_ERR_RANGE, "%lld tokens exceed the session's context of %lld",
                         (long long)(s->kv.length + n), (long long)s->max_tokens);
    if (s->kv.max_batch > 0 && n > s->kv.max_batch)
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "an input with images runs as one batch, but this session's cache takes "
                         "at most %lld tokens at once (max_kv_size or sliding layers)",
                         (long long)s->kv.max_batch);
    lmc_status st = lmc_kv_cache_remember(&s->kv, tokens, s->kv.length, n);
    if (st != LMC_OK) return st;
    return s->model->arch->forward_images(s->model, &s->kv, tokens, n, images, all_positions,
                                          logits);
}

lmc_status lmc_session_forward_input(lmc_session *s, const lmc_model_input *in, int all_positions,
                                     float *logits_out) {
    if (!s || !in)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward_input: bad arguments");
    if (in->n_images < 0 || (in->n_images > 0 && !in->pixel_values))
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward_input: bad images");
    if (in->n_images == 0)
        return lmc_session_forward(s, in->tokens, in->n_tokens, all_positions, logits_out);
    lmc_pixels px = {in->pixel_values, in->n_images, in->image_height, in->image_width};
    return lmc_session_forward_images(s, in->tokens, in->n_tokens, &px, all_positions != 0,
                                      logits_out);
}
