/* pool.h: a persistent thread pool for the CPU backend. Workers are created once; each run wakes
 * them (they spin briefly after a job, then sleep on a condition variable), the calling thread
 * does share 0 itself, and the call returns when every share is done. No thread is created per op. */
#ifndef MF_POOL_H
#define MF_POOL_H

#include "core/core.h"

/* One share of a job: ith in [0, nth). */
typedef void (*mf_pool_fn)(void *arg, int ith, int nth);

typedef struct mf_pool mf_pool;

/* n_threads >= 1 (the caller counts as one). */
mf_status mf_pool_create(int n_threads, mf_pool **out);
/* One more owner of p (a second backend running on the same threads); returns p. */
mf_pool *mf_pool_retain(mf_pool *p);
void mf_pool_free(mf_pool *p); /* accepts NULL; the last owner's call joins the workers */
int mf_pool_n_threads(const mf_pool *p);
/* Run fn(arg, i, n) for i in [0, n) on the pool's threads and wait for all. Not reentrant (fn must
 * not run the pool); runs from several threads take turns. */
void mf_pool_run(mf_pool *p, mf_pool_fn fn, void *arg);

/* Rows [*r0, *r1) of n for share ith of nth (contiguous, balanced). */
static inline void mf_pool_range(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t per = (n + nth - 1) / nth;
    *r0 = MF_MIN(n, per * ith);
    *r1 = MF_MIN(n, *r0 + per);
}

#endif /* MF_POOL_H */
