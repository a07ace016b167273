/* lmc_convert: mlx_lm.convert in C (mlx_lm/convert.py convert(), and
 * mlx_lm/utils.py quantize_model, dequantize_model, save_model,
 * save_config). The plan: sanitize the key names (models/sanitize.c),
 * decide per tensor what is written (cast, quantize, dequantize), split
 * into shards; then write everything into OUT.tmp-XXXXXX and rename. */
#include "api/convert_internal.h"
#include "kernels/quant.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SHARD_BYTES ((uint64_t)5 << 30) /* mlx_lm.utils.MAX_FILE_SIZE_GB << 30 */

void lmc_convert_params_default(lmc_convert_params *p) {
    memset(p, 0, sizeof *p);
}

typedef struct plan {
    const lmc_convert_params *p;
    lmc_model_config cfg; /* the input config.json */
    const json_t *in_quant;
    lmc_weights w;
    bool weights_open;
    cv_tensor *t; /* sorted by name (strcmp) */
    size_t n_t;
    cv_item *items;
    size_t n_items, cap_items;
    int bits, group;
    bool has_target;
    lmc_dtype target;
    /* mixed_* recipes (mlx_lm/convert.py mixed_quant_predicate_builder) */
    int low_bits, high_bits, layer_location;
    int64_t num_layers;
} plan;

static bool is_float(lmc_dtype dt) {
    return dt == LMC_DTYPE_F32 || dt == LMC_DTYPE_F16 || dt == LMC_DTYPE_BF16;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int64_t numel(const cv_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static const char *dtype_config_name(lmc_dtype dt) {
    return dt == LMC_DTYPE_F16 ? "float16" : dt == LMC_DTYPE_BF16 ? "bfloat16" : "float32";
}

/* ---- parameters ------------------------------------------------------------ */

static lmc_status check_params(const lmc_convert_params *p, plan *pl) {
    if (!p->input_dir || !p->output_dir)
        return lmc_error(LMC_ERR_INVALID_ARG, "convert: input and output folders are required");
    if (p->quantize && p->dequantize)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "convert: choose either quantize or dequantize, not both");
    if ((int)p->dtype < LMC_CONVERT_DTYPE_AUTO || p->dtype > LMC_CONVERT_DTYPE_F32)
        return lmc_error(LMC_ERR_INVALID_ARG, "convert: bad dtype %d", (int)p->dtype);
    pl->bits = p->q_bits ? p->q_bits : 4; /* quantize_model's affine defaults */
    pl->group = p->q_group_size ? p->q_group_size : 64;
    if (p->quantize) {
        int b = pl->bits, g = pl->group;
        if (b != 2 && b != 3 && b != 4 && b != 5 && b != 6 && b != 8)
            return lmc_error(LMC_ERR_INVALID_ARG,
                             "convert: %d bits are not supported (2, 3, 4, 5, 6 or 8)", b);
        if (g != 32 && g != 64 && g != 128)
            return lmc_error(LMC_ERR_INVALID_ARG,
                             "convert: group size %d is not supported (32, 64 or 128)", g);
    }
    if (p->quant_predicate) {
        static const struct {
            const char *name;
            int low, high;
        } recipes[] = {
            {"mixed_2_6", 2, 6}, {"mixed_3_4", 3, 4}, {"mixed_3_6", 3, 6}, {"mixed_4_6", 4, 6}};
        bool found = false;
        for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
            if (!strcmp(p->quant_predicate, recipes[i].name)) {
                pl->low_bits = recipes[i].low;
                pl->high_bits = recipes[i].high;
                found = true;
            }
        if (!found)
            return lmc_error(LMC_ERR_INVALID_ARG,
                             "convert: unknown quant predicate '%s' (mixed_2_6, mixed_3_4, "
                             "mixed_3_6, mixed_4_6)",
                             p->quant_predicate);
        if (!p->quantize)
            return lmc_error(LMC_ERR_INVALID_ARG, "convert: quant predicate '%s' needs quantize",
                             p->quant_predicate);
    }
    return LMC_OK;
}

/* convert(): dtype = --dtype, else config torch_dtype (or text_config's
 * dtype); only float16/bfloat16/float32 cast, anything else keeps each
 * tensor's dtype. transformers 5 spells the key "dtype". */
static void resolve_dtype(plan *pl) {
    static const lmc_dtype map[] = {LMC_DTYPE_F32, LMC_DTYPE_F16, LMC_DTYPE_BF16, LMC_DTYPE_F32};
    if (pl->p->dtype != LMC_CONVERT_DTYPE_AUTO) {
        pl->has_target = true;
        pl->target = map[pl->p->dtype];
        return;
    }
    const json_t *c = pl->cfg.json;
    const char *name = lmc_json_string(c, "torch_dtype", NULL, NULL);
    if (!name) name = lmc_json_string(c, "dtype", NULL, NULL);
    if (!name) name = lmc_json_string(json_object_get(c, "text_config"), "dtype", NULL, NULL);
    if (!name) return;
    if (!strcmp(name, "float16"))
        pl->target = LMC_DTYPE_F16;
    else if (!strcmp(name, "bfloat16"))
        pl->target = LMC_DTYPE_BF16;
    else if (!strcmp(name, "float32"))
        pl->target = LMC_DTYPE_F32;
    else
        return;
    pl->has_target = true;
}

/* ---- sanitize: the tensors as mlx-lm names them ------------------------- */

/* name = <pre>.<block>.experts.<e>.<from>.<k> with k weight/scales/biases:
 * *e and the stacked name <pre>.<block>.switch_mlp.<to>.<k>. */
static bool match_expert(const lmc_expert_stacking *s, const char *name, int64_t *e, char *out,
                         size_t size) {
    char mid[128];
    snprintf(mid, sizeof mid, ".%s.experts.", s->block);
    const char *at = strstr(name, mid);
    if (!at) return false;
    const char *p = at + strlen(mid);
    char *end;
    if (*p < '0' || *p > '9') return false;
    long long idx = strtoll(p, &end, 10);
    if (*end != '.') return false;
    p = end + 1;
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(s->from[i]);
        if (strncmp(p, s->from[i], n) || p[n] != '.') continue;
        const char *k = p + n + 1;
        if (strcmp(k, "weight") && strcmp(k, "scales") && strcmp(k, "biases")) return false;
        snprintf(out, size, "%.*s.%s.switch_mlp.%s.%s", (int)(at - name), name, s->block, s->to[i],
                 k);
        *e = idx;
        return true;
    }
    return false;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const cv_tensor *)a)->name, ((const cv_tensor *)b)->name);
}

