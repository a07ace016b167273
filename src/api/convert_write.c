/* lmc_convert's output: tensors computed item by item, grouped into
 * safetensors shards (mlx_lm.utils.make_shards / save_model), the index,
 * and the side files. Numerics follow mlx: mx.quantize on the CPU for
 * quantization, the mlx/ops.cpp affine_dequantize fallback (scales * q +
 * biases, each operation rounded to the dtype) for dequantization. */
#include "api/convert_internal.h"
#include "kernels/quant.h"

#include <dirent.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cv_natural_cmp(const char *a, const char *b) {
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            char *ea, *eb;
            unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
            if (x != y) return x < y ? -1 : 1;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static int64_t numel(const cv_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Elements [e0, e0 + n) of t (stacked sources back to back) as f32. */
static void read_f32(const cv_tensor *t, int64_t e0, int64_t n, float *dst) {
    int64_t per = lmc_tensor_numel(t->src[0]);
    while (n > 0) {
        int64_t s = e0 / per, off = e0 % per, k = per - off < n ? per - off : n;
        const uint8_t *base = t->src[s]->data;
        lmc_convert_to_f32(t->dtype, base + (size_t)off * lmc_dtype_size(t->dtype), dst, k);
        dst += k;
        e0 += k;
        n -= k;
    }
}

/* All bytes of t (sources back to back); *owned is set when a copy was made. */
static const void *raw_bytes(const cv_tensor *t, void **owned) {
    *owned = NULL;
    if (t->n_src == 1) return t->src[0]->data;
    uint64_t per = t->src[0]->nbytes;
    uint8_t *buf = malloc((size_t)(per * (uint64_t)t->n_src) + 1);
    if (!buf) return NULL;
    for (int s = 0; s < t->n_src; s++) memcpy(buf + per * (uint64_t)s, t->src[s]->data, per);
    *owned = buf;
    return buf;
}

static float round_to(lmc_dtype dt, float x) {
    if (dt == LMC_DTYPE_F16) return lmc_f16_to_f32(lmc_f32_to_f16(x));
    if (dt == LMC_DTYPE_BF16) return lmc_bf16_to_f32(lmc_f32_to_bf16(x));
    return x;
}

/* Owned buffers of one shard, freed after it is written. */
typedef struct buffers {
    void **p;
    size_t n, cap;
} buffers;

static void *keep(buffers *b, void *p) {
    if (!p) return NULL;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 32;
        void **q = realloc(b->p, cap * sizeof *q);
        if (!q) {
            free(p);
            return NULL;
        }
        b->p = q;
        b->cap = cap;
    }
    b->p[b->n++] = p;
    return p;
}

static void buffers_clear(buffers *b) {
    for (size_t i = 0; i < b->n; i++) free(b->p[i]);
    b->n = 0;
}

#define CHUNK ((int64_t)1 << 16)

static lmc_status produce_cast(const cv_item *it, lmc_safetensors_writer *wr, buffers *bufs) {
    const cv_tensor *t = it->src[0];
    const void *data;
    if (it->dtype == t->dtype) {
        void *owned;
        data = raw_bytes(t, &owned);
        if (!data || (owned && !keep(bufs, owned)))
            return lmc_error(LMC_ERR_NOMEM, "out of memory converting '%s'", it->name);
    } else {
        int64_t n = numel(t);
        uint8_t *out = keep(bufs, malloc((size_t)it->nbytes + 1));
        float *tmp = malloc((size_t)CHUNK * sizeof(float));
        if (!out || !tmp) {
            free(tmp);
            return lmc_error(LMC_ERR_NOMEM, "out of memory converting '%s'", it->name);
        }
        size_t es = lmc_dtype_size(it->dtype);
        for (int64_t e = 0; e < n; e += CHUNK) {
            int64_t k = n - e < CHUNK ? n - e : CHUNK;
            read_f32(t, e, k, tmp);
            lmc_convert_from_f32(it->dtype, tmp, out + (size_t)e * es, k);
        }
        free(tmp);
        data = out;
    }
    return lmc_safetensors_writer_add(wr, it->name, it->dtype, t->ndim, t->shape, data);
}

