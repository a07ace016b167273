/* safetensors reading: an 8-byte little-endian header length, a JSON header
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
 * then the data. Format: huggingface/safetensors README. Every number from
 * the file is checked before use. */
#include "tensor/safetensors.h"

#include "base/json.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HEADER_BYTES (100u << 20) /* the reference implementation's limit */

typedef struct span {
    uint64_t begin, end;
    size_t index;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const lmc_tensor *)a)->name, ((const lmc_tensor *)b)->name);
}

static lmc_status parse_entry(const char *what, const char *key, json_t *v, uint64_t data_size,
                              lmc_tensor *t, span *s) {
    if (!json_is_object(v))
        return lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", what,
                         key);
    json_t *dt = json_object_get(v, "dtype");
    json_t *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: tensor '%s': needs string 'dtype', array 'shape' and "
                         "'data_offsets'",
                         what, key);
    if (!lmc_dtype_parse(json_string_value(dt), &t->dtype))
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: tensor '%s': unknown dtype '%s' (supported: F32, F16, BF16, U32, "
                         "I32, I64, U8, I8, BOOL)",
                         what, key, json_string_value(dt));
    size_t nd = json_array_size(shape);
    if (nd > LMC_MAX_DIMS)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d)", what,
                         key, nd, LMC_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a size", what, key,
                             i);
        t->shape[i] = (int64_t)json_integer_value(d);
        if (!lmc_mul_ok(numel, (uint64_t)t->shape[i], &numel))
            return lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s': shape overflows", what, key);
    }
    uint64_t nbytes;
    if (!lmc_mul_ok(numel, lmc_dtype_size(t->dtype), &nbytes))
        return lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s': size overflows", what, key);
    if (json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end]", what,
                         key);
    json_int_t b = json_integer_value(json_array_get(offs, 0));
    json_int_t e = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || e < b)
        return lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s': bad data_offsets [%lld, %lld]", what,
                         key, (long long)b, (long long)e);
    if ((uint64_t)e > data_size)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets [%lld, %lld] past the end of the data "
                         "(%llu bytes)",
                         what, key, (long long)b, (long long)e, (unsigned long long)data_size);
    if ((uint64_t)(e - b) != nbytes) {
        char buf[128];
        return lmc_error(
            LMC_ERR_FORMAT, "%s: tensor '%s': %s %s needs %llu bytes but data_offsets span %llu",
            what, key, lmc_dtype_name(t->dtype), lmc_shape_str(t->shape, t->ndim, buf, sizeof buf),
            (unsigned long long)nbytes, (unsigned long long)(e - b));
    }
    t->nbytes = nbytes;
    s->begin = (uint64_t)b;
    s->end = (uint64_t)e;
    return LMC_OK;
}

lmc_status lmc_safetensors_parse(const uint8_t *data, size_t size, const char *what,
                                 lmc_safetensors *out) {
    memset(out, 0, sizeof *out);
    if (size < 8)
        return lmc_error(LMC_ERR_FORMAT, "%s: truncated: %zu bytes, no header length", what, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (hlen > MAX_HEADER_BYTES)
        return lmc_error(LMC_ERR_FORMAT, "%s: header length %llu exceeds the %u-byte limit", what,
                         (unsigned long long)hlen, MAX_HEADER_BYTES);
    if (hlen > size - 8)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: header length %llu runs past the end of the file (%zu bytes)", what,
                         (unsigned long long)hlen, size);
    json_error_t jerr;
    json_t *root = NULL;
    lmc_status lst = lmc_json_loadb((const char *)data + 8, (size_t)hlen, 0, &root, &jerr);
    if (lst == LMC_ERR_FORMAT)
        return lmc_error(LMC_ERR_FORMAT, "%s: header is not valid JSON (column %d): %s", what,
                         jerr.column, jerr.text);
    if (lst != LMC_OK) return lmc_error_prefix(lst, "%s", what);
    lmc_status st = LMC_OK;
    span *spans = NULL;
    if (!json_is_object(root)) {
        st = lmc_error(LMC_ERR_FORMAT, "%s: header is not a JSON object", what);
        goto fail;
    }
    uint64_t data_size = size - 8 - hlen;
    size_t n = json_object_size(root);
    size_t names_len = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        names_len += strlen(key) + 1;
    }
    out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
    spans = calloc(n ? n : 1, sizeof *spans);
    out->names = malloc(names_len ? names_len : 1);
    if (!out->tensors || !spans || !out->names) {
        st = lmc_error(LMC_ERR_NOMEM, "%s: out of memory", what);
        goto fail;
    }
    size_t k = 0, noff = 0;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(v)) {
                st = lmc_error(LMC_ERR_FORMAT, "%s: __metadata__ is not an object", what);
                goto fail;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    st = lmc_error(LMC_ERR_FORMAT, "%s: __metadata__['%s'] is not a string", what,
                                   mk);
                    goto fail;
                }
            }
            out->metadata = json_incref(v);
            continue;
        }
        lmc_tensor *t = &out->tensors[k];
        size_t kl = strlen(key) + 1;
        memcpy(out->names + noff, key, kl);
        t->name = out->names + noff;
        noff += kl;
        st = parse_entry(what, key, v, data_size, t, &spans[k]);
        if (st != LMC_OK) goto fail;
        spans[k].index = k;
        t->data = data + 8 + hlen + spans[k].begin;
        k++;
    }
    out->n_tensors = k;
    /* Overlapping tensors are malformed (the reference rejects them too). */
    qsort(spans, k, sizeof *spans, cmp_span);
    for (size_t i = 1; i < k; i++) {
        if (spans[i].begin < spans[i - 1].end) {
            st =
                lmc_error(LMC_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the file", what,
                          out->tensors[spans[i - 1].index].name, out->tensors[spans[i].index].name);
            goto fail;
        }
    }
    /* Names point into out->names, so sorting the structs is safe. */
    qsort(out->tensors, k, sizeof *out->tensors, cmp_tensor_name);
    free(spans);
    json_decref(root);
    return LMC_OK;
fail:
    free(spans);
    json_decref(root);
    free(out->tensors);
    free(out->names);
    if (out->metadata) json_decref(out->metadata);
    memset(out, 0, sizeof *out);
    return st;
}

lmc_status lmc_safetensors_open(const char *path, lmc_safetensors *out) {
    lmc_mapped_file f;
    lmc_status st = lmc_map_file(path, &f);
    if (st != LMC_OK) return st;
    st = lmc_safetensors_parse(f.data, f.size, path, out);
    if (st != LMC_OK) {
        lmc_unmap_file(&f);
        return st;
    }
    out->file = f;
    return LMC_OK;
}

void lmc_safetensors_close(lmc_safetensors *st) {
    if (!st) return;
    free(st->tensors);
    free(st->names);
    if (st->metadata) json_decref(st->metadata);
    lmc_unmap_file(&st->file);
    memset(st, 0, sizeof *st);
}

const lmc_tensor *lmc_safetensors_find(const lmc_safetensors *st, const char *name) {
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(st->tensors[mid].name, name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
