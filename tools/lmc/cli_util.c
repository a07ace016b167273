/* The option parser and the helpers every subcommand shares. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool cli_verbose;

int cli_fail(const char *cmd, const char *fmt, ...) {
    fprintf(stderr, "lmc %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    fprintf(stderr, "lmc %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'lmc %s --help')\n", cmd);
    return CLI_EXIT_USAGE;
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
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool is_sep(char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n';
}

bool cli_parse_ids(const char *s, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t cap = 16, len = 0;
    int32_t *a = malloc(cap * sizeof *a);
    if (!a) return false;
    const char *p = s;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && !is_sep(*end))) {
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
        /* one comma (with blanks around it) or blanks between ids; none after the last */
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (*p == ',') {
            p++;
            while (*p == ' ' || *p == '\t' || *p == '\n') p++;
            if (!*p || *p == ',') {
                free(a);
                return false;
            }
        }
    }
    *ids = a;
    *n = len;
    return true;
}

void cli_strs_free(cli_strs *s) {
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = !strcmp(path, "-") ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (buf && ferror(f)) {
        int e = errno;
        free(buf);
        buf = NULL;
        errno = e ? e : EIO;
    }
    if (f != stdin) fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static bool write_all(FILE *f, const void *data, size_t len) {
    return fwrite(data, 1, len, f) == len && fflush(f) == 0;
}

int cli_write_file(const char *cmd, const char *path, const void *data, size_t len) {
    struct stat st;
    if (!strcmp(path, "-")) {
        if (!write_all(stdout, data, len))
            return cli_fail(cmd, "cannot write to stdout: %s", strerror(errno));
        return CLI_EXIT_OK;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) return cli_fail(cmd, "%s is a folder", path);
        FILE *f = fopen(path, "wb");
        if (!f) return cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
        bool ok = write_all(f, data, len);
        int e = errno;
        if (fclose(f) != 0 && ok) {
            ok = false;
            e = errno;
        }
        return ok ? CLI_EXIT_OK : cli_fail(cmd, "cannot write %s: %s", path, strerror(e));
    }
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    if (!tmp) return cli_fail(cmd, "out of memory");
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(tmp);
        return cli_fail(cmd, "cannot write %s: %s", path, strerror(e));
    }
    bool ok = write_all(f, data, len) && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) unlink(tmp);
    free(tmp);
    return ok ? CLI_EXIT_OK : cli_fail(cmd, "cannot write %s: %s", path, strerror(e));
}

char *cli_text_arg(const char *cmd, const char *arg) {
    if (arg[0] == '@' && arg[1]) {
        char *t = cli_read_file(arg + 1, NULL);
        if (!t) cli_fail(cmd, "cannot read '%s': %s", arg + 1, strerror(errno));
        return t;
    }
    char *t = strdup(arg);
    if (!t) cli_fail(cmd, "out of memory");
    return t;
}

/* ---- the parser --------------------------------------------------------------- */

static long g_threads;
static bool g_exact, g_kv_f16, g_help;

static const cli_option COMMON[] = {
    {"help", 'h', CLI_FLAG, &g_help, NULL, "print this help and exit", 0, 0, NULL},
    {"verbose", 'v', CLI_FLAG, &cli_verbose, NULL, "print load details and timings on stderr", 0, 0,
     NULL},
};
static const cli_option MODEL_COMMON[] = {
    {"threads", 't', CLI_INT, &g_threads, "N",
     "worker threads (default: the cores; or LMC_NUM_THREADS)", 1, 1024, NULL},
    {"exact", 0, CLI_FLAG, &g_exact, NULL,
     "keep every activation in f32 (no integer dot products; or LMC_EXACT=1)", 0, 0, NULL},
    {"kv-f16", 0, CLI_FLAG, &g_kv_f16, NULL,
     "keep the KV cache in f16: half the memory and the attention traffic (or LMC_KV_F16=1)", 0, 0,
     NULL},
};

static const cli_option *find_long(const cli_command *cmd, const char *name, size_t len) {
    for (int i = 0; i < cmd->n_options; i++)
        if (strlen(cmd->options[i].name) == len && !strncmp(cmd->options[i].name, name, len))
            return &cmd->options[i];
    for (size_t i = 0; i < sizeof COMMON / sizeof COMMON[0]; i++)
        if (strlen(COMMON[i].name) == len && !strncmp(COMMON[i].name, name, len)) return &COMMON[i];
    if (cmd->flags & CLI_MODEL_OPTIONS)
        for (size_t i = 0; i < sizeof MODEL_COMMON / sizeof MODEL_COMMON[0]; i++)
            if (strlen(MODEL_COMMON[i].name) == len && !strncmp(MODEL_COMMON[i].name, name, len))
                return &MODEL_COMMON[i];
    return NULL;
}

static const cli_option *find_short(const cli_command *cmd, char c) {
    for (int i = 0; i < cmd->n_options; i++)
        if (cmd->options[i].short_name == c) return &cmd->options[i];
    for (size_t i = 0; i < sizeof COMMON / sizeof COMMON[0]; i++)
        if (COMMON[i].short_name == c) return &COMMON[i];
    if (cmd->flags & CLI_MODEL_OPTIONS)
        for (size_t i = 0; i < sizeof MODEL_COMMON / sizeof MODEL_COMMON[0]; i++)
            if (MODEL_COMMON[i].short_name == c) return &MODEL_COMMON[i];
    return NULL;
}

