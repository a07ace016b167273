/* The API layer's internal header: registry, factories, container and
 * processor (src/api). Nothing below api includes it. */
#ifndef LMC_API_INTERNAL_H
#define LMC_API_INTERNAL_H

#include "base/base.h"
#include "base/json.h"
#include "models/model.h"
#include "vision/vision.h"

struct lmc_context {
    lmc_model *model;
    lmc_tokenizer *tok; /* NULL when the folder has no tokenizer.json */
    lmc_session *session;
    const lmc_model_preset *preset; /* NULL when loaded by path or hub id */
    char *dir;
    lmc_model_kind kind;
    lmc_image_processor image_processor; /* VLMs: preprocessor_config.json */
};

/* The VLM processor (api/processor_vlm.c): images and text -> tokens and
 * pixel values, as transformers' PaliGemmaProcessor. */
lmc_status lmc_vlm_prepare(const lmc_context *c, const lmc_user_input *in, lmc_model_input *out);

#endif
