/* LlamaForCausalLM and MistralForCausalLM (transformers modeling_llama.py,
 * modeling_mistral.py): RMSNorm, GQA with rotary embeddings, SwiGLU MLP,
 * tied or untied head. Mistral adds a sliding window on every layer. */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdlib.h>
#include <string.h>

static lmc_status llama_load(lmc_model *m) {
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, &m->cfg);
    if (st != LMC_OK) return st;
    lmc_activation act;
    if ((st = lmc_activation_parse(m->cfg.hidden_act, &act)) != LMC_OK) return st;
    st = lmc_decoder_bind_llama_layout(d, &m->weights, 0.0f, act, m->cfg.attention_bias,
                                       m->cfg.attention_bias);
    if (st != LMC_OK) return st;
    /* Llama has no sliding window; Mistral's applies to every layer. */
    if (!strcmp(m->cfg.model_type, "mistral"))
        lmc_decoder_set_sliding(d, m->cfg.sliding_window, true);
    return LMC_OK;
}

static const lmc_config_defaults llama_defaults = {.rms_norm_eps = 1e-6,
                                                   .max_position_embeddings = 2048,
                                                   .tie_word_embeddings = false,
                                                   .sliding_window = 0,
                                                   .bos_token_id = 1,
                                                   .eos_token_id = 2};
static const lmc_config_defaults mistral_defaults = {.rms_norm_eps = 1e-6,
                                                     .max_position_embeddings = 4096 * 32,
                                                     .tie_word_embeddings = false,
                                                     .sliding_window = 4096,
                                                     .bos_token_id = 1,
                                                     .eos_token_id = 2};

const lmc_arch lmc_arch_llama = {"llama", &llama_defaults, llama_load, LMC_DECODER_HOOKS};
const lmc_arch lmc_arch_mistral = {"mistral", &mistral_defaults, llama_load, LMC_DECODER_HOOKS};
