/* bench/par_bench — what a fork-join costs a kernel (src/util/par.h).
 *
 * The mlp's step is ~0.7 ms over ~10 kernels, so a parallel region's own
 * cost matters. Times, per call with T threads: an empty OpenMP parallel
 * loop of T pieces (libgomp, as the kernels use it), and the same with a
 * minimal pthread fork-join pool written for the comparison (workers spin
 * on a generation counter, then the caller spins until all are done: the
 * least a fork-join can cost). Prints one line per variant:
 *   par variant=openmp threads=T us_per_call=X
 *
 * Then what it costs one core to use data another core wrote, as the
 * kernels do whenever a region reads what a piece of the previous region
 * left on the other core (two threads of the OpenMP team): a cache line
 * passed back and forth between the two (round trip), and a buffer of K
 * kB written by one thread and then summed by the other, against summed
 * by the thread that wrote it (its own cache):
 *   par handoff line_round_trip_ns=X
 *   par handoff kb=K own_gb_s=X other_gb_s=Y own/other=Z
 *
 * Last, what the host takes from the two cores: both threads read the
 * clock in a loop for a while, and every gap above 20 us between two
 * readings is time the core was taken from them (an interrupt, another
 * task, or, in a virtual machine, the host running something else on the
 * virtual CPU's core). A two-thread step waits at every join for the
 * slower core, so its rate falls with the sum of both cores' pauses where
 * one process's falls with one core's:
 *   par pauses secs=S lost_pct=A,B over_100us=N,M longest_ms=X together_pct=Y
 * (lost_pct per thread; together_pct: the share of thread 0's lost time
 * during which thread 1 was also paused, 100 when the host pauses the whole
 * machine at once; of the first 65536 gaps of each thread when a long
 * probe has more, and the line then says so). `par_bench pauses S` prints
 * only that line.
 * Usage: par_bench [T] [CALLS] | par_bench pauses [SECS]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "util/par.h"
#include "util/util.h"

typedef struct pool {
    int n;
    atomic_long gen;     /* bumped by the caller to start a round */
    atomic_int left;     /* workers still in the round */
    atomic_int stop;
    volatile float sink[64];
} pool_t;

#ifdef _OPENMP
/* Two threads of the OpenMP team: a line's round trip between them, ns. */
static double line_round_trip_ns(long rounds)
{
    double t = 0;
    _Alignas(64) atomic_long flag = 0;
    #pragma omp parallel num_threads(2)
    {
        const int me = omp_get_thread_num();
        #pragma omp barrier
        const double t0 = now_s();
        for (long i = 0; i < 2 * rounds; i += 2) {
            const long mine = me == 0 ? i : i + 1;   /* thread 0 takes even turns */
            while (atomic_load_explicit(&flag, memory_order_acquire) != mine) { }
            atomic_store_explicit(&flag, mine + 1, memory_order_release);
        }
        if (me == 0) t = (now_s() - t0) / (double)rounds * 1e9;
    }
    return t;
}

enum { GAPS_MAX = 1 << 16 };
typedef struct gap { double t0, t1; } gap_t;

/* Both threads read the clock for secs seconds, each adding up its gaps
 * above 20 us and listing the first GAPS_MAX of them (for the overlap
 * alone): the pauses line of the header. */
