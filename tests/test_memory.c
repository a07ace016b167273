/* Loading a 4-bit model keeps weights memory-mapped: the peak RSS of
 * `lmc generate` (16 prompt tokens, 16 new ones) on a ~70 MB MLX 4-bit model
 * stays within the file size plus the KV cache plus 10%. The model is made
 * by bench/make_random_model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL_DIR LMC_BINARY_DIR "/tests/q4-memory-model"

#if defined(__SANITIZE_ADDRESS__)
#define LMC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LMC_ASAN 1
#endif
#endif

static void test_q4_peak_rss(void **state) {
    (void)state;
#ifdef LMC_ASAN
    print_message(
        "SKIPPED: peak RSS under AddressSanitizer (its shadow memory is not the library's)\n");
    skip();
#endif
    struct stat st;
    if (stat(MODEL_DIR "/model.safetensors", &st) != 0) {
        /* hidden 1024, 8 layers, vocab 16000, intermediate 2816, 16 heads, 4 KV heads */
        int rc = system(LMC_BINARY_DIR "/bench/make_random_model " MODEL_DIR
                                       " q4 1024 8 16000 2816 16 4 > /dev/null");
        assert_int_equal(rc, 0);
        assert_int_equal(stat(MODEL_DIR "/model.safetensors", &st), 0);
    }
    const int n_tokens = 16, n_new = 16;
    char tokens[1024] = "";
    for (int i = 0; i < n_tokens; i++)
        snprintf(tokens + strlen(tokens), sizeof tokens - strlen(tokens), "%s%d", i ? "," : "",
                 (i * 977) % 16000);
    /* The executable's own footprint (its shared libraries: libmicrohttpd's
     * TLS stack, OpenBLAS, libedit: several MB) is not the model's memory:
     * measured with `lmc --version`, which loads the same libraries. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(LMC_CLI, "lmc", "--version", (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    double base = (double)ru.ru_maxrss * 1024.0;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(LMC_CLI, "lmc", "generate", "--model", MODEL_DIR, "--tokens", tokens, "--max-tokens",
              "16", "--temp", "0", "--print-ids", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    double file = (double)st.st_size;
    double kv =
        2.0 * 8 * 4 * 64 * (n_tokens + n_new) * sizeof(float); /* layers, KV heads, head_dim */
    double peak = (double)ru.ru_maxrss * 1024.0 - base;
    double limit = (file + kv) * 1.10;
    print_message("peak RSS %.1f MB over the executable's %.1f MB, file %.1f MB, KV %.2f MB, "
                  "limit %.1f MB\n",
                  peak / 1e6, base / 1e6, file / 1e6, kv / 1e6, limit / 1e6);
    assert_true(peak <= limit);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_q4_peak_rss)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
