#include "cpu.h"

#include <cblas.h>

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
    csr_set(flush ? (v | CSR_FLUSH) : (v & ~CSR_FLUSH));
    if (blas_thread_shutdown_) blas_thread_shutdown_();
    openblas_set_num_threads(threads);
}

int cpu_flushes_denormals(void)
{
    return CSR_FLUSH != 0 && (csr_get() & CSR_FLUSH) == CSR_FLUSH;
}