static bool in_range(const cli_option *o, double v) {
    if (o->min == 0 && o->max == 0) return true;
    return v >= o->min && v <= o->max;
}

static int set_value(const cli_command *cmd, const cli_option *o, const char *shown,
                     const char *value) {
    switch (o->kind) {
    case CLI_FLAG:
        *(bool *)o->dest = true;
        break;
    case CLI_STR:
        *(const char **)o->dest = value;
        break;
    case CLI_STRS: {
        cli_strs *s = o->dest;
        const char **v = realloc(s->v, (size_t)(s->n + 1) * sizeof *v);
        if (!v) return cli_usage_error(cmd->name, "out of memory");
        v[s->n++] = value;
        s->v = v;
        break;
    }
    case CLI_INT: {
        long n;
        if (!cli_parse_int(value, &n) || !in_range(o, (double)n)) {
            if (o->min == 0 && o->max == 0)
                return cli_usage_error(cmd->name, "%s wants an integer, not '%s'", shown, value);
            return cli_usage_error(cmd->name, "%s wants an integer from %.0f to %.0f, not '%s'",
                                   shown, o->min, o->max, value);
        }
        *(long *)o->dest = n;
        break;
    }
    case CLI_FLOAT: {
        double d;
        if (!cli_parse_float(value, &d) || !in_range(o, d)) {
            if (o->min == 0 && o->max == 0)
                return cli_usage_error(cmd->name, "%s wants a number, not '%s'", shown, value);
            return cli_usage_error(cmd->name, "%s wants a number from %g to %g, not '%s'", shown,
                                   o->min, o->max, value);
        }
        *(double *)o->dest = d;
        break;
    }
    }
    if (o->seen) *o->seen = true;
    return -1;
}

int cli_parse(const cli_command *cmd, int argc, char **argv) {
    g_help = false;
    g_threads = 0;
    g_exact = false;
    g_kv_f16 = false;
    bool positional_seen = false, no_more_options = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (no_more_options || a[0] != '-' || !a[1]) {
            if (cmd->positional && !positional_seen) {
                *cmd->positional = a;
                positional_seen = true;
                continue;
            }
            return cli_usage_error(cmd->name, "unexpected argument '%s'", a);
        }
        if (!strcmp(a, "--")) {
            no_more_options = true;
            continue;
        }
        const cli_option *o;
        const char *value = NULL;
        char shown[64];
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(cmd, name, len);
            if (!o) return cli_usage_error(cmd->name, "unknown option '%.*s'", (int)len + 2, a);
            snprintf(shown, sizeof shown, "--%s", o->name);
            if (eq) {
                if (o->kind == CLI_FLAG)
                    return cli_usage_error(cmd->name, "%s takes no value", shown);
                value = eq + 1;
            }
        } else {
            if (a[2]) return cli_usage_error(cmd->name, "unknown option '%s'", a);
            o = find_short(cmd, a[1]);
            if (!o) return cli_usage_error(cmd->name, "unknown option '%s'", a);
            snprintf(shown, sizeof shown, "-%c", a[1]);
        }
        if (o->kind != CLI_FLAG && !value) {
            if (i + 1 >= argc) return cli_usage_error(cmd->name, "%s needs a value", shown);
            value = argv[++i];
        }
        int r = set_value(cmd, o, shown, value);
        if (r >= 0) return r;
    }
    if (g_help) {
        cli_print_help(cmd);
        return CLI_EXIT_OK;
    }
    if (cmd->flags & CLI_MODEL_OPTIONS) {
        if (g_threads) lmc_set_num_threads((int)g_threads);
        if (g_exact) lmc_set_exact(1);
        if (g_kv_f16) lmc_set_kv_f16(1);
    }
    return -1;
}

static void print_option(const cli_option *o) {
    char left[64];
    int n = 0;
    if (o->short_name)
        n = snprintf(left, sizeof left, "-%c, --%s", o->short_name, o->name);
    else
        n = snprintf(left, sizeof left, "    --%s", o->name);
    if (o->metavar && n > 0 && (size_t)n < sizeof left)
        snprintf(left + n, sizeof left - (size_t)n, " %s", o->metavar);
    if (strlen(left) > 26)
        printf("  %s\n  %-26s %s%s\n", left, "", o->help,
               o->kind == CLI_STRS ? " (repeatable)" : "");
    else
        printf("  %-26s %s%s\n", left, o->help, o->kind == CLI_STRS ? " (repeatable)" : "");
}

void cli_print_help(const cli_command *cmd) {
    printf("usage: lmc %s %s\n", cmd->name, cmd->synopsis);
    if (cmd->about) printf("\n%s\n", cmd->about);
    printf("\noptions:\n");
    for (int i = 0; i < cmd->n_options; i++) print_option(&cmd->options[i]);
    if (cmd->flags & CLI_MODEL_OPTIONS)
        for (size_t i = 0; i < sizeof MODEL_COMMON / sizeof MODEL_COMMON[0]; i++)
            print_option(&MODEL_COMMON[i]);
    for (size_t i = 0; i < sizeof COMMON / sizeof COMMON[0]; i++) print_option(&COMMON[i]);
    if (cmd->examples) printf("\nexamples:\n%s", cmd->examples);
    fflush(stdout);
}
