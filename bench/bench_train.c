/* bench_train — single-process training throughput on Fashion-MNIST, set
 * against the GEMM bound measured in the same run.
 *
 * For each model: ~50 warm-up steps, then a timed loop of whole training
 * steps (next batch → forward → loss → backward → SGD-momentum update) run
 * until ~3.5 s have passed, with each phase timed. FLOPs are those the step
 * performs (model_train_flops: no input gradient for the first layer). The
 * bounds: the model's own GEMM shapes (batch × in × out, each way the step
 * multiplies) timed alone on OpenBLAS's sgemm, which is what the step could
 * reach if nothing but those GEMMs ran on the BLAS (the dense layers run
 * dsgd's own tiles, nn/dense.c, so a step can pass it); the square-matrix
 * sgemm peak; and the core's FP32
 * peak, an FMA-throughput loop for the widest vector unit the CPU has (the
 * physical limit: a bound no kernel, OpenBLAS's or dsgd's, can pass).
 *
 * Output: human-readable lines, plus machine-readable ones:
 *   sgemm n=N gflops=G
 *   sgemm_peak_gflops=G
 *   core_peak_gflops=G isa=ISA
 *   bench model=M batch=B steps=S seconds=T samples_per_s=X mflop_per_sample=F gflops=G
 *         gemm_shapes_bound_samples_per_s=Y fraction=F peak_bound_samples_per_s=P peak_fraction=Q
 *         core_fraction=C
 *   profile model=M step_us=U gemm_alone=F gather=F forward=F loss=F backward=F update=F
 *   layers model=M kind=K n=N forward_ms=F backward_ms=B   (per step, the N layers of kind K together)
 * Usage: bench_train [--threads T] [MODEL...]   (one process; no mpirun
 *        needed; T threads per kernel as dsgd train --threads, default 1; MODEL is mlp,
 *        lenet or resnet (resnet:20,16), default mlp and lenet; the memory
 *        line's peak resident size is the process's, so it is the model's
 *        own when one model is asked for)
 */
#include <cblas.h>
#include <immintrin.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "data/data.h"
#include "nn/model.h"
#include "optim/optim.h"
#include "util/blas.h"
#include "util/cpu.h"
#include "util/par.h"
#include "util/util.h"

/* warm-up: WARMUP steps, or fewer once WARMUP_S has passed (at least
 * WARMUP_MIN): a residual network's 50 steps would take 5-15 s */
enum { BATCH = 64, WARMUP = 50, WARMUP_MIN = 5 };
#define WARMUP_S 1.0
#define TARGET_S 3.5     /* timed seconds per model */
#define SGEMM_S 1.0      /* timed seconds per sgemm size */
#define LR 0.05f

/* Single-thread sgemm GFLOP/s on square n×n matrices (2·n³ FLOPs per call). */
static double sgemm_gflops(int n)
{
    const size_t nn = (size_t)n * (size_t)n;
    float *a = xalloc_floats(nn), *b = xalloc_floats(nn), *c = xalloc_floats(nn); /* (n, n) */
    rng_t r;
    rng_seed(&r, 7, (uint64_t)n);
    for (size_t i = 0; i < nn; i++) { a[i] = (float)rng_uniform(&r); b[i] = (float)rng_uniform(&r); }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    long calls = 0;
    double t0 = MPI_Wtime(), t;
    do {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        calls++;
        t = MPI_Wtime() - t0;
    } while (t < SGEMM_S || calls < 3);
    free(a); free(b); free(c);
    return 2.0 * (double)n * n * n * (double)calls / t * 1e-9;
}

/* ---- the model's own GEMMs: the attainable bound on its shapes ---- */

typedef struct gemm_call {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;         /* C (M, N) = op(A) (M, K) · op(B) (K, N), row-major */
    int reps;            /* calls per training step */
} gemm_call_t;

enum { MAX_CALLS = 64 };

