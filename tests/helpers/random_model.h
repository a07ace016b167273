/* Tiny random model folders for tests that need no reference outputs
 * (loading, key layouts, cache equivalence): tensors with deterministic
 * pseudo-random values, written as model.safetensors + config.json. */
#ifndef LMC_TEST_RANDOM_MODEL_H
#define LMC_TEST_RANDOM_MODEL_H

#include <stdint.h>

typedef struct random_model random_model;

/* seed picks the values; the folder is written by random_model_write. */
random_model *random_model_create(uint64_t seed);
/* Adds name with shape [d0] (d1 == 0) or [d0, d1], values offset + scale * U(-1, 1), f32. */
void random_model_add(random_model *m, const char *name, int64_t d0, int64_t d1, float scale,
                      float offset);
/* random_model_add with a printf-style name. */
void random_model_addf(random_model *m, int64_t d0, int64_t d1, float scale, float offset,
                       const char *fmt, ...);
/* Writes dir/model.safetensors and dir/config.json (config_json as given);
 * returns 0 on success. Frees m. */
int random_model_write(random_model *m, const char *dir, const char *config_json);
/* Removes the two files and the folder. */
void random_model_remove(const char *dir);

#endif
