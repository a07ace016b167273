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
    const char *in = NULL, *out = NULL, *hf = NULL, *mlx = NULL, *dtype = NULL, *shard = NULL,
               *pred = NULL;
    bool quantize = false, dequantize = false, force = false;
    long bits = p.q_bits, group = p.q_group_size;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &in, "IN", "the folder to convert", 0, 0, NULL},
        {"hf-path", 0, CLI_STR, &hf, "IN", "the same as --model (mlx_lm.convert's name)", 0, 0,
         NULL},
        {"out", 'o', CLI_STR, &out, "OUT", "the folder to write", 0, 0, NULL},
        {"mlx-path", 0, CLI_STR, &mlx, "OUT", "the same as --out (mlx_lm.convert's name)", 0, 0,
         NULL},
        {"quantize", 'q', CLI_FLAG, &quantize, NULL,
         "MLX affine quantization (default 4 bits, group 64)", 0, 0, NULL},
        {"q-bits", 0, CLI_INT, &bits, "B", "bits per weight (2, 3, 4, 5, 6 or 8)", 1, 64, NULL},
        {"q-group-size", 0, CLI_INT, &group, "G", "weights per scale and bias (32, 64 or 128)", 1,
         4096, NULL},
        {"quant-predicate", 0, CLI_STR, &pred, "R",
         "mixed-precision recipe: mixed_2_6, mixed_3_4, mixed_3_6 or mixed_4_6", 0, 0, NULL},
        {"dtype", 0, CLI_STR, &dtype, "T",
         "f16, bf16 or f32: dense tensors, scales and biases (default: config.json's)", 0, 0, NULL},
        {"dequantize", 'd', CLI_FLAG, &dequantize, NULL,
         "an MLX-quantized folder back to dense weights", 0, 0, NULL},
        {"max-shard-size", 0, CLI_STR, &shard, "SIZE",
         "bytes per safetensors file, e.g. 5GB (default 5GiB)", 0, 0, NULL},
        {"force", 0, CLI_FLAG, &force, NULL, "replace an existing OUT model folder", 0, 0, NULL},
    };
    const cli_command cmd = {
        .name = "convert",
        .synopsis = "--model IN --out OUT [-q [--q-bits B] [--q-group-size G]] [options]",
        .about = "mlx_lm.convert: a Hugging Face or MLX folder to an MLX folder (quantized with\n"
                 "-q, bit-identical to mlx), or back to dense with --dequantize. A progress bar\n"
                 "is drawn on a terminal; Ctrl-C stops and leaves nothing behind.",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples =
            "  lmc convert --model hf-folder --out mlx-4bit -q --q-bits 4 --q-group-size 64\n"
            "  lmc convert --model mlx-4bit --out dense --dequantize --dtype f32\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    p.input_dir = in ? in : hf;
    p.output_dir = out ? out : mlx;
    if (!p.input_dir || !p.output_dir)
        return cli_usage_error("convert", "--model and --out are required");
    p.quantize = quantize;
    p.dequantize = dequantize;
    p.force = force;
    p.q_bits = (int)bits;
    p.q_group_size = (int)group;
    p.quant_predicate = pred;
    if (dtype) {
        if (!strcmp(dtype, "f16") || !strcmp(dtype, "float16"))
            p.dtype = LMC_CONVERT_DTYPE_F16;
        else if (!strcmp(dtype, "bf16") || !strcmp(dtype, "bfloat16"))
            p.dtype = LMC_CONVERT_DTYPE_BF16;
        else if (!strcmp(dtype, "f32") || !strcmp(dtype, "float32"))
            p.dtype = LMC_CONVERT_DTYPE_F32;
        else
            return cli_usage_error("convert", "--dtype must be f16, bf16 or f32, not '%s'", dtype);
    }
    if (shard && !parse_size(shard, &p.max_shard_bytes))
        return cli_usage_error("convert", "bad --max-shard-size '%s' (e.g. 5GB, 500MB, 2GiB)",
                               shard);
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