static cv_tensor *find_tensor(const plan *pl, const char *name) {
    cv_tensor key = {.name = (char *)name};
    return bsearch(&key, pl->t, pl->n_t, sizeof *pl->t, cmp_tensor);
}

static lmc_status build_tensors(plan *pl) {
    const json_t *c = pl->cfg.json;
    const lmc_expert_stacking *stk = lmc_expert_stacking_find(pl->cfg.model_type);
    int64_t E = stk ? lmc_expert_count(stk, c) : 0;
    bool tied = lmc_config_tied(c);
    pl->t = calloc(pl->w.n_tensors + 1, sizeof *pl->t);
    if (!pl->t) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->w.n_tensors; i++) {
        const lmc_tensor *src = pl->w.index[i];
        if (lmc_sanitize_drops(src->name)) continue;
        if (tied && !strncmp(src->name, "lm_head.", 8)) continue;
        char stacked[512];
        int64_t e;
        if (stk && match_expert(stk, src->name, &e, stacked, sizeof stacked)) {
            if (E <= 0)
                return lmc_error(LMC_ERR_FORMAT,
                                 "%s: per-expert tensor '%s' but config.json's expert "
                                 "count (num_experts / num_local_experts) is %lld",
                                 pl->p->input_dir, src->name, (long long)E);
            if (e >= E)
                return lmc_error(LMC_ERR_FORMAT, "%s: '%s': expert %lld of %lld", pl->p->input_dir,
                                 src->name, (long long)e, (long long)E);
            cv_tensor *t = NULL;
            for (size_t k = 0; k < pl->n_t && !t; k++)
                if (pl->t[k].n_src > 1 && !strcmp(pl->t[k].name, stacked)) t = &pl->t[k];
            if (!t) {
                t = &pl->t[pl->n_t++];
                t->name = lmc_strdup(stacked);
                t->src = calloc((size_t)E, sizeof *t->src);
                t->n_src = (int)E;
                if (!t->name || !t->src) return lmc_error(LMC_ERR_NOMEM, "out of memory");
            }
            t->src[e] = src;
            continue;
        }
        cv_tensor *t = &pl->t[pl->n_t++];
        t->name = lmc_strdup(src->name);
        t->src = calloc(1, sizeof *t->src);
        if (!t->name || !t->src) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        t->src[0] = src;
        t->n_src = 1;
    }
    for (size_t k = 0; k < pl->n_t; k++) {
        cv_tensor *t = &pl->t[k];
        const lmc_tensor *s0 = t->src[0];
        for (int e = 0; e < t->n_src; e++) {
            const lmc_tensor *s = t->src[e];
            if (!s)
                return lmc_error(LMC_ERR_FORMAT, "%s: expert %d of '%s' is missing",
                                 pl->p->input_dir, e, t->name);
            if (s->dtype != s0->dtype || s->ndim != s0->ndim ||
                memcmp(s->shape, s0->shape, sizeof s->shape) || s->ndim + 1 > LMC_MAX_DIMS)
                return lmc_error(LMC_ERR_SHAPE, "%s: experts of '%s' differ in shape or dtype",
                                 pl->p->input_dir, t->name);
        }
        t->dtype = s0->dtype;
        int lead = t->n_src > 1 ? 1 : 0;
        t->ndim = s0->ndim + lead;
        if (lead) t->shape[0] = t->n_src;
        memcpy(t->shape + lead, s0->shape, (size_t)s0->ndim * sizeof *t->shape);
    }
    qsort(pl->t, pl->n_t, sizeof *pl->t, cmp_tensor);
    return LMC_OK;
}

