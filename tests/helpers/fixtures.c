#include "fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

int32_t *json_int_array(const json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *out = malloc((*n ? *n : 1) * sizeof *out);
    for (size_t i = 0; i < *n; i++) out[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return out;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static float *read_f32(const char *path, size_t *count) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *buf = malloc((size_t)size);
    *count = fread(buf, 4, (size_t)size / 4, f);
    fclose(f);
    return buf;
}

size_t ref_cases_load(const char *set_dir, ref_case **cases) {
    *cases = NULL;
    char *man_path = join(set_dir, "manifest.json");
    json_t *man = json_load_file(man_path, 0, NULL);
    free(man_path);
    if (!man) return 0;
    json_t *models = json_object_get(man, "models");
    size_t n = json_array_size(models);
    ref_case *cs = calloc(n ? n : 1, sizeof *cs);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(models, i);
        ref_case *c = &cs[i];
        c->name = strdup(json_string_value(json_object_get(m, "name")));
        c->dir = join(set_dir, json_string_value(json_object_get(m, "dir")));
        char *ep = join(c->dir, "expect.json");
        c->expect = json_load_file(ep, 0, NULL);
        free(ep);
        c->prompt = json_int_array(json_object_get(c->expect, "prompt_tokens"), &c->n_prompt);
        c->greedy = json_int_array(json_object_get(c->expect, "greedy_tokens"), &c->n_greedy);
        json_t *lf = json_object_get(c->expect, "logits_file");
        char *lp = join(c->dir, lf ? json_string_value(lf) : "logits.f32");
        size_t count = 0;
        c->logits = read_f32(lp, &count);
        free(lp);
        c->vocab = c->n_prompt ? count / c->n_prompt : 0;
        json_t *tol = json_object_get(c->expect, "rtol_l2_hint");
        c->rtol = tol ? json_number_value(tol) : 1e-4;
        json_t *q = json_object_get(c->expect, "quant");
        c->quantized = q && !json_is_null(q);
        c->model_type = json_string_value(json_object_get(c->expect, "model_type"));
        c->layout = json_string_value(json_object_get(c->expect, "layout"));
    }
    json_decref(man);
    *cases = cs;
    return n;
}

void ref_cases_free(ref_case *cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(cs[i].dir);
        free(cs[i].name);
        free(cs[i].prompt);
        free(cs[i].greedy);
        free(cs[i].logits);
        json_decref(cs[i].expect);
    }
    free(cs);
}
