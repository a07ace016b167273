/* Internal base layer: errors, logging, allocation, file mapping, threads.
 * Everything in src/ includes this; nothing here prints or exits. */
#ifndef LMC_BASE_H
#define LMC_BASE_H

#include "lmc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define LMC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define LMC_UNUSED __attribute__((unused))
#else
#define LMC_PRINTF(a, b)
#define LMC_UNUSED
#endif

/* Sets the thread's last error message and returns status, so callers can
 * write `return lmc_error(LMC_ERR_FORMAT, "%s: bad header", path);`. */
lmc_status lmc_error(lmc_status status, const char *fmt, ...) LMC_PRINTF(2, 3);
/* Prefixes the current message with context: "ctx: <old message>". */
lmc_status lmc_error_prefix(lmc_status status, const char *fmt, ...) LMC_PRINTF(2, 3);
void lmc_clear_error(void);

void lmc_log(lmc_log_level level, const char *fmt, ...) LMC_PRINTF(2, 3);

/* Allocation: NULL on failure (callers turn it into LMC_ERR_NOMEM). */
void *lmc_alloc_aligned(size_t size); /* 64-byte aligned, free with lmc_free_aligned */
void lmc_free_aligned(void *ptr);
/* Per-thread scratch, one buffer per slot: at least `bytes`, 64-byte
 * aligned, owned by the calling thread and valid until its next call for the
 * same slot; freed when the thread exits. NULL on allocation failure. */
enum {
    LMC_SCRATCH_KERNELS,   /* inside parallel bodies */
    LMC_SCRATCH_ATTENTION, /* inside attention's parallel body */
    /* lmc_tmp_get's, on the calling thread: one per site, as they nest */
    LMC_SCRATCH_FORWARD,
    LMC_SCRATCH_MLP,
    LMC_SCRATCH_MLP_FUSED,
    LMC_SCRATCH_QTOKENS,
    LMC_SCRATCH_QEXACT,
    LMC_SCRATCH_QMULTI,
    LMC_SCRATCH_SLOTS
};
void *lmc_thread_scratch(int slot, size_t bytes);
/* One call's temporary buffer (64-byte aligned): up to LMC_TMP_KEEP bytes
 * from the calling thread's scratch slot, kept for the next call (so the
 * decode loop allocates nothing, and a long prompt's 512-token steps do not
 * map and fault in fresh pages at every layer: that cost pp512 a third of
 * its time), more from the heap. Give it back with lmc_tmp_put(p, *owned).
 * NULL on allocation failure. */
#define LMC_TMP_KEEP ((size_t)64 << 20)
void *lmc_tmp_get(int slot, size_t bytes, bool *owned);
void lmc_tmp_put(void *p, bool owned);
char *lmc_strdup(const char *s);                          /* free with free() / lmc_free() */
char *lmc_path_join(const char *dir, const char *name);   /* malloc'd */
char *lmc_sprintf(const char *fmt, ...) LMC_PRINTF(1, 2); /* malloc'd */

/* Checked size arithmetic: false on overflow. */
static inline bool lmc_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool lmc_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* A read-only mapping of a whole file. */
typedef struct lmc_mapped_file {
    const uint8_t *data;
    size_t size;
    char *path; /* owned copy */
} lmc_mapped_file;

lmc_status lmc_map_file(const char *path, lmc_mapped_file *out);
void lmc_unmap_file(lmc_mapped_file *f);
/* Reads a whole (small) file into a NUL-terminated malloc'd buffer. */
lmc_status lmc_read_file(const char *path, char **data, size_t *size);
bool lmc_file_exists(const char *path);
bool lmc_dir_exists(const char *path);
/* Copies a file (following links) to dst, replacing it. */
lmc_status lmc_copy_file(const char *src, const char *dst);
/* Removes a directory and everything in it (links are removed, not
 * followed). For the library's own temporary folders. */
lmc_status lmc_remove_tree(const char *path);

/* Thread pool: one persistent pool, fork-join parallel-for (the pool's
 * size: lmc_get_num_threads). The body gets a
 * half-open range [begin, end) of [0, n) and the worker index. */
typedef void (*lmc_range_fn)(void *ctx, int64_t begin, int64_t end, int worker);
/* Splits [0, n) into chunks of at least `grain` items over the workers;
 * runs inline when one worker suffices, when the pool is busy with another
 * caller's job, and when called from inside a body. */
void lmc_parallel_for(int64_t n, int64_t grain, lmc_range_fn fn, void *ctx);

/* Monotonic time in seconds. */
double lmc_time_now(void);

#endif
