/* x86_scratch.c: the float tiles' per-thread scratch (x86_scratch.h). Plain C with the baseline
 * flags: the kernels of every level share it. */
#include "x86/x86_scratch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    void *p;
    size_t bytes;
} thread_buf;

static pthread_key_t key;
static bool key_ok;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void buf_free(void *v) {
    thread_buf *b = v;
    free(b->p);
    free(b);
}

static void key_init(void) { key_ok = pthread_key_create(&key, buf_free) == 0; }

void *mf_x86_thread_scratch(size_t bytes) {
    pthread_once(&once, key_init);
    if (!key_ok) return NULL;
    thread_buf *b = pthread_getspecific(key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        if (pthread_setspecific(key, b)) {
            free(b);
            return NULL;
        }
    }
    if (b->bytes < bytes) {
        void *p;
        if (posix_memalign(&p, 64, bytes)) return NULL;
        free(b->p);
        b->p = p, b->bytes = bytes;
    }
    return b->p;
}
