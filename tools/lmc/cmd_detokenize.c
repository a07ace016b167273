/* lmc detokenize [--model M] --ids 1,2,3 [--skip-special]
 * Prints the decoded text exactly (no newline is added). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

int cmd_detokenize(int argc, char **argv) {
    const char *spec = NULL, *ids_arg = NULL;
    bool skip = false;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"ids", 0, CLI_STR, &ids_arg, "IDS", "token ids, comma-separated", 0, 0, NULL},
        {"skip-special", 0, CLI_FLAG, &skip, NULL, "leave special tokens out", 0, 0, NULL},
    };
    const cli_command cmd = {.name = "detokenize",
                             .synopsis = "[--model M] --ids 1,2,3 [--skip-special]",
                             .about = "Prints the text of token ids exactly (no newline added).",
                             .options = opts,
                             .n_options = sizeof opts / sizeof opts[0],
                             .examples = "  lmc detokenize --ids 0,361,1240\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    if (!ids_arg) return cli_usage_error("detokenize", "--ids is required");
    int32_t *ids = NULL;
    size_t n = 0;
    if (!cli_parse_ids(ids_arg, &ids, &n))
        return cli_usage_error("detokenize", "--ids must be a comma-separated list of token ids");
    char *dir = cli_model_dir("detokenize", spec);
    if (!dir) {
        free(ids);
        return CLI_EXIT_ERROR;
    }
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
    lmc_free(dir);
    lmc_tokenizer_free(tok);
    free(ids);
    return rc;
}