/* ---- what each tensor becomes ------------------------------------------------ */

static cv_item *new_item(plan *pl, cv_kind kind, const char *name) {
    if (pl->n_items == pl->cap_items) {
        size_t cap = pl->cap_items ? 2 * pl->cap_items : 64;
        cv_item *p = realloc(pl->items, cap * sizeof *p);
        if (!p) return NULL;
        pl->items = p;
        pl->cap_items = cap;
    }
    cv_item *it = &pl->items[pl->n_items];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->name = lmc_strdup(name);
    if (!it->name) return NULL;
    pl->n_items++;
    return it;
}

/* bits and group size of a stored quantized module (config.json's entry
 * for it, else the default), checked against the tensors. */
static lmc_status module_quant(const plan *pl, const char *prefix, const cv_tensor *w,
                               const cv_tensor *s, int *bits, int *group, int64_t *cols) {
    const json_t *entry = json_object_get(pl->in_quant, prefix);
    if (json_is_false(entry))
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: config.json marks '%s' as not quantized, but it has scales",
                         pl->p->input_dir, prefix);
    const json_t *src = json_is_object(entry) ? entry : pl->in_quant;
    *bits = (int)lmc_json_int(src, "bits", lmc_json_int(pl->in_quant, "bits", 4, NULL), NULL);
    *group = (int)lmc_json_int(src, "group_size",
                               lmc_json_int(pl->in_quant, "group_size", 64, NULL), NULL);
    int64_t packed = w->shape[w->ndim - 1], groups = s->shape[s->ndim - 1];
    if (*bits <= 0 || *group <= 0 || (packed * 32) % *bits ||
        packed * 32 / *bits != groups * *group)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: '%s': %lld packed words and %lld groups per row do not fit bits %d, "
                         "group_size %d",
                         pl->p->input_dir, prefix, (long long)packed, (long long)groups, *bits,
                         *group);
    *cols = packed * 32 / *bits;
    return LMC_OK;
}

/* nn.quantize's default class predicate (mlx-lm quantize_model): modules
 * with to_quantized (Linear, Embedding, SwitchLinear: the 2D weights and the
 * stacked switch_mlp ones), whose input dimension divides the group size. */
