/* lmc logits --model DIR --tokens 1,2,3 --out FILE
 * Writes the logits after every prompt position as raw little-endian
 * float32, T x V, row-major, from one batched forward pass. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr,
            "usage: lmc logits --model DIR --tokens 1,2,3 --out FILE [--threads N] [--exact]\n");
}

int cmd_logits(int argc, char **argv) {
    const char *model_dir = NULL, *tokens_arg = NULL, *out_path = NULL, *v;
    for (int i = 1; i < argc; i++) {
        if (cli_opt(argc, argv, &i, "--model", &v))
            model_dir = v;
        else if (cli_opt(argc, argv, &i, "--tokens", &v))
            tokens_arg = v;
        else if (cli_opt(argc, argv, &i, "--out", &v))
            out_path = v;
        else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            long n;
            if (!v || !cli_parse_int(v, &n) || n < 0) return cli_fail("logits", "bad --threads");
            lmc_set_num_threads((int)n);
        } else if (!strcmp(argv[i], "--exact")) {
            lmc_set_exact(1); /* f32 activations in quantized matmuls (lmc.h) */
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            return cli_fail("logits", "unknown option '%s' (see 'lmc logits --help')", argv[i]);
        }
    }
    if (!model_dir || !tokens_arg || !out_path) {
        return cli_fail("logits",
                        "--model, --tokens and --out are required (see 'lmc logits --help')");
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (!cli_parse_ids(tokens_arg, &ids, &n) || n == 0) {
        free(ids);
        return cli_fail("logits", "--tokens must be a comma-separated list of token ids");
    }
    lmc_model *model = NULL;
    lmc_session *sess = NULL;
    float *logits = NULL;
    int rc = 1;
    lmc_status st = lmc_model_load(model_dir, &model);
    if (st != LMC_OK) {
        rc = cli_fail_status("logits", st);
        goto done;
    }
    lmc_model_info info;
    lmc_model_get_info(model, &info);
    st = lmc_session_create(model, (int32_t)n, &sess);
    if (st != LMC_OK) {
        rc = cli_fail_status("logits", st);
        goto done;
    }
    logits = malloc(n * (size_t)info.vocab_size * sizeof(float));
    if (!logits) {
        rc = cli_fail("logits", "out of memory");
        goto done;
    }
    st = lmc_session_forward(sess, ids, (int32_t)n, 1, logits);
    if (st != LMC_OK) {
        rc = cli_fail_status("logits", st);
        goto done;
    }
    /* Write to a temporary file and rename, so a failure leaves nothing. */
    size_t plen = strlen(out_path) + 32;
    char *tmp = malloc(plen);
    if (!tmp) {
        rc = cli_fail("logits", "out of memory");
        goto done;
    }
    snprintf(tmp, plen, "%s.tmp.%ld", out_path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    size_t count = n * (size_t)info.vocab_size;
    bool ok = f && fwrite(logits, sizeof(float), count, f) == count;
    if (f) ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, out_path) == 0) {
        rc = 0;
    } else {
        unlink(tmp);
        rc = cli_fail("logits", "%s: cannot write the logits", out_path);
    }
    free(tmp);
done:
    free(logits);
    free(ids);
    lmc_session_free(sess);
    lmc_model_free(model);
    return rc;
}
