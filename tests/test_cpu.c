/* The compute set-up every dsgd process runs: subnormal floats flushed to
 * zero on the calling thread and on OpenBLAS's worker threads (which start
 * before main), or kept when asked; and the FLOPs a training step performs. */
#include <cblas.h>
#include <dirent.h>
#include <string.h>

#include "nn/model.h"
#include "test.h"
#include "util/blas.h"
#include "util/cpu.h"
#include "util/util.h"

enum { N = 2048 };

/* C = A·B whose every entry is 2048 products of 1e-20·1e-21 = 1e-41: a
 * subnormal result (and subnormal partial sums) everywhere. Large enough
 * that OpenBLAS splits it across its threads. Returns how many entries are
 * non-zero. */
static long subnormal_gemm(void)
{
    float *a = xalloc_floats((size_t)N * N), *b = xalloc_floats((size_t)N * N), *c = xalloc_floats((size_t)N * N);
    for (long i = 0; i < (long)N * N; i++) { a[i] = 1e-20f; b[i] = 1e-21f; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    long nz = 0;
    for (long i = 0; i < (long)N * N; i++) nz += c[i] != 0.0f;
    free(a); free(b); free(c);
    return nz;
}

static void test_flush_everywhere(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
    cpu_compute_setup(2, 1);
    CHECK(cpu_flushes_denormals(), "this thread does not flush after set-up");
    long nz = subnormal_gemm();
    CHECK(nz == 0, "%ld of %d entries stayed subnormal: some BLAS thread does not flush", nz, N * N);
    volatile float tiny = 1e-39f;   /* a subnormal input reads as zero */
    CHECK(tiny * 1.0f == 0.0f, "a subnormal input was not read as zero");
#endif
}

static void test_keep_everywhere(void)
{
    cpu_compute_setup(2, 0);
    CHECK(!cpu_flushes_denormals(), "this thread still flushes after --denormals keep");
    long nz = subnormal_gemm();
    CHECK(nz == (long)N * N, "only %ld of %d entries kept their subnormal value", nz, N * N);
    cpu_compute_setup(1, 1);
}

static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* After the set-up for 2 threads the process has this thread and
 * OpenMP's one other, and no OpenBLAS worker (which would spin on
 * sched_yield beside the two for its first 0.1 s): setting OpenBLAS's
 * thread count starts its workers again if they were stopped, so they
 * are stopped after it. A one-thread GEMM starts none. */
static void test_no_blas_workers(void)
{
    cpu_compute_setup(2, 1);
    float a[64 * 64], c[64 * 64];
    for (int i = 0; i < 64 * 64; i++) a[i] = 1.0f / (float)(i + 1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, a, 64, 0.0f, c, 64);
    const int n = task_count();
    CHECK(n < 0 || n == 2, "%d threads after the set-up for 2 (this one and OpenMP's other)", n);
    cpu_compute_setup(1, 1);
}

/* mlp:256,128 on 28x28, 10 classes: forward and weight gradient of every
 * dense layer, input gradient of all but the first. */
static void test_train_flops(void)
{
    model_t *m = model_create("mlp", 1, 28, 28, 10, 4);
    const double l1 = 784.0 * 256, l2 = 256.0 * 128, l3 = 128.0 * 10;
    CHECK_NEAR(model_train_flops(m), 2 * (2 * l1 + 3 * l2 + 3 * l3), 0.5, "mlp FLOPs per sample");
    model_free(m);
}

/* The check dsgd runs before it trusts kernels it chose: it passes the
 * kernels that loaded, and the vector units of OpenBLAS's core names are
 * the ones dsgd judges by. */
static void test_blas_check(void)
{
    CHECK(blas_selfcheck() == 0, "sgemm (%s kernels) disagrees with the plain loop", blas_core());
    CHECK(blas_core_isa("Prescott") == ISA_SSE && blas_core_isa("Sandybridge") == ISA_AVX, "old cores");
    CHECK(blas_core_isa("Haswell") == ISA_AVX2 && blas_core_isa("zen") == ISA_AVX2, "AVX2 cores");
    CHECK(blas_core_isa("SkylakeX") == ISA_AVX512 && blas_core_isa("Cooperlake") == ISA_AVX512, "AVX-512 cores");
    CHECK(blas_core_isa("Unknown") == ISA_SSE, "an unknown name counts as the oldest");
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_blas_check);
    RUN(test_flush_everywhere);
    RUN(test_keep_everywhere);
    RUN(test_no_blas_workers);
    RUN(test_train_flops);
    return TEST_END("test_cpu");
}