static bool quantizable(const plan *pl, const cv_tensor *t) {
    if (!ends_with(t->name, ".weight") || !is_float(t->dtype)) return false;
    if (strstr(t->name, "norm")) return false;
    bool ok = t->ndim == 2 || (t->ndim == 3 && strstr(t->name, ".switch_mlp."));
    return ok && t->shape[t->ndim - 1] % pl->group == 0;
}

/* mixed_quant_predicate: more bits for v_proj and down_proj of the first
 * and last eighth of the layers and every third one between, and lm_head. */
static int mixed_bits(const plan *pl, const char *path) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    int64_t index = 0;
    int k = 0;
    for (char *part = strtok(buf, "."); part; part = strtok(NULL, "."), k++)
        if (k == pl->layer_location) index = strtoll(part, NULL, 10);
    int64_t L = pl->num_layers;
    bool more = index < L / 8 || index >= 7 * L / 8 || (index - L / 8) % 3 == 2;
    if ((strstr(path, "v_proj") || strstr(path, "v_a_proj") || strstr(path, "v_b_proj")) && more)
        return pl->high_bits;
    if (strstr(path, "down_proj") && more) return pl->high_bits;
    if (strstr(path, "lm_head")) return pl->high_bits;
    return pl->low_bits;
}

static lmc_status prepare_mixed(plan *pl) {
    const json_t *c = pl->cfg.json;
    pl->num_layers = lmc_json_int(c, "num_hidden_layers", -1, NULL);
    if (pl->num_layers < 0)
        pl->num_layers =
            lmc_json_int(json_object_get(c, "text_config"), "num_hidden_layers", 0, NULL);
    for (size_t i = 0; i < pl->n_t; i++) {
        if (!strstr(pl->t[i].name, "down_proj")) continue;
        char buf[512];
        snprintf(buf, sizeof buf, "%s", pl->t[i].name);
        int k = 0, loc = -1;
        for (char *part = strtok(buf, "."); part; part = strtok(NULL, "."), k++)
            if (loc < 0 && part[0] >= '0' && part[0] <= '9') loc = k;
        pl->layer_location = loc < 0 ? k - 1 : loc;
        return LMC_OK;
    }
    return lmc_error(LMC_ERR_INVALID_ARG,
                     "%s: the model has no down_proj module, which the mixed quant predicate '%s' "
                     "needs",
                     pl->p->input_dir, pl->p->quant_predicate);
}

static lmc_dtype out_dtype(const plan *pl, lmc_dtype dt) {
    return is_float(dt) && pl->has_target ? pl->target : dt;
}

