/* CPU feature detection, the one place the kernels ask what the CPU has. */
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

/* AVX2 + FMA + F16C with the YMM state enabled by the OS. cpuid directly:
 * clang 14's __builtin_cpu_supports does not know "f16c". */
static bool cpu_has_avx2(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (fma | osxsave | avx | f16c)) != (fma | osxsave | avx | f16c)) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return false; /* XMM and YMM state */
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & (1u << 5)) != 0; /* AVX2 */
#else
    return false;
#endif
}

bool lmc_cpu_has_avx2_fma_f16c(void) {
    static atomic_int cached = -1; /* racing first calls compute the same value */
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        c = cpu_has_avx2();
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c != 0;
}

/* AVX-512 F, BW, VL, DQ, VNNI and BF16 with the opmask and ZMM state enabled
 * (on top of the AVX2 set). */
static bool cpu_has_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!cpu_has_avx2()) return false;
    unsigned a, b, c, d;
    __get_cpuid(1, &a, &b, &c, &d);
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xE6) != 0xE6) return false; /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM */
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    if ((b & (f | dq | bw | vl)) != (f | dq | bw | vl)) return false;
    if (!(c & (1u << 11))) return false; /* AVX512_VNNI */
    __cpuid_count(7, 1, a, b, c, d);
    return (a & (1u << 5)) != 0; /* AVX512_BF16 */
#else
    return false;
#endif
}

bool lmc_cpu_has_avx512(void) {
    static atomic_int cached = -1;
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        const char *no = getenv("LMC_NO_AVX512");
        c = cpu_has_avx512() && !(no && *no && *no != '0');
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c != 0;
}

/* AVX-VNNI (vpdpbusd on ymm, VEX): cpuid leaf 7 subleaf 1, EAX bit 4. */
static bool cpu_has_avxvnni(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!cpu_has_avx2() || __get_cpuid_max(0, NULL) < 7) return false;
    unsigned a, b, c, d;
    __cpuid_count(7, 1, a, b, c, d);
    return (a & (1u << 4)) != 0;
#else
    return false;
#endif
}

static atomic_int g_avxvnni = -1; /* -1: not read yet; tests set it (lmc_cpu_avxvnni_allow) */

bool lmc_cpu_has_avxvnni(void) {
    int c = atomic_load_explicit(&g_avxvnni, memory_order_relaxed);
    if (c < 0) {
        const char *no = getenv("LMC_NO_AVXVNNI");
        c = cpu_has_avxvnni() && !(no && *no && *no != '0');
        atomic_store_explicit(&g_avxvnni, c, memory_order_relaxed);
    }
    return c != 0;
}

bool lmc_cpu_avxvnni_allow(bool allow) {
    atomic_store_explicit(&g_avxvnni, allow && cpu_has_avxvnni(), memory_order_relaxed);
    return lmc_cpu_has_avxvnni();
}