/* The sgemm calls of one training step on a batch of B, as nn makes them for
 * dense layers; conv layers as per-sample im2col GEMMs (the direct path of a
 * one-channel conv does the same FLOPs outside BLAS, so its im2col shape is
 * the reference). Returns the number of calls written. */
static int step_gemms(const model_t *m, int B, gemm_call_t *c)
{
    int n = 0, first = -1;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (l->kind != LAYER_DENSE && l->kind != LAYER_CONV) continue;   /* bn: no GEMM */
        /* an input gradient is computed (a graph model: unless it reads the input) */
        const int below = m->graph ? l->src >= 0 : first >= 0;
        if (first < 0) first = i;
        if (n + 3 > MAX_CALLS) break;
        if (l->kind == LAYER_DENSE) {
            const int IN = l->in_c * l->in_h * l->in_w, OUT = l->out_c;
            c[n++] = (gemm_call_t){ CblasNoTrans, CblasTrans, B, OUT, IN, 1 };    /* forward */
            c[n++] = (gemm_call_t){ CblasTrans, CblasNoTrans, OUT, IN, B, 1 };    /* weight gradient */
            if (below) c[n++] = (gemm_call_t){ CblasNoTrans, CblasNoTrans, B, IN, OUT, 1 };
        } else {
            const int OC = l->out_c, OHW = l->out_h * l->out_w, CKK = l->in_c * l->k * l->k;
            c[n++] = (gemm_call_t){ CblasNoTrans, CblasNoTrans, OC, OHW, CKK, B };
            c[n++] = (gemm_call_t){ CblasNoTrans, CblasTrans, CKK, OC, OHW, B };
            if (below) c[n++] = (gemm_call_t){ CblasTrans, CblasNoTrans, CKK, OHW, OC, B };
        }
    }
    return n;
}

/* Seconds one step's GEMMs take, each shape timed alone on its own buffers
 * (the best of several rounds: the bound is what the shape can attain). */
static double gemm_step_seconds(const gemm_call_t *c, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        const gemm_call_t *g = &c[i];
        const size_t na = (size_t)g->M * g->K, nb = (size_t)g->K * g->N, nc = (size_t)g->M * g->N;
        float *a = xalloc_floats(na), *b = xalloc_floats(nb), *o = xalloc_floats(nc);
        rng_t r;
        rng_seed(&r, 11, (uint64_t)i);
        for (size_t j = 0; j < na; j++) a[j] = (float)rng_uniform(&r) - 0.5f;
        for (size_t j = 0; j < nb; j++) b[j] = (float)rng_uniform(&r) - 0.5f;
        const int lda = g->ta == CblasNoTrans ? g->K : g->M, ldb = g->tb == CblasNoTrans ? g->N : g->K;
        double best = 1e30;
        for (int round = 0; round < 5; round++) {
            long calls = 0;
            double t0 = MPI_Wtime(), t;
            do {
                cblas_sgemm(CblasRowMajor, g->ta, g->tb, g->M, g->N, g->K, 1.0f, a, lda, b, ldb, 0.0f, o, g->N);
                calls++;
                t = MPI_Wtime() - t0;
            } while (t < 0.02);
            if (t / (double)calls < best) best = t / (double)calls;
        }
        total += best * g->reps;
        free(a); free(b); free(o);
    }
    return total;
}

/* ---- a whole training step, with where its time goes ---- */

enum { PH_GATHER, PH_FORWARD, PH_LOSS, PH_BACKWARD, PH_UPDATE, NPH };
static const char *const phase_name[NPH] = { "gather", "forward", "loss", "backward", "update" };

/* One training step, exactly as the worker loop does it with --sync none;
 * adds each phase's seconds to ph. */
