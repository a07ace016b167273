/* The API layer's internal header: registry, factories, container and
 * processor (src/api). Nothing below api includes it. */
#ifndef LMC_API_INTERNAL_H
#define LMC_API_INTERNAL_H

#include "base/base.h"
#include "base/json.h"
#include "models/model.h"

struct lmc_context {
    lmc_model *model;
    lmc_tokenizer *tok; /* NULL when the folder has no tokenizer.json */
    lmc_session *session;
    const lmc_model_preset *preset; /* NULL when loaded by path or hub id */
    char *dir;
    lmc_model_kind kind;
};

#endif
