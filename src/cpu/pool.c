/* pool.c: persistent workers synchronised by a generation counter. A run publishes the job, bumps
 * the generation and wakes sleepers; a worker that sees a new generation runs its share and
 * decrements `pending`. Sleep/wake race: a worker announces itself in n_sleeping before its last
 * check of the generation (both sequentially consistent), and the runner reads n_sleeping after
 * bumping the generation, so either the worker sees the new job or the runner sees the sleeper. */
#include "cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Waiting: spin with a pause instruction for SPIN_ITERS checks (bridges consecutive ops of one
 * forward pass), then yield the core for YIELD_ITERS checks (so an oversubscribed machine still
 * runs the thread being waited for), then sleep on the condition variable (between tokens). */
#define SPIN_ITERS 2000
#define YIELD_ITERS 2000

typedef struct worker {
    struct mf_pool *pool;
    int index;
    pthread_t thread;
} worker;

struct mf_pool {
    int n_threads;
    atomic_int refs;       /* owners (mf_pool_retain) */
    pthread_mutex_t run_mu; /* one run at a time, whoever its caller */
    worker *workers; /* n_threads - 1 */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;
    atomic_int pending;
    atomic_int n_sleeping;
    atomic_bool stop;
    mf_pool_fn fn;
    void *arg;
};

static void *worker_main(void *p) {
    worker *w = p;
    mf_pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&pool->gen)) == seen && !atomic_load(&pool->stop) && spins < SPIN_ITERS + YIELD_ITERS) {
            if (spins++ < SPIN_ITERS)
                CPU_RELAX();
            else
                sched_yield();
        }
        if (g == seen && !atomic_load(&pool->stop)) {
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->n_sleeping, 1);
            while ((g = atomic_load(&pool->gen)) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->cv, &pool->mu);
            atomic_fetch_sub(&pool->n_sleeping, 1);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->stop)) break;
        seen = g;
        pool->fn(pool->arg, w->index, pool->n_threads);
        atomic_fetch_sub(&pool->pending, 1);
    }
    return NULL;
}

mf_status mf_pool_create(int n_threads, mf_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return mf_fail(MF_ERR_ARG, "thread count %d: must be in [1, 1024]", n_threads);
    mf_pool *p = mf_calloc(1, sizeof *p);
    if (!p) return MF_ERR_NOMEM;
    p->n_threads = n_threads;
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->stop, false);
    if (n_threads > 1) {
        p->workers = mf_calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            mf_pool_free(p);
            return MF_ERR_NOMEM;
        }
        for (int i = 1; i < n_threads; i++) {
            worker *w = &p->workers[i - 1];
            w->pool = p;
            w->index = i;
            if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
                p->n_threads = i; /* join the ones that started */
                mf_pool_free(p);
                return mf_fail(MF_ERR_INTERNAL, "cannot start worker thread %d of %d", i, n_threads);
            }
        }
    }
    *out = p;
    return MF_OK;
}

mf_pool *mf_pool_retain(mf_pool *p) {
    atomic_fetch_add(&p->refs, 1);
    return p;
}

void mf_pool_free(mf_pool *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) > 1) return;
    atomic_store(&p->stop, true);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->workers)
        for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1].thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_mu);
    pthread_cond_destroy(&p->cv);
    free(p->workers);
    free(p);
}

int mf_pool_n_threads(const mf_pool *p) { return p->n_threads; }

void mf_pool_run(mf_pool *p, mf_pool_fn fn, void *arg) {
    if (p->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->run_mu);
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n_threads);
    for (int spins = 0; atomic_load(&p->pending) > 0; spins++) {
        if (spins < SPIN_ITERS)
            CPU_RELAX();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&p->run_mu);
}
