/* Folder helpers for writers: existence, file copy, recursive removal of
 * the library's own temporary folders. */
#include "base.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool lmc_dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

lmc_status lmc_copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    if (!in) return lmc_error(LMC_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    FILE *out = fopen(dst, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return lmc_error(LMC_ERR_IO, "%s: cannot create: %s", dst, strerror(e));
    }
    char buf[1 << 16];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    int e = errno;
    fclose(in);
    ok = (fclose(out) == 0) && ok;
    if (!ok) {
        unlink(dst);
        return lmc_error(LMC_ERR_IO, "%s: cannot copy to %s: %s", src, dst, strerror(e));
    }
    return LMC_OK;
}

lmc_status lmc_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? LMC_OK : lmc_error(LMC_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0) return lmc_error(LMC_ERR_IO, "%s: %s", path, strerror(errno));
        return LMC_OK;
    }
    DIR *d = opendir(path);
    if (!d) return lmc_error(LMC_ERR_IO, "%s: %s", path, strerror(errno));
    lmc_status result = LMC_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *child = lmc_path_join(path, e->d_name);
        lmc_status s = child ? lmc_remove_tree(child) : lmc_error(LMC_ERR_NOMEM, "out of memory");
        free(child);
        if (s != LMC_OK) result = s;
    }
    closedir(d);
    if (rmdir(path) != 0 && result == LMC_OK)
        result = lmc_error(LMC_ERR_IO, "%s: %s", path, strerror(errno));
    return result;
}
