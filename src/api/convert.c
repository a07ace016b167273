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

/* ---- parameters ------------------------------------------------------------ */

static lmc_status check_params(const lmc_convert_params *p, cv_plan *pl) {
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
static void resolve_dtype(cv_plan *pl) {
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

static void plan_free(cv_plan *pl) {
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
    cv_plan pl = {.p = params};
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
    if ((st = cv_build_tensors(&pl)) != LMC_OK) goto done;
    if ((st = cv_plan_items(&pl,
                            params->max_shard_bytes ? params->max_shard_bytes : DEFAULT_SHARD_BYTES,
                            &job.n_shards)) != LMC_OK)
        goto done;
    job.items = pl.items;
    job.n_items = pl.n_items;
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
    if ((st = cv_write_config(&pl, job.tmp_dir)) != LMC_OK) goto done;
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
