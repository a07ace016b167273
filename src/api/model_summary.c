/* A model folder at a glance, without loading it (`lmc models`): config.json's
 * model_type, kind and storage (mlx-lm's "quantization" as mlx_lm.convert
 * writes it, transformers' quantization_config, else torch_dtype / dtype),
 * and the bytes of its files. */
#include "api/hub.h"
#include "base/json.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- size ---------------------------------------------------------------- */

/* Adds the bytes of every file under dir to *total. Links to files are
 * followed (a snapshot's files are links to ../../blobs/); a dangling one
 * (a blob not downloaded) counts 0. Links to folders are not followed, so
 * a link loop cannot make the walk go round. */
static lmc_status folder_bytes(const char *dir, uint64_t *total) {
    DIR *d = opendir(dir);
    if (!d) return lmc_error(LMC_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    lmc_status st = LMC_OK;
    struct dirent *e;
    while (st == LMC_OK && (errno = 0, e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = lmc_path_join(dir, e->d_name);
        if (!p) {
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
            break;
        }
        struct stat lsb, sb;
        if (lstat(p, &lsb) != 0) {
            if (errno != ENOENT) /* ENOENT: removed while we read */
                st = lmc_error(LMC_ERR_IO, "%s: %s", p, strerror(errno));
        } else if (S_ISDIR(lsb.st_mode)) {
            st = folder_bytes(p, total);
        } else if (stat(p, &sb) != 0) {
            if (errno != ENOENT && errno != ELOOP)
                st = lmc_error(LMC_ERR_IO, "%s: %s", p, strerror(errno));
        } else if (S_ISREG(sb.st_mode) && !lmc_add_ok(*total, (uint64_t)sb.st_size, total)) {
            st = lmc_error(LMC_ERR_RANGE, "%s: the sizes of the files overflow", dir);
        }
        free(p);
    }
    if (st == LMC_OK && !e && errno)
        st = lmc_error(LMC_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    closedir(d);
    return st;
}

/* ---- config.json ------------------------------------------------------------ */

/* bits and group_size of an MLX quantization object; defaults are the
 * enclosing object's (mlx.nn.quantize's 4 and 64 at the top). */
static lmc_status quant_params(const json_t *q, const char *what, const char *key, int *bits,
                               int *group) {
    bool bad_bits = false, bad_group = false;
    int64_t b = lmc_json_int(q, "bits", *bits, &bad_bits);
    int64_t g = lmc_json_int(q, "group_size", *group, &bad_group);
    if (bad_bits || b < 1 || b > 16)
        return lmc_error(LMC_ERR_FORMAT, "%s: quantization%s%s bits is not an integer in 1..16",
                         what, key ? " of " : "", key ? key : "");
    if (bad_group || g < 1 || g > 1 << 20)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: quantization%s%s group_size is not a positive integer", what,
                         key ? " of " : "", key ? key : "");
    *bits = (int)b;
    *group = (int)g;
    return LMC_OK;
}

/* Adds v to the sorted set a[0..*n) of at most cap values (beyond cap it
 * is dropped: the description then lists the first ones). */
static void add_value(int *a, int *n, int cap, int v) {
    int i = 0;
    while (i < *n && a[i] < v) i++;
    if ((i < *n && a[i] == v) || *n == cap) return;
    memmove(a + i + 1, a + i, (size_t)(*n - i) * sizeof *a);
    a[i] = v;
    (*n)++;
}

/* "4/8" into buf. */
static void join_values(char *buf, size_t size, const int *a, int n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++) {
        int w = snprintf(buf + used, size - used, i ? "/%d" : "%d", a[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* An MLX quantization object (mlx_lm.convert; per-layer overrides are
 * objects keyed by module path, or false for a module left dense):
 * "4-bit g64", "mixed 4/8-bit g32/64", "mxfp4 4-bit g32". */
static lmc_status describe_mlx(const json_t *q, const char *what, char **out) {
    bool bad = false;
    const char *mode = lmc_json_string(q, "mode", "affine", &bad);
    if (bad) return lmc_error(LMC_ERR_FORMAT, "%s: quantization mode is not a string", what);
    int bits = 4, group = 64;
    lmc_status st = quant_params(q, what, NULL, &bits, &group);
    if (st != LMC_OK) return st;
    enum { CAP = 8 };
    int bit_set[CAP], group_set[CAP], n_bits = 0, n_groups = 0;
    add_value(bit_set, &n_bits, CAP, bits);
    add_value(group_set, &n_groups, CAP, group);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)q, key, v) {
        if (!json_is_object(v)) continue;
        int b = bits, g = group;
        if ((st = quant_params(v, what, key, &b, &g)) != LMC_OK) return st;
        add_value(bit_set, &n_bits, CAP, b);
        add_value(group_set, &n_groups, CAP, g);
    }
    char b_text[64], g_text[64];
    join_values(b_text, sizeof b_text, bit_set, n_bits);
    join_values(g_text, sizeof g_text, group_set, n_groups);
    bool affine = !strcmp(mode, "affine");
    *out = lmc_sprintf("%s%s%s%s-bit g%s", affine ? "" : mode, affine ? "" : " ",
                       n_bits > 1 || n_groups > 1 ? "mixed " : "", b_text, g_text);
    return *out ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "out of memory");
}

/* transformers' quantization_config of another method: "gptq 4-bit g128",
 * "awq 4-bit g128", "bitsandbytes 4-bit", "fp8". Its own keys vary by
 * method; what is not an integer is left out. */
static lmc_status describe_method(const json_t *q, const char *method, char **out) {
    int64_t bits = lmc_json_int(q, "bits", 0, NULL);
    if (bits <= 0) bits = lmc_json_int(q, "w_bit", 0, NULL); /* AutoAWQ */
    if (bits <= 0 && lmc_json_bool(q, "load_in_4bit", false, NULL)) bits = 4;
    if (bits <= 0 && lmc_json_bool(q, "load_in_8bit", false, NULL)) bits = 8;
    int64_t group = lmc_json_int(q, "group_size", 0, NULL);
    if (group <= 0) group = lmc_json_int(q, "q_group_size", 0, NULL);
    char b_text[32] = "", g_text[32] = "";
    if (bits > 0 && bits <= 64) snprintf(b_text, sizeof b_text, " %d-bit", (int)bits);
    if (bits > 0 && bits <= 64 && group > 0) /* gptq's -1: no groups */
        snprintf(g_text, sizeof g_text, " g%lld", (long long)group);
    *out = lmc_sprintf("%s%s%s", method, b_text, g_text);
    return *out ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "out of memory");
}

/* torch_dtype (or transformers 5's dtype) in short: "bf16", "f16", "f32". */
static const char *dtype_of(const json_t *cfg) {
    const char *keys[] = {"torch_dtype", "dtype"};
    for (int i = 0; i < 2; i++) {
        const char *t = json_string_value(json_object_get(cfg, keys[i]));
        if (!t || !*t) continue;
        static const char *const names[][2] = {
            {"bfloat16", "bf16"}, {"float16", "f16"}, {"half", "f16"},
            {"float32", "f32"},   {"float", "f32"},   {"float64", "f64"},
        };
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (!strcmp(t, names[k][0])) return names[k][1];
        return t;
    }
    return NULL;
}

static lmc_status describe_storage(const json_t *cfg, const char *what, char **out) {
    *out = NULL;
    const json_t *q = json_object_get(cfg, "quantization");
    if (q && !json_is_null(q) && !json_is_object(q))
        return lmc_error(LMC_ERR_FORMAT, "%s: quantization is not an object", what);
    if (json_is_object(q)) return describe_mlx(q, what, out);
    q = json_object_get(cfg, "quantization_config");
    if (json_is_object(q)) {
        const char *method = json_string_value(json_object_get(q, "quant_method"));
        /* mlx-lm writes its quantization here too, without a method */
        return method && *method ? describe_method(q, method, out) : describe_mlx(q, what, out);
    }
    const char *dtype = dtype_of(cfg);
    const json_t *text = json_object_get(cfg, "text_config");
    if (!dtype && json_is_object(text)) dtype = dtype_of(text);
    if (!dtype) return LMC_OK;
    *out = lmc_strdup(dtype);
    return *out ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "out of memory");
}

