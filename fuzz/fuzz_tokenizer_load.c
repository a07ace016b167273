/* libFuzzer: tokenizer.json parsing. Any input must load or fail cleanly;
 * what loads is exercised with a short encode/decode round. */
#include "tokenizer/tok_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lmc_tokenizer *tok = NULL;
    if (tok_load_json_text((const char *)data, size, "fuzz", &tok) != LMC_OK) return 0;
    static const char text[] = "Hello  world! 123 <s> caf\xC3\xA9 \xE2\x96\x81x\n";
    int32_t *ids = NULL;
    size_t n = 0;
    if (lmc_tokenizer_encode(tok, text, sizeof text - 1, LMC_ENCODE_ADD_SPECIAL, &ids, &n) ==
        LMC_OK) {
        char *out = NULL;
        size_t len = 0;
        if (lmc_tokenizer_decode(tok, ids, n, 0, &out, &len) == LMC_OK) lmc_free(out);
        lmc_detokenizer *d = NULL;
        if (lmc_detokenizer_create(tok, 1, &d) == LMC_OK) {
            const char *t;
            size_t tl;
            for (size_t i = 0; i < n; i++) lmc_detokenizer_push(d, ids[i], &t, &tl);
            lmc_detokenizer_flush(d, &t, &tl);
            lmc_detokenizer_free(d);
        }
    }
    lmc_free(ids);
    lmc_tokenizer_free(tok);
    return 0;
}
