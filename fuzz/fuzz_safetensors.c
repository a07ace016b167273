/* libFuzzer target: the safetensors header parser over arbitrary bytes.
 * A parse that succeeds must hand out views inside the input: every
 * tensor's bytes are read (ASan catches a view past the end) and a few
 * lookups run. Seeds: fuzz/seeds/safetensors. */
#include "tensor/safetensors.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lmc_safetensors st;
    if (lmc_safetensors_parse(data, size, "fuzz.safetensors", &st) != LMC_OK) {
        /* A failure always leaves a message and an empty struct. */
        if (!lmc_last_error()[0] || st.tensors || st.n_tensors) __builtin_trap();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < st.n_tensors; i++) {
        const lmc_tensor *t = &st.tensors[i];
        const uint8_t *p = t->data;
        if (p < data || t->nbytes > size || p - data > (ptrdiff_t)(size - t->nbytes))
            __builtin_trap();
        for (uint64_t b = 0; b < t->nbytes; b++) sink ^= p[b];
        if (lmc_safetensors_find(&st, t->name) != t) __builtin_trap();
        if (i > 0 && strcmp(st.tensors[i - 1].name, t->name) >= 0) __builtin_trap();
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (numel * lmc_dtype_size(t->dtype) != t->nbytes) __builtin_trap();
    }
    (void)lmc_safetensors_find(&st, "");
    (void)lmc_safetensors_find(&st, "model.embed_tokens.weight");
    (void)lmc_safetensors_find(&st, "__metadata__");
    (void)sink;
    lmc_safetensors_close(&st);
    return 0;
}
