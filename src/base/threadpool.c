/* One persistent pool of worker threads with a fork-join parallel-for.
 * Decode runs a few hundred small parallel loops per token, so workers spin
 * briefly on the job word before sleeping on a condition variable.
 *
 * The caller never waits for a worker that has not started: a worker joins
 * a job (counted in the job word) only while it is open; once the caller has
 * run out of chunks it closes the job and waits only for the workers that
 * joined, which are running chunks. So on a machine where another process
 * holds the other core, a worker that is not scheduled before the job ends
 * costs nothing: the caller does all chunks itself (it used to spin, then
 * yield, until every worker had checked in). One descheduled inside its
 * chunk does cost a wait: those stalls send every job to the caller alone
 * for a while (stalled(), below).
 *
 * Several application threads may call lmc_parallel_for at once (each with
 * its own session over one model): the pool runs one job at a time, owned
 * by whoever took job_mu; a caller that finds it taken (another thread's
 * job, or a call from inside a body) runs its loop inline on its own thread.
 * No caller waits for another's job and no job's fields are written while
 * workers read them. The loop bodies compute each output from its index
 * alone, so the results do not depend on who ran which range. */
#include "base.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define SPIN_ITERATIONS 20000

/* The job word: generation << 32 | JOB_CLOSED | workers inside the job. */
#define JOB_CLOSED (1ull << 31)
#define JOB_ACTIVE(w) ((w)&0x7fffffffull)
#define JOB_GEN(w) ((unsigned)((w) >> 32))

typedef struct pool {
    pthread_mutex_t job_mu; /* held by the caller whose job the workers run */
    int n_threads;          /* including the calling thread */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_ullong job;   /* the job word; workers join with a CAS while it is open */
    atomic_int sleepers; /* workers waiting on cv (the caller signals only then) */
    atomic_bool quit;
    unsigned gen; /* the caller's generation counter (job_mu held) */
    /* the current job: written by the caller before it opens the job, read
     * by workers only after they joined it (so never while rewritten) */
    lmc_range_fn fn;
    void *ctx;
    int64_t n, grain, chunk; /* chunk: the shortest (run_chunks) */
    _Atomic int64_t next;    /* the first index not yet taken */
    struct job_stat *stats;  /* [STAT_SLOTS], job_mu held */
    /* contention (job_mu held): see stalled() */
    bool contended;      /* jobs run on the caller alone until inline_until */
    double inline_until; /* lmc_time_now() */
    double backoff;      /* seconds inline after the next stall */
    double probe_end;    /* a stall before this lengthens the backoff */
    double last_stall;   /* when the last stall was */
} pool;

static pool g_pool = {.job_mu = PTHREAD_MUTEX_INITIALIZER, .last_stall = -1e9};
static int g_requested_threads; /* 0 = default */
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool g_started;

/* Runs chunks until none is left; returns how many indices it ran. The
 * chunks shrink as the job goes (guided scheduling): each takes a
 * 2 * n_threads-th of what is left, a multiple of the grain and at least
 * p->chunk, so the first ones are long and the threads finish within a
 * short chunk of each other (equal chunks of an eighth of the job left one
 * thread waiting for the other's last one: 3-4% of a decode step's time). */
static int64_t run_chunks(pool *p, int worker) {
    int64_t ran = 0;
    const int64_t n = p->n, grain = p->grain, min = p->chunk, parts = 2 * (int64_t)p->n_threads;
    int64_t b = atomic_load_explicit(&p->next, memory_order_relaxed);
    for (;;) {
        int64_t size;
        do {
            if (b >= n) return ran;
            size = (n - b + parts - 1) / parts;
            if (size < min) size = min;
            size = (size + grain - 1) / grain * grain;
            if (size > n - b) size = n - b;
        } while (!atomic_compare_exchange_weak_explicit(
            &p->next, &b, b + size, memory_order_relaxed, memory_order_relaxed));
        p->fn(p->ctx, b, b + size, worker);
        ran += size;
        b += size;
    }
}

