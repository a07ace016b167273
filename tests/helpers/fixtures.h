/* Test helpers: reference sets (manifest.json + expect.json + logits.f32). */
#ifndef LMC_TEST_FIXTURES_H
#define LMC_TEST_FIXTURES_H

#include "lmc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ref_case {
    char *dir; /* model folder */
    char *name;
    json_t *expect; /* expect.json */
    int32_t *prompt;
    size_t n_prompt;
    int32_t *greedy;
    size_t n_greedy;
    float *logits; /* [n_prompt, vocab] */
    size_t vocab;
    double rtol;
    bool quantized;
    const char *model_type;
    const char *layout;
} ref_case;

/* Loads every model of set_dir/manifest.json; returns the count (0 when the
 * set is absent). *cases is freed with ref_cases_free. */
size_t ref_cases_load(const char *set_dir, ref_case **cases);
void ref_cases_free(ref_case *cases, size_t n);

double rel_l2(const float *a, const float *b, size_t n);
/* Reads a JSON int array into a malloc'd buffer. */
int32_t *json_int_array(const json_t *a, size_t *n);

#endif
