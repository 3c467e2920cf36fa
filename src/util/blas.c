#include "blas.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

char *openblas_get_corename(void);

/* Where dsgd may start itself again with other kernels: x86-64 (the
 * kernel families below are OpenBLAS's x86 ones), and not under SimGrid,
 * whose ranks share one process. */
#if defined(__x86_64__) && !defined(DSGD_SIM)
#define BLAS_RESTARTS 1
#else
#define BLAS_RESTARTS 0
#endif

const char *blas_core(void) { return openblas_get_corename(); }

blas_isa_t blas_core_isa(const char *core)
{
    static const char *const avx512[] = { "SkylakeX", "Cooperlake", "SapphireRapids" };
    static const char *const avx2[] = { "Haswell", "Zen" };
    static const char *const avx[] = { "Sandybridge", "Bulldozer", "Piledriver", "Steamroller", "Excavator" };
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(core, avx512[i])) return ISA_AVX512;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (!strcasecmp(core, avx2[i])) return ISA_AVX2;
    for (size_t i = 0; i < sizeof avx / sizeof *avx; i++)
        if (!strcasecmp(core, avx[i])) return ISA_AVX;
    return ISA_SSE;
}

/* __builtin_cpu_supports asks cpuid and whether the OS saves the wide
 * registers (xgetbv), so a feature it reports can be used. */
blas_isa_t blas_cpu_isa(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ISA_AVX2;
    if (__builtin_cpu_supports("avx")) return ISA_AVX;
#endif
    return ISA_SSE;
}

static const char *isa_name(blas_isa_t isa)
{
    return isa == ISA_AVX512 ? "AVX-512" : isa == ISA_AVX2 ? "AVX2+FMA" : isa == ISA_AVX ? "AVX" : "SSE";
}

#if BLAS_RESTARTS
/* OpenBLAS's best kernels for a vector unit (SkylakeX ran dsgd's GEMMs
 * faster than Cooperlake's and Haswell's on AVX-512 CPUs; Cooperlake's
 * add only bfloat16 kernels, which dsgd does not call). */
static const char *best_core(blas_isa_t isa)
{
    return isa == ISA_AVX512 ? "SkylakeX" : isa == ISA_AVX2 ? "Haswell" : isa == ISA_AVX ? "Sandybridge" : NULL;
}
#endif

void blas_cpu(char *out, size_t len)
{
    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        snprintf(model, sizeof model, "%s", v);
        model[strcspn(model, "\n")] = 0;
        break;
    }
    if (f) fclose(f);
    snprintf(out, len, "%s (%s)", model, isa_name(blas_cpu_isa()));
}

/* C = alpha·op(A)·op(B) + beta·C against the plain triple loop, in double,
 * for one shape and transpose pair; returns the largest error relative to
 * the sum of |terms| (the rounding bound's scale). */
static double check_one(int M, int N, int K, int ta, int tb)
{
    float *A = xalloc_floats((size_t)M * K), *B = xalloc_floats((size_t)K * N), *C = xalloc_floats((size_t)M * N);
    double worst = 0;
    unsigned s = 12345u;
    for (int i = 0; i < M * K; i++) { s = s * 1103515245u + 12345u; A[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f; }
    for (int i = 0; i < K * N; i++) { s = s * 1103515245u + 12345u; B[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f; }
    for (int i = 0; i < M * N; i++) C[i] = 0.5f;
    /* row major: op(A) is M x K, stored K x M when transposed */
    const int lda = ta ? M : K, ldb = tb ? K : N;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 0.75f, A, lda, B,
                ldb, 0.5f, C, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * ldb + k] : B[k * ldb + j];
                sum += a * b;
                mag += fabs(a * b);
            }
            double want = 0.75 * sum + 0.25, err = fabs((double)C[i * N + j] - want) / (0.75 * mag + 0.25);
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
        }
    free(A); free(B); free(C);
    return worst;
}

int blas_selfcheck(void)
{
    /* the layers' shapes (NN, NT, TN; conv and dense), and sizes past one
     * vector and one register block that are multiples of neither */
    static const int shapes[][5] = {
        { 37, 53, 29, 0, 0 }, { 64, 10, 100, 0, 1 }, { 100, 64, 33, 1, 0 }, { 17, 300, 72, 0, 0 }, { 5, 3, 1, 1, 1 },
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int *s = shapes[i];
        /* K products rounded in float, each of relative error 2^-24 */
        if (!(check_one(s[0], s[1], s[2], s[3], s[4]) <= (s[2] + 2) * 1.2e-7)) return -1;
    }
    return 0;
}

