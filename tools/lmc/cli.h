/* Shared helpers of the lmc subcommands. The CLI uses only lmc.h. */
#ifndef LMC_CLI_H
#define LMC_CLI_H

#include "lmc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LMC_COMMAND(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef LMC_COMMAND

#define LMC_CLI_VERSION "0.1.0"

/* Exit codes of every subcommand. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_INTERRUPTED = 130 };

/* ---- the option parser (one for every subcommand) ------------------------ */

typedef enum cli_kind {
    CLI_FLAG,  /* bool *: set by --name (no value) */
    CLI_STR,   /* const char **: --name VALUE or --name=VALUE */
    CLI_INT,   /* long *: an integer in [min, max] */
    CLI_FLOAT, /* double *: a finite number in [min, max] */
    CLI_STRS,  /* cli_strs *: repeatable --name VALUE */
} cli_kind;

/* The values of a repeatable option, in order (pointers into argv). */
typedef struct cli_strs {
    const char **v;
    int n;
} cli_strs;
void cli_strs_free(cli_strs *s);

typedef struct cli_option {
    const char *name; /* long name without the dashes: "max-tokens" */
    char short_name;  /* 'n' for -n, or 0 */
    cli_kind kind;
    void *dest;
    const char *metavar; /* "N"; NULL for flags */
    const char *help;
    double min, max; /* CLI_INT / CLI_FLOAT range, inclusive (both 0: any value) */
    bool *seen;      /* set when the option was given; may be NULL */
} cli_option;

/* Options every model-running command takes: --threads N, --exact. */
#define CLI_MODEL_OPTIONS 1u
typedef struct cli_command {
    const char *name;     /* "generate" */
    const char *synopsis; /* "[--model M] --prompt TEXT [options]" */
    const char *about;    /* a paragraph for --help; may be NULL */
    const cli_option *options;
    int n_options;
    unsigned flags;          /* CLI_MODEL_OPTIONS */
    const char *examples;    /* printed after the options by --help; may be NULL */
    const char **positional; /* when non-NULL, the one positional argument goes here */
} cli_command;

/* Parses argv[1..argc-1] against cmd's options plus the common ones
 * (--help/-h, --verbose/-v, and with CLI_MODEL_OPTIONS --threads, --exact,
 * which it applies). Returns -1 to go on; CLI_EXIT_OK after printing the
 * help on stdout; CLI_EXIT_USAGE after printing a one-line error. */
int cli_parse(const cli_command *cmd, int argc, char **argv);
/* Prints the help of cmd on stdout. */
void cli_print_help(const cli_command *cmd);
/* --verbose was given (load details and timings on stderr). */
extern bool cli_verbose;

/* "lmc CMD: message (see 'lmc CMD --help')" on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "lmc CMD: message" on stderr and returns CLI_EXIT_ERROR. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library's last error for a failed status and returns CLI_EXIT_ERROR. */
int cli_fail_status(const char *cmd, lmc_status st);

/* Parses "1,2,3" (commas or spaces; no empty items) into a malloc'd array. */
bool cli_parse_ids(const char *s, int32_t **ids, size_t *n);
/* Parses an integer/float argument strictly (floats must be finite). */
bool cli_parse_int(const char *s, long *out);
bool cli_parse_float(const char *s, double *out);

/* Reads a whole file (NUL-terminated, *len bytes without the NUL); NULL and
 * errno set on failure. */
char *cli_read_file(const char *path, size_t *len);
/* Writes len bytes to path: "-" is stdout; a device or FIFO is written in
 * place; a regular file goes through a temporary file in the same folder,
 * fsync'd and renamed, so a failure leaves nothing behind. Every write,
 * flush and close is checked. Returns CLI_EXIT_OK, or CLI_EXIT_ERROR after
 * printing the error. */
int cli_write_file(const char *cmd, const char *path, const void *data, size_t len);
/* "@FILE" reads FILE, "@-" stdin, anything else is the text itself (copied).
 * NULL on failure, after printing the error. */
char *cli_text_arg(const char *cmd, const char *arg);

/* ---- models ---------------------------------------------------------------- */

/* The model shipped in the repository (models/), and its registry name. */
#define CLI_SHIPPED_NAME "kjv:11m"
#define CLI_SHIPPED_DIR "kjv-llama-11m-4bit"
/* Folder of the shipped model: $LMC_MODELS_DIR, then models/ next to the
 * executable's folder (a build tree), then share/lmc/models of the install
 * prefix. NULL when it is in none (the message names them). Also adds the
 * registry entry CLI_SHIPPED_NAME. */
const char *cli_shipped_model(void);
/* The folder of a model spec (a folder, a registry name or a cached hub
 * id; NULL: the shipped model), freed with lmc_free; NULL after printing
 * the error (every place tried). */
char *cli_model_dir(const char *cmd, const char *spec);
/* Loads spec (NULL: the shipped model, or for VLMs the registry's first
 * VLM) with the LLM or VLM factory; progress on a terminal, details with
 * --verbose. On failure prints the error and returns false. */
bool cli_load(const char *cmd, const char *spec, lmc_model_kind kind, int32_t max_kv_tokens,
              lmc_container **out);

/* The sampling options of generate and chat (cli_sampling.c). */
typedef struct cli_sampling {
    long max_tokens, top_k, rep_ctx, seed;
    double temp, top_p, min_p, rep, presence, frequency;
    bool seed_given, ignore_eos;
    cli_strs stops; /* freed with cli_strs_free */
} cli_sampling;
#define CLI_SAMPLING_N 12
void cli_sampling_init(cli_sampling *s);
/* Fills out[0..CLI_SAMPLING_N) with the options, writing into s. */
void cli_sampling_options(cli_sampling *s, cli_option out[CLI_SAMPLING_N]);
void cli_sampling_apply(const cli_sampling *s, lmc_generate_params *p);

/* The stats line of generate and chat's /stats, on stderr. */
void cli_print_stats(const lmc_generate_stats *s);

#endif