static lmc_status plan_items(plan *pl) {
    lmc_status st;
    if (pl->p->quant_predicate && (st = prepare_mixed(pl)) != LMC_OK) return st;
    /* pass 0: stored quantized modules (their scales sort before the weight);
     * pass 1: everything else */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < pl->n_t; i++) {
            cv_tensor *t = &pl->t[i];
            if (t->used) continue;
            char prefix[512];
            cv_tensor *s = NULL, *b = NULL;
            if (pass == 0 && !(ends_with(t->name, ".weight") && t->dtype == LMC_DTYPE_U32))
                continue;
            if (ends_with(t->name, ".weight") && t->dtype == LMC_DTYPE_U32) {
                snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(t->name) - 7), t->name);
                char name[600];
                snprintf(name, sizeof name, "%s.scales", prefix);
                s = find_tensor(pl, name);
                snprintf(name, sizeof name, "%s.biases", prefix);
                b = find_tensor(pl, name);
            }
            if (s && b) { /* a stored quantized module */
                if (!pl->in_quant)
                    return lmc_error(LMC_ERR_FORMAT,
                                     "%s: '%s' is stored quantized but config.json has no "
                                     "\"quantization\"",
                                     pl->p->input_dir, prefix);
                int bits = 0, group = 0;
                int64_t cols = 0;
                if ((st = module_quant(pl, prefix, t, s, &bits, &group, &cols)) != LMC_OK)
                    return st;
                s->used = b->used = t->used = true;
                uint64_t rows = (uint64_t)(numel(t) / t->shape[t->ndim - 1]);
                if (pl->p->dequantize) {
                    cv_item *it = new_item(pl, CV_DEQUANTIZE, prefix);
                    if (!it) return lmc_error(LMC_ERR_NOMEM, "out of memory");
                    it->src[0] = t;
                    it->src[1] = s;
                    it->src[2] = b;
                    it->bits = bits;
                    it->group = group;
                    it->cols = cols;
                    it->dtype = pl->has_target ? pl->target : s->dtype;
                    it->nbytes = rows * (uint64_t)cols * lmc_dtype_size(it->dtype);
                    it->parameters = rows * (uint64_t)cols;
                    continue;
                }
                const cv_tensor *parts[3] = {t, s, b};
                for (int k = 0; k < 3; k++) {
                    cv_item *it = new_item(pl, CV_CAST, parts[k]->name);
                    if (!it) return lmc_error(LMC_ERR_NOMEM, "out of memory");
                    it->src[0] = parts[k];
                    it->dtype = out_dtype(pl, parts[k]->dtype);
                    it->nbytes = (uint64_t)numel(parts[k]) * lmc_dtype_size(it->dtype);
                    it->parameters = k == 0 ? rows * (uint64_t)cols : 0;
                }
                continue;
            }
            if (pl->p->quantize && quantizable(pl, t)) {
                snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(t->name) - 7), t->name);
                cv_item *it = new_item(pl, CV_QUANTIZE, prefix);
                if (!it) return lmc_error(LMC_ERR_NOMEM, "out of memory");
                it->src[0] = t;
                it->bits = pl->p->quant_predicate ? mixed_bits(pl, prefix) : pl->bits;
                it->group = pl->group;
                it->cols = t->shape[t->ndim - 1];
                it->dtype = out_dtype(pl, t->dtype);
                uint64_t n = (uint64_t)numel(t);
                it->nbytes = n * (uint64_t)it->bits / 8 +
                             2 * (n / (uint64_t)it->group) * lmc_dtype_size(it->dtype);
                it->parameters = n;
                t->used = true;
                continue;
            }
            cv_item *it = new_item(pl, CV_CAST, t->name);
            if (!it) return lmc_error(LMC_ERR_NOMEM, "out of memory");
            it->src[0] = t;
            it->dtype = out_dtype(pl, t->dtype);
            it->nbytes = (uint64_t)numel(t) * lmc_dtype_size(it->dtype);
            it->parameters = (uint64_t)numel(t);
            t->used = true;
        }
    return LMC_OK;
}

static int cmp_item(const void *a, const void *b) {
    return cv_natural_cmp(((const cv_item *)a)->name, ((const cv_item *)b)->name);
}

/* make_shards: a new shard when the next tensor would pass the limit. The
 * items go in module order (names with numbers compared as numbers), the
 * order in which mlx-lm lists a model's parameters for the usual layouts. */
static int assign_shards(cv_item *items, size_t n, uint64_t limit) {
    int shard = 0;
    uint64_t size = 0;
    for (size_t i = 0; i < n; i++) {
        if (size > 0 && size + items[i].nbytes > limit) {
            shard++;
            size = 0;
        }
        items[i].shard = shard;
        size += items[i].nbytes;
    }
    return shard + 1;
}

/* ---- config.json (save_config) ------------------------------------------- */

static json_t *quant_entry(int group, int bits) {
    return json_pack("{s:i, s:i, s:s}", "group_size", group, "bits", bits, "mode", "affine");
}

