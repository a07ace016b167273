/* Qwen2ForCausalLM (Qwen 1.5, 2, 2.5; transformers modeling_qwen2.py): the
 * Llama layout with biases on q/k/v (not o). The sliding window applies only
 * with use_sliding_window, to layers from max_window_layers on (or as
 * layer_types says). */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdlib.h>

static lmc_status qwen2_load(lmc_model *m) {
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, &m->cfg);
    if (st != LMC_OK) return st;
    lmc_activation act;
    if ((st = lmc_activation_parse(m->cfg.hidden_act, &act)) != LMC_OK) return st;
    st = lmc_decoder_bind_llama_layout(d, &m->weights, 0.0f, act, true, false);
    if (st != LMC_OK) return st;
    bool use_sw = lmc_json_bool(m->cfg.json, "use_sliding_window", false, NULL);
    int64_t max_window_layers = lmc_json_int(m->cfg.json, "max_window_layers", 28, NULL);
    if (use_sw && m->cfg.sliding_window > 0) {
        lmc_decoder_set_sliding(d, m->cfg.sliding_window, false);
        if (!json_object_get(m->cfg.json, "layer_types"))
            for (int64_t i = max_window_layers; i < d->n_layers; i++)
                d->layers[i].sliding_window = m->cfg.sliding_window;
    }
    return LMC_OK;
}

static const lmc_config_defaults qwen2_defaults = {.rms_norm_eps = 1e-6,
                                                   .max_position_embeddings = 32768,
                                                   .tie_word_embeddings = false,
                                                   .sliding_window = 0,
                                                   .bos_token_id = -1,
                                                   .eos_token_id = -1};

const lmc_arch lmc_arch_qwen2 = {"qwen2", &qwen2_defaults, qwen2_load, LMC_DECODER_HOOKS};
