/* Per-thread scratch buffers. A pthread key's destructor frees them when a
 * thread exits: the pool's workers are stopped and restarted by
 * lmc_set_num_threads, and plain _Thread_local pointers leaked theirs. */
#include "base.h"

#include <pthread.h>

typedef struct scratch_slot {
    void *data;
    size_t cap;
} scratch_slot;

static _Thread_local scratch_slot tl_slots[LMC_SCRATCH_SLOTS];
static pthread_key_t g_key;
static bool g_key_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void free_slots(void *arg) {
    scratch_slot *slots = arg;
    for (int i = 0; i < LMC_SCRATCH_SLOTS; i++) {
        lmc_free_aligned(slots[i].data);
        slots[i].data = NULL;
        slots[i].cap = 0;
    }
}

static void make_key(void) {
    g_key_ok = pthread_key_create(&g_key, free_slots) == 0;
}

void *lmc_thread_scratch(int slot, size_t bytes) {
    scratch_slot *s = &tl_slots[slot];
    if (bytes > s->cap) {
        /* geometric growth: a buffer that grows with the context (the
         * attention scores) is reallocated O(log n) times, not per token */
        size_t want = bytes < s->cap / 2 * 3 ? s->cap / 2 * 3 : bytes;
        pthread_once(&g_once, make_key);
        lmc_free_aligned(s->data);
        s->data = lmc_alloc_aligned(want);
        s->cap = s->data ? want : 0;
        if (s->data && g_key_ok) pthread_setspecific(g_key, tl_slots);
    }
    return s->data;
}

void *lmc_tmp_get(int slot, size_t bytes, bool *owned) {
    *owned = bytes > LMC_TMP_KEEP;
    return *owned ? lmc_alloc_aligned(bytes) : lmc_thread_scratch(slot, bytes);
}

void lmc_tmp_put(void *p, bool owned) {
    if (owned) lmc_free_aligned(p);
}