static lmc_status write_config(const plan *pl, const char *dir) {
    json_t *c = json_deep_copy(pl->cfg.json), *sorted = json_object();
    lmc_status st = LMC_OK;
    if (!c || !sorted) goto nomem;
    json_object_del(c, "_name_or_path");
    json_object_del(c, "vision_config");
    if (pl->p->quantize) {
        json_t *q = quant_entry(pl->group, pl->bits);
        if (!q) goto nomem;
        if (pl->p->quant_predicate)
            for (size_t i = 0; i < pl->n_items; i++)
                if (pl->items[i].kind == CV_QUANTIZE)
                    json_object_set_new(q, pl->items[i].name,
                                        quant_entry(pl->items[i].group, pl->items[i].bits));
        json_object_set(c, "quantization", q);
        json_object_set_new(c, "quantization_config", q);
    } else if (pl->p->dequantize) {
        json_object_del(c, "quantization");
        json_object_del(c, "quantization_config");
    } else if (json_object_get(c, "quantization")) {
        json_object_set(c, "quantization_config", json_object_get(c, "quantization"));
    }
    /* mlx-lm leaves torch_dtype alone; it is set to the dtype written so the
     * folder describes itself (as the mlx-community conformance folders do). */
    if (pl->has_target) {
        if (json_object_get(c, "torch_dtype") || !json_object_get(c, "dtype"))
            json_object_set_new(c, "torch_dtype", json_string(dtype_config_name(pl->target)));
        if (json_object_get(c, "dtype"))
            json_object_set_new(c, "dtype", json_string(dtype_config_name(pl->target)));
    }
    /* dict(sorted(config.items())): the top level only */
    size_t n = json_object_size(c), k = 0;
    const char **keys = malloc((n + 1) * sizeof *keys);
    if (!keys) goto nomem;
    const char *key;
    json_t *val;
    json_object_foreach(c, key, val) keys[k++] = key;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *x = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = x;
        }
    for (k = 0; k < n; k++) json_object_set(sorted, keys[k], json_object_get(c, keys[k]));
    free(keys);
    char *text = lmc_json_dumps_python(sorted, 4);
    char *path = lmc_path_join(dir, "config.json");
    if (!text || !path) {
        free(text);
        free(path);
        goto nomem;
    }
    FILE *f = fopen(path, "wb");
    size_t len = strlen(text);
    bool ok = f && fwrite(text, 1, len, f) == len;
    if (f) ok = (fclose(f) == 0) && ok;
    if (!ok) st = lmc_error(LMC_ERR_IO, "%s: cannot write", path);
    free(text);
    free(path);
    json_decref(c);
    json_decref(sorted);
    return st;
nomem:
    if (c) json_decref(c);
    if (sorted) json_decref(sorted);
    return lmc_error(LMC_ERR_NOMEM, "out of memory writing config.json");
}

/* ---- the output folder ------------------------------------------------------- */

static char *strip_slashes(const char *s) {
    char *r = lmc_strdup(s);
    if (!r) return NULL;
    size_t n = strlen(r);
    while (n > 1 && r[n - 1] == '/') r[--n] = '\0';
    return r;
}

static lmc_status make_parents(const char *out) {
    char *p = lmc_strdup(out);
    if (!p) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            lmc_status st = lmc_error(LMC_ERR_IO, "%s: cannot create: %s", p, strerror(errno));
            free(p);
            return st;
        }
        *s = '/';
    }
    free(p);
    return LMC_OK;
}

static bool is_empty_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)) != NULL)
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

/* --force replaces only what looks like a model folder (or an empty one). */
static lmc_status check_output(const lmc_convert_params *p, const char *out) {
    struct stat sb;
    if (lstat(out, &sb) != 0) return LMC_OK;
    if (!p->force)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "convert: cannot save to %s: it already exists (delete it, or force)",
                         out);
    if (!S_ISDIR(sb.st_mode))
        return lmc_error(LMC_ERR_INVALID_ARG, "convert: %s exists and is not a folder", out);
    char *cfg = lmc_path_join(out, "config.json");
    bool model = cfg && lmc_file_exists(cfg);
    free(cfg);
    if (!model && !is_empty_dir(out))
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "convert: %s is not a model folder (no config.json); not replacing it",
                         out);
    char in_real[PATH_MAX], out_real[PATH_MAX];
    if (realpath(p->input_dir, in_real) && realpath(out, out_real) && !strcmp(in_real, out_real))
        return lmc_error(LMC_ERR_INVALID_ARG, "convert: the output %s is the input", out);
    return LMC_OK;
}

/* Moves tmp to out, replacing out (already checked) when it exists. */
static lmc_status publish(const char *tmp, const char *out) {
    /* rename(2) also replaces an empty folder */
    if (rename(tmp, out) == 0) return LMC_OK;
    if (errno != ENOTEMPTY && errno != EEXIST)
        return lmc_error(LMC_ERR_IO, "%s: cannot rename to %s: %s", tmp, out, strerror(errno));
    char *old = lmc_sprintf("%s.old-XXXXXX", out);
    if (!old) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (!mkdtemp(old) || rename(out, old) != 0) {
        lmc_status st = lmc_error(LMC_ERR_IO, "%s: cannot move aside: %s", out, strerror(errno));
        rmdir(old);
        free(old);
        return st;
    }
    if (rename(tmp, out) != 0) {
        lmc_status st =
            lmc_error(LMC_ERR_IO, "%s: cannot rename to %s: %s", tmp, out, strerror(errno));
        rename(old, out);
        free(old);
        return st;
    }
    lmc_remove_tree(old);
    free(old);
    return LMC_OK;
}