static lmc_status add3(lmc_safetensors_writer *wr, const char *prefix, const int64_t *lead,
                       int nlead, int64_t wcols, lmc_dtype wdt, const void *w, int64_t scols,
                       lmc_dtype sdt, const void *s, const void *b) {
    int64_t shape[LMC_MAX_DIMS];
    memcpy(shape, lead, (size_t)nlead * sizeof *shape);
    char name[512];
    lmc_status st;
    shape[nlead] = wcols;
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((st = lmc_safetensors_writer_add(wr, name, wdt, nlead + 1, shape, w)) != LMC_OK) return st;
    if (!s) return LMC_OK;
    shape[nlead] = scols;
    snprintf(name, sizeof name, "%s.scales", prefix);
    if ((st = lmc_safetensors_writer_add(wr, name, sdt, nlead + 1, shape, s)) != LMC_OK) return st;
    snprintf(name, sizeof name, "%s.biases", prefix);
    return lmc_safetensors_writer_add(wr, name, sdt, nlead + 1, shape, b);
}

static lmc_status produce_quantize(const cv_item *it, lmc_safetensors_writer *wr, buffers *bufs) {
    const cv_tensor *t = it->src[0];
    int64_t cols = it->cols, rows = numel(t) / cols, groups = cols / it->group;
    int64_t words = cols * it->bits / 32;
    size_t ss = lmc_dtype_size(it->dtype);
    uint32_t *packed = keep(bufs, malloc((size_t)(rows * words) * 4 + 1));
    uint8_t *scales = keep(bufs, malloc((size_t)(rows * groups) * ss + 1));
    uint8_t *biases = keep(bufs, malloc((size_t)(rows * groups) * ss + 1));
    int64_t chunk = ((int64_t)1 << 20) / cols;
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    float *w = malloc((size_t)(chunk * cols) * sizeof(float));
    if (!packed || !scales || !biases || !w) {
        free(w);
        return lmc_error(LMC_ERR_NOMEM, "out of memory quantizing '%s'", it->name);
    }
    lmc_status st = LMC_OK;
    for (int64_t r = 0; r < rows && st == LMC_OK; r += chunk) {
        int64_t n = rows - r < chunk ? rows - r : chunk;
        read_f32(t, r * cols, n * cols, w);
        st = lmc_quantize_affine(w, n, cols, it->bits, it->group, it->dtype, packed + r * words,
                                 scales + (size_t)(r * groups) * ss,
                                 biases + (size_t)(r * groups) * ss);
    }
    free(w);
    if (st != LMC_OK) return lmc_error_prefix(st, "quantizing '%s'", it->name);
    return add3(wr, it->name, t->shape, t->ndim - 1, words, LMC_DTYPE_U32, packed, groups,
                it->dtype, scales, biases);
}

