/* config.json of a converted model, as mlx_lm's save_config writes it. */
#include "api/convert_internal.h"
#include "kernels/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dtype_config_name(lmc_dtype dt) {
    return dt == LMC_DTYPE_F16 ? "float16" : dt == LMC_DTYPE_BF16 ? "bfloat16" : "float32";
}

static json_t *quant_entry(int group, int bits) {
    return json_pack("{s:i, s:i, s:s}", "group_size", group, "bits", bits, "mode", "affine");
}

lmc_status cv_write_config(const cv_plan *pl, const char *dir) {
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
