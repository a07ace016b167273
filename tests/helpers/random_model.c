#include "random_model.h"

#include "tensor/safetensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct random_model {
    lmc_safetensors_writer *w;
    float *bufs[1024];
    int n;
    uint64_t rng;
};

random_model *random_model_create(uint64_t seed) {
    random_model *m = calloc(1, sizeof *m);
    lmc_safetensors_writer_create(&m->w);
    m->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    return m;
}

static float frand(random_model *m) {
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return (float)((double)(m->rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

void random_model_add(random_model *m, const char *name, int64_t d0, int64_t d1, float scale,
                      float offset) {
    int64_t shape[2] = {d0, d1}, n = d0 * (d1 ? d1 : 1);
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = offset + scale * frand(m);
    m->bufs[m->n++] = p;
    lmc_safetensors_writer_add(m->w, name, LMC_DTYPE_F32, d1 ? 2 : 1, shape, p);
}

void random_model_addf(random_model *m, int64_t d0, int64_t d1, float scale, float offset,
                       const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    random_model_add(m, name, d0, d1, scale, offset);
}

int random_model_write(random_model *m, const char *dir, const char *config_json) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    lmc_safetensors_writer_set_metadata(m->w, "format", "pt");
    int rc = lmc_safetensors_writer_write(m->w, path) == LMC_OK ? 0 : 1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(config_json, f) < 0) rc = 1;
    if (f) fclose(f);
    lmc_safetensors_writer_free(m->w);
    for (int i = 0; i < m->n; i++) free(m->bufs[i]);
    free(m);
    return rc;
}

void random_model_remove(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}