static lmc_status read_config(const char *dir, lmc_model_summary *out) {
    char *path = lmc_path_join(dir, "config.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    json_t *cfg = NULL;
    lmc_status st = LMC_OK;
    if (!lmc_file_exists(path)) { /* stat follows the link to the blob */
        st = lmc_error(LMC_ERR_NOT_FOUND, "%s: not a model folder (no config.json)", dir);
        goto done;
    }
    if ((st = lmc_json_load_file(path, &cfg)) != LMC_OK) goto done;
    if (!json_is_object(cfg)) {
        st = lmc_error(LMC_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    const json_t *mt = json_object_get(cfg, "model_type");
    if (mt && !json_is_null(mt) && !json_is_string(mt)) {
        st = lmc_error(LMC_ERR_FORMAT, "%s: model_type is not a string", path);
        goto done;
    }
    char *model_type = NULL, *storage = NULL;
    if (json_is_string(mt) && !(model_type = lmc_strdup(json_string_value(mt)))) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = describe_storage(cfg, path, &storage)) != LMC_OK) {
        free(model_type);
        goto done;
    }
    const json_t *vision = json_object_get(cfg, "vision_config");
    out->kind = vision && !json_is_null(vision) ? LMC_MODEL_VLM : LMC_MODEL_LLM;
    out->model_type = model_type;
    out->quantization = storage;
done:
    json_decref(cfg);
    free(path);
    return st;
}

/* ---- the summary ------------------------------------------------------------ */

lmc_status lmc_model_summary_read(const char *dir, lmc_model_summary *out) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errno == ENOENT || errno == ENOTDIR
                   ? lmc_error(LMC_ERR_NOT_FOUND, "no folder %s", dir)
                   : lmc_error(LMC_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return lmc_error(LMC_ERR_NOT_FOUND, "%s is not a folder", dir);
    if (!(out->dir = lmc_strdup(dir))) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    lmc_status st = lmc_hub_id_of_snapshot(dir, &out->hub_id);
    if (st != LMC_OK) return st;
    /* both parts, so that a listing shows what it can of a broken folder;
     * the config's error is the one reported when both fail */
    lmc_status size_st = folder_bytes(dir, &out->size_bytes);
    if (size_st == LMC_ERR_NOMEM) return size_st;
    st = read_config(dir, out);
    return st != LMC_OK ? st : size_st;
}

lmc_status lmc_model_summarize(const char *dir, lmc_model_summary *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!dir || !out)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_model_summarize: %s is NULL",
                         dir ? "out" : "dir");
    lmc_status st = lmc_model_summary_read(dir, out);
    if (st != LMC_OK) lmc_model_summary_clear(out);
    return st;
}

void lmc_model_summary_clear(lmc_model_summary *s) {
    if (!s) return;
    free(s->dir);
    free(s->hub_id);
    free(s->model_type);
    free(s->quantization);
    memset(s, 0, sizeof *s);
}

void lmc_model_summaries_free(lmc_model_summary *list, int32_t n) {
    if (!list) return;
    for (int32_t i = 0; i < n; i++) lmc_model_summary_clear(&list[i]);
    free(list);
}