static void host_pauses(double secs)
{
    gap_t *gaps[2] = { xmalloc(sizeof(gap_t) * GAPS_MAX), xmalloc(sizeof(gap_t) * GAPS_MAX) };
    long n[2] = { 0, 0 }, over[2] = { 0, 0 };
    double lost[2] = { 0, 0 }, longest[2] = { 0, 0 };
    int capped = 0;
    #pragma omp parallel num_threads(2) reduction(| : capped)
    {
        const int me = omp_get_thread_num();
        #pragma omp barrier
        const double start = now_s();
        double last = start;
        for (;;) {
            const double t = now_s(), d = t - last;
            if (d > 20e-6) {
                lost[me] += d;
                over[me] += d > 100e-6;
                longest[me] = d > longest[me] ? d : longest[me];
                if (n[me] < GAPS_MAX) gaps[me][n[me]++] = (gap_t){ last, t };
                else capped = 1;
            }
            last = t;
            if (t - start > secs) break;
        }
    }
    double both = 0;   /* thread 0's listed gaps' overlap with thread 1's (both in time order) */
    for (long i = 0, j = 0; i < n[0]; i++) {
        while (j < n[1] && gaps[1][j].t1 <= gaps[0][i].t0) j++;
        for (long k = j; k < n[1] && gaps[1][k].t0 < gaps[0][i].t1; k++) {
            const double a = gaps[0][i].t0 > gaps[1][k].t0 ? gaps[0][i].t0 : gaps[1][k].t0;
            const double b = gaps[0][i].t1 < gaps[1][k].t1 ? gaps[0][i].t1 : gaps[1][k].t1;
            both += b - a;
        }
    }
    double listed = 0;   /* thread 0's time in its listed gaps: all of lost[0] unless capped */
    for (long i = 0; i < n[0]; i++) listed += gaps[0][i].t1 - gaps[0][i].t0;
    printf("par pauses secs=%g lost_pct=%.2f,%.2f over_100us=%ld,%ld longest_ms=%.2f together_pct=%.0f", secs,
           100 * lost[0] / secs, 100 * lost[1] / secs, over[0], over[1],
           1e3 * (longest[0] > longest[1] ? longest[0] : longest[1]), listed > 0 ? 100 * both / listed : 0);
    if (capped) printf(" (together: of each core's first %d gaps)", GAPS_MAX);
    printf("\n");
    free(gaps[0]);
    free(gaps[1]);
}

static float sum_buf(const float *b, long n)
{
    float s[16] = { 0 };
    for (long i = 0; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += b[i + j];
    float t = 0;
    for (int j = 0; j < 16; j++) t += s[j];
    return t;
}

/* A buffer of n floats written by one thread, then summed by the writer
 * (other = 0) or by the other thread (other = 1): the reader's GB/s. */
static double handoff_gb_s(float *buf, long n, int other, int reps)
{
    double t = 0;
    float sink = 0;
    #pragma omp parallel num_threads(2) reduction(+ : t, sink)
    {
        const int me = omp_get_thread_num();
        for (int r = 0; r < reps; r++) {
            const int writer = r & 1, reader = other ? 1 - writer : writer;
            if (me == writer)
                for (long i = 0; i < n; i++) buf[i] = (float)(i + r);
            #pragma omp barrier
            if (me == reader) {
                const double t0 = now_s();
                sink += sum_buf(buf, n);
                t += now_s() - t0;
            }
            #pragma omp barrier
        }
    }
    volatile float keep = sink;   /* the sums must be computed */
    (void)keep;
    return t > 0 ? (double)reps * (double)n * sizeof(float) / t / 1e9 : 0;
}
#endif

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

static int run(int argc, char **argv)
{
#ifdef _OPENMP
    if (argc > 1 && strcmp(argv[1], "pauses") == 0) {
        const double secs = argc > 2 ? atof(argv[2]) : 1;
        if (!(secs > 0 && secs <= 600)) { fprintf(stderr, "usage: par_bench pauses [SECS in (0, 600]]\n"); return 2; }
        host_pauses(secs);
        return 0;
    }
#endif
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
#ifdef _OPENMP
    if (T >= 2) {
        printf("par handoff line_round_trip_ns=%.0f\n", line_round_trip_ns(200000));
        const long kb[] = { 64, 256, 1024 };
        float *buf = xmalloc(sizeof(float) * (size_t)(kb[2] * 256));
        for (int i = 0; i < 3; i++) {
            const long n = kb[i] * 256;
            const int reps = (int)(16384 / kb[i]);   /* 16 MB read at every size; even */
            handoff_gb_s(buf, n, 1, 4);   /* warm-up */
            const double own = handoff_gb_s(buf, n, 0, reps), oth = handoff_gb_s(buf, n, 1, reps);
            printf("par handoff kb=%ld own_gb_s=%.1f other_gb_s=%.1f own/other=%.2f\n", kb[i], own, oth,
                   oth > 0 ? own / oth : 0);
        }
        free(buf);
        host_pauses(1);
    }
#endif
    return 0;
}

/* The clock is util's now_s, MPI_Wtime, which MPICH allows only between
 * MPI_Init and MPI_Finalize (Open MPI at any time): one process, no
 * launcher needed, every thread reading it. */
int main(int argc, char **argv)
{
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);   /* no runtime daemon for one process */
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "par_bench: MPI_Init_thread failed\n");
        return 1;
    }
    const int rc = run(argc, argv);
    MPI_Finalize();
    return rc;
}
