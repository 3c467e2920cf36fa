/* A rank's compute threads (util/par.h): every threaded kernel gives the
 * same bits with 1, 2 and 3 threads (convolution on its direct, flat and
 * im2col paths, forward and backward; dense; batch normalization; the
 * residual add; the optimizer; the batch iterator's rows), and one-thread
 * cblas_sgemm calls made from several threads at once give what the same
 * calls made one after another give (Debian's OpenBLAS 0.3.21, pthread
 * build, at dsgd's shapes). Without OpenMP (the simulated build's compiler
 * flags) there is nothing to compare and the tests pass trivially.
 *
 * Built with -fsanitize=thread as well (see docs/design.md), its kernels'
 * races would show; the OpenMP runtime itself is not instrumented. */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "data/data.h"
#include "nn/layers.h"
#include "optim/optim.h"
#include "test.h"
#include "util/cpu.h"
#include "util/par.h"
#include "util/util.h"

static rng_t R;

static float *rnd(long n)
{
    float *x = xalloc_floats((size_t)n);
    for (long i = 0; i < n; i++) x[i] = (float)(2.0 * rng_uniform(&R) - 1.0);
    return x;
}

static float *copy(const float *x, long n)
{
    float *y = xalloc_floats((size_t)n);
    memcpy(y, x, sizeof(float) * (size_t)n);
    return y;
}