static lmc_status produce_dequantize(const cv_item *it, lmc_safetensors_writer *wr, buffers *bufs) {
    const cv_tensor *wt = it->src[0], *st_ = it->src[1], *bt = it->src[2];
    void *o1, *o2, *o3;
    const void *wd = raw_bytes(wt, &o1), *sd = raw_bytes(st_, &o2), *bd = raw_bytes(bt, &o3);
    lmc_status st = LMC_OK;
    float *srow = NULL, *brow = NULL, *vrow = NULL;
    uint8_t *q = NULL, *out = NULL;
    if (!wd || !sd || !bd) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory dequantizing '%s'", it->name);
        goto done;
    }
    lmc_tensor W = {.name = it->name, .dtype = wt->dtype, .ndim = wt->ndim, .data = wd};
    lmc_tensor S = {.name = it->name, .dtype = st_->dtype, .ndim = st_->ndim, .data = sd};
    lmc_tensor B = {.name = it->name, .dtype = bt->dtype, .ndim = bt->ndim, .data = bd};
    memcpy(W.shape, wt->shape, sizeof W.shape);
    memcpy(S.shape, st_->shape, sizeof S.shape);
    memcpy(B.shape, bt->shape, sizeof B.shape);
    W.nbytes = (uint64_t)numel(wt) * 4;
    S.nbytes = (uint64_t)numel(st_) * lmc_dtype_size(S.dtype);
    B.nbytes = (uint64_t)numel(bt) * lmc_dtype_size(B.dtype);
    lmc_qweight qw;
    st = lmc_qweight_from_tensors(&W, &S, &B, it->bits, it->group, it->name, &qw);
    if (st != LMC_OK) goto done;
    int64_t cols = qw.cols, groups = cols / qw.group_size;
    size_t es = lmc_dtype_size(it->dtype);
    out = keep(bufs, malloc((size_t)it->nbytes + 1));
    q = malloc((size_t)cols);
    srow = malloc((size_t)groups * sizeof(float));
    brow = malloc((size_t)groups * sizeof(float));
    vrow = malloc((size_t)cols * sizeof(float));
    if (!out || !q || !srow || !brow || !vrow) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory dequantizing '%s'", it->name);
        goto done;
    }
    size_t ss = lmc_dtype_size(qw.scale_dtype);
    for (int64_t r = 0; r < qw.rows; r++) {
        lmc_qunpack_row(&qw, r, q);
        lmc_convert_to_f32(qw.scale_dtype, (const uint8_t *)qw.scales + (size_t)(r * groups) * ss,
                           srow, groups);
        lmc_convert_to_f32(qw.scale_dtype, (const uint8_t *)qw.biases + (size_t)(r * groups) * ss,
                           brow, groups);
        for (int64_t g = 0; g < groups; g++) {
            /* convert casts scales/biases to the dtype first (set_dtype), then
             * mlx multiplies and adds in that dtype, rounding each result */
            float s = round_to(it->dtype, srow[g]), b = round_to(it->dtype, brow[g]);
            for (int64_t c = g * qw.group_size; c < (g + 1) * qw.group_size; c++) {
                float prod = s * (float)q[c];
                prod = round_to(it->dtype, prod);
                float v = prod + b;
                vrow[c] = round_to(it->dtype, v);
            }
        }
        lmc_convert_from_f32(it->dtype, vrow, out + (size_t)(r * cols) * es, cols);
    }
    st =
        add3(wr, it->name, wt->shape, wt->ndim - 1, cols, it->dtype, out, 0, it->dtype, NULL, NULL);
done:
    free(o1);
    free(o2);
    free(o3);
    free(q);
    free(srow);
    free(brow);
    free(vrow);
    return st;
}

static char *shard_name(int i, int n) {
    if (n == 1) return lmc_strdup("model.safetensors");
    return lmc_sprintf("model-%05d-of-%05d.safetensors", i + 1, n);
}

static lmc_status write_file_text(const char *dir, const char *name, const char *text) {
    char *path = lmc_path_join(dir, name);
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    FILE *f = fopen(path, "wb");
    size_t n = strlen(text);
    bool ok = f && fwrite(text, 1, n, f) == n;
    if (f) ok = (fclose(f) == 0) && ok;
    lmc_status st = ok ? LMC_OK : lmc_error(LMC_ERR_IO, "%s: cannot write", path);
    free(path);
    return st;
}