/* Which jobs pay to run on the pool: per kind of job (body and size; a
 * decode step runs the same few hundred each token), the wall time on the
 * pool and on the caller alone, as moving averages, and each kind runs the
 * faster way. A run on the pool also estimates the time alone (the
 * caller's pace over its own chunks, times all chunks), so while the pool
 * wins nothing is spent on finding out; while the caller alone wins, the
 * pool is tried again after PROBE_MIN runs, and twice as many after each
 * try that did not change the verdict (up to PROBE_MAX). On a quiet
 * machine the pool wins all but the smallest jobs; when another process
 * holds a core, a descheduled worker makes jobs on the pool slower than on
 * the caller alone (5-10x in decode), and they run inline until that
 * changes. */
#define STAT_SLOTS 128
#define PROBE_MIN 16
#define PROBE_MAX 2048
typedef struct job_stat {
    lmc_range_fn fn;
    int64_t n;
    double t[2];          /* seconds: [0] inline, [1] on the pool; 0 = not measured */
    uint32_t left, every; /* runs to the next try of the other way, and the interval */
    bool probing;         /* this run tries the other way */
} job_stat;

static job_stat *job_stat_of(pool *p, lmc_range_fn fn, int64_t n) {
    if (!p->stats && !(p->stats = calloc(STAT_SLOTS, sizeof *p->stats))) return NULL;
    uint64_t h = ((uint64_t)(uintptr_t)fn >> 4) * 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    h *= 0xBF58476D1CE4E5B9ull;
    job_stat *js = &p->stats[(h >> 32) % STAT_SLOTS];
    if (js->fn != fn || js->n != n) *js = (job_stat){.fn = fn, .n = n, .every = PROBE_MIN};
    return js;
}

/* true: run this job on the pool */
static bool choose_pool(job_stat *js) {
    if (!js) return true;
    js->probing = false;
    if (js->t[1] == 0) return true;
    if (js->t[0] == 0) return false;
    if (js->t[1] <= js->t[0]) return true;
    if (js->left > 0) {
        js->left--;
        return false;
    }
    js->probing = true;
    return true;
}

static void average_in(double *t, double dt) {
    if (*t == 0) {
        *t = dt > 0 ? dt : 1e-9;
        return;
    }
    /* one slow run (an interrupt) moves the average by at most a quarter;
     * faster runs count double */
    double x = dt > 2 * *t ? 2 * *t : dt;
    *t += (x - *t) * (x < *t ? 0.5 : 0.25);
}

/* A run's times, alone and on the pool (0: none of that kind). */
static void record(job_stat *js, double alone, double on_pool) {
    if (!js) return;
    bool pool_won = js->t[1] <= js->t[0];
    if (alone > 0) average_in(&js->t[0], alone);
    if (on_pool > 0) average_in(&js->t[1], on_pool);
    bool same = (js->t[1] <= js->t[0]) == pool_won;
    if (js->probing || !same) {
        /* a verdict that changed is checked again soon */
        js->every = !same ? PROBE_MIN : js->every < PROBE_MAX ? js->every * 2 : PROBE_MAX;
        js->left = js->every;
    }
}

/* A busy machine (another process holds a core): a worker runs late, and
 * a job on the pool takes longer than the caller alone would have (a stall:
 * the caller waited STALL_MIN or more for a worker descheduled inside its
 * chunk, or no worker took part in a job that long: one spinning joins
 * within a microsecond and one woken from its sleep within a tenth of a
 * millisecond when it is scheduled). Two stalls within STALL_WINDOW make every job
 * run on the caller alone for a while, so the workers go to sleep and leave
 * the cores to the caller and the other process; then the pool is tried
 * again, and a stall within PROBE_WINDOW of that makes the time alone four
 * times longer (CONTENDED_MIN up to CONTENDED_MAX: 20, 80, 320, 1000 ms; a
 * doubling took 7 tries to get there, 3-4% of a one-second run). So a busy
 * machine costs the pool about one stall and one probe (the worker taking
 * time from the caller) per CONTENDED_MAX, where the per-kind timings (each
 * kind of job tried again every few hundred runs, and a lucky try sending
 * it back to the pool while the worker took a core's time from the caller)
 * left 2 threads at 0.8x one in some runs. With `yes` holding a core, the
 * stalls here were a scheduler slice (about 4 ms) every few ms on the pool.
 * A quiet machine has a stall now and then (a virtual CPU descheduled by
 * the host for 1-4 ms, every few hundred ms here), which costs that stall
 * and no more; shorter waits (a worker's page faults) are not stalls, nor
 * is a job that a worker woken for it did not reach: after a time alone the
 * workers sleep, and waking an idle virtual CPU took over STALL_MIN often
 * enough on a quiet virtual machine that each probe failed and the backoff
 * grew to CONTENDED_MAX (8-bit decode at half speed for seconds); with
 * another process on the core, the woken worker stalls inside a chunk. */
