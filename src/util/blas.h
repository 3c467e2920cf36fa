/* util/blas — which kernels the BLAS runs, and the best this CPU can take.
 *
 * A distribution's OpenBLAS picks its kernels from a table of the CPUs it
 * knew when it was released; on a newer CPU it falls back to its oldest
 * x86-64 kernels (Prescott: SSE3), which run a dense layer 3-4x slower than
 * the AVX-512 ones the CPU supports. It reads OPENBLAS_CORETYPE when the
 * library loads, before main, so dsgd corrects a fallback by starting
 * itself again (the same process, execv) with the variable set, then
 * checks the chosen kernels against a plain loop before trusting them.
 *
 *   (no --blas)   correct a fallback, unless the user set OPENBLAS_CORETYPE
 *   --blas auto   correct a fallback, over OPENBLAS_CORETYPE too
 *   --blas keep   never correct
 *   --blas NAME   run OpenBLAS's kernels NAME (e.g. Haswell, SkylakeX)
 *
 * The decision is carried through the restart in DSGD_BLAS_FROM ("WHY:CORE"),
 * so nothing here keeps state of its own. A correction is said in the run's
 * header, the config event and dsgd version, not on stderr, where each of
 * dsgd's errors is one line.
 * Simulated builds (SimGrid) leave the BLAS as it loaded.
 */
#ifndef DSGD_BLAS_H
#define DSGD_BLAS_H

#include <stddef.h>

/* The widest vector unit the CPU and its OS support, as OpenBLAS's kernel
 * families use them. */
typedef enum blas_isa { ISA_SSE = 1, ISA_AVX, ISA_AVX2, ISA_AVX512 } blas_isa_t;

/* First thing in main, before MPI: may restart the process (argv as
 * given) with OPENBLAS_CORETYPE set; returns when the kernels to run are
 * loaded. Exits with one line on a --blas it cannot take. */
void blas_choose(int argc, char **argv);
/* "SkylakeX (corrected: OpenBLAS chose Prescott on this AVX-512 CPU)" and
 * the like: which kernels run and why. */
void blas_describe(char *out, size_t len);
/* The kernels' name as OpenBLAS reports it. */
const char *blas_core(void);
/* The CPU's model name and the features the choice was judged by. */
void blas_cpu(char *out, size_t len);
blas_isa_t blas_cpu_isa(void);
/* The vector unit a kernel family of OpenBLAS's uses (ISA_SSE for names
 * it does not know). */
blas_isa_t blas_core_isa(const char *core);
/* 0 if sgemm agrees with a plain loop on shapes dsgd uses (every
 * transpose, sizes that are not multiples of a vector), else -1. */
int blas_selfcheck(void);

#endif
