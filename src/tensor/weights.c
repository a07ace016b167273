/* A model folder's tensors: shards from model.safetensors.index.json,
 * model.safetensors, or every *.safetensors file (as mlx-lm globs them). */
#include "base/json.h"
#include "tensor/safetensors.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_tensor_ptr(const void *a, const void *b) {
    return strcmp((*(const lmc_tensor *const *)a)->name, (*(const lmc_tensor *const *)b)->name);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Shard file names: from the index's weight_map values, deduplicated. */
static lmc_status list_from_index(const char *index_path, json_t *index, char ***names, size_t *n) {
    json_t *map = json_object_get(index, "weight_map");
    if (!json_is_object(map))
        return lmc_error(LMC_ERR_FORMAT, "%s: no 'weight_map' object", index_path);
    size_t cap = json_object_size(map) + 1, len = 0;
    char **list = calloc(cap, sizeof *list);
    if (!list) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        if (!json_is_string(v)) {
            for (size_t i = 0; i < len; i++) free(list[i]);
            free(list);
            return lmc_error(LMC_ERR_FORMAT, "%s: weight_map['%s'] is not a file name", index_path,
                             key);
        }
        const char *f = json_string_value(v);
        if (!*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..")) {
            for (size_t i = 0; i < len; i++) free(list[i]);
            free(list);
            return lmc_error(LMC_ERR_FORMAT, "%s: weight_map['%s'] = '%s' is not a plain file name",
                             index_path, key, f);
        }
        bool seen = false;
        for (size_t i = 0; i < len && !seen; i++) seen = !strcmp(list[i], f);
        if (!seen && !(list[len++] = lmc_strdup(f))) {
            for (size_t i = 0; i < len; i++) free(list[i]);
            free(list);
            return lmc_error(LMC_ERR_NOMEM, "out of memory");
        }
    }
    qsort(list, len, sizeof *list, cmp_str);
    *names = list;
    *n = len;
    return LMC_OK;
}

static lmc_status list_from_dir(const char *dir, char ***names, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return lmc_error(LMC_ERR_IO, "%s: cannot open the model folder", dir);
    size_t cap = 8, len = 0;
    char **list = calloc(cap, sizeof *list);
    struct dirent *e = NULL;
    while (list && (e = readdir(d))) {
        if (!has_suffix(e->d_name, ".safetensors")) continue;
        if (len == cap) {
            char **b = realloc(list, 2 * cap * sizeof *list);
            if (!b) break;
            list = b;
            cap *= 2;
        }
        if (!(list[len] = lmc_strdup(e->d_name))) break;
        len++;
    }
    closedir(d);
    if (!list || e) {
        for (size_t i = 0; list && i < len; i++) free(list[i]);
        free(list);
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    if (len == 0) {
        free(list);
        return lmc_error(LMC_ERR_NOT_FOUND,
                         "%s: no model.safetensors, model.safetensors.index.json or *.safetensors",
                         dir);
    }
    qsort(list, len, sizeof *list, cmp_str);
    *names = list;
    *n = len;
    return LMC_OK;
}

lmc_status lmc_weights_open(const char *dir, lmc_weights *out) {
    memset(out, 0, sizeof *out);
    char **names = NULL;
    size_t n = 0;
    json_t *index = NULL;
    lmc_status st;
    char *index_path = lmc_path_join(dir, "model.safetensors.index.json");
    if (!index_path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (lmc_file_exists(index_path)) {
        st = lmc_json_load_file(index_path, &index);
        if (st == LMC_OK) st = list_from_index(index_path, index, &names, &n);
    } else {
        st = list_from_dir(dir, &names, &n);
    }
    if (st != LMC_OK) goto done;
    out->dir = lmc_strdup(dir);
    out->files = calloc(n ? n : 1, sizeof *out->files);
    if (!out->files || !out->dir) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = lmc_path_join(dir, names[i]);
        st = p ? lmc_safetensors_open(p, &out->files[i]) : lmc_error(LMC_ERR_NOMEM, "oom");
        free(p);
        if (st != LMC_OK) goto done;
        out->n_files = i + 1;
        total += out->files[i].n_tensors;
    }
    out->index = calloc(total ? total : 1, sizeof *out->index);
    if (!out->index) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < out->files[i].n_tensors; j++) {
            out->index[out->n_tensors++] = &out->files[i].tensors[j];
            out->total_bytes += out->files[i].tensors[j].nbytes;
        }
    qsort(out->index, out->n_tensors, sizeof *out->index, cmp_tensor_ptr);
    for (size_t i = 1; i < out->n_tensors; i++)
        if (!strcmp(out->index[i]->name, out->index[i - 1]->name)) {
            st = lmc_error(LMC_ERR_FORMAT, "%s: tensor '%s' appears in more than one file", dir,
                           out->index[i]->name);
            goto done;
        }
    /* Every tensor the index names must be in the shard it names. */
    if (index) {
        json_t *map = json_object_get(index, "weight_map");
        const char *key;
        json_t *v;
        json_object_foreach(map, key, v) {
            const char *file = json_string_value(v);
            const lmc_tensor *found = NULL;
            for (size_t i = 0; i < n && !found; i++)
                if (!strcmp(names[i], file)) found = lmc_safetensors_find(&out->files[i], key);
            if (!found) {
                st = lmc_error(LMC_ERR_NOT_FOUND,
                               "%s: model.safetensors.index.json maps '%s' to %s, which does not "
                               "hold it",
                               dir, key, file);
                goto done;
            }
        }
    }
    st = LMC_OK;
done:
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(index_path);
    if (index) json_decref(index);
    if (st != LMC_OK) lmc_weights_close(out);
    return st;
}

