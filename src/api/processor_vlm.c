/* The VLM processor, as transformers' PaliGemmaProcessor builds the input:
 *   "<image>" * (image_seq_length * n_images) + "<bos>" + prompt + "\n"
 * tokenized without adding special tokens (the processor turns the
 * tokenizer's add_bos_token off), and pixel_values from the image processor
 * (SiglipImageProcessor) for each image. No chat template. */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

lmc_status lmc_vlm_prepare(const lmc_context *c, const lmc_user_input *in, lmc_model_input *out) {
    const char *const *paths = in->images;
    int32_t n = in->n_images;
    const char *text = in->prompt;
    const char **gathered = NULL;
    if (in->n_messages > 0) {
        int32_t total = 0;
        for (int32_t i = 0; i < in->n_messages; i++) {
            const lmc_message *m = &in->messages[i];
            if (!m->role || !m->content)
                return lmc_error(LMC_ERR_INVALID_ARG, "message %d has no role or content", i);
            if (m->n_images < 0 || (m->n_images > 0 && !m->images))
                return lmc_error(LMC_ERR_INVALID_ARG, "message %d: bad images", i);
            total += m->n_images;
        }
        gathered = malloc(((size_t)total + 1) * sizeof *gathered);
        if (!gathered) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        n = 0;
        for (int32_t i = 0; i < in->n_messages; i++)
            for (int32_t k = 0; k < in->messages[i].n_images; k++)
                gathered[n++] = in->messages[i].images[k];
        paths = gathered;
        text = in->messages[in->n_messages - 1].content; /* PaliGemma takes one prompt */
    }
    lmc_status st = LMC_OK;
    lmc_model_info info;
    lmc_model_get_info(c->model, &info);
    const lmc_image_processor *p = &c->image_processor;
    if (n == 0)
        st = lmc_error(LMC_ERR_INVALID_ARG,
                       "%s is a vision-language model (%s): the input needs an image", c->dir,
                       info.model_type);
    else if (!c->tok)
        st = lmc_error(LMC_ERR_INVALID_ARG, "%s has no tokenizer.json: only token ids can be given",
                       c->dir);
    else if (!p->do_resize || p->height != info.image_size || p->width != info.image_size)
        st =
            lmc_error(LMC_ERR_FORMAT,
                      "%s: preprocessor_config.json resizes to %d x %d, but the vision tower takes "
                      "%d x %d",
                      c->dir, p->do_resize ? p->height : 0, p->do_resize ? p->width : 0,
                      info.image_size, info.image_size);
    else if (p->image_seq_length && p->image_seq_length != info.image_tokens)
        st = lmc_error(LMC_ERR_FORMAT,
                       "%s: preprocessor_config.json's image_seq_length %d differs from the vision "
                       "tower's %d patches",
                       c->dir, p->image_seq_length, info.image_tokens);
    else if (info.bos_token_id < 0)
        st = lmc_error(LMC_ERR_FORMAT, "%s: config.json has no bos_token_id", c->dir);
    size_t plane = (size_t)info.image_size * (size_t)info.image_size;
    if (st == LMC_OK) {
        out->pixel_values = malloc((size_t)n * 3 * plane * sizeof(float));
        if (!out->pixel_values) st = lmc_error(LMC_ERR_NOMEM, "out of memory for %d images", n);
    }
    for (int32_t i = 0; i < n && st == LMC_OK; i++) {
        lmc_image im;
        st = lmc_image_load(paths[i], &im);
        if (st == LMC_OK)
            st = lmc_image_preprocess(p, &im, out->pixel_values + (size_t)i * 3 * plane);
        lmc_image_free(&im);
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *line = NULL;
    if (st == LMC_OK) {
        size_t len = strlen(text);
        line = malloc(len + 2);
        if (!line)
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        else {
            memcpy(line, text, len);
            memcpy(line + len, "\n", 2);
            st = lmc_tokenizer_encode(c->tok, line, len + 1, 0, &ids, &n_ids);
        }
    }
    int64_t total = (int64_t)n * info.image_tokens + 1 + (int64_t)n_ids;
    if (st == LMC_OK && total > INT32_MAX) st = lmc_error(LMC_ERR_LIMIT, "the input is too long");
    if (st == LMC_OK) {
        out->tokens = malloc((size_t)total * sizeof *out->tokens);
        if (!out->tokens) st = lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    if (st == LMC_OK) {
        int32_t k = 0;
        for (int64_t i = 0; i < (int64_t)n * info.image_tokens; i++)
            out->tokens[k++] = info.image_token_id;
        out->tokens[k++] = info.bos_token_id;
        memcpy(out->tokens + k, ids, n_ids * sizeof *ids);
        out->n_tokens = (int32_t)total;
        out->n_images = n;
        out->image_height = out->image_width = info.image_size;
    }
    lmc_free(ids);
    free(line);
    free(gathered);
    if (st != LMC_OK) lmc_model_input_clear(out);
    return st;
}
