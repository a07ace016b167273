/* GemmaForCausalLM (transformers modeling_gemma.py): RMSNorm scales by
 * (1 + w), embeddings are multiplied by sqrt(hidden_size) (in the
 * activation dtype, float32 here), GELU-tanh gated MLP, tied head. */
#include "models/model.h"
#include "nn/decoder.h"

#include <math.h>
#include <stdlib.h>

lmc_status lmc_gemma_bind(lmc_decoder *d, const lmc_model_config *cfg, const lmc_weights *w) {
    lmc_status st = lmc_decoder_init(d, cfg);
    if (st != LMC_OK) return st;
    /* Gemma names it hidden_activation; hidden_act is the legacy key. */
    const char *act_name = lmc_json_string(cfg->json, "hidden_activation", NULL, NULL);
    if (!act_name) act_name = lmc_json_string(cfg->json, "hidden_act", "gelu_pytorch_tanh", NULL);
    lmc_activation act;
    if ((st = lmc_activation_parse(act_name, &act)) != LMC_OK) return st;
    /* transformers uses the tanh approximation even when hidden_act says "gelu". */
    if (act == LMC_ACT_GELU) act = LMC_ACT_GELU_TANH;
    st = lmc_decoder_bind_llama_layout(d, w, 1.0f, act, cfg->attention_bias, cfg->attention_bias);
    if (st != LMC_OK) return st;
    d->embed_scale = sqrtf((float)cfg->hidden_size);
    return LMC_OK;
}

static lmc_status gemma_load(lmc_model *m) {
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    return lmc_gemma_bind(d, &m->cfg, &m->weights);
}

static const lmc_config_defaults gemma_defaults = {.rms_norm_eps = 1e-6,
                                                   .max_position_embeddings = 8192,
                                                   .tie_word_embeddings = true,
                                                   .sliding_window = 0,
                                                   .bos_token_id = 2,
                                                   .eos_token_id = 1};

const lmc_arch lmc_arch_gemma = {"gemma", &gemma_defaults, gemma_load, LMC_DECODER_HOOKS};
