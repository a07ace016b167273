/* lmc convert --model IN --out OUT [-q] [--q-bits B] [--q-group-size G]
 *   [--quant-predicate R] [--dtype f16|bf16|f32] [--dequantize]
 *   [--max-shard-size SIZE] [--force]
 * mlx_lm.convert: a Hugging Face or MLX folder to an MLX folder (quantized
 * with -q), or back to dense with --dequantize. A progress bar is drawn on
 * stderr when it is a terminal; Ctrl-C stops and leaves nothing behind. */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void usage(void) {
    fprintf(stderr,
            "usage: lmc convert --model IN --out OUT [-q] [--q-bits B] [--q-group-size G]\n"
            "                   [--quant-predicate mixed_2_6|mixed_3_4|mixed_3_6|mixed_4_6]\n"
            "                   [--dtype f16|bf16|f32] [--dequantize] [--max-shard-size SIZE]\n"
            "                   [--force]\n"
            "  -q, --quantize        MLX affine quantization (default 4 bits, group 64)\n"
            "  --dtype               dtype of the dense tensors, scales and biases\n"
            "                        (default: config.json's torch_dtype)\n"
            "  -d, --dequantize      an MLX-quantized folder back to dense weights\n"
            "  --max-shard-size      bytes per safetensors file, e.g. 5GB (default 5GiB)\n"
            "  --force               replace an existing OUT model folder\n");
}

typedef struct bar {
    bool tty;
    int last;
} bar;

static int on_progress(uint64_t done, uint64_t total, const char *tensor, void *ud) {
    bar *b = ud;
    if (b->tty) {
        int pct = total ? (int)(done * 100 / total) : 100;
        if (pct != b->last || !tensor) {
            int fill = pct * 30 / 100;
            fprintf(stderr, "\r[%.*s%*s] %3d%% %.40s\033[K", fill, "##############################",
                    30 - fill, "", pct, tensor ? tensor : "");
            if (!tensor) fputc('\n', stderr);
            b->last = pct;
        }
    }
    return g_stop != 0;
}

/* "5GB", "150MB", "100KB" (powers of 10, as transformers), "2GiB", or bytes */
static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return false;
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {{"", 1},         {"B", 1},           {"KB", 1e3},          {"K", 1e3},
                 {"MB", 1e6},     {"M", 1e6},         {"GB", 1e9},          {"G", 1e9},
                 {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            *out = (uint64_t)(v * units[i].mult);
            return *out > 0;
        }
    return false;
}

int cmd_convert(int argc, char **argv) {
    lmc_convert_params p;
    lmc_convert_params_default(&p);
    const char *v;
    for (int i = 1; i < argc; i++) {
        long n;
        if (cli_opt(argc, argv, &i, "--model", &v) || cli_opt(argc, argv, &i, "--hf-path", &v)) {
            p.input_dir = v;
        } else if (cli_opt(argc, argv, &i, "--out", &v) ||
                   cli_opt(argc, argv, &i, "--mlx-path", &v)) {
            p.output_dir = v;
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quantize")) {
            p.quantize = 1;
        } else if (!strcmp(argv[i], "-d") || !strcmp(argv[i], "--dequantize")) {
            p.dequantize = 1;
        } else if (!strcmp(argv[i], "--force")) {
            p.force = 1;
        } else if (cli_opt(argc, argv, &i, "--q-bits", &v)) {
            if (!v || !cli_parse_int(v, &n) || n <= 0 || n > 64)
                return cli_fail("convert", "bad --q-bits");
            p.q_bits = (int)n;
        } else if (cli_opt(argc, argv, &i, "--q-group-size", &v)) {
            if (!v || !cli_parse_int(v, &n) || n <= 0 || n > 4096)
                return cli_fail("convert", "bad --q-group-size");
            p.q_group_size = (int)n;
        } else if (cli_opt(argc, argv, &i, "--quant-predicate", &v)) {
            if (!v) return cli_fail("convert", "--quant-predicate needs a recipe");
            p.quant_predicate = v;
        } else if (cli_opt(argc, argv, &i, "--dtype", &v)) {
            if (!v) return cli_fail("convert", "--dtype needs a value");
            if (!strcmp(v, "f16") || !strcmp(v, "float16"))
                p.dtype = LMC_CONVERT_DTYPE_F16;
            else if (!strcmp(v, "bf16") || !strcmp(v, "bfloat16"))
                p.dtype = LMC_CONVERT_DTYPE_BF16;
            else if (!strcmp(v, "f32") || !strcmp(v, "float32"))
                p.dtype = LMC_CONVERT_DTYPE_F32;
            else
                return cli_fail("convert", "--dtype must be f16, bf16 or f32");
        } else if (cli_opt(argc, argv, &i, "--max-shard-size", &v)) {
            if (!v || !parse_size(v, &p.max_shard_bytes))
                return cli_fail("convert", "bad --max-shard-size (e.g. 5GB, 500MB, 2GiB)");
        } else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            if (!v || !cli_parse_int(v, &n) || n < 0) return cli_fail("convert", "bad --threads");
            lmc_set_num_threads((int)n);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            usage();
            return cli_fail("convert", "unknown option '%s'", argv[i]);
        }
    }
    if (!p.input_dir || !p.output_dir) {
        usage();
        return cli_fail("convert", "--model and --out are required");
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    bar b = {.tty = isatty(STDERR_FILENO) != 0, .last = -1};
    lmc_status st = lmc_convert(&p, on_progress, &b);
    if (st != LMC_OK) {
        if (b.tty) fputc('\n', stderr);
        return cli_fail_status("convert", st);
    }
    return 0;
}
