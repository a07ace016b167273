/* libFuzzer target: compiles the input as a template and renders it with a
 * small fixed context (messages, tools, special tokens), under tight limits
 * so that every input finishes quickly. Any crash, sanitizer report or leak
 * is a bug; template errors are expected. */
#include "template/template.h"

#include <stdlib.h>
#include <string.h>

static json_t *g_vars;

static json_t *context(void) {
    const char *ctx =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \\u00e9\"}, "
        "{\"type\": \"image\"}]},"
        " {\"role\": \"assistant\", \"content\": \"Hello\", \"tool_calls\": [{\"id\": "
        "\"abc123xyz\", \"type\": \"function\","
        "   \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]},"
        " {\"role\": \"tool\", \"content\": \"42\"}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
        "{\"type\": \"object\"}}}],"
        " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true, \"n\": "
        "3}";
    json_error_t err;
    return json_loads(ctx, 0, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_vars) g_vars = context();
    if (size > 64 * 1024) return 0;
    lmc_template *t = NULL;
    if (tpl_compile((const char *)data, size, &t) != LMC_OK) return 0;
    tpl_options opts;
    tpl_options_default(&opts);
    opts.max_output = 1 << 20;
    opts.max_memory = 64 << 20;
    opts.max_steps = 20000;
    opts.max_depth = 16;
    opts.fixed_time = true;
    opts.now = 1739188800;
    char *out = NULL;
    size_t len = 0;
    if (tpl_render(t, g_vars, &opts, &out, &len) == LMC_OK) free(out);
    tpl_free(t);
    return 0;
}