#define STALL_MIN 500e-6
#define STALL_WINDOW 0.1
#define CONTENDED_MIN 0.02
#define CONTENDED_MAX 1.0
#define PROBE_WINDOW 0.02

/* A job on the pool: wall time on_pool, the caller's own part in t_mine,
 * alone: the time the caller alone would have taken (0: the workers did it
 * all, no loss), all_mine: no worker took part. */
static bool stalled(double on_pool, double t_mine, double alone, bool all_mine) {
    if (alone <= 0) return false;
    if (on_pool - t_mine > STALL_MIN && on_pool > alone) return true;
    return all_mine && t_mine > STALL_MIN;
}

static void note_stall(pool *p, double now) {
    if (now < p->probe_end && p->backoff > 0) {
        p->backoff = p->backoff * 4 < CONTENDED_MAX ? p->backoff * 4 : CONTENDED_MAX;
    } else if (now - p->last_stall < STALL_WINDOW) {
        p->backoff = CONTENDED_MIN;
    } else {
        p->last_stall = now; /* one alone: a hiccup, or the first of many */
        return;
    }
    p->last_stall = now;
    p->contended = true;
    p->inline_until = now + p->backoff;
}

/* true: the machine looks busy, run this job on the caller alone */
static bool contended(pool *p, double now) {
    if (!p->contended) return false;
    if (now < p->inline_until) return true;
    p->contended = false;
    p->probe_end = now + PROBE_WINDOW;
    return false;
}

static void *worker_main(void *arg) {
    int worker = (int)(intptr_t)arg;
    pool *p = &g_pool;
    unsigned seen = 0; /* the pool starts at generation 0, before any worker runs */
    for (;;) {
        unsigned long long w;
        int spins = 0;
        while (JOB_GEN(w = atomic_load_explicit(&p->job, memory_order_acquire)) == seen &&
               !atomic_load(&p->quit)) {
            if (++spins < SPIN_ITERATIONS) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (JOB_GEN(atomic_load(&p->job)) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->quit)) break;
        seen = JOB_GEN(w);
        /* join while the job is open and still this generation */
        bool joined = false;
        while (JOB_GEN(w) == seen && !(w & JOB_CLOSED)) {
            if (atomic_compare_exchange_weak_explicit(&p->job, &w, w + 1, memory_order_acquire,
                                                      memory_order_acquire)) {
                joined = true;
                break;
            }
        }
        if (!joined) continue;
        run_chunks(p, worker);
        atomic_fetch_sub_explicit(&p->job, 1, memory_order_release);
    }
    return NULL;
}

