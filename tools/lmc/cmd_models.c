/* lmc models [--json] [--paths]
 * The registry's presets (name, hub id, kind, and for those on this machine
 * size, architecture and quantization; "not downloaded" otherwise), then the
 * other models of the local Hugging Face cache. --json prints one JSON array
 * instead, an object per model. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* One model to show: a registry preset (present or not) or a cached model. */
typedef struct model_row {
    const lmc_model_preset *preset;   /* NULL for a model only in the cache */
    const lmc_model_summary *summary; /* NULL when not on this machine */
    bool folder;                      /* the preset names a folder, not a hub id */
} model_row;

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "512 B", "4.6 MB", "1.7 GB": decimal units, as the hub shows sizes. */
static void human_size(uint64_t bytes, char *buf, size_t size) {
    static const char *const units[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
    if (bytes < 1000) {
        snprintf(buf, size, "%u B", (unsigned)bytes);
        return;
    }
    double v = (double)bytes / 1000;
    size_t u = 0;
    while (v >= 999.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1000;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
}

static const char *kind_name(lmc_model_kind kind) {
    return kind == LMC_MODEL_VLM ? "VLM" : "LLM";
}

/* The kind config.json says (vision_config), else the preset's. */
static lmc_model_kind row_kind(const model_row *r) {
    const lmc_model_summary *s = r->summary;
    if (!r->preset) return s->kind;
    return s && s->model_type ? s->kind : r->preset->kind;
}

/* The row's folder: the preset's own, or the snapshot; NULL when absent. */
static const char *row_dir(const model_row *r) {
    if (!r->summary) return NULL;
    return r->folder ? r->preset->hub_id : r->summary->dir;
}

static const char *or_unknown(const char *s) {
    return s && *s ? s : "?";
}

/* ---- the table ------------------------------------------------------------------ */

enum { COL_NAME, COL_HUB, COL_KIND, COL_SIZE, COL_ARCH, COL_QUANT, COL_PATH, N_COLS };

/* The cells of a row; cells[COL_SIZE] is "not downloaded" (and the rest
 * empty) for an absent preset. */
static void row_cells(const model_row *r, char size[32], const char *cells[N_COLS]) {
    const lmc_model_summary *s = r->summary;
    cells[COL_NAME] = r->preset ? r->preset->name : "";
    cells[COL_HUB] = r->folder ? "(local folder)" : r->preset ? r->preset->hub_id : s->hub_id;
    cells[COL_KIND] = kind_name(row_kind(r));
    if (!s) {
        cells[COL_SIZE] = "not downloaded";
        cells[COL_ARCH] = cells[COL_QUANT] = cells[COL_PATH] = "";
        return;
    }
    human_size(s->size_bytes, size, 32);
    cells[COL_SIZE] = s->dir ? size : "?"; /* no dir: a folder preset that could not be read */
    cells[COL_ARCH] = or_unknown(s->model_type);
    cells[COL_QUANT] = or_unknown(s->quantization);
    cells[COL_PATH] = row_dir(r);
}

/* cells[first..last], each but the last padded to its column's width. */
static void print_line(const char *const *cells, int first, int last, const size_t *width) {
    for (int c = first; c < last; c++) printf("%-*s  ", (int)width[c], cells[c]);
    printf("%s\n", cells[last]);
}

/* Prints rows[0..n) as aligned columns from first to COL_QUANT (COL_PATH
 * with paths). An absent preset's "not downloaded" runs over the columns after
 * it, which it leaves empty, so it does not widen them. */
static void print_table(const model_row *rows, int n, int first, bool paths) {
    static const char *const heads[N_COLS] = {"NAME", "HUB ID", "KIND", "SIZE",
                                              "ARCH", "QUANT",  "PATH"};
    int last = paths ? COL_PATH : COL_QUANT;
    size_t width[N_COLS];
    for (int c = 0; c < N_COLS; c++) width[c] = strlen(heads[c]);
    for (int i = 0; i < n; i++) {
        char size[32];
        const char *cells[N_COLS];
        row_cells(&rows[i], size, cells);
        for (int c = first; c <= last && (rows[i].summary || c < COL_SIZE); c++)
            if (strlen(cells[c]) > width[c]) width[c] = strlen(cells[c]);
    }
    print_line(heads, first, last, width);
    for (int i = 0; i < n; i++) {
        char size[32];
        const char *cells[N_COLS];
        row_cells(&rows[i], size, cells);
        print_line(cells, first, rows[i].summary ? last : COL_SIZE, width);
    }
}

/* ---- JSON -------------------------------------------------------------------------- */

static void json_string(const char *s) {
    if (!s) {
        fputs("null", stdout);
        return;
    }
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", stdout);
        else if (*c == '\t')
            fputs("\\t", stdout);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}

static void print_json(const model_row *rows, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) {
        const model_row *r = &rows[i];
        const lmc_model_summary *s = r->summary;
        fputs(i ? ",\n  {" : "\n  {", stdout);
        fputs("\"name\": ", stdout);
        json_string(r->preset ? r->preset->name : NULL);
        fputs(", \"hub_id\": ", stdout);
        json_string(r->folder ? NULL : r->preset ? r->preset->hub_id : s->hub_id);
        fputs(", \"dir\": ", stdout);
        json_string(row_dir(r));
        printf(", \"kind\": \"%s\"", row_kind(r) == LMC_MODEL_VLM ? "vlm" : "llm");
        fputs(", \"model_type\": ", stdout);
        json_string(s ? s->model_type : NULL);
        fputs(", \"quantization\": ", stdout);
        json_string(s ? s->quantization : NULL);
        if (s && s->dir) /* no dir: a folder preset that could not be read */
            printf(", \"size_bytes\": %llu", (unsigned long long)s->size_bytes);
        else
            fputs(", \"size_bytes\": null", stdout);
        printf(", \"cached\": %s, \"registry\": %s}", s ? "true" : "false",
               r->preset ? "true" : "false");
    }
    fputs(n ? "\n]\n" : "]\n", stdout);
}

/* ---- the command --------------------------------------------------------------------- */

int cmd_models(int argc, char **argv) {
    bool json = false, paths = false;
    const cli_option opts[] = {
        {"json", 0, CLI_FLAG, &json, NULL, "print one JSON array instead of the table", 0, 0, NULL},
        {"paths", 'p', CLI_FLAG, &paths, NULL, "show each model's folder (also with --verbose)", 0,
         0, NULL},
    };
    const cli_command cmd = {
        .name = "models",
        .synopsis = "[--json] [--paths]",
        .about = "Lists the registry's models (present on this machine or not downloaded), then\n"
                 "the other models of the local Hugging Face cache ($HF_HUB_CACHE, else\n"
                 "$HF_HOME/hub, else ~/.cache/huggingface/hub): hub id, kind, size,\n"
                 "architecture (config.json's model_type) and quantization. With --json, one\n"
                 "array of objects with name, hub_id, dir, kind, model_type, quantization,\n"
                 "size_bytes, cached and registry (null where unknown).",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .examples = "  lmc models\n  lmc models --paths\n  lmc models --json\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    if (cli_verbose) paths = true;
    cli_shipped_model(); /* registers its name, when it is there */

    lmc_model_summary *cached = NULL;
    int32_t n_cached = 0;
    lmc_status st = lmc_hub_list(&cached, &n_cached);
    if (st != LMC_OK) return cli_fail_status("models", st);
    int32_t n_presets = lmc_registry_count();
    model_row *rows = calloc((size_t)n_presets + (size_t)n_cached + 1, sizeof *rows);
    lmc_model_summary *folders = calloc((size_t)n_presets + 1, sizeof *folders);
    bool *listed = calloc((size_t)n_cached + 1, sizeof *listed);
    int rc = CLI_EXIT_OK, n_rows = 0;
    if (!rows || !folders || !listed) {
        rc = cli_fail("models", "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n_presets; i++) {
        const lmc_model_preset *p = lmc_registry_get(i);
        if (!p || lmc_registry_find(p->name) != p) continue; /* shadowed by a newer one */
        model_row *row = &rows[n_rows++];
        row->preset = p;
        if ((row->folder = is_dir(p->hub_id))) {
            /* a broken folder is listed all the same, "?" where unknown */
            lmc_status fst = lmc_model_summarize(p->hub_id, &folders[i]);
            if (fst == LMC_ERR_NOMEM) {
                rc = cli_fail_status("models", fst);
                goto done;
            }
            if (fst != LMC_OK) fprintf(stderr, "lmc models: %s: %s\n", p->name, lmc_last_error());
            row->summary = &folders[i];
            continue;
        }
        for (int32_t k = 0; k < n_cached && !row->summary; k++)
            if (!strcasecmp(cached[k].hub_id, p->hub_id)) {
                row->summary = &cached[k];
                listed[k] = true;
            }
    }
    int n_registry = n_rows;
    for (int32_t k = 0; k < n_cached; k++)
        if (!listed[k]) rows[n_rows++] = (model_row){NULL, &cached[k], false};

    if (json) {
        print_json(rows, n_rows);
    } else {
        char *cache = NULL;
        if (lmc_hub_cache_path(&cache) != LMC_OK) {
            rc = cli_fail_status("models", LMC_ERR_NOMEM);
            goto done;
        }
        printf("Registry:\n");
        print_table(rows, n_registry, COL_NAME, paths);
        if (n_rows > n_registry) {
            printf("\nOther models in the Hugging Face cache (%s):\n", cache);
            print_table(rows + n_registry, n_rows - n_registry, COL_HUB, paths);
        } else {
            printf("\nNo other models in the Hugging Face cache (%s).\n", cache);
        }
        lmc_free(cache);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) rc = cli_fail("models", "cannot write the output");
done:
    if (folders)
        for (int32_t i = 0; i < n_presets; i++) lmc_model_summary_clear(&folders[i]);
    free(folders);
    free(listed);
    free(rows);
    lmc_model_summaries_free(cached, n_cached);
    return rc;
}