static void plan_free(plan *pl) {
    for (size_t i = 0; i < pl->n_t; i++) {
        free(pl->t[i].name);
        free((void *)pl->t[i].src);
    }
    free(pl->t);
    for (size_t i = 0; i < pl->n_items; i++) free(pl->items[i].name);
    free(pl->items);
    if (pl->weights_open) lmc_weights_close(&pl->w);
    lmc_config_free(&pl->cfg);
}

lmc_status lmc_convert(const lmc_convert_params *params, lmc_convert_progress_fn progress,
                       void *user_data) {
    if (!params) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_convert: params is NULL");
    plan pl = {.p = params};
    cv_job job = {.p = params, .progress = progress, .user_data = user_data};
    char *out = NULL;
    lmc_status st = check_params(params, &pl);
    if (st != LMC_OK) return st;
    if (!(out = strip_slashes(params->output_dir)))
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    if ((st = check_output(params, out)) != LMC_OK) goto done;
    if (!lmc_dir_exists(params->input_dir)) {
        st = lmc_error(LMC_ERR_NOT_FOUND, "convert: input folder %s not found", params->input_dir);
        goto done;
    }
    if ((st = lmc_config_load(params->input_dir, &pl.cfg)) != LMC_OK) goto done;
    if ((st = lmc_config_quantization(&pl.cfg, params->input_dir, &pl.in_quant)) != LMC_OK)
        goto done;
    if (params->quantize && pl.in_quant) {
        st = lmc_error(LMC_ERR_UNSUPPORTED, "convert: %s is already quantized; dequantize it first",
                       params->input_dir);
        goto done;
    }
    resolve_dtype(&pl);
    if ((st = lmc_weights_open(params->input_dir, &pl.w)) != LMC_OK) goto done;
    pl.weights_open = true;
    if ((st = build_tensors(&pl)) != LMC_OK) goto done;
    if ((st = plan_items(&pl)) != LMC_OK) goto done;
    qsort(pl.items, pl.n_items, sizeof *pl.items, cmp_item);
    job.items = pl.items;
    job.n_items = pl.n_items;
    job.n_shards =
        assign_shards(pl.items, pl.n_items,
                      params->max_shard_bytes ? params->max_shard_bytes : DEFAULT_SHARD_BYTES);
    for (size_t i = 0; i < pl.n_items; i++) job.total_bytes += pl.items[i].nbytes;

    if ((st = make_parents(out)) != LMC_OK) goto done;
    job.tmp_dir = lmc_sprintf("%s.tmp-XXXXXX", out);
    if (!job.tmp_dir) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!mkdtemp(job.tmp_dir)) {
        st = lmc_error(LMC_ERR_IO, "%s: cannot create: %s", job.tmp_dir, strerror(errno));
        free(job.tmp_dir);
        job.tmp_dir = NULL;
        goto done;
    }
    chmod(job.tmp_dir, 0755);
    if ((st = cv_write_shards(&job)) != LMC_OK) goto done;
    if ((st = write_config(&pl, job.tmp_dir)) != LMC_OK) goto done;
    if ((st = cv_copy_side_files(params->input_dir, job.tmp_dir)) != LMC_OK) goto done;
    if (progress && progress(job.total_bytes, job.total_bytes, NULL, user_data)) {
        st = lmc_error(LMC_ERR_STOPPED, "convert stopped by the progress callback");
        goto done;
    }
    st = publish(job.tmp_dir, out);
done:
    if (job.tmp_dir && st != LMC_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", lmc_last_error());
        lmc_remove_tree(job.tmp_dir);
        lmc_error(st, "%s", msg);
    }
    free(job.tmp_dir);
    free(out);
    plan_free(&pl);
    return st;
}