static void train_step(model_t *m, optim_t *o, batch_iter_t *it, double *ph)
{
    double t[NPH + 1];
    t[0] = MPI_Wtime();
    batch_iter_next(it);
    t[1] = MPI_Wtime();
    model_forward(m, it->x, it->nb);
    t[2] = MPI_Wtime();
    model_loss(m, it->y, it->nb);
    t[3] = MPI_Wtime();
    model_backward(m, it->y, it->nb);
    t[4] = MPI_Wtime();
    optim_step(o, m->params, m->grads, 0, m->nparams, LR);
    t[5] = MPI_Wtime();
    for (int p = 0; p < NPH; p++) ph[p] += t[p + 1] - t[p];
}

/* The core's FP32 peak: 12 independent chains of fused multiply-adds in
 * registers (more than an FMA's latency times the units that issue them,
 * so the units never wait), 2 FLOPs a lane; the best of 5 runs of ~0.2 s.
 * The chains' values stay bounded (x·1 + 0), and are summed so the loop is
 * not dropped. Each width is its own function, compiled for that unit. */
enum { FMA_CHAINS = 12, FMA_ITERS = 1 << 22 };
#define FMA_LOOP(VEC, SET1, FMA, ADD, LANES)                                     \
    VEC acc[FMA_CHAINS], one = SET1(1.0f), zero = SET1(0.0f);                  \
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = SET1((float)c);              \
    for (long i = 0; i < reps; i++)                                            \
        for (int c = 0; c < FMA_CHAINS; c++) acc[c] = FMA(acc[c], one, zero);  \
    VEC sum = zero;                                                            \
    for (int c = 0; c < FMA_CHAINS; c++) sum = ADD(sum, acc[c]);               \
    float out[LANES];                                                          \
    memcpy(out, &sum, sizeof out);                                             \
    return out[0] + out[LANES - 1];

__attribute__((target("avx512f"))) static float fma_avx512(long reps)
{
    FMA_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
}
__attribute__((target("avx2,fma"))) static float fma_avx2(long reps)
{
    FMA_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)
}
static float fma_sse(long reps)   /* no FMA unit: a multiply and an add, counted as 2 FLOPs */
{
#define SSE_FMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
    FMA_LOOP(__m128, _mm_set1_ps, SSE_FMA, _mm_add_ps, 4)
#undef SSE_FMA
}

static double core_peak_gflops(blas_isa_t isa, const char **name)
{
    const int lanes = isa == ISA_AVX512 ? 16 : isa == ISA_AVX2 ? 8 : 4;
    *name = isa == ISA_AVX512 ? "avx512" : isa == ISA_AVX2 ? "avx2" : "sse";
    double best = 0;
    volatile float sink = 0;
    for (int run = 0; run < 5; run++) {
        double t = MPI_Wtime();
        sink += isa == ISA_AVX512 ? fma_avx512(FMA_ITERS) : isa == ISA_AVX2 ? fma_avx2(FMA_ITERS) : fma_sse(FMA_ITERS);
        t = MPI_Wtime() - t;
        double g = (double)FMA_ITERS * FMA_CHAINS * lanes * 2 / t * 1e-9;
        if (g > best) best = g;
    }
    (void)sink;
    return best;
}

/* Where the timed steps went, layer by layer (m->layer_s), summed over the
 * layers of one kind (a convolution's by its taps and stride): the number
 * of such layers, and milliseconds per step forward and backward. */
