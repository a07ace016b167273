/* lmc tokenize [--model M] (--text TEXT | --text-file FILE) [--no-special] [--special-as-text]
 * Prints the token ids of the text, space-separated, on one line. Special
 * tokens of the post-processor (BOS, ...) are added unless --no-special;
 * --special-as-text treats special-token text in the input as plain text. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ids, space-separated, on one line: formatted by hand into a buffer
 * (a 100 MB input has some 25 million ids, where printf costs seconds).
 * Write errors surface through ferror(stdout). */
static void print_ids(const int32_t *ids, size_t n) {
    char buf[1 << 16];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (len > sizeof buf - 16) {
            fwrite(buf, 1, len, stdout);
            len = 0;
        }
        if (i) buf[len++] = ' ';
        uint32_t v = (uint32_t)ids[i];
        if (ids[i] < 0) {
            buf[len++] = '-';
            v = 0u - v;
        }
        char d[10];
        int k = 0;
        do d[k++] = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        while (k) buf[len++] = d[--k];
    }
    buf[len++] = '\n';
    fwrite(buf, 1, len, stdout);
}

int cmd_tokenize(int argc, char **argv) {
    const char *spec = NULL, *text = NULL, *file = NULL;
    bool no_special = false, special_as_text = false;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"text", 0, CLI_STR, &text, "TEXT", "the text", 0, 0, NULL},
        {"text-file", 0, CLI_STR, &file, "FILE", "read the text from FILE ('-': stdin)", 0, 0,
         NULL},
        {"no-special", 0, CLI_FLAG, &no_special, NULL, "add no special tokens (BOS, ...)", 0, 0,
         NULL},
        {"special-as-text", 0, CLI_FLAG, &special_as_text, NULL,
         "special-token text in the input is plain text", 0, 0, NULL},
    };
    const cli_command cmd = {.name = "tokenize",
                             .synopsis = "[--model M] (--text TEXT | --text-file FILE) [options]",
                             .about =
                                 "Prints the token ids of a text, space-separated, on one line.",
                             .options = opts,
                             .n_options = sizeof opts / sizeof opts[0],
                             .examples = "  lmc tokenize --text \"In the beginning\"\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    if (!text == !file) return cli_usage_error("tokenize", "give one of --text or --text-file");
    unsigned flags = no_special ? 0 : LMC_ENCODE_ADD_SPECIAL;
    if (special_as_text) flags |= LMC_ENCODE_SPECIAL_AS_TEXT;
    char *owned = NULL;
    size_t len = 0;
    if (file) {
        if (!(owned = cli_read_file(file, &len)))
            return cli_fail("tokenize", "cannot read '%s': %s", file, strerror(errno));
        text = owned;
    } else {
        len = strlen(text);
    }
    char *dir = cli_model_dir("tokenize", spec);
    if (!dir) {
        free(owned);
        return CLI_EXIT_ERROR;
    }
    lmc_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 0;
    lmc_status st = lmc_tokenizer_load(dir, &tok);
    if (st == LMC_OK) st = lmc_tokenizer_encode(tok, text, len, flags, &ids, &n);
    if (st != LMC_OK) {
        rc = cli_fail_status("tokenize", st);
    } else {
        print_ids(ids, n);
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = cli_fail("tokenize", "cannot write the output");
    }
    lmc_free(ids);
    lmc_free(dir);
    lmc_tokenizer_free(tok);
    free(owned);
    return rc;
}