static void set_threads(int t)
{
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

#define SAME(a, b, n, what, t) CHECK(!memcmp((a), (b), sizeof(float) * (size_t)(n)), "%s differs with %d threads", (what), (t))

/* conv2d forward and backward with T threads against 1 thread, bit for bit */
static void conv_case(int B, int C, int H, int W, int OC, int K, int s, int p)
{
    conv_geom_t g = { .B = B, .C = C, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .stride = s, .pad = p };
    CHECK(conv_geom_init(&g) == 0, "geometry");
    const long nx = (long)B * C * H * W, nw = (long)OC * C * K * K, no = (long)B * OC * g.OH * g.OW;
    float *x = rnd(nx), *w = rnd(nw), *b = rnd(OC), *dout = rnd(no);
    float *out[2], *dx[2], *dw[2], *db[2];
    for (int r = 0; r < 2; r++) {
        out[r] = xalloc_floats((size_t)no); dx[r] = xalloc_floats((size_t)nx);
        dw[r] = xalloc_floats((size_t)nw); db[r] = xalloc_floats((size_t)OC);
    }
    float *col = xalloc_floats((size_t)conv_col_size(&g));
    for (int t = 1; t <= 3; t++) {
        const int r = t > 1;
        set_threads(t);
        conv2d_forward(out[r], col, x, w, b, &g);
        conv2d_backward(dx[r], dw[r], db[r], col, dout, w, &g);
        if (!r) continue;
        SAME(out[0], out[1], no, "conv out", t);
        SAME(dx[0], dx[1], nx, "conv dinp", t);
        SAME(dw[0], dw[1], nw, "conv dw", t);
        SAME(db[0], db[1], OC, "conv db", t);
    }
    set_threads(1);
    free(x); free(w); free(b); free(dout); free(col);
    for (int r = 0; r < 2; r++) { free(out[r]); free(dx[r]); free(dw[r]); free(db[r]); }
}

static void test_conv_paths(void)
{
    conv_case(6, 1, 28, 28, 6, 5, 1, 2);     /* direct: one input channel (LeNet's first) */
    conv_case(7, 32, 8, 8, 32, 3, 1, 1);     /* flat 3x3, output channels in the lanes with AVX-512 */
    conv_case(5, 16, 16, 16, 16, 3, 1, 1);   /* flat 3x3, lane-sum tiles */
    /* the flat weight gradients over several chunks of the batch, each
     * thread keeping its share in every chunk: 7 + 2 samples (lane sums),
     * 6 + 1 (output channels in the lanes, 32 input channels cut in pairs) */
    conv_case(9, 16, 28, 28, 16, 3, 1, 1);
    conv_case(7, 32, 24, 24, 32, 3, 1, 1);
    conv_case(9, 16, 16, 16, 32, 3, 2, 1);   /* im2col: stride 2 */
    conv_case(9, 16, 16, 16, 32, 1, 2, 0);   /* im2col: the 1x1 projection */
    conv_case(8, 6, 14, 14, 16, 5, 1, 0);    /* im2col: LeNet's second */
}

static void dense_case(int B, int IN, int OUT, int relu)
{
    float *x = rnd((long)B * IN), *w = rnd((long)OUT * IN), *b = rnd(OUT), *d = rnd((long)B * OUT);
    float *out[2], *dx[2], *dw[2], *db[2], *ws = xalloc_floats((size_t)dense_ws_size(B, IN, OUT));
    for (int r = 0; r < 2; r++) {
        out[r] = xalloc_floats((size_t)B * OUT); dx[r] = xalloc_floats((size_t)B * IN);
        dw[r] = xalloc_floats((size_t)OUT * IN); db[r] = xalloc_floats(OUT);
    }
    for (int t = 1; t <= 3; t++) {
        const int r = t > 1;
        set_threads(t);
        dense_forward(out[r], ws, x, w, b, B, IN, OUT, relu);
        dense_backward(dx[r], dw[r], db[r], d, x, w, B, IN, OUT, relu);
        if (!r) continue;
        SAME(out[0], out[1], (long)B * OUT, "dense out", t);
        SAME(dx[0], dx[1], (long)B * IN, "dense dinp", t);
        SAME(dw[0], dw[1], (long)OUT * IN, "dense dw", t);
        SAME(db[0], db[1], OUT, "dense db", t);
    }
    set_threads(1);
    free(x); free(w); free(b); free(d); free(ws);
    for (int r = 0; r < 2; r++) { free(out[r]); free(dx[r]); free(dw[r]); free(db[r]); }
}

static void test_dense(void)
{
    dense_case(64, 784, 256, 0);   /* one strip: the tiles shared out */
    dense_case(200, 300, 130, 1);  /* strips of 64 and one of 8, each a piece; the ReLU both ways */
    dense_case(64, 1100, 130, 1);  /* backward through the BLAS and the ReLU */
}

static void test_bn_add(void)
{
    const int B = 16, C = 32, HW = 64;
    const long n = (long)B * C * HW;
    float *x = rnd(n), *gam = rnd(C), *bet = rnd(C), *d = rnd(n);
    double *scratch = xcalloc((size_t)(2 * n + 4 * C), sizeof(double));
    float *out[2], *dx[2], *stats[2], *run[2], *dg[2], *sum[2];
    for (int r = 0; r < 2; r++) {
        out[r] = xalloc_floats((size_t)n); dx[r] = xalloc_floats((size_t)n); stats[r] = xalloc_floats(2 * C);
        run[r] = xalloc_floats(2 * C); dg[r] = xalloc_floats(2 * C); sum[r] = xalloc_floats((size_t)n);
    }
    for (int t = 1; t <= 3; t++) {
        const int r = t > 1;
        set_threads(t);
        for (int c = 0; c < C; c++) { run[r][c] = 0.0f; run[r][C + c] = 1.0f; }
        bn_forward_train(out[r], stats[r], stats[r] + C, run[r], run[r] + C, x, gam, bet, NULL, scratch, B, C, HW, 1,
                         0.1f, 1e-5f, NULL, NULL);
        bn_backward(dx[r], dg[r], dg[r] + C, d, x, stats[r], stats[r] + C, gam, bet, scratch, B, C, HW, 1, NULL, NULL);
        add_forward(sum[r], out[r], x, n, 1);
        add_backward(sum[r], d, sum[r], n, 1);
        if (!r) continue;
        SAME(out[0], out[1], n, "bn out", t);
        SAME(stats[0], stats[1], 2 * C, "bn mean and 1/sigma", t);
        SAME(run[0], run[1], 2 * C, "bn running statistics", t);
        SAME(dx[0], dx[1], n, "bn dinp", t);
        SAME(dg[0], dg[1], 2 * C, "bn dgamma, dbeta", t);
        SAME(sum[0], sum[1], n, "residual add forward and backward", t);
    }
    set_threads(1);
    free(x); free(gam); free(bet); free(d); free(scratch);
    for (int r = 0; r < 2; r++) { free(out[r]); free(dx[r]); free(stats[r]); free(run[r]); free(dg[r]); free(sum[r]); }
}

static void test_optim(void)
{
    const size_t n = 270000;
    /* the update's spans by thread (model_owner_spans), uneven, on threads
     * 0-3 taken modulo T: the same bits as the threads' own pieces */
    static const size_t owners[] = { 0, 100000, 0, 100000, 3, 1, 100003, 50000, 1, 150003, 119997, 2 };
    float *w0 = rnd((long)n), *g = rnd((long)n), *w[2];
    for (int kind = 0; kind < 6; kind++) {
        optim_cfg_t cfg = { .kind = (opt_kind_t)(kind % 3), .momentum = 0.9f, .weight_decay = 5e-4f, .eps = 1e-8f };
        if (kind >= 3) { cfg.owners = owners; cfg.nowners = 4; }
        for (int t = 1; t <= 3; t++) {
            const int r = t > 1 || kind >= 3;
            set_threads(t);
            optim_t *o = optim_create(&cfg, n);
            w[r] = copy(w0, (long)n);
            for (int k = 0; k < 3; k++) optim_step_scaled(o, w[r], g, 0.5f, 0, n, 0.1f);
            optim_step_scaled(o, w[r], g, 0.5f, 99000, 60000, 0.1f);   /* a span across three owners */
            optim_free(o);
            if (kind >= 3 && t == 1) { w[0] = copy(w[1], (long)n); free(w[1]); continue; }
            if (r) {
                SAME(w[0], w[1], (long)n, optim_kind_name((opt_kind_t)kind), t);
                free(w[1]);
            }
        }
        free(w[0]);
    }
    set_threads(1);
    free(w0); free(g);
}

/* the loss by pieces of the batch: the same bits and probabilities for
 * every T */
static void test_loss(void)
{
    const int B = 300, K = 10;
    float *z = rnd((long)B * K), *p[2];
    int32_t y[300];
    for (int i = 0; i < B; i++) y[i] = i % K;
    float l[2] = { 0, 0 };
    for (int t = 1; t <= 3; t++) {
        const int r = t > 1;
        set_threads(t);
        p[r] = xalloc_floats((size_t)B * K);
        l[r] = softmax_xent_forward(p[r], z, y, B, K);
        if (!r) continue;
        SAME(p[0], p[1], (long)B * K, "softmax", t);
        SAME(&l[0], &l[1], 1, "loss", t);
        free(p[1]);
    }
    set_threads(1);
    free(p[0]); free(z);
}

/* the batch iterator's rows (bytes to floats, split across the threads)
 * and labels with T threads against 1, over two pass boundaries, both byte
 * conversions: the same bits, the same samples in the same order */
static void test_batches(void)
{
    enum { N = 300, DIM = 784, B = 128 };
    dataset_t d = { .n = N, .c = 1, .h = 28, .w = 28, .classes = 10 };
    d.px = xmalloc(N * DIM);
    d.y = xmalloc(N);
    for (long i = 0; i < (long)N * DIM; i++) d.px[i] = (uint8_t)(rng_u64(&R) >> 56);
    for (int i = 0; i < N; i++) d.y[i] = (uint8_t)(i % 10);
    int32_t idx[N];
    for (int i = 0; i < N; i++) idx[i] = i;
    for (int div = 0; div < 2; div++) {
        d.px_div = div;
        float *x1 = xalloc_floats((size_t)5 * B * DIM);
        int32_t y1[5 * B];
        for (int t = 1; t <= 3; t++) {
            set_threads(t);
            batch_iter_t *it = batch_iter_create(&d, idx, N, B, 5, 0);
            int same = 1;
            for (int k = 0; k < 5; k++) {   /* 640 draws: two pass boundaries */
                batch_iter_next(it);
                if (t == 1) {
                    memcpy(x1 + (long)k * B * DIM, it->x, sizeof(float) * B * DIM);
                    memcpy(y1 + k * B, it->y, sizeof(int32_t) * B);
                } else {
                    same &= !memcmp(x1 + (long)k * B * DIM, it->x, sizeof(float) * B * DIM);
                    same &= !memcmp(y1 + k * B, it->y, sizeof(int32_t) * B);
                }
            }
            CHECK(same, "the batch iterator's rows or labels differ with %d threads (px_div %d)", t, div);
            batch_iter_free(it);
        }
        /* and they are the samples' own: the first row of the first batch */
        int row = -1;
        for (int i = 0; i < N && row < 0; i++) {
            float v[DIM];
            dataset_row(&d, i, v);
            if (!memcmp(v, x1, sizeof v)) row = i;
        }
        CHECK(row >= 0 && y1[0] == d.y[row], "the first batch's first row is no sample's, or its label is not the sample's");
        free(x1);
    }
    set_threads(1);
    free(d.px); free(d.y);
}

/* one-thread sgemm from 2 threads at once, many rounds, at dsgd's shapes
 * and transposes, against the same calls made alone */
static void test_concurrent_sgemm(void)
{
#ifdef _OPENMP
    enum { NS = 4, ROUNDS = 300 };
    static const int shp[NS][5] = {   /* M, N, K, transA, transB (row-major) */
        { 64, 256, 784, 0, 1 }, { 256, 784, 64, 1, 0 }, { 64, 784, 256, 0, 0 }, { 144, 32, 256, 0, 1 },
    };
    openblas_set_num_threads(1);
    float *a[NS], *b[NS], *ref[NS][2], *c[2][NS];
    for (int i = 0; i < NS; i++) {
        const long M = shp[i][0], N = shp[i][1], K = shp[i][2];
        a[i] = rnd(M * K);
        b[i] = rnd(K * N);
        for (int v = 0; v < 2; v++) {   /* two operand scalings, so the two threads compute different things */
            ref[i][v] = xalloc_floats((size_t)(M * N));
            cblas_sgemm(CblasRowMajor, shp[i][3] ? CblasTrans : CblasNoTrans, shp[i][4] ? CblasTrans : CblasNoTrans,
                        (int)M, (int)N, (int)K, v ? 0.5f : 1.0f, a[i], shp[i][3] ? (int)M : (int)K, b[i],
                        shp[i][4] ? (int)K : (int)N, 0.0f, ref[i][v], (int)N);
            c[v][i] = xalloc_floats((size_t)(M * N));
        }
    }
    int bad[2] = { 0, 0 };
#pragma omp parallel num_threads(2)
    {
        const int v = omp_get_thread_num();
        for (int round = 0; round < ROUNDS && v < 2; round++)
            for (int i0 = 0; i0 < NS; i0++) {
                const int i = (i0 + v + round) % NS;   /* the threads on different shapes, then the same */
                const long M = shp[i][0], N = shp[i][1], K = shp[i][2];
                cblas_sgemm(CblasRowMajor, shp[i][3] ? CblasTrans : CblasNoTrans, shp[i][4] ? CblasTrans : CblasNoTrans,
                            (int)M, (int)N, (int)K, v ? 0.5f : 1.0f, a[i], shp[i][3] ? (int)M : (int)K, b[i],
                            shp[i][4] ? (int)K : (int)N, 0.0f, c[v][i], (int)N);
                bad[v] += memcmp(c[v][i], ref[i][v], sizeof(float) * (size_t)(M * N)) != 0;
            }
    }
    CHECK(bad[0] == 0 && bad[1] == 0, "concurrent sgemm differed from the serial call %d and %d times in %d", bad[0],
          bad[1], ROUNDS * NS);
    for (int i = 0; i < NS; i++) {
        free(a[i]); free(b[i]);
        for (int v = 0; v < 2; v++) { free(ref[i][v]); free(c[v][i]); }
    }
#endif
}

/* the pool's threads flush subnormals as the calling thread does, after
 * cpu_compute_setup, and stop when it says keep */
static void test_pool_denormals(void)
{
#ifdef _OPENMP
    for (int flush = 1; flush >= 0; flush--) {
        cpu_compute_setup(2, flush);
        int agree = 0;
#pragma omp parallel num_threads(2) reduction(+ : agree)
        agree += cpu_flushes_denormals() == flush;
        CHECK(agree == 2, "%d of 2 pool threads %s subnormals", agree, flush ? "flush" : "keep");
    }
    cpu_compute_setup(1, 1);
#endif
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    rng_seed(&R, 7, 0);
    RUN(test_pool_denormals);
    RUN(test_concurrent_sgemm);
    RUN(test_conv_paths);
    RUN(test_dense);
    RUN(test_bn_add);
    RUN(test_optim);
    RUN(test_loss);
    RUN(test_batches);
    return TEST_END("test_par");
}
