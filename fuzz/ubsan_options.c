/* Linked into every fuzz target: an undefined-behaviour report stops the
 * run like any other crash, so libFuzzer keeps the input as an artifact
 * (UBSan's default is to print and go on, which a long campaign buries in
 * its log). The code stays built in UBSan's recover mode, whose finer
 * edges guide the fuzzer better than -fno-sanitize-recover's. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) {
    return "halt_on_error=1:print_stacktrace=1";
}
