/* util/cpu — the floating-point mode and the signals of the threads that
 * compute.
 *
 * Subnormal floats (|x| < 1.2e-38) cost 50-100 cycles per operation on x86
 * and ARM cores when the hardware handles them; noisy training (small
 * batches, high rates, dead units) produces them in activations and
 * gradients, and a step becomes several times slower. Flushing them to zero
 * changes no result that stays in the normal range, and matches what GPU
 * frameworks do by default.
 */
#ifndef DSGD_CPU_H
#define DSGD_CPU_H

#include <signal.h>

/* Sets this thread's subnormal mode (flush != 0: flush-to-zero and
 * denormals-are-zero; 0: IEEE subnormals) and that of the kernels' thread
 * pool, which gets `threads` threads (util/par.h); OpenBLAS computes on the
 * calling thread alone. OpenBLAS starts its workers when the library is
 * loaded, before main, so they are restarted here: a thread inherits the
 * mode of the thread that creates it. */
void cpu_compute_setup(int threads, int flush);
/* The signals sent to a whole process (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
 * SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD). The kernels' threads block them
 * (cpu_compute_setup), and so does any thread a library starts while the
 * caller holds them blocked (comm_init around MPI_Init): the kernel then
 * hands them to the thread that runs the paradigm, and two of them sent at
 * once both reach it before it takes another step. Taken by another thread,
 * a signal waits until that thread is scheduled again, which on a loaded
 * machine can be after the first one's graceful stop has been written. */
void cpu_process_signals(sigset_t *set);
/* 1 if this thread flushes subnormals to zero. */
int cpu_flushes_denormals(void);

/* OMP_NUM_THREADS's first count (it may be a list, one count per nesting
 * level) into *t, if it is one from 1 to 1024: 1; else 0, *t untouched */
int cpu_env_threads(int *t);

#endif