lmc_status lmc_weights_view(const lmc_weights *w, const lmc_weight_rename *renames,
                            size_t n_renames, lmc_weights *out) {
    memset(out, 0, sizeof *out);
    size_t n = 0, name_bytes = 0;
    for (size_t i = 0; i < w->n_tensors; i++)
        for (size_t r = 0; r < n_renames; r++) {
            size_t fl = strlen(renames[r].from);
            if (!strncmp(w->index[i]->name, renames[r].from, fl)) {
                n++;
                name_bytes += strlen(renames[r].to) + strlen(w->index[i]->name) - fl + 1;
                break;
            }
        }
    out->dir = lmc_strdup(w->dir);
    out->view_tensors = calloc(n ? n : 1, sizeof *out->view_tensors);
    out->index = calloc(n ? n : 1, sizeof *out->index);
    out->view_names = malloc(name_bytes ? name_bytes : 1);
    if (!out->dir || !out->view_tensors || !out->index || !out->view_names) {
        lmc_weights_close(out);
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    char *p = out->view_names;
    for (size_t i = 0; i < w->n_tensors; i++)
        for (size_t r = 0; r < n_renames; r++) {
            size_t fl = strlen(renames[r].from);
            const char *name = w->index[i]->name;
            if (strncmp(name, renames[r].from, fl)) continue;
            lmc_tensor *t = &out->view_tensors[out->n_tensors];
            *t = *w->index[i];
            size_t len = (size_t)sprintf(p, "%s%s", renames[r].to, name + fl);
            t->name = p;
            p += len + 1;
            out->index[out->n_tensors++] = t;
            out->total_bytes += t->nbytes;
            break;
        }
    qsort(out->index, out->n_tensors, sizeof *out->index, cmp_tensor_ptr);
    for (size_t i = 1; i < out->n_tensors; i++)
        if (!strcmp(out->index[i]->name, out->index[i - 1]->name)) {
            lmc_status st = lmc_error(LMC_ERR_FORMAT,
                                      "%s: two tensors are both named '%s' after renaming (the "
                                      "file mixes key layouts)",
                                      w->dir, out->index[i]->name);
            lmc_weights_close(out);
            return st;
        }
    out->quantization = w->quantization;
    out->renames = renames;
    out->n_renames = n_renames;
    return LMC_OK;
}

const char *lmc_weights_file_name(const lmc_weights *w, const char *name, char *buf, size_t size) {
    for (size_t r = 0; r < w->n_renames; r++) {
        size_t tl = strlen(w->renames[r].to);
        if (strncmp(name, w->renames[r].to, tl)) continue;
        /* the view holds a tensor under this rename: check it came from it */
        snprintf(buf, size, "%s%s", w->renames[r].from, name + tl);
        return buf;
    }
    return name;
}

void lmc_weights_close(lmc_weights *w) {
    for (size_t i = 0; i < w->n_files; i++) lmc_safetensors_close(&w->files[i]);
    free(w->view_tensors);
    free(w->view_names);
    free(w->files);
    free(w->index);
    free(w->dir);
    memset(w, 0, sizeof *w);
}

const lmc_tensor *lmc_weights_find(const lmc_weights *w, const char *name) {
    size_t lo = 0, hi = w->n_tensors;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(w->index[mid]->name, name);
        if (c == 0) return w->index[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Appends to buf the names (after "prefix.") of up to 8 tensors under
 * prefix; returns how many exist. */
static size_t list_under(const lmc_weights *w, const char *prefix, char *buf, size_t size) {
    size_t n = strlen(prefix), count = 0, off = strlen(buf);
    for (size_t i = 0; i < w->n_tensors; i++) {
        const char *t = w->index[i]->name;
        if (strncmp(t, prefix, n) || t[n] != '.') continue;
        if (count < 8 && off + strlen(t + n + 1) + 3 < size)
            off += (size_t)snprintf(buf + off, size - off, "%s%s", count ? ", " : "", t + n + 1);
        count++;
    }
    if (count > 8 && off + 8 < size) snprintf(buf + off, size - off, ", ...");
    return count;
}

lmc_status lmc_weights_get(const lmc_weights *w, const char *name, const lmc_tensor **out) {
    *out = lmc_weights_find(w, name);
    if (*out) return LMC_OK;
    /* Name the module and what the file holds there (or one level up), so a
     * layout mismatch (HF vs mlx-lm names, quantized vs dense) is visible. */
    char module[512], present[768] = "";
    snprintf(module, sizeof module, "%s", name);
    char *dot = strrchr(module, '.');
    if (dot) *dot = '\0';
    size_t n = dot ? list_under(w, module, present, sizeof present) : 0;
    if (n)
        return lmc_error(LMC_ERR_NOT_FOUND, "%s: missing tensor '%s': module '%s' has %s", w->dir,
                         name, module, present);
    char parent[512];
    snprintf(parent, sizeof parent, "%s", module);
    dot = strrchr(parent, '.');
    if (dot) *dot = '\0';
    n = dot ? list_under(w, parent, present, sizeof present) : 0;
    return lmc_error(LMC_ERR_NOT_FOUND, "%s: missing tensor '%s': no module '%s'; under '%s': %s",
                     w->dir, name, module, parent, n ? present : "nothing");
}

lmc_status lmc_weights_get_shaped(const lmc_weights *w, const char *name, int ndim,
                                  const int64_t *shape, const lmc_tensor **out) {
    lmc_status st = lmc_weights_get(w, name, out);
    if (st != LMC_OK) return st;
    const lmc_tensor *t = *out;
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = shape[i] < 0 || shape[i] == t->shape[i];
    if (!ok) {
        char want[128], got[128];
        *out = NULL;
        return lmc_error(LMC_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", w->dir, name,
                         lmc_shape_str(t->shape, t->ndim, got, sizeof got),
                         lmc_shape_str(shape, ndim, want, sizeof want));
    }
    return LMC_OK;
}