static void print_layers(const char *name, const model_t *m, long steps)
{
    enum { MAX_GROUPS = 32 };
    char key[MAX_GROUPS][48];
    double f[MAX_GROUPS] = { 0 }, b[MAX_GROUPS] = { 0 };
    int count[MAX_GROUPS] = { 0 }, ng = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        char k[48];
        if (l->kind == LAYER_CONV) snprintf(k, sizeof k, "conv%dx%d/%d", l->k, l->k, l->stride);
        else snprintf(k, sizeof k, "%s", layer_kind_name(l->kind));
        int g = 0;
        while (g < ng && strcmp(key[g], k)) g++;
        if (g == ng) {
            if (ng == MAX_GROUPS) continue;
            snprintf(key[ng++], sizeof key[0], "%s", k);
        }
        count[g]++;
        f[g] += m->layer_s[2 * i];
        b[g] += m->layer_s[2 * i + 1];
    }
    printf("       by layer, ms per step forward + backward:");
    for (int g = 0; g < ng; g++) printf(" %s x%d %.2f + %.2f;", key[g], count[g], f[g] * 1e3 / steps, b[g] * 1e3 / steps);
    printf("\n");
    for (int g = 0; g < ng; g++)
        printf("layers model=%s kind=%s n=%d forward_ms=%.3f backward_ms=%.3f\n", name, key[g], count[g],
               f[g] * 1e3 / steps, b[g] * 1e3 / steps);
}

/* Times one model and prints its result lines. */
static void bench_model(const char *name, const char *spec, const dataset_t *train,
                        const int32_t *idx, double peak_gflops, double core_gflops)
{
    model_t *m = model_create(spec, train->c, train->h, train->w, train->classes, BATCH);
    model_init_params(m, 1);
    optim_cfg_t oc = { .kind = OPT_SGD, .momentum = 0.9f };
    optim_t *o = optim_create(&oc, m->nparams);
    /* as dsgd train: each span of the update on the thread of its gradient */
    const int T = par_threads();
    size_t *owners = xmalloc(sizeof(size_t) * 3 * (size_t)(T + 1) * (size_t)m->nlayers);
    o->cfg.owners = owners;
    o->cfg.nowners = model_owner_spans(m, BATCH, T, owners, (T + 1) * m->nlayers);
    batch_iter_t *it = batch_iter_create(train, idx, train->n, BATCH, 1, 0);
    double ph[NPH] = { 0 };

    const double w0 = MPI_Wtime();
    for (int s = 0; s < WARMUP && (s < WARMUP_MIN || MPI_Wtime() - w0 < WARMUP_S); s++) train_step(m, o, it, ph);
    memset(ph, 0, sizeof ph);
    m->layer_s = xcalloc(2 * (size_t)m->nlayers, sizeof(double));
    /* N is set by the clock: steps until TARGET_S has passed (a clock read
     * costs ~20 ns against a step of 0.5-10 ms) */
    long steps = 0;
    double t0 = MPI_Wtime(), secs;
    do {
        train_step(m, o, it, ph);
        steps++;
        secs = MPI_Wtime() - t0;
    } while (secs < TARGET_S || steps < 10);

    gemm_call_t calls[MAX_CALLS];
    const double gemm_s = gemm_step_seconds(calls, step_gemms(m, BATCH, calls));
    const double sps = (double)steps * BATCH / secs;
    const double flops = model_train_flops(m);              /* per sample, as performed */
    const double gflops = flops * sps * 1e-9;
    const double bound = BATCH / gemm_s;                    /* samples/s if only the GEMMs ran */
    const double peak_bound = peak_gflops * 1e9 / flops;    /* ... and at the square-matrix peak */
    printf("%-6s %-14s %9zu params %8.3f MFLOP/sample  %9.0f samples/s  %6.2f GFLOP/s\n"
           "       GEMM bound on its own shapes %9.0f samples/s (%5.1f%% reached); at the sgemm peak %9.0f (%5.1f%%)\n",
           name, spec, m->nparams, flops * 1e-6, sps, gflops, bound, 100.0 * sps / bound,
           peak_bound, 100.0 * sps / peak_bound);
    const double step_s = secs / (double)steps;
    printf("       the core's FP32 peak: %5.1f%% reached\n", 100.0 * gflops / core_gflops);
    printf("       step %.1f us: GEMM %.0f%% (its shapes' time alone);", step_s * 1e6, 100.0 * gemm_s / step_s);
    for (int p = 0; p < NPH; p++) printf(" %s %.0f%%", phase_name[p], 100.0 * ph[p] / secs);
    printf("\n");
    print_layers(name, m, steps);
    printf("bench model=%s batch=%d steps=%ld seconds=%.3f samples_per_s=%.1f mflop_per_sample=%.4f gflops=%.3f"
           " gemm_shapes_bound_samples_per_s=%.1f fraction=%.4f peak_bound_samples_per_s=%.1f peak_fraction=%.4f"
           " core_fraction=%.4f\n",
           name, BATCH, steps, secs, sps, flops * 1e-6, gflops, bound, sps / bound, peak_bound, sps / peak_bound,
           gflops / core_gflops);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("memory model=%s maxrss_kb=%ld\n", name, ru.ru_maxrss);
    printf("profile model=%s step_us=%.1f gemm_alone=%.4f", name, step_s * 1e6, gemm_s / step_s);
    for (int p = 0; p < NPH; p++) printf(" %s=%.4f", phase_name[p], ph[p] / secs);
    printf("\n");
    fflush(stdout);
    batch_iter_free(it);
    optim_free(o);
    free(owners);
    free(m->layer_s);
    model_free(m);
}

