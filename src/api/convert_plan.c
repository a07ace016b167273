/* The conversion plan (mlx_lm/utils.py quantize_model, dequantize_model
 * and the sanitize step): which tensors the input holds under mlx-lm's
 * names, and what each becomes in the output. */
#include "api/convert_internal.h"
#include "kernels/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static cv_tensor *find_tensor(const cv_plan *pl, const char *name) {
    cv_tensor key = {.name = (char *)name};
    return bsearch(&key, pl->t, pl->n_t, sizeof *pl->t, cmp_tensor);
}

lmc_status cv_build_tensors(cv_plan *pl) {
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

static cv_item *new_item(cv_plan *pl, cv_kind kind, const char *name) {
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
static lmc_status module_quant(const cv_plan *pl, const char *prefix, const cv_tensor *w,
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
static bool quantizable(const cv_plan *pl, const cv_tensor *t) {
    if (!ends_with(t->name, ".weight") || !is_float(t->dtype)) return false;
    if (strstr(t->name, "norm")) return false;
    bool ok = t->ndim == 2 || (t->ndim == 3 && strstr(t->name, ".switch_mlp."));
    return ok && t->shape[t->ndim - 1] % pl->group == 0;
}

/* mixed_quant_predicate: more bits for v_proj and down_proj of the first
 * and last eighth of the layers and every third one between, and lm_head. */
static int mixed_bits(const cv_plan *pl, const char *path) {
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

static lmc_status prepare_mixed(cv_plan *pl) {
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

static lmc_dtype out_dtype(const cv_plan *pl, lmc_dtype dt) {
    return is_float(dt) && pl->has_target ? pl->target : dt;
}

static lmc_status plan_items(cv_plan *pl) {
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

lmc_status cv_plan_items(cv_plan *pl, uint64_t shard_bytes, int *n_shards) {
    lmc_status st = plan_items(pl);
    if (st != LMC_OK) return st;
    qsort(pl->items, pl->n_items, sizeof *pl->items, cmp_item);
    *n_shards = assign_shards(pl->items, pl->n_items, shard_bytes);
    return LMC_OK;
}
