#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *cmd, const char *fmt, ...) {
    fprintf(stderr, "lmc %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cli_fail_status(const char *cmd, lmc_status st) {
    const char *msg = lmc_last_error();
    return cli_fail(cmd, "%s", msg && *msg ? msg : lmc_status_string(st));
}

bool cli_parse_int(const char *s, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool cli_parse_ids(const char *s, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t cap = 16, len = 0;
    int32_t *a = malloc(cap * sizeof *a);
    if (!a) return false;
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n')) {
            free(a);
            return false;
        }
        if (len == cap) {
            cap *= 2;
            int32_t *b = realloc(a, cap * sizeof *a);
            if (!b) {
                free(a);
                return false;
            }
            a = b;
        }
        a[len++] = (int32_t)v;
        p = end;
    }
    *ids = a;
    *n = len;
    return true;
}

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **value) {
    if (strcmp(argv[*i], name) != 0) return false;
    if (*i + 1 >= argc) {
        *value = NULL;
        return true;
    }
    *value = argv[++*i];
    return true;
}
