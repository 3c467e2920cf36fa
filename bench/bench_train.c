/* bench_train — single-process training throughput on Fashion-MNIST, set
 * against an sgemm peak measured in the same run.
 *
 * For each model: ~50 warm-up steps, then a timed loop of whole training
 * steps (next batch → forward → loss → backward → SGD-momentum update) run
 * until ~3.5 s have passed. Training FLOPs per sample are taken as
 * 3 × 2 × forward MACs (backward ≈ 2 × forward), so the GEMM-only bound is
 * what the model would reach if every FLOP ran at the measured single-thread
 * sgemm peak.
 *
 * Output: human-readable lines, plus one machine-readable line per result:
 *   sgemm n=N gflops=G
 *   sgemm_peak_gflops=G
 *   bench model=M batch=B steps=S seconds=T samples_per_s=X gflops=G
 *         gemm_bound_samples_per_s=Y fraction=F
 * Usage: bench_train [MODEL...]   (one process; no mpirun needed; MODEL is mlp
 *        or lenet, default both)
 */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "nn/model.h"
#include "optim/optim.h"
#include "util/util.h"

enum { BATCH = 64, WARMUP = 50 };
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

/* One training step, exactly as the worker loop does it with --sync none. */
static void train_step(model_t *m, optim_t *o, batch_iter_t *it)
{
    batch_iter_next(it);
    model_forward(m, it->x, it->nb);
    model_loss(m, it->y, it->nb);
    model_backward(m, it->y, it->nb);
    optim_step(o, m->params, m->grads, 0, m->nparams, LR);
}

/* Times one model and prints its result lines. */
static void bench_model(const char *name, const char *spec, const dataset_t *train,
                        const int32_t *idx, double peak_gflops)
{
    model_t *m = model_create(spec, train->c, train->h, train->w, train->classes, BATCH);
    model_init_params(m, 1);
    optim_cfg_t oc = { .kind = OPT_SGD, .momentum = 0.9f };
    optim_t *o = optim_create(&oc, m->nparams);
    batch_iter_t *it = batch_iter_create(train, idx, train->n, BATCH, 1, 0);

    for (int s = 0; s < WARMUP; s++) train_step(m, o, it);
    /* N is set by the clock: steps until TARGET_S has passed (a clock read
     * costs ~20 ns against a step of 0.5-10 ms) */
    long steps = 0;
    double t0 = MPI_Wtime(), secs;
    do {
        train_step(m, o, it);
        steps++;
        secs = MPI_Wtime() - t0;
    } while (secs < TARGET_S || steps < 10);

    double sps = (double)steps * BATCH / secs;
    double flops = 3.0 * 2.0 * model_forward_macs(m);   /* per sample, forward + backward */
    double gflops = flops * sps * 1e-9;
    double bound = peak_gflops * 1e9 / flops;
    printf("%-6s %-14s %9zu params %8.3f MFLOP/sample  %9.0f samples/s  %6.2f GFLOP/s"
           "  (GEMM bound %9.0f samples/s, %5.1f%%)\n",
           name, spec, m->nparams, flops * 1e-6, sps, gflops, bound, 100.0 * sps / bound);
    printf("bench model=%s batch=%d steps=%ld seconds=%.3f samples_per_s=%.1f gflops=%.3f"
           " gemm_bound_samples_per_s=%.1f fraction=%.4f\n",
           name, BATCH, steps, secs, sps, gflops, bound, sps / bound);
    fflush(stdout);
    batch_iter_free(it);
    optim_free(o);
    model_free(m);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    openblas_set_num_threads(1);
    printf("openblas core=%s config=%s\n", openblas_get_corename(), openblas_get_config());
    printf("openblas_core=%s\n", openblas_get_corename());

    dataset_t train, test;
    char err[512];
    if (dataset_load("fashion-mnist", &train, &test, err, sizeof err) != 0) {
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
    fflush(stdout);

    int32_t *idx = xmalloc(sizeof(int32_t) * (size_t)train.n);   /* (n) every sample */
    for (long i = 0; i < train.n; i++) idx[i] = (int32_t)i;
    static const struct { const char *name, *spec; } models[] = {
        { "mlp", "mlp:256,128" }, { "lenet", "lenet" },
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int chosen = argc < 2;
        for (int a = 1; a < argc; a++) chosen |= !strcmp(argv[a], models[i].name);
        if (chosen) bench_model(models[i].name, models[i].spec, &train, idx, peak);
    }

    free(idx);
    dataset_free(&train);
    dataset_free(&test);
    MPI_Finalize();
    return 0;
}
