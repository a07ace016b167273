/* Post-processors for a single sequence with add_special_tokens:
 * tokenizers/src/processors/{template.rs,roberta.rs,bert.rs,sequence.rs};
 * ByteLevel only trims offsets, so it changes no ids. Each processor is
 * flattened to a template of ids around the TOK_SEQ marker. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

void tok_postproc_free(tok_postproc *p) {
    for (size_t i = 0; i < p->n; i++) free(p->templates[i]);
    free(p->templates);
    free(p->lens);
    memset(p, 0, sizeof *p);
}

static lmc_status add_template(tok_postproc *p, const int32_t *ids, size_t n) {
    int32_t **t = realloc(p->templates, (p->n + 1) * sizeof *t);
    if (!t) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    p->templates = t;
    size_t *l = realloc(p->lens, (p->n + 1) * sizeof *l);
    if (!l) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    p->lens = l;
    int32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    if (n) memcpy(c, ids, n * sizeof *c); /* ids may be NULL when n is 0 (UBSan, fuzzing) */
    p->templates[p->n] = c;
    p->lens[p->n++] = n;
    return LMC_OK;
}

static lmc_status pair_id(const json_t *j, const char *key, const char *type, int32_t *id) {
    /* "cls": ["<s>", 0] */
    const json_t *v = json_object_get(j, key);
    const json_t *x = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(x) ||
        json_integer_value(x) < 0 || json_integer_value(x) >= INT32_MAX)
        return lmc_error(LMC_ERR_FORMAT, "%s: \"%s\" must be [token, id]", type, key);
    *id = (int32_t)json_integer_value(x);
    return LMC_OK;
}

static lmc_status load_template(tok_postproc *p, const json_t *j) {
    const json_t *single = json_object_get(j, "single");
    const json_t *specials = json_object_get(j, "special_tokens");
    if (!json_is_array(single))
        return lmc_error(LMC_ERR_FORMAT, "TemplateProcessing: \"single\" must be a list of pieces");
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    lmc_status st = LMC_OK;
    for (size_t i = 0; st == LMC_OK && i < json_array_size(single); i++) {
        const json_t *piece = json_array_get(single, i);
        const json_t *sp = json_object_get(piece, "SpecialToken");
        const json_t *seq = json_object_get(piece, "Sequence");
        const json_t *add = NULL;
        int32_t one = TOK_SEQ;
        size_t k = 1;
        if (json_is_object(sp)) {
            const char *name = lmc_json_string(sp, "id", NULL, NULL);
            const json_t *tok = name ? json_object_get(specials, name) : NULL;
            add = json_object_get(tok, "ids");
            if (!json_is_array(add)) {
                st = lmc_error(LMC_ERR_FORMAT,
                               "TemplateProcessing: special token \"%s\" is not in special_tokens",
                               name ? name : "?");
                break;
            }
            k = json_array_size(add);
        } else if (!json_is_object(seq)) {
            st = lmc_error(LMC_ERR_FORMAT,
                           "TemplateProcessing: a piece must be SpecialToken or Sequence");
            break;
        }
        if (n + k > cap) {
            cap = (n + k) * 2;
            int32_t *v = realloc(ids, cap * sizeof *v);
            if (!v) {
                st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
                break;
            }
            ids = v;
        }
        if (!add) {
            ids[n++] = one;
            continue;
        }
        for (size_t m = 0; m < k; m++) {
            const json_t *x = json_array_get(add, m);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) >= INT32_MAX) {
                st = lmc_error(LMC_ERR_FORMAT, "TemplateProcessing: bad special token id");
                break;
            }
            ids[n++] = (int32_t)json_integer_value(x);
        }
    }
    if (st == LMC_OK) st = add_template(p, ids, n);
    free(ids);
    return st;
}

static lmc_status load(tok_postproc *p, const json_t *j, int depth) {
    if (depth > 8) return lmc_error(LMC_ERR_FORMAT, "post_processor: nested too deeply");
    const char *type = lmc_json_string(j, "type", NULL, NULL);
    if (!json_is_object(j) || !type)
        return lmc_error(LMC_ERR_FORMAT, "post_processor must be an object with a \"type\"");
    if (!strcmp(type, "ByteLevel")) return LMC_OK;
    if (!strcmp(type, "TemplateProcessing")) return load_template(p, j);
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        int32_t t[3] = {0, TOK_SEQ, 0};
        lmc_status st = pair_id(j, "cls", type, &t[0]);
        if (st == LMC_OK) st = pair_id(j, "sep", type, &t[2]);
        return st == LMC_OK ? add_template(p, t, 3) : st;
    }
    if (!strcmp(type, "Sequence")) {
        const json_t *arr = json_object_get(j, "processors");
        if (!json_is_array(arr))
            return lmc_error(LMC_ERR_FORMAT,
                             "Sequence post-processor: \"processors\" must be an array");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            lmc_status st = load(p, json_array_get(arr, i), depth + 1);
            if (st != LMC_OK) return st;
        }
        return LMC_OK;
    }
    return lmc_error(LMC_ERR_UNSUPPORTED, "post-processor type \"%s\" is not supported", type);
}

lmc_status tok_postproc_load(tok_postproc *p, const json_t *j, const lmc_tokenizer *tok) {
    (void)tok;
    memset(p, 0, sizeof *p);
    if (!j || json_is_null(j)) return LMC_OK;
    lmc_status st = load(p, j, 0);
    if (st != LMC_OK) tok_postproc_free(p);
    return st;
}

lmc_status tok_postproc_apply(const tok_postproc *p, int32_t **ids, size_t *n_ids) {
    for (size_t t = 0; t < p->n; t++) {
        size_t seqs = 0, fixed = 0;
        for (size_t i = 0; i < p->lens[t]; i++) p->templates[t][i] == TOK_SEQ ? seqs++ : fixed++;
        uint64_t total;
        if (!lmc_mul_ok(seqs, *n_ids, &total) || !lmc_add_ok(total, fixed, &total) ||
            total > SIZE_MAX / sizeof(int32_t))
            return lmc_error(LMC_ERR_LIMIT, "post-processor: output too large");
        int32_t *out = malloc((total ? total : 1) * sizeof *out);
        if (!out) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
        size_t o = 0;
        for (size_t i = 0; i < p->lens[t]; i++) {
            int32_t x = p->templates[t][i];
            if (x == TOK_SEQ) {
                if (*n_ids) memcpy(out + o, *ids, *n_ids * sizeof *out);
                o += *n_ids;
            } else {
                out[o++] = x;
            }
        }
        free(*ids);
        *ids = out;
        *n_ids = o;
    }
    return LMC_OK;
}
