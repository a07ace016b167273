/* The shared decoder as an architecture's free/forward: every architecture
 * whose load builds an lmc_decoder in m->impl uses these (LMC_DECODER_HOOKS). */
#include "models/model.h"

#include <stdlib.h>

void lmc_decoder_model_free(lmc_model *m) {
    if (!m->impl) return;
    lmc_decoder_free(m->impl);
    free(m->impl);
    m->impl = NULL;
}

lmc_status lmc_decoder_model_forward(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                     int64_t T, bool all_positions, float *logits) {
    return lmc_decoder_forward(m->impl, kv, tokens, T, all_positions, logits);
}

const lmc_decoder *lmc_decoder_model_decoder(const lmc_model *m) {
    return m->impl;
}
