/* Finding and loading models for the subcommands: the shipped model, the
 * factories with a progress bar on a terminal, load details with --verbose. */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool has_config(const char *dir) {
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path) return false;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char g_shipped[PATH_MAX];
static char g_tried[4 * PATH_MAX + 64];

/* Tries base/CLI_SHIPPED_DIR; records the attempt. */
static bool try_dir(const char *base) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/%s", base, CLI_SHIPPED_DIR) >= (int)sizeof dir) return false;
    char *real = realpath(dir, NULL);
    if (real && has_config(real) && strlen(real) < sizeof g_shipped) {
        strcpy(g_shipped, real);
        free(real);
        return true;
    }
    free(real);
    size_t used = strlen(g_tried);
    snprintf(g_tried + used, sizeof g_tried - used, "%s%s", used ? ", " : "", dir);
    return false;
}

const char *cli_shipped_model(void) {
    if (g_shipped[0]) return g_shipped;
    g_tried[0] = '\0';
    bool found = false;
    const char *env = getenv("LMC_MODELS_DIR");
    if (env && *env) found = try_dir(env);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!found && n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        char base[PATH_MAX];
        /* build/lmc -> models/; PREFIX/bin/lmc -> PREFIX/share/lmc/models */
        if (snprintf(base, sizeof base, "%s/../models", exe) < (int)sizeof base)
            found = try_dir(base);
        if (!found && snprintf(base, sizeof base, "%s/../share/lmc/models", exe) < (int)sizeof base)
            found = try_dir(base);
    }
#ifdef LMC_SOURCE_MODELS_DIR
    if (!found) found = try_dir(LMC_SOURCE_MODELS_DIR);
#endif
    if (!found) return NULL;
    lmc_model_preset p = {.name = CLI_SHIPPED_NAME,
                          .hub_id = g_shipped,
                          .default_prompt = "And God said,",
                          .extra_eos = NULL,
                          .kind = LMC_MODEL_LLM};
    lmc_registry_add(&p); /* copies; a failure only loses the name */
    return g_shipped;
}

/* ---- loading ---------------------------------------------------------------- */

typedef struct progress {
    bool tty;
    int drawn; /* last percentage drawn, -1 none */
    double start;
} progress;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int on_progress(const char *stage, double fraction, void *ud) {
    progress *p = ud;
    if (cli_verbose)
        fprintf(stderr, "lmc: load %-9s %3.0f%%  %.3f s\n", stage, 100 * fraction,
                now() - p->start);
    else if (p->tty) {
        int pct = (int)(100 * fraction);
        if (pct != p->drawn) {
            int w = pct * 30 / 100;
            fprintf(stderr, "\rloading %-9s [%.*s%*s] %3d%%", stage, w,
                    "==============================", 30 - w, "", pct);
            p->drawn = pct;
        }
    }
    return 0;
}

static void on_log(lmc_log_level level, const char *message, void *ud) {
    (void)level;
    (void)ud;
    fprintf(stderr, "lmc: %s\n", message);
}

char *cli_model_dir(const char *cmd, const char *spec) {
    const char *shipped = cli_shipped_model();
    if (!spec) spec = shipped;
    if (!spec) {
        cli_fail(cmd, "no --model given and the shipped model %s is in none of: %s",
                 CLI_SHIPPED_DIR, g_tried);
        return NULL;
    }
    char *dir = NULL;
    lmc_status st = lmc_model_locate(spec, &dir);
    if (st != LMC_OK) {
        cli_fail_status(cmd, st);
        return NULL;
    }
    return dir;
}

bool cli_load(const char *cmd, const char *spec, lmc_model_kind kind, int32_t max_kv_tokens,
              lmc_container **out) {
    *out = NULL;
    const char *shipped = cli_shipped_model(); /* also registers its name */
    if (!spec) {
        if (kind == LMC_MODEL_VLM) {
            for (int32_t i = 0; i < lmc_registry_count() && !spec; i++)
                if (lmc_registry_get(i)->kind == LMC_MODEL_VLM) spec = lmc_registry_get(i)->name;
        } else {
            spec = shipped;
        }
        if (!spec) {
            cli_fail(cmd, "no --model given and the shipped model %s is in none of: %s",
                     CLI_SHIPPED_DIR, g_tried);
            return false;
        }
    }
    if (cli_verbose) lmc_set_log_callback(on_log, NULL);
    progress p = {.tty = isatty(2) && !cli_verbose, .drawn = -1, .start = now()};
    lmc_load_options o = {.progress = on_progress, .user_data = &p, .max_kv_tokens = max_kv_tokens};
    lmc_status st =
        kind == LMC_MODEL_VLM ? lmc_vlm_load(spec, &o, out) : lmc_llm_load(spec, &o, out);
    if (p.tty && p.drawn >= 0) fprintf(stderr, "\r%60s\r", "");
    if (st != LMC_OK) {
        cli_fail_status(cmd, st);
        return false;
    }
    if (cli_verbose) fprintf(stderr, "lmc: loaded %s in %.3f s\n", spec, now() - p.start);
    return true;
}
