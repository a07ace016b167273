/* lmc tokenize --model DIR (--text TEXT | --text-file FILE) [--no-special] [--special-as-text]
 * Prints the token ids of the text, space-separated, on one line. Special
 * tokens of the post-processor (BOS, ...) are added unless --no-special;
 * --special-as-text treats special-token text in the input as plain text. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr, "usage: lmc tokenize --model DIR (--text TEXT | --text-file FILE) "
                    "[--no-special] [--special-as-text]\n");
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

int cmd_tokenize(int argc, char **argv) {
    const char *dir = NULL, *text = NULL, *file = NULL, *v;
    unsigned flags = LMC_ENCODE_ADD_SPECIAL;
    for (int i = 1; i < argc; i++) {
        if (cli_opt(argc, argv, &i, "--model", &v))
            dir = v;
        else if (cli_opt(argc, argv, &i, "--text", &v))
            text = v;
        else if (cli_opt(argc, argv, &i, "--text-file", &v))
            file = v;
        else if (!strcmp(argv[i], "--no-special"))
            flags &= ~(unsigned)LMC_ENCODE_ADD_SPECIAL;
        else if (!strcmp(argv[i], "--special-as-text"))
            flags |= LMC_ENCODE_SPECIAL_AS_TEXT;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            usage();
            return cli_fail("tokenize", "unknown option '%s'", argv[i]);
        }
    }
    if (!dir || (!text) == (!file)) {
        usage();
        return cli_fail("tokenize", "--model and one of --text or --text-file are required");
    }
    char *owned = NULL;
    size_t len = 0;
    if (file) {
        if (!(owned = read_all(file, &len))) return cli_fail("tokenize", "cannot read '%s'", file);
        text = owned;
    } else {
        len = strlen(text);
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
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
        if (fflush(stdout) != 0) rc = cli_fail("tokenize", "cannot write the output");
    }
    lmc_free(ids);
    lmc_tokenizer_free(tok);
    free(owned);
    return rc;
}
