/* safetensors writing: header JSON padded with spaces to a multiple of 8
 * (as the reference writer does), tensors in name order, written to a
 * temporary file and renamed into place. */
#include "tensor/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct entry {
    char *name;
    lmc_dtype dtype;
    int ndim;
    int64_t shape[LMC_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} entry;

struct lmc_safetensors_writer {
    entry *entries;
    size_t n, cap;
    json_t *metadata;
};

lmc_status lmc_safetensors_writer_create(lmc_safetensors_writer **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    return LMC_OK;
}

void lmc_safetensors_writer_free(lmc_safetensors_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) free(w->entries[i].name);
    free(w->entries);
    if (w->metadata) json_decref(w->metadata);
    free(w);
}

lmc_status lmc_safetensors_writer_add(lmc_safetensors_writer *w, const char *name, lmc_dtype dtype,
                                      int ndim, const int64_t *shape, const void *data) {
    if (ndim < 0 || ndim > LMC_MAX_DIMS || dtype >= LMC_DTYPE_COUNT)
        return lmc_error(LMC_ERR_INVALID_ARG, "safetensors writer: bad tensor '%s'", name);
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->entries[i].name, name))
            return lmc_error(LMC_ERR_INVALID_ARG, "safetensors writer: duplicate tensor '%s'",
                             name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        entry *e = realloc(w->entries, cap * sizeof *e);
        if (!e) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        w->entries = e;
        w->cap = cap;
    }
    entry *e = &w->entries[w->n];
    memset(e, 0, sizeof *e);
    e->name = lmc_strdup(name);
    if (!e->name) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    e->dtype = dtype;
    e->ndim = ndim;
    uint64_t nbytes = lmc_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        e->shape[i] = shape[i];
        if (shape[i] < 0 || !lmc_mul_ok(nbytes, (uint64_t)shape[i], &nbytes)) {
            free(e->name);
            return lmc_error(LMC_ERR_INVALID_ARG, "safetensors writer: bad shape for '%s'", name);
        }
    }
    e->nbytes = nbytes;
    e->data = data;
    w->n++;
    return LMC_OK;
}

void lmc_safetensors_writer_remove_last(lmc_safetensors_writer *w, size_t n) {
    while (n-- > 0 && w->n > 0) free(w->entries[--w->n].name);
}

lmc_status lmc_safetensors_writer_set_metadata(lmc_safetensors_writer *w, const char *key,
                                               const char *value) {
    if (!w->metadata) w->metadata = json_object();
    if (!w->metadata || json_object_set_new(w->metadata, key, json_string(value)) != 0)
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    return LMC_OK;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static char *build_header(lmc_safetensors_writer *w, size_t *len) {
    qsort(w->entries, w->n, sizeof *w->entries, cmp_entry);
    json_t *root = json_object();
    if (!root) return NULL;
    if (w->metadata) json_object_set(root, "__metadata__", w->metadata);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        entry *e = &w->entries[i];
        json_t *shape = json_array();
        for (int d = 0; d < e->ndim; d++) json_array_append_new(shape, json_integer(e->shape[d]));
        json_t *t =
            json_pack("{s:s, s:o, s:[I, I]}", "dtype", lmc_dtype_name(e->dtype), "shape", shape,
                      "data_offsets", (json_int_t)off, (json_int_t)(off + e->nbytes));
        if (!t || json_object_set_new(root, e->name, t) != 0) {
            json_decref(root);
            return NULL;
        }
        off += e->nbytes;
    }
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return NULL;
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *h = realloc(text, padded + 1);
    if (!h) {
        free(text);
        return NULL;
    }
    memset(h + n, ' ', padded - n);
    h[padded] = '\0';
    *len = padded;
    return h;
}

lmc_status lmc_safetensors_writer_write(lmc_safetensors_writer *w, const char *path) {
    size_t hlen = 0;
    char *header = build_header(w, &hlen);
    if (!header) return lmc_error(LMC_ERR_NOMEM, "%s: cannot build the header", path);
    char *tmp = lmc_sprintf("%s.tmp.%ld", path, (long)getpid());
    FILE *f = tmp ? fopen(tmp, "wb") : NULL;
    if (!f) {
        lmc_status st =
            lmc_error(LMC_ERR_IO, "%s: cannot create: %s", tmp ? tmp : path, strerror(errno));
        free(header);
        free(tmp);
        return st;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, hlen, f) == hlen;
    for (size_t i = 0; ok && i < w->n; i++)
        ok = w->entries[i].nbytes == 0 ||
             fwrite(w->entries[i].data, 1, w->entries[i].nbytes, f) == w->entries[i].nbytes;
    ok = (fclose(f) == 0) && ok;
    free(header);
    if (!ok || rename(tmp, path) != 0) {
        lmc_status st = lmc_error(LMC_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    return LMC_OK;
}
