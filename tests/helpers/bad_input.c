#include "helpers/bad_input.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *bi_tmpdir(void) {
    char tmpl[] = "/tmp/lmc-bad-XXXXXX";
    if (!mkdtemp(tmpl)) return NULL;
    return lmc_strdup(tmpl);
}

char *bi_path(const char *dir, const char *name) {
    return lmc_path_join(dir, name);
}

static void rm_dir(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = bi_path(dir, e->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode) && depth > 0)
                rm_dir(p, depth - 1);
            else
                unlink(p);
        }
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

void bi_rmtree(const char *dir) {
    /* Only what bi_tmpdir made. */
    if (dir && !strncmp(dir, "/tmp/lmc-bad-", 13)) rm_dir(dir, 1);
}

static bool copy_file(const char *from, const char *to) {
    char *data = NULL;
    size_t n = 0;
    if (lmc_read_file(from, &data, &n) != LMC_OK) return false;
    FILE *f = fopen(to, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    free(data);
    return ok;
}

char *bi_copy_fixture(const char *name) {
    char *src = lmc_sprintf("%s/tests/fixtures/models/%s", LMC_SOURCE_DIR, name);
    char *dst = bi_tmpdir();
    DIR *d = src ? opendir(src) : NULL;
    bool ok = d && dst;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *a = bi_path(src, e->d_name), *b = bi_path(dst, e->d_name);
        ok = a && b && copy_file(a, b);
        free(a);
        free(b);
    }
    if (d) closedir(d);
    free(src);
    if (!ok) {
        bi_rmtree(dst);
        free(dst);
        return NULL;
    }
    return dst;
}

bool bi_write(const char *dir, const char *name, const void *data, size_t len) {
    char *p = bi_path(dir, name);
    FILE *f = p ? fopen(p, "wb") : NULL;
    bool ok = f && (len == 0 || fwrite(data, 1, len, f) == len);
    if (f) ok = fclose(f) == 0 && ok;
    free(p);
    return ok;
}

bool bi_write_str(const char *dir, const char *name, const char *text) {
    return bi_write(dir, name, text, strlen(text));
}

bool bi_truncate(const char *dir, const char *name, long size) {
    char *p = bi_path(dir, name);
    bool ok = p && truncate(p, size) == 0;
    free(p);
    return ok;
}

bool bi_remove(const char *dir, const char *name) {
    char *p = bi_path(dir, name);
    bool ok = p && unlink(p) == 0;
    free(p);
    return ok;
}

long bi_file_size(const char *dir, const char *name) {
    char *p = bi_path(dir, name);
    struct stat st;
    long n = p && stat(p, &st) == 0 ? (long)st.st_size : -1;
    free(p);
    return n;
}

bool bi_write_st(const char *dir, const char *name, const char *header,
                 uint64_t header_len_override, const void *data, size_t data_len) {
    size_t hl = strlen(header);
    uint64_t len = header_len_override ? header_len_override : hl;
    size_t total = 8 + hl + data_len;
    uint8_t *buf = malloc(total);
    if (!buf) return false;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(len >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (data_len) memcpy(buf + 8 + hl, data, data_len);
    bool ok = bi_write(dir, name, buf, total);
    free(buf);
    return ok;
}

bool bi_edit_tensor(const char *dir, const char *file, const bi_tensor_edit *edit) {
    char *p = bi_path(dir, file);
    lmc_safetensors st;
    lmc_safetensors_writer *w = NULL;
    if (!p || lmc_safetensors_open(p, &st) != LMC_OK) {
        free(p);
        return false;
    }
    bool ok = lmc_safetensors_writer_create(&w) == LMC_OK, found = false;
    for (size_t i = 0; ok && i < st.n_tensors; i++) {
        const lmc_tensor *t = &st.tensors[i];
        if (strcmp(t->name, edit->name) != 0) {
            ok = lmc_safetensors_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data) ==
                 LMC_OK;
            continue;
        }
        found = true;
        if (edit->drop) continue;
        lmc_dtype dt = edit->dtype >= 0 ? (lmc_dtype)edit->dtype : t->dtype;
        int nd = edit->ndim ? edit->ndim : t->ndim;
        const int64_t *shape = edit->ndim ? edit->shape : t->shape;
        uint64_t bytes = lmc_dtype_size(dt);
        for (int d = 0; d < nd; d++) bytes *= (uint64_t)shape[d];
        ok = bytes <= t->nbytes &&
             lmc_safetensors_writer_add(w, t->name, dt, nd, shape, t->data) == LMC_OK;
    }
    ok = ok && found && lmc_safetensors_writer_write(w, p) == LMC_OK;
    lmc_safetensors_writer_free(w);
    lmc_safetensors_close(&st);
    free(p);
    return ok;
}

bool bi_edit_json(const char *dir, const char *file, const char *key, json_t *value) {
    char *p = bi_path(dir, file);
    json_error_t err;
    json_t *root = p ? json_load_file(p, 0, &err) : NULL;
    json_t *obj = root;
    char *k = lmc_strdup(key);
    char *dot = k ? strchr(k, '.') : NULL;
    const char *leaf = k;
    if (dot && obj) {
        *dot = '\0';
        obj = json_object_get(root, k);
        leaf = dot + 1;
    }
    bool ok = json_is_object(obj) && k;
    if (ok && value)
        ok = json_object_set_new(obj, leaf, value) == 0;
    else if (value)
        json_decref(value);
    if (ok && !value) ok = json_object_del(obj, leaf) == 0;
    if (ok) ok = json_dump_file(root, p, JSON_INDENT(2)) == 0;
    if (root) json_decref(root);
    free(k);
    free(p);
    return ok;
}

int bi_run_cli(const char *args, char **err) {
    *err = NULL;
    char *dir = bi_tmpdir();
    char *errfile = dir ? bi_path(dir, "stderr.txt") : NULL;
    char *cmd = errfile ? lmc_sprintf("'%s' %s >/dev/null 2>'%s'", LMC_CLI, args, errfile) : NULL;
    int rc = -2;
    if (cmd) {
        int ws = system(cmd);
        rc = ws == -1 ? -2 : WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        size_t n;
        if (lmc_read_file(errfile, err, &n) != LMC_OK) *err = NULL;
    }
    free(cmd);
    free(errfile);
    bi_rmtree(dir);
    free(dir);
    return rc;
}

int bi_count_lines(const char *text) {
    int n = 0;
    const char *p = text;
    for (; p && *p; p++)
        if (*p == '\n') n++;
    if (p && p != text && p[-1] != '\n') n++;
    return n;
}
