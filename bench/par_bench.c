/* bench/par_bench — what a fork-join costs a kernel (src/util/par.h).
 *
 * The mlp's step is ~0.7 ms over ~10 kernels, so a parallel region's own
 * cost matters. Times, per call with T threads: an empty OpenMP parallel
 * loop of T pieces (libgomp, as the kernels use it), and the same with a
 * minimal pthread fork-join pool written for the comparison (workers spin
 * on a generation counter, then the caller spins until all are done: the
 * least a fork-join can cost). Prints one line per variant:
 *   par variant=openmp threads=T us_per_call=X
 * Usage: par_bench [T] [CALLS]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/par.h"
#include "util/util.h"

typedef struct pool {
    int n;
    atomic_long gen;     /* bumped by the caller to start a round */
    atomic_int left;     /* workers still in the round */
    atomic_int stop;
    volatile float sink[64];
} pool_t;

static pool_t P;   /* this benchmark's own: one pool, set up once in main */

static void piece(int i) { P.sink[i & 63] += 1.0f; }

static void *worker(void *arg)
{
    const int id = (int)(long)arg;
    long seen = 0;
    for (;;) {
        long g;
        while ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen)
            if (atomic_load_explicit(&P.stop, memory_order_relaxed)) return NULL;
        seen = g;
        piece(id);
        atomic_fetch_sub_explicit(&P.left, 1, memory_order_acq_rel);
    }
}

static void pool_run(void)
{
    atomic_store_explicit(&P.left, P.n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&P.gen, 1, memory_order_acq_rel);
    piece(0);
    while (atomic_load_explicit(&P.left, memory_order_acquire) > 0) { }
}

int main(int argc, char **argv)
{
    const int T = argc > 1 ? atoi(argv[1]) : 2;
    const long N = argc > 2 ? atol(argv[2]) : 200000;
    if (T < 1 || N < 1) { fprintf(stderr, "usage: par_bench [T] [CALLS]\n"); return 2; }
#ifdef _OPENMP
    omp_set_num_threads(T);
    volatile float sink[64] = { 0 };
    for (int w = 0; w < 2; w++) {   /* the first round warms the pool up */
        double t0 = now_s();
        for (long k = 0; k < N; k++) {
            PAR_FOR_IF(T > 1)
            for (int i = 0; i < T; i++) sink[i & 63] += 1.0f;
        }
        double t = now_s() - t0;
        if (w) printf("par variant=openmp threads=%d us_per_call=%.3f\n", T, t / N * 1e6);
    }
#endif
    P.n = T;
    pthread_t th[256];
    for (int i = 1; i < T && i < 256; i++) pthread_create(&th[i], NULL, worker, (void *)(long)i);
    for (int w = 0; w < 2; w++) {
        double t0 = now_s();
        for (long k = 0; k < N; k++) pool_run();
        double t = now_s() - t0;
        if (w) printf("par variant=pthread-spin threads=%d us_per_call=%.3f\n", T, t / N * 1e6);
    }
    atomic_store(&P.stop, 1);
    for (int i = 1; i < T && i < 256; i++) pthread_join(th[i], NULL);
    return 0;
}
