/* lmc detokenize --model DIR --ids 1,2,3 [--skip-special]
 * Prints the decoded text exactly (no newline is added). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr, "usage: lmc detokenize --model DIR --ids 1,2,3 [--skip-special]\n");
}

int cmd_detokenize(int argc, char **argv) {
    const char *dir = NULL, *ids_arg = NULL, *v;
    int skip = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_opt(argc, argv, &i, "--model", &v))
            dir = v;
        else if (cli_opt(argc, argv, &i, "--ids", &v))
            ids_arg = v;
        else if (!strcmp(argv[i], "--skip-special"))
            skip = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            usage();
            return cli_fail("detokenize", "unknown option '%s'", argv[i]);
        }
    }
    if (!dir || !ids_arg) {
        usage();
        return cli_fail("detokenize", "--model and --ids are required");
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (!cli_parse_ids(ids_arg, &ids, &n))
        return cli_fail("detokenize", "--ids must be a comma-separated list of token ids");
    lmc_tokenizer *tok = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = 0;
    lmc_status st = lmc_tokenizer_load(dir, &tok);
    if (st == LMC_OK) st = lmc_tokenizer_decode(tok, ids, n, skip, &text, &len);
    if (st != LMC_OK) {
        rc = cli_fail_status("detokenize", st);
    } else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
        rc = cli_fail("detokenize", "cannot write the output");
    }
    lmc_free(text);
    lmc_tokenizer_free(tok);
    free(ids);
    return rc;
}
