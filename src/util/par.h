/* util/par — a worker's threads inside one compute kernel (--threads T).
 *
 * Rule (docs/design.md, "Threads"): threads exist only inside a compute
 * kernel, and all their work is joined before the kernel returns; the
 * paradigm and communication logic run on the rank's one thread, which
 * alone calls MPI. A kernel's parallel loop runs over pieces whose
 * boundaries depend on the shapes only, never on T, and each piece is
 * computed as the one-thread kernel computes it (one-thread BLAS, the same
 * vector loops, every sum over the batch in its order), so the result is
 * the same bits for every T: only which thread computes a piece changes.
 *
 * The pool is OpenMP's (GCC's libgomp): a parallel region forks to threads
 * that persist between regions and joins at its end. Chosen over a small
 * pthread fork-join pool of dsgd's own after measuring the per-call cost
 * (bench/par_bench, 2 threads, this 2-core EPYC): an empty region costs
 * libgomp about 0.6 us, a bare spinning pthread pool 0.05 us (3.3-4.1 and
 * 0.5 us where the host placed the two vCPUs far apart: docs/design.md,
 * "What a second thread gets"). At the mlp's ~15 regions in a 0.7 ms step
 * that is 1-9% (resnet:20,16: ~150 regions in ~80 ms, 0.1-0.8%), which
 * libgomp buys back: its idle threads spin a while and then sleep (a bare
 * spinning pool burns the cores while the rank communicates), it hands
 * out pieces dynamically (a thread the OS
 * deschedules holds up one piece, not half a kernel: see PAR_GRAIN; the
 * dense layers and the update instead give a thread the same rows every
 * step, nn/dense.c, so that they stay in its core's cache), and
 * a kernel's parallel loop stays a loop, not a callback and a context
 * struct. A region below PAR_MIN_FLOATS of work, or with one thread, runs
 * on the calling thread alone (the if clause). The thread count is
 * libgomp's nthreads-var, set once per process by cpu_compute_setup
 * (util/cpu.h) before any kernel runs and only read afterwards: the one
 * piece of state, set up once, in the runtime, not a global of dsgd's.
 * The simulated build (SimGrid runs ranks as threads of one process) is
 * compiled without OpenMP: every PAR_ macro then runs its loop in order on
 * the calling thread.
 */
#ifndef DSGD_PAR_H
#define DSGD_PAR_H

/* The most threads a kernel that needs a workspace per thread uses (its
 * workspace is laid out for PAR_SLOTS, whatever T, so that a model's
 * layout does not depend on T); and the pieces the im2col path's weight
 * gradient cuts the batch into (fixed, so T does not move a boundary). */
enum { PAR_SLOTS = 4 };
/* Below about this many floats of work a region costs more than it saves. */
enum { PAR_MIN_FLOATS = 16384 };

#ifdef _OPENMP
#include <omp.h>
#define PAR_STR_(x) #x
/* a parallel for over the loop that follows, if cond holds */
#define PAR_FOR_IF(cond) _Pragma(PAR_STR_(omp parallel for schedule(static) if((cond) && par_threads() > 1)))
/* the same, handing out iterations one at a time in order: for pieces of
 * unequal cost */
#define PAR_FOR_DYN_IF(cond) _Pragma(PAR_STR_(omp parallel for schedule(dynamic, 1) if((cond) && par_threads() > 1)))
/* the same on at most PAR_SLOTS threads, each using workspace slot
 * par_slot(): for pieces that need scratch space */
#define PAR_FOR_SLOTS_IF(cond) \
    _Pragma(PAR_STR_(omp parallel for schedule(dynamic, 1) if((cond) && par_threads() > 1) num_threads(par_slots())))
/* a parallel region over the block that follows, if cond holds, whose
 * threads share its work out themselves (par_team_size, par_team_index),
 * PAR_BARRIER between its phases, PAR_FOR_STATIC for a loop cut evenly
 * among them (the same thread takes the same iterations every time) */
#define PAR_REGION_IF(cond) _Pragma(PAR_STR_(omp parallel if((cond) && par_threads() > 1)))
#define PAR_BARRIER _Pragma("omp barrier")
#define PAR_FOR_STATIC _Pragma("omp for schedule(static)")
static inline int par_team_size(void) { return omp_get_num_threads(); }
static inline int par_team_index(void) { return omp_get_thread_num(); }
static inline int par_threads(void) { return omp_get_max_threads(); }
static inline int par_slots(void) { const int t = omp_get_max_threads(); return t < PAR_SLOTS ? t : PAR_SLOTS; }
static inline int par_slot(void) { return omp_get_thread_num(); }
#else
/* (the condition still counts as used; a statement before the loop) */
#define PAR_FOR_IF(cond) (void)(cond);
#define PAR_FOR_DYN_IF(cond) (void)(cond);
#define PAR_FOR_SLOTS_IF(cond) (void)(cond);
#define PAR_REGION_IF(cond) (void)(cond);
#define PAR_BARRIER
#define PAR_FOR_STATIC
static inline int par_team_size(void) { return 1; }
static inline int par_team_index(void) { return 0; }
static inline int par_threads(void) { return 1; }
static inline int par_slot(void) { return 0; }
#endif

/* Pieces of work whose bits do not depend on where they are cut (each
 * output computed alone, in the same tiles): PAR_GRAIN per thread, handed
 * out one at a time, so that a thread the OS deschedules holds up only
 * its current piece (the others take the rest); at most max, at least 1;
 * 1 on one thread. */
enum { PAR_GRAIN = 4 };
static inline int par_pieces(long max)
{
    const int t = par_threads();
    const long n = t > 1 ? (long)t * PAR_GRAIN : 1;
    return max < 1 ? 1 : max < n ? (int)max : (int)n;
}

/* Pieces for an element-wise pass over n floats, whose bits no cut
 * changes: at least PAR_MIN_FLOATS / PAR_GRAIN floats each; 1 when the
 * pass is too small to share. */
static inline int par_elems(long n) { return n < PAR_MIN_FLOATS ? 1 : par_pieces(n / (PAR_MIN_FLOATS / PAR_GRAIN)); }

/* Piece i of n over [0, len), its start; boundaries are multiples of align
 * (the last piece takes the rest). */
static inline long par_cut(long len, int n, int i, long align)
{
    if (i >= n) return len;
    long b = len * i / n;
    b = b / align * align;
    return b < len ? b : len;
}

#endif
