/* Picks the kernel table once: AVX2 when the CPU has it, unless
 * LMC_NO_SIMD is set. */
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static _Atomic(const lmc_kernel_table *) g_table;

static void choose(void) {
    const char *no = getenv("LMC_NO_SIMD");
    const lmc_kernel_table *t = (no && *no && *no != '0') ? NULL : lmc_kernels_avx2();
    atomic_store(&g_table, t ? t : lmc_kernels_generic());
}

const lmc_kernel_table *lmc_kernels(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    const lmc_kernel_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (t) return t;
    pthread_once(&once, choose);
    return atomic_load(&g_table);
}

void lmc_kernels_use(const lmc_kernel_table *table) {
    lmc_kernels();
    atomic_store(&g_table, table ? table : lmc_kernels_generic());
}
