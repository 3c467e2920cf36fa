#include "cpu.h"

#include <cblas.h>
#include <errno.h>
#include <stdlib.h>
#include <pthread.h>

#include "par.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define CSR_FLUSH 0x8040u   /* MXCSR FTZ (bit 15) | DAZ (bit 6) */
static unsigned csr_get(void) { return _mm_getcsr(); }
static void csr_set(unsigned v) { _mm_setcsr(v); }
#elif defined(__aarch64__)
#define CSR_FLUSH (1u << 24)   /* FPCR.FZ */
static unsigned csr_get(void) { unsigned long v; __asm__ volatile("mrs %0, fpcr" : "=r"(v)); return (unsigned)v; }
static void csr_set(unsigned v) { unsigned long w = v; __asm__ volatile("msr fpcr, %0" : : "r"(w)); }
#else
#define CSR_FLUSH 0u        /* no known control: subnormals stay IEEE */
static unsigned csr_get(void) { return 0; }
static void csr_set(unsigned v) { (void)v; }
#endif

/* OpenBLAS's own entry for stopping its worker threads (it is what its fork
 * handler calls); the next parallel call starts them again from the calling
 * thread. Weak: another CBLAS simply lacks it. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void cpu_compute_setup(int threads, int flush)
{
    unsigned v = csr_get();
    const unsigned mode = flush ? (v | CSR_FLUSH) : (v & ~CSR_FLUSH);
    csr_set(mode);
    /* whatever threads start from here on leave the process's signals to
     * this one (cpu.h) */
    sigset_t sigs, was;
    cpu_process_signals(&sigs);
    pthread_sigmask(SIG_BLOCK, &sigs, &was);
    /* OpenBLAS computes on the calling thread only: its own threads split
     * a GEMM where it likes, which changes the bits with their number;
     * dsgd's kernels split their work themselves (util/par.h). Then its
     * worker threads are stopped: after the count is set, because
     * OpenBLAS 0.3.21's openblas_set_num_threads starts them again when
     * they are stopped (each then spins on sched_yield for about 0.1 s
     * before it sleeps: on 2 cores with --threads 2, the first 0.1 s of
     * training on a core and a half). A one-thread call never starts them. */
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
#ifdef _OPENMP
    omp_set_num_threads(threads);
    /* the pool's threads take this mode and mask too: those that exist
     * already kept the ones they were created with */
#pragma omp parallel num_threads(threads)
    {
        csr_set(mode);
        if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    }
#else
    (void)threads;
#endif
    pthread_sigmask(SIG_SETMASK, &was, NULL);
}

void cpu_process_signals(sigset_t *set)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD };
    sigemptyset(set);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaddset(set, sigs[i]);
}

int cpu_flushes_denormals(void)
{
    return CSR_FLUSH != 0 && (csr_get() & CSR_FLUSH) == CSR_FLUSH;
}

/* (cpu.h) */
int cpu_env_threads(int *t)
{
    const char *e = getenv("OMP_NUM_THREADS");
    if (!e) return 0;
    char *end;
    errno = 0;
    const long v = strtol(e, &end, 10);
    if (errno || end == e || (*end != '\0' && *end != ',') || v < 1 || v > 1024) return 0;
    *t = (int)v;
    return 1;
}
