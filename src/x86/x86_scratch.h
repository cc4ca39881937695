/* x86_scratch.h: the per-thread scratch of the x86 float tiles (x86_scratch.c), apart from
 * x86_common.h so that its baseline-compiled file needs no vector types. */
#ifndef MF_X86_SCRATCH_H
#define MF_X86_SCRATCH_H

#include <stddef.h>

/* The calling thread's scratch of at least bytes, 64-byte aligned: one buffer per thread, kept until
 * the thread exits and replaced by a larger one when asked for more (its contents then dropped), so
 * it holds a kernel's state within one call only. NULL if it cannot be had. */
void *mf_x86_thread_scratch(size_t bytes);

#endif /* MF_X86_SCRATCH_H */