static int default_threads(void) {
    const char *env = getenv("LMC_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void pool_stop(void) {
    pool *p = &g_pool;
    if (!atomic_load(&g_started)) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    atomic_store(&g_started, false);
}

static void pool_start(void) {
    pool *p = &g_pool;
    int n = g_requested_threads > 0 ? g_requested_threads : default_threads();
    if (n > 256) n = 256;
    p->n_threads = 1;
    p->threads = NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_store(&p->quit, false);
    atomic_store(&p->job, 0);
    atomic_store(&p->sleepers, 0);
    p->gen = 0;
    if (n > 1) {
        p->threads = calloc((size_t)n - 1, sizeof(pthread_t));
        if (p->threads) {
            /* Workers start with every signal blocked, so a process-directed
             * signal (a Ctrl-C) goes to an application thread that waits for
             * it: were it delivered to a sleeping worker, a caller blocked
             * in pselect or sigwait would never see it. */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            for (int i = 1; i < n; i++) {
                if (pthread_create(&p->threads[i - 1], NULL, worker_main, (void *)(intptr_t)i) != 0)
                    break;
                pthread_setname_np(p->threads[i - 1], "lmc-worker"); /* for top, gdb, tests */
                p->n_threads++;
            }
            pthread_sigmask(SIG_SETMASK, &old, NULL);
        }
    }
    atomic_store(&g_started, true);
}

static void at_exit_stop(void) {
    pthread_mutex_lock(&g_init_mu);
    pool_stop();
    pthread_mutex_unlock(&g_init_mu);
}

/* Starts the pool if it is not running; g_init_mu held. */
static void ensure_started_locked(void) {
    if (atomic_load(&g_started)) return;
    pool_start();
    static bool registered;
    if (!registered) {
        atexit(at_exit_stop);
        registered = true;
    }
}

void lmc_set_num_threads(int n) {
    pthread_mutex_lock(&g_init_mu);
    /* No job may be running while the workers are joined: wait for the
     * current owner, and keep others inline (their trylock fails). */
    pthread_mutex_lock(&g_pool.job_mu);
    g_requested_threads = n < 0 ? 0 : n;
    pool_stop();
    free(g_pool.stats); /* the timings were for the old pool's size */
    g_pool.stats = NULL;
    g_pool.contended = false, g_pool.backoff = 0, g_pool.probe_end = 0;
    g_pool.last_stall = -1e9;
    pthread_mutex_unlock(&g_pool.job_mu);
    pthread_mutex_unlock(&g_init_mu);
}

int lmc_get_num_threads(void) {
    pthread_mutex_lock(&g_init_mu);
    ensure_started_locked();
    int n = g_pool.n_threads;
    pthread_mutex_unlock(&g_init_mu);
    return n;
}

void lmc_parallel_for(int64_t n, int64_t grain, lmc_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    pool *p = &g_pool;
    if (n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (!atomic_load_explicit(&g_started, memory_order_acquire)) {
        pthread_mutex_lock(&g_init_mu);
        ensure_started_locked();
        pthread_mutex_unlock(&g_init_mu);
    }
    /* The pool is busy with another caller's job (or being restarted):
     * this caller's loop runs on its own thread. */
    if (pthread_mutex_trylock(&p->job_mu) != 0) {
        fn(ctx, 0, n, 0);
        return;
    }
    int workers = atomic_load(&g_started) ? p->n_threads : 1;
    if (workers <= 1) {
        pthread_mutex_unlock(&p->job_mu);
        fn(ctx, 0, n, 0);
        return;
    }
    const double t0 = lmc_time_now();
    if (contended(p, t0)) { /* job_mu stays held: others run inline meanwhile */
        fn(ctx, 0, n, 0);
        pthread_mutex_unlock(&p->job_mu);
        return;
    }
    job_stat *js = job_stat_of(p, fn, n);
    if (!choose_pool(js)) {
        fn(ctx, 0, n, 0);
        record(js, lmc_time_now() - t0, 0);
        pthread_mutex_unlock(&p->job_mu);
        return;
    }
    /* the shortest chunk: a 128th of a thread's share, or the grain */
    int64_t chunk = n / ((int64_t)workers * 128);
    if (chunk < grain) chunk = grain;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    /* open the job (seq_cst: a worker that is about to sleep either sees
     * the new generation or is counted in sleepers and gets the signal) */
    p->gen++;
    if (p->gen == 0) p->gen = 1; /* workers start at 0 */
    atomic_store(&p->job, (unsigned long long)p->gen << 32);
    /* a worker asleep needs waking: on a virtual machine an idle virtual
     * CPU can take a millisecond or more to come back, which says nothing
     * about another process holding a core (see stalled()) */
    const bool woke = atomic_load(&p->sleepers) > 0;
    if (woke) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    int64_t mine = run_chunks(p, 0);
    const double t1 = lmc_time_now();
    /* no chunk left: close the job to late workers, wait for those inside
     * (running a chunk; yield after a while in case one was preempted) */
    atomic_fetch_or(&p->job, JOB_CLOSED);
    for (int spins = 0; JOB_ACTIVE(atomic_load_explicit(&p->job, memory_order_acquire)) > 0;
         spins++) {
        if (spins < 4000) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
    const double t2 = lmc_time_now();
    /* the caller's pace over its own indices estimates the time alone; a
     * stall says how busy the machine is, not what this kind of job costs */
    const double alone = mine > 0 ? (t1 - t0) / (double)mine * (double)n : 0;
    const bool stall = stalled(t2 - t0, t1 - t0, alone, mine == n && !woke);
    if (stall) note_stall(p, t2);
    record(js, alone, stall ? 0 : t2 - t0);
    pthread_mutex_unlock(&p->job_mu);
}