#if BLAS_RESTARTS
/* The --blas value in argv (train and eval take it), or NULL. */
static const char *blas_flag(int argc, char **argv)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--blas")) return argv[i + 1];
    return NULL;
}

/* Rank 0 of an MPI job, or a process on its own: who says the note. */
static int speaks(void)
{
    const char *vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK" };
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v) return !strcmp(v, "0");
    }
    return 1;
}

/* Start this process again with OpenBLAS's kernels `core`; from says why
 * (blas.h). Returns only if it cannot. */
static void restart(char **argv, const char *core, const char *why, const char *was)
{
    char from[128];
    snprintf(from, sizeof from, "%s:%s", why, was);
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv("DSGD_BLAS_FROM", from, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    unsetenv("DSGD_BLAS_FROM");   /* no /proc: the kernels stay as they loaded */
}

#endif

/* DSGD_BLAS_FROM = "WHY:CORE": auto (dsgd corrected OpenBLAS's CORE), flag
 * (--blas NAME over CORE), rejected (CORE failed the check; these are the
 * kernels that loaded before). */
static const char *from_core(const char *from) { const char *c = strchr(from, ':'); return c ? c + 1 : from; }

void blas_choose(int argc, char **argv)
{
#if BLAS_RESTARTS
    const char *mode = blas_flag(argc, argv), *from = getenv("DSGD_BLAS_FROM"), *core = blas_core();
    if (from && !strncmp(from, "rejected:", 9)) return;   /* the third start: the kernels that loaded first */
    if (from) {                                         /* the second start: trust, but check */
        if (blas_selfcheck() != 0) {
            if (speaks())
                fprintf(stderr, "dsgd: OpenBLAS's %s kernels disagree with a plain loop on this CPU; using %s, which loaded first\n",
                        core, from_core(from));
            restart(argv, from_core(from), "rejected", core);
            return;
        }
        if (mode && strcmp(mode, "auto") && strcmp(mode, "keep") && strcasecmp(core, mode))
            die("--blas %s: OpenBLAS has no kernels of that name (it runs %s); name one of its cores (Haswell, SkylakeX, ...), auto or keep",
                mode, core);
        return;
    }
    if (mode && !strcmp(mode, "keep")) return;
    if (!mode || !strcmp(mode, "auto")) {
        /* a user's OPENBLAS_CORETYPE stands unless --blas auto is given */
        const char *best = best_core(blas_cpu_isa());
        if ((!mode && getenv("OPENBLAS_CORETYPE")) || !best || blas_core_isa(core) >= blas_cpu_isa()) return;
        restart(argv, best, "auto", core);
        return;
    }
    if (strcasecmp(core, mode)) restart(argv, mode, "flag", core);
#else
    (void)argc; (void)argv;
#endif
}

void blas_describe(char *out, size_t len)
{
    const char *core = blas_core(), *from = getenv("DSGD_BLAS_FROM"), *user = getenv("OPENBLAS_CORETYPE");
    blas_isa_t cpu = blas_cpu_isa(), own = blas_core_isa(core);
    const char *takes = own < cpu ? "; this CPU takes better ones" : "";
    if (from && !strncmp(from, "rejected:", 9))
        snprintf(out, len, "%s (dsgd's choice, %s, disagreed with a plain loop%s)", core, from_core(from), takes);
    else if (from && !strncmp(from, "auto:", 5))
        snprintf(out, len, "%s (dsgd's choice for this %s CPU, checked against a plain loop; OpenBLAS chose %s)", core,
                 isa_name(cpu), from_core(from));
    else if (from)
        snprintf(out, len, "%s (--blas %s, checked against a plain loop; OpenBLAS chose %s%s)", core, core, from_core(from), takes);
    else if (user)
        snprintf(out, len, "%s (OPENBLAS_CORETYPE=%s, the user's choice%s)", core, user, takes);
    else
        snprintf(out, len, "%s (OpenBLAS's choice for this %s CPU%s)", core, isa_name(cpu), takes);
}