int main(int argc, char **argv)
{
    blas_choose(argc, argv);   /* the kernels dsgd train runs (util/blas.h) */
    MPI_Init(&argc, &argv);
    int threads = 1, named = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else named = 1;
    }
    if (threads < 1) {
        fprintf(stderr, "bench_train: --threads needs a positive count\n");
        return 2;
    }
    cpu_compute_setup(threads, 1);   /* as dsgd train: one BLAS thread, subnormals flushed */
    char blas[256], cpu[256];
    blas_describe(blas, sizeof blas);
    blas_cpu(cpu, sizeof cpu);
    printf("openblas core=%s config=%s\n", openblas_get_corename(), openblas_get_config());
    printf("blas: OpenBLAS %s\ncpu: %s\n", blas, cpu);
    printf("openblas_core=%s\n", openblas_get_corename());

    dataset_t train, test;
    char err[512];
    if (dataset_load("fashion-mnist", 0, &train, &test, err, sizeof err) != 0) {
        /* the synthetic set is 1x8x8, not comparable with the 28x28 figures */
        fprintf(stderr, "bench_train: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    printf("data fashion-mnist train=%ld %dx%dx%d classes=%d\n",
           train.n, train.c, train.h, train.w, train.classes);

    static const int sizes[] = { 512, 1024 };
    double peak = 0.0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double g = sgemm_gflops(sizes[i]);
        printf("sgemm n=%d gflops=%.2f\n", sizes[i], g);
        if (g > peak) peak = g;
    }
    printf("sgemm_peak_gflops=%.2f\n", peak);
    const char *isa;
    const double core = core_peak_gflops(blas_cpu_isa(), &isa);
    printf("core_peak_gflops=%.2f isa=%s\n", core, isa);
    printf("the core's FP32 peak (%s FMA loop) %.1f GFLOP/s; the best sgemm reaches %.0f%% of it\n", isa, core,
           100.0 * peak / core);
    fflush(stdout);

    int32_t *idx = xmalloc(sizeof(int32_t) * (size_t)train.n);   /* (n) every sample */
    for (long i = 0; i < train.n; i++) idx[i] = (int32_t)i;
    static const struct { const char *name, *spec; } models[] = {
        { "mlp", "mlp:256,128" }, { "lenet", "lenet" }, { "resnet", "resnet:20,16" },
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int chosen = !named && strcmp(models[i].name, "resnet");   /* resnet: asked for by name */
        for (int a = 1; a < argc; a++) chosen |= !strcmp(argv[a], models[i].name);
        if (chosen) bench_model(models[i].name, models[i].spec, &train, idx, peak, core);
    }

    free(idx);
    dataset_free(&train);
    dataset_free(&test);
    MPI_Finalize();
    return 0;
}