static void add_item_names(json_t *map, const cv_item *it, const char *file) {
    char name[512];
    if (it->kind == CV_CAST) {
        json_object_set_new(map, it->name, json_string(file));
        return;
    }
    static const char *const parts[3] = {"weight", "scales", "biases"};
    for (int k = 0; k < (it->kind == CV_QUANTIZE ? 3 : 1); k++) {
        snprintf(name, sizeof name, "%s.%s", it->name, parts[k]);
        json_object_set_new(map, name, json_string(file));
    }
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* model.safetensors.index.json as mlx_lm.utils.save_model writes it. */
static lmc_status write_index(cv_job *job) {
    json_t *map = json_object(), *sorted = json_object(), *root = NULL;
    lmc_status st = LMC_OK;
    uint64_t params = 0;
    for (size_t i = 0; i < job->n_items; i++) {
        char *file = shard_name(job->items[i].shard, job->n_shards);
        if (file) add_item_names(map, &job->items[i], file);
        free(file);
        params += job->items[i].parameters;
    }
    size_t n = json_object_size(map), k = 0;
    const char **keys = malloc((n + 1) * sizeof *keys);
    const char *key;
    json_t *val;
    if (!keys) goto nomem;
    json_object_foreach(map, key, val) keys[k++] = key;
    qsort(keys, n, sizeof *keys, cmp_cstr);
    for (k = 0; k < n; k++) json_object_set(sorted, keys[k], json_object_get(map, keys[k]));
    free(keys);
    root = json_pack("{s:{s:I, s:I}, s:O}", "metadata", "total_size", (json_int_t)job->total_bytes,
                     "total_parameters", (json_int_t)params, "weight_map", sorted);
    char *text = root ? lmc_json_dumps_python(root, 4) : NULL;
    if (!text) goto nomem;
    st = write_file_text(job->tmp_dir, "model.safetensors.index.json", text);
    free(text);
    json_decref(root);
    json_decref(map);
    json_decref(sorted);
    return st;
nomem:
    if (root) json_decref(root);
    json_decref(map);
    json_decref(sorted);
    return lmc_error(LMC_ERR_NOMEM, "out of memory writing the index");
}

lmc_status cv_write_shards(cv_job *job) {
    lmc_status st = LMC_OK;
    buffers bufs = {0};
    size_t i = 0;
    for (int s = 0; s < job->n_shards && st == LMC_OK; s++) {
        lmc_safetensors_writer *wr = NULL;
        if ((st = lmc_safetensors_writer_create(&wr)) != LMC_OK) break;
        st = lmc_safetensors_writer_set_metadata(wr, "format", "mlx");
        for (; st == LMC_OK && i < job->n_items && job->items[i].shard == s; i++) {
            const cv_item *it = &job->items[i];
            if (it->kind == CV_CAST)
                st = produce_cast(it, wr, &bufs);
            else if (it->kind == CV_QUANTIZE)
                st = produce_quantize(it, wr, &bufs);
            else
                st = produce_dequantize(it, wr, &bufs);
            job->done_bytes += it->nbytes;
            if (st == LMC_OK && job->progress &&
                job->progress(job->done_bytes, job->total_bytes, it->name, job->user_data))
                st = lmc_error(LMC_ERR_STOPPED, "convert stopped by the progress callback");
        }
        char *name = st == LMC_OK ? shard_name(s, job->n_shards) : NULL;
        char *path = name ? lmc_path_join(job->tmp_dir, name) : NULL;
        if (st == LMC_OK && !path) st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        if (st == LMC_OK) st = lmc_safetensors_writer_write(wr, path);
        free(name);
        free(path);
        lmc_safetensors_writer_free(wr);
        buffers_clear(&bufs);
    }
    free(bufs.p);
    if (st == LMC_OK) st = write_index(job);
    return st;
}

/* What mlx_lm.utils.save carries over: the files tokenizer.save_pretrained
 * writes, generation_config.json and *.py. */
static bool is_side_file(const char *name) {
    static const char *const patterns[] = {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "tokenizer.model",
        "tiktoken.model",
        "*.tiktoken",
        "chat_template.jinja",
        "chat_template.json",
        "generation_config.json",
        "*.py",
    };
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++)
        if (fnmatch(patterns[i], name, 0) == 0) return true;
    return false;
}

lmc_status cv_copy_side_files(const char *in_dir, const char *out_dir) {
    DIR *d = opendir(in_dir);
    if (!d) return lmc_error(LMC_ERR_IO, "%s: cannot list the folder", in_dir);
    lmc_status st = LMC_OK;
    struct dirent *e;
    while (st == LMC_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !is_side_file(e->d_name)) continue;
        char *src = lmc_path_join(in_dir, e->d_name), *dst = lmc_path_join(out_dir, e->d_name);
        if (!src || !dst)
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        else if (lmc_file_exists(src))
            st = lmc_copy_file(src, dst);
        free(src);
        free(dst);
    }
    closedir(d);
    return st;
}
