/* Gradients of every layer and every model against central finite
 * differences, conv2d against a direct convolution, and the loss against a
 * double-precision reference.
 *
 * Tolerance: float32 forward passes carry a relative rounding error of a few
 * 1e-7 of the summed magnitudes (≈1e-6 here); divided by 2·eps = 2e-3 that is
 * ≤ 1e-3 in the difference quotient, while the truncation error O(eps²·f''')
 * is far smaller. We allow 2e-3 + 2% relative. */
#include <string.h>

#include "nn/layers.h"
#include "nn/model.h"
#include "test.h"
#include "util/util.h"

#define EPS 1e-3f
#define TOL(g) (2e-3 + 0.02 * fabs(g))

static rng_t R;

static void fill(float *x, long n, float scale)
{
    for (long i = 0; i < n; i++) x[i] = scale * (float)(2.0 * rng_uniform(&R) - 1.0);
}

static double dotd(const float *a, const float *b, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* ---------------- dense ---------------- */
enum { DB = 3, DIN = 5, DOUT = 4, DENSE_WS = 1024 };   /* DENSE_WS: at least dense_ws_size(DB, DIN, DOUT) */

static double dense_obj(const float *x, const float *w, const float *b, const float *r)
{
    float out[DB * DOUT], ws[DENSE_WS];
    dense_forward(out, ws, x, w, b, DB, DIN, DOUT, 0);
    return dotd(out, r, DB * DOUT);
}

static void check_fd(float *v, long n, const float *analytic, double (*obj)(void *), void *ctx, const char *what)
{
    for (long i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + EPS; double fp = obj(ctx);
        v[i] = keep - EPS; double fm = obj(ctx);
        v[i] = keep;
        double fd = (fp - fm) / (2.0 * EPS);
        CHECK(fabs(fd - analytic[i]) <= TOL(fd), "%s[%ld]: analytic %.6g vs finite difference %.6g", what, i, analytic[i], fd);
    }
}

typedef struct dense_ctx { float x[DB * DIN], w[DOUT * DIN], b[DOUT], r[DB * DOUT]; } dense_ctx_t;
static double dense_cb(void *p) { dense_ctx_t *c = p; return dense_obj(c->x, c->w, c->b, c->r); }

static void test_dense_gradients(void)
{
    dense_ctx_t c;
    fill(c.x, DB * DIN, 1); fill(c.w, DOUT * DIN, 1); fill(c.b, DOUT, 1); fill(c.r, DB * DOUT, 1);
    float dx[DB * DIN], dw[DOUT * DIN], db[DOUT];
    CHECK(dense_ws_size(DB, DIN, DOUT) <= DENSE_WS, "dense_ws_size %ld floats, the test's workspace %d",
          dense_ws_size(DB, DIN, DOUT), (int)DENSE_WS);
    dense_backward(dx, dw, db, c.r, c.x, c.w, DB, DIN, DOUT, 0);
    check_fd(c.x, DB * DIN, dx, dense_cb, &c, "dense dinp");
    check_fd(c.w, DOUT * DIN, dw, dense_cb, &c, "dense dw");
    check_fd(c.b, DOUT, db, dense_cb, &c, "dense db");
}

/* ---------------- conv2d ---------------- */
typedef struct conv_ctx {
    conv_geom_t g;
    float *x, *w, *b, *r, *out, *col;
} conv_ctx_t;

static long conv_out_n(const conv_geom_t *g) { return (long)g->B * g->OC * g->OH * g->OW; }

static double conv_cb(void *p)
{
    conv_ctx_t *c = p;
    conv2d_forward(c->out, c->col, c->x, c->w, c->b, &c->g);
    return dotd(c->out, c->r, conv_out_n(&c->g));
}

static void conv_case(int B, int C, int H, int W, int OC, int K, int stride, int pad)
{
    conv_ctx_t c = { .g = { .B = B, .C = C, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .stride = stride, .pad = pad } };
    CHECK(conv_geom_init(&c.g) == 0, "geometry");
    const conv_geom_t *g = &c.g;
    long nx = (long)B * C * H * W, nw = (long)OC * C * K * K, no = conv_out_n(g);
    c.x = xalloc_floats(nx); c.w = xalloc_floats(nw); c.b = xalloc_floats(OC); c.r = xalloc_floats(no);
    c.out = xalloc_floats(no); c.col = xalloc_floats(conv_col_size(g));
    fill(c.x, nx, 1); fill(c.w, nw, 1); fill(c.b, OC, 1); fill(c.r, no, 1);
    /* forward against a direct convolution */
    conv_cb(&c);
    double maxerr = 0;
    for (int b = 0; b < B; b++)
        for (int oc = 0; oc < OC; oc++)
            for (int oh = 0; oh < g->OH; oh++)
                for (int ow = 0; ow < g->OW; ow++) {
                    double s = c.b[oc];
                    for (int ch = 0; ch < C; ch++)
                        for (int ki = 0; ki < K; ki++)
                            for (int kj = 0; kj < K; kj++) {
                                int ih = oh * stride - pad + ki, iw = ow * stride - pad + kj;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += (double)c.w[((oc * C + ch) * K + ki) * K + kj] * c.x[((b * C + ch) * H + ih) * W + iw];
                            }
                    double e = fabs(s - c.out[((b * OC + oc) * g->OH + oh) * g->OW + ow]);
                    if (e > maxerr) maxerr = e;
                }
    CHECK(maxerr < 1e-4, "conv forward differs from direct convolution by %g", maxerr);
    float *dx = xalloc_floats(nx), *dw = xalloc_floats(nw), *db = xalloc_floats(OC);
    conv_cb(&c);  /* col must hold this input's im2col */
    conv2d_backward(dx, dw, db, c.col, c.r, c.w, g);
    check_fd(c.x, nx, dx, conv_cb, &c, "conv dinp");
    check_fd(c.w, nw, dw, conv_cb, &c, "conv dw");
    check_fd(c.b, OC, db, conv_cb, &c, "conv db");
    free(dx); free(dw); free(db);
    free(c.x); free(c.w); free(c.b); free(c.r); free(c.out); free(c.col);
}

static void test_conv_gradients(void)
{
    conv_case(2, 2, 7, 6, 3, 3, 1, 1);
    conv_case(2, 3, 8, 8, 2, 5, 2, 2);
    conv_case(1, 1, 5, 5, 2, 2, 1, 0);
    conv_case(2, 2, 9, 9, 2, 3, 3, 0);
    conv_case(1, 2, 6, 6, 2, 5, 1, 2);   /* LeNet's first-layer shape, small */
    conv_case(2, 2, 5, 21, 2, 3, 1, 1);  /* rows longer than one vector, ragged end */
    /* one input channel: the direct path */
    conv_case(2, 1, 9, 20, 3, 3, 1, 1);  /* a full and a partial column tile */
    conv_case(2, 1, 11, 7, 2, 5, 1, 2);  /* LeNet's first layer; rows not a multiple of the row tile */
    conv_case(1, 1, 13, 37, 2, 5, 2, 2); /* stride 2 */
    conv_case(1, 1, 6, 40, 2, 3, 1, 1);  /* three column tiles, more than one block per row */
    conv_case(2, 1, 10, 10, 2, 1, 3, 0); /* 1x1 kernel, stride larger than the kernel */
    conv_case(1, 1, 6, 9, 2, 4, 3, 3);   /* padding wider than the stride */
}

/* The direct one-channel path against the im2col path on the same
 * convolution: a second, zero input channel with arbitrary weights changes
 * neither the output nor the first channel's gradients, but sends the input
 * through the general code. */
static void conv_paths_case(int B, int H, int W, int OC, int K, int stride, int pad)
{
    conv_geom_t g1 = { .B = B, .C = 1, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .stride = stride, .pad = pad };
    conv_geom_t g2 = g1;
    g2.C = 2;
    CHECK(conv_geom_init(&g1) == 0 && conv_geom_init(&g2) == 0, "geometry");
    const long HW = (long)H * W, KK = (long)K * K, no = conv_out_n(&g1);
    float *x1 = xalloc_floats(B * HW), *x2 = xalloc_floats(2 * B * HW);
    float *w1 = xalloc_floats(OC * KK), *w2 = xalloc_floats(2 * OC * KK), *b = xalloc_floats(OC);
    float *o1 = xalloc_floats(no), *o2 = xalloc_floats(no), *dout = xalloc_floats(no);
    float *col1 = xalloc_floats(conv_col_size(&g1)), *col2 = xalloc_floats(conv_col_size(&g2));
    float *dw1 = xalloc_floats(OC * KK), *dw2 = xalloc_floats(2 * OC * KK), *db1 = xalloc_floats(OC), *db2 = xalloc_floats(OC);
    float *dx1 = xalloc_floats(B * HW), *dx2 = xalloc_floats(2 * B * HW);
    fill(x1, B * HW, 1); fill(w2, 2 * OC * KK, 1); fill(b, OC, 1); fill(dout, no, 1);
    for (int i = 0; i < B; i++) {
        memcpy(x2 + 2 * i * HW, x1 + i * HW, sizeof(float) * (size_t)HW);
        memset(x2 + (2 * i + 1) * HW, 0, sizeof(float) * (size_t)HW);
    }
    for (int oc = 0; oc < OC; oc++) memcpy(w1 + oc * KK, w2 + 2 * oc * KK, sizeof(float) * (size_t)KK);
    conv2d_forward(o1, col1, x1, w1, b, &g1);
    conv2d_forward(o2, col2, x2, w2, b, &g2);
    conv2d_backward(dx1, dw1, db1, col1, dout, w1, &g1);
    conv2d_backward(dx2, dw2, db2, col2, dout, w2, &g2);
    /* sums of up to K²·B·OH·OW products of magnitude ≤ 1, in float */
    const double tol = 1e-6 * (double)KK * B * g1.OH * g1.OW + 1e-5;
    double e_out = 0, e_dw = 0, e_db = 0, e_dx = 0;
    for (long i = 0; i < no; i++) e_out = fmax(e_out, fabs(o1[i] - o2[i]));
    for (int oc = 0; oc < OC; oc++) {
        e_db = fmax(e_db, fabs(db1[oc] - db2[oc]));
        for (long k = 0; k < KK; k++) e_dw = fmax(e_dw, fabs(dw1[oc * KK + k] - dw2[2 * oc * KK + k]));
    }
    for (int i = 0; i < B; i++)
        for (long k = 0; k < HW; k++) e_dx = fmax(e_dx, fabs(dx1[i * HW + k] - dx2[2 * i * HW + k]));
    CHECK(e_out < tol && e_dw < tol && e_db < tol && e_dx < tol,
          "direct vs im2col path, %dx%d k%d s%d p%d: out %g dw %g db %g dinp %g (tol %g)",
          H, W, K, stride, pad, e_out, e_dw, e_db, e_dx, tol);
    free(x1); free(x2); free(w1); free(w2); free(b); free(o1); free(o2); free(dout);
    free(col1); free(col2); free(dw1); free(dw2); free(db1); free(db2); free(dx1); free(dx2);
}

static void test_conv_paths_agree(void)
{
    conv_paths_case(3, 28, 28, 6, 5, 1, 2);   /* LeNet's first layer */
    conv_paths_case(2, 17, 33, 3, 3, 1, 0);
    conv_paths_case(2, 15, 19, 2, 5, 2, 1);
    conv_paths_case(1, 9, 9, 4, 2, 3, 1);
}

/* ---------------- locally connected ---------------- */
typedef struct lc_ctx {
    conv_geom_t g;
    float *x, *w, *b, *r, *out, *col;
} lc_ctx_t;

static double lc_cb(void *p)
{
    lc_ctx_t *c = p;
    lc_forward(c->out, c->col, c->x, c->w, c->b, &c->g);
    return dotd(c->out, c->r, conv_out_n(&c->g));
}

/* Forward against the definition, in double; every gradient against
 * finite differences. */
static void lc_case(int B, int C, int H, int W, int OC, int K, int stride, int pad)
{
    lc_ctx_t c = { .g = { .B = B, .C = C, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .stride = stride, .pad = pad } };
    CHECK(conv_geom_init(&c.g) == 0, "geometry");
    const conv_geom_t *g = &c.g;
    const long OHW = (long)g->OH * g->OW, CKK = (long)C * K * K;
    long nx = (long)B * C * H * W, nw = OHW * OC * CKK, nb = OC * OHW, no = conv_out_n(g);
    c.x = xalloc_floats(nx); c.w = xalloc_floats(nw); c.b = xalloc_floats(nb); c.r = xalloc_floats(no);
    c.out = xalloc_floats(no); c.col = xalloc_floats(lc_col_size(g));
    fill(c.x, nx, 1); fill(c.w, nw, 1); fill(c.b, nb, 1); fill(c.r, no, 1);
    lc_cb(&c);
    double maxerr = 0;
    for (int b = 0; b < B; b++)
        for (int oc = 0; oc < OC; oc++)
            for (int oh = 0; oh < g->OH; oh++)
                for (int ow = 0; ow < g->OW; ow++) {
                    const long p = (long)oh * g->OW + ow;
                    double s = c.b[oc * OHW + p];
                    for (int ch = 0; ch < C; ch++)
                        for (int ki = 0; ki < K; ki++)
                            for (int kj = 0; kj < K; kj++) {
                                int ih = oh * stride - pad + ki, iw = ow * stride - pad + kj;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += (double)c.w[(p * OC + oc) * CKK + (ch * K + ki) * K + kj] * c.x[((b * C + ch) * H + ih) * W + iw];
                            }
                    double e = fabs(s - c.out[(b * OC + oc) * OHW + p]);
                    if (e > maxerr) maxerr = e;
                }
    CHECK(maxerr < 1e-4, "lc forward (%dx%d k%d s%d p%d) differs from the definition by %g", H, W, K, stride, pad, maxerr);
    float *dx = xalloc_floats(nx), *dw = xalloc_floats(nw), *db = xalloc_floats(nb);
    /* stale values in the outputs: backward overwrites, never accumulates */
    fill(dx, nx, 5); fill(dw, nw, 5); fill(db, nb, 5);
    lc_backward(dx, dw, db, c.col, c.r, c.x, c.w, g);
    check_fd(c.x, nx, dx, lc_cb, &c, "lc dinp");
    check_fd(c.w, nw, dw, lc_cb, &c, "lc dw");
    check_fd(c.b, nb, db, lc_cb, &c, "lc db");
    /* no input gradient asked: the same weight gradient */
    float *dw2 = xalloc_floats(nw), *db2 = xalloc_floats(nb);
    lc_backward(NULL, dw2, db2, c.col, c.r, c.x, c.w, g);
    CHECK(memcmp(dw, dw2, sizeof(float) * (size_t)nw) == 0 && memcmp(db, db2, sizeof(float) * (size_t)nb) == 0,
          "lc weight gradient depends on whether dinp is computed");
    free(dx); free(dw); free(db); free(dw2); free(db2);
    free(c.x); free(c.w); free(c.b); free(c.r); free(c.out); free(c.col);
}

static void test_lc_gradients(void)
{
    lc_case(2, 2, 6, 5, 3, 3, 1, 1);    /* same size, a border on every side */
    lc_case(2, 3, 7, 8, 2, 3, 2, 1);    /* stride 2, odd height: the last row's field hangs over */
    lc_case(1, 1, 9, 9, 2, 5, 2, 2);    /* one channel, padding 2 */
    lc_case(2, 2, 5, 7, 2, 2, 1, 0);    /* even kernel, no padding */
    lc_case(1, 2, 10, 10, 3, 3, 3, 0);  /* stride equal to the kernel: fields that do not overlap */
    lc_case(2, 1, 6, 9, 2, 4, 3, 3);    /* padding wider than the stride: whole field rows outside */
}

/* ---------------- pooling and activations ---------------- */
typedef struct pool_ctx { conv_geom_t g; float *x, *r, *out; int32_t *arg; } pool_ctx_t;
static double pool_cb(void *p)
{
    pool_ctx_t *c = p;
    maxpool_forward(c->out, c->arg, c->x, &c->g);
    return dotd(c->out, c->r, (long)c->g.B * c->g.C * c->g.OH * c->g.OW);
}

static void pool_case(int B, int C, int H, int W, int K, int stride)
{
    pool_ctx_t c = { .g = { .B = B, .C = C, .H = H, .W = W, .KH = K, .KW = K, .stride = stride } };
    conv_geom_init(&c.g);
    long nx = (long)B * C * H * W, no = (long)B * C * c.g.OH * c.g.OW;
    c.x = xalloc_floats(nx); c.r = xalloc_floats(no); c.out = xalloc_floats(no);
    c.arg = xcalloc((size_t)no, sizeof(int32_t));
    /* distinct values spaced well beyond EPS, so no window has a near-tie */
    int32_t *perm = xmalloc(sizeof(int32_t) * (size_t)nx);
    for (long i = 0; i < nx; i++) perm[i] = (int32_t)i;
    rng_shuffle(&R, perm, (size_t)nx);
    for (long i = 0; i < nx; i++) c.x[i] = 0.01f * (float)perm[i];
    free(perm);
    fill(c.r, no, 1);
    float *dx = xalloc_floats(nx);
    pool_cb(&c);
    maxpool_backward(dx, c.r, c.arg, &c.g);
    check_fd(c.x, nx, dx, pool_cb, &c, "maxpool dinp");
    free(dx); free(c.x); free(c.r); free(c.out); free(c.arg);
}

static void test_maxpool_gradients(void)
{
    pool_case(2, 2, 6, 5, 2, 2);
    pool_case(1, 3, 7, 7, 3, 2);   /* overlapping windows */
}

/* The fused ReLU + pool gives the bits of the two layers in turn: outputs
 * and input gradients, with negative windows, all-negative windows, zeros
 * and ties (values on a coarse grid). */
static void fused_case(int B, int C, int H, int W, int K, int stride)
{
    conv_geom_t g = { .B = B, .C = C, .H = H, .W = W, .KH = K, .KW = K, .stride = stride };
    conv_geom_init(&g);
    long nx = (long)B * C * H * W, no = (long)B * C * g.OH * g.OW;
    float *x = xalloc_floats(nx), *rx = xalloc_floats(nx), *r = xalloc_floats(no);
    float *o1 = xalloc_floats(no), *o2 = xalloc_floats(no);
    float *d1 = xalloc_floats(nx), *d2 = xalloc_floats(nx), *drx = xalloc_floats(nx);
    int32_t *a1 = xcalloc((size_t)no, sizeof(int32_t)), *a2 = xcalloc((size_t)no, sizeof(int32_t));
    rng_t q;   /* its own stream: the shared one feeds the finite-difference checks */
    rng_seed(&q, 7, (uint64_t)nx);
    for (long i = 0; i < nx; i++) x[i] = (float)((int)(rng_uniform(&q) * 9) - 5) * 0.25f;   /* -1.25 .. 0.75 */
    for (long i = 0; i < no; i++) r[i] = (float)(2 * rng_uniform(&q) - 1);
    relu_forward(rx, x, nx);
    maxpool_forward(o1, a1, rx, &g);
    maxpool_backward(drx, r, a1, &g);
    relu_backward(d1, drx, rx, nx);
    maxpool_relu_forward(o2, a2, x, &g);
    maxpool_relu_backward(d2, r, o2, a2, &g);
    /* the pool's own backward against the plain scatter into zeros */
    float *ref = xalloc_floats(nx);
    memset(ref, 0, sizeof(float) * (size_t)nx);
    for (long i = 0; i < no; i++) ref[a1[i]] += r[i];
    CHECK(memcmp(ref, drx, sizeof(float) * (size_t)nx) == 0, "pool gradient differs from the scatter (K=%d stride=%d)", K, stride);
    free(ref);
    CHECK(memcmp(o1, o2, sizeof(float) * (size_t)no) == 0, "fused relu+pool output differs (K=%d stride=%d)", K, stride);
    CHECK(memcmp(d1, d2, sizeof(float) * (size_t)nx) == 0, "fused relu+pool gradient differs (K=%d stride=%d)", K, stride);
    free(x); free(rx); free(r); free(o1); free(o2); free(d1); free(d2); free(drx); free(a1); free(a2);
}

static void test_relu_pool_fused(void)
{
    fused_case(4, 6, 28, 28, 2, 2);   /* LeNet's */
    fused_case(2, 3, 9, 7, 3, 3);
    fused_case(3, 2, 7, 9, 2, 2);     /* odd sizes: a row and a column outside every window */
}

typedef struct act_ctx { int tanh_; float x[40], r[40], out[40]; } act_ctx_t;
static double act_cb(void *p)
{
    act_ctx_t *c = p;
    if (c->tanh_) tanh_forward(c->out, c->x, 40); else relu_forward(c->out, c->x, 40);
    return dotd(c->out, c->r, 40);
}

static void test_activation_gradients(void)
{
    for (int t = 0; t < 2; t++) {
        act_ctx_t c = { .tanh_ = t };
        fill(c.x, 40, 2); fill(c.r, 40, 1);
        for (int i = 0; i < 40; i++) if (fabsf(c.x[i]) < 0.05f) c.x[i] = 0.5f;  /* away from ReLU's kink */
        float dx[40];
        act_cb(&c);
        if (t) tanh_backward(dx, c.r, c.out, 40); else relu_backward(dx, c.r, c.out, 40);
        check_fd(c.x, 40, dx, act_cb, &c, t ? "tanh" : "relu");
    }
}

/* ---------------- loss ---------------- */
typedef struct loss_ctx { float z[3 * 5], p[3 * 5]; int32_t y[3]; } loss_ctx_t;
static double loss_cb(void *p) { loss_ctx_t *c = p; return softmax_xent_forward(c->p, c->z, c->y, 3, 5); }

static void test_softmax_xent(void)
{
    loss_ctx_t c = { .y = { 0, 3, 4 } };
    fill(c.z, 15, 3);
    double ref = 0;
    for (int i = 0; i < 3; i++) {
        double s = 0;
        for (int k = 0; k < 5; k++) s += exp((double)c.z[i * 5 + k]);
        ref += log(s) - c.z[i * 5 + c.y[i]];
    }
    CHECK_NEAR(loss_cb(&c), ref / 3, 1e-5, "mean cross-entropy");
    float dz[15];
    loss_cb(&c);
    softmax_xent_backward(dz, c.p, c.y, 3, 5);
    check_fd(c.z, 15, dz, loss_cb, &c, "softmax-xent dlogits");
    /* stability: logits far beyond exp's range */
    float z[2] = { 1000.0f, -1000.0f }, p[2];
    int32_t y[1] = { 1 };
    float l = softmax_xent_forward(p, z, y, 1, 2);
    CHECK(isfinite(l) && fabs(l - 2000.0) < 1e-2, "loss of extreme logits %g, want 2000", (double)l);
}

/* ---------------- whole models ---------------- */
typedef struct model_ctx { model_t *m; float *x; int32_t y[4]; } model_ctx_t;
static double model_cb(void *p)
{
    model_ctx_t *c = p;
    model_forward(c->m, c->x, 4);
    return model_loss(c->m, c->y, 4);
}

static void model_case(const char *spec)
{
    model_ctx_t c = { .y = { 0, 1, 2, 1 } };
    c.m = model_create(spec, 1, 12, 12, 3, 4);
    model_init_params(c.m, 7);
    for (size_t i = 0; i < c.m->nparams; i++) c.m->params[i] += 0.05f * rng_normal(&R); /* nonzero biases */
    c.x = xalloc_floats(4 * 144);
    for (int i = 0; i < 4 * 144; i++) c.x[i] = (float)rng_uniform(&R);
    model_cb(&c);
    model_backward(c.m, c.y, 4);
    float *g = xalloc_floats(c.m->nparams);
    memcpy(g, c.m->grads, sizeof(float) * c.m->nparams);
    /* every parameter of a small model; a sample of 300 for the larger ones */
    size_t n = c.m->nparams;
    int bad = 0, checked = 0;
    for (size_t k = 0; k < (n < 300 ? n : 300); k++) {
        size_t i = n < 300 ? k : rng_below(&R, (uint32_t)n);
        float keep = c.m->params[i];
        c.m->params[i] = keep + EPS; double fp = model_cb(&c);
        c.m->params[i] = keep - EPS; double fm = model_cb(&c);
        c.m->params[i] = keep;
        double fd = (fp - fm) / (2.0 * EPS);
        checked++;
        if (fabs(fd - g[i]) > TOL(fd)) {
            if (bad++ < 5) printf("    %s param %zu: analytic %.6g vs finite difference %.6g\n", spec, i, g[i], fd);
        }
    }
    CHECK(bad == 0, "%s: %d of %d parameter gradients disagree with finite differences", spec, bad, checked);
    free(g); free(c.x);
    model_free(c.m);
}

static void test_model_gradients(void)
{
    model_case("logreg");
    model_case("mlp:16,8");
    model_case("mlp:10:tanh");
    model_case("lenet");
    /* batch normalization in training mode, projection shortcuts (two
     * stride-2 stages on 12x12), an identity add whose input also feeds a
     * convolution, global average pooling. (Deeper ones are too curved for
     * per-parameter differences in float: a directional difference along a
     * random vector converges to the analytic value as the step shrinks.) */
    model_case("resnet:8,2");
    /* two locally connected layers with pooling, stride 2 and a tanh */
    model_case("lc:2,3");
    model_case("lc:3,2:k=4:s=2:p=1:pool=1:tanh");
}

static void test_model_specs(void)
{
    char err[256];
    CHECK(model_spec_check("mlp", 1, 28, 28, 10, err, sizeof err) == 0, "mlp");
    CHECK(model_spec_check("mlp:300,100,50", 1, 8, 8, 10, err, sizeof err) == 0, "mlp 8x8");
    CHECK(model_spec_check("lenet", 3, 32, 32, 10, err, sizeof err) == 0, "lenet cifar");
    CHECK(model_spec_check("lenet", 1, 8, 8, 10, err, sizeof err) != 0 && strstr(err, "12x12"), "lenet 8x8: %s", err);
    CHECK(model_spec_check("resnet", 1, 28, 28, 10, err, sizeof err) == 0, "resnet: %s", err);
    CHECK(model_spec_check("vgg", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "unknown model"), "%s", err);
    CHECK(model_spec_check("resnet:21,16", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "6n+2") && strstr(err, "--model"), "%s", err);
    CHECK(model_spec_check("resnet:2,16", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "6n+2"), "%s", err);
    CHECK(model_spec_check("resnet:20,0", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "width"), "%s", err);
    CHECK(model_spec_check("resnet:20", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "D,W"), "%s", err);
    CHECK(model_spec_check("resnet:20,16", 1, 3, 3, 10, err, sizeof err) != 0 && strstr(err, "too small"), "%s", err);
    CHECK(model_spec_check("resnet:362,4096", 3, 32, 32, 10, err, sizeof err) != 0 && strstr(err, "too large"), "%s", err);
    CHECK(model_spec_check("resnet:99999999999999999999,4", 3, 32, 32, 10, err, sizeof err) != 0, "huge depth accepted");
    CHECK(model_spec_check("mlp:0", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "hidden size"), "%s", err);
    CHECK(model_spec_check("mlp:12,x", 1, 28, 28, 10, err, sizeof err) != 0, "mlp:12,x accepted");
    model_t *m = model_create("mlp", 1, 28, 28, 10, 8);
    CHECK(m->nparams == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10, "mlp has %zu params", m->nparams);
    model_free(m);
    m = model_create("lenet", 1, 28, 28, 10, 8);
    size_t want = 6 * 25 + 6 + 16 * 150 + 16 + 400 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10;
    CHECK(m->nparams == want, "lenet has %zu params, want %zu", m->nparams, want);
    model_free(m);
    /* ResNet-20 on CIFAR-10: 0.27 M parameters (He et al.), counted by hand:
     * stem 432 + 32, stage 1 14016, stage 2 14528 + 37120, stage 3
     * 57728 + 147968, classifier 650; 2 running statistics per bn channel */
    m = model_create("resnet", 3, 32, 32, 10, 2);
    CHECK(m->nparams == 272474, "resnet:20,16 has %zu params, want 272474", m->nparams);
    CHECK(m->nstate == 2 * (16 + 6 * 16 + 6 * 32 + 32 + 6 * 64 + 64), "resnet:20,16 has %zu state floats", m->nstate);
    CHECK(m->state == m->params + m->nparams, "the state follows the parameters");
    model_free(m);
    /* lc = lc:8,16:k=3:s=1:p=1:pool=2 on Fashion-MNIST: 28x28x8 with 3x3x1
     * filters and a bias per position, pool, 14x14x16 with 3x3x8, pool,
     * 7x7x16 → 10 */
    m = model_create("lc", 1, 28, 28, 10, 2);
    want = 784 * (8 * 9 + 8) + 196 * (16 * 72 + 16) + 784 * 10 + 10;
    CHECK(m->nparams == want && want == 299498, "lc has %zu params, want %zu", m->nparams, want);
    model_free(m);
    m = model_create("lc:4:k=5:s=2:p=0:pool=1", 3, 11, 11, 5, 2);   /* 4x4 outputs */
    want = 16 * (4 * 75 + 4) + 64 * 5 + 5;
    CHECK(m->nparams == want, "lc:4:k=5:s=2:p=0:pool=1 has %zu params, want %zu", m->nparams, want);
    model_free(m);
    /* hundreds of millions of parameters are a valid spec (checked, not built) */
    CHECK(model_spec_check("lc:32,64:k=5", 3, 200, 200, 10, err, sizeof err) == 0, "large lc: %s", err);
    CHECK(model_spec_check("lc:8,x", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "--model lc:8,x") && strstr(err, "channel"), "%s", err);
    CHECK(model_spec_check("lc:8:q=3", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "unknown field 'q'"), "%s", err);
    CHECK(model_spec_check("lc:8:k=x", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "integer"), "%s", err);
    CHECK(model_spec_check("lc:8:k=3:p=3", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "p < k"), "%s", err);
    /* a negative padding is refused, not taken for the default */
    CHECK(model_spec_check("lc:8:p=-1", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "0 <= p") && strstr(err, "p=-1"),
          "lc:8:p=-1: %s", err);
    CHECK(model_spec_check("lc:8:p=0", 1, 28, 28, 10, err, sizeof err) == 0, "lc:8:p=0: %s", err);
    static const char *const bad[] = { "lc:8:k=-3", "lc:8:s=-1", "lc:8:pool=-2", "lc:8:s=0", "lc:8:p=", "lc:8:p=1.5",
                                       "lc:8:p= 1", "lc:8:p=+1", "lc:8:k=3:k=5", "lc:8:p=1:p=1", "lc:8:p", "lc:8,-4" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECK(model_spec_check(bad[i], 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, bad[i]) && !strchr(err, '\n'),
              "'%s' accepted or not named: %s", bad[i], err);
    }
    CHECK(model_spec_check("lc:8:k=3:k=5", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "twice"), "%s", err);
    CHECK(model_spec_check("lc:8,8,8,8,8", 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "pool"), "%s", err);
    CHECK(model_spec_check("lc:8:k=9:p=0", 1, 8, 8, 10, err, sizeof err) != 0 && strstr(err, "does not fit"), "%s", err);
    CHECK(model_spec_check("lc:4096,4096:k=7", 3, 256, 256, 10, err, sizeof err) != 0 && strstr(err, "too large"), "%s", err);
    /* spatial blocks: 28x28 pools to 14 and 7, which a 4x4 grid tiles, an 8x8 one not */
    CHECK(model_part_check("lc", 1, 28, 28, 10, 16, err, sizeof err) == 0, "%s", err);
    CHECK(model_part_check("lc", 1, 28, 28, 10, 64, err, sizeof err) != 0 && strstr(err, "--model-parallel 64") &&
          strstr(err, "8x8 grid") && strstr(err, "7x7 positions after pooling"), "%s", err);
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    rng_seed(&R, 42, 0);
    RUN(test_dense_gradients);
    RUN(test_conv_gradients);
    RUN(test_conv_paths_agree);
    RUN(test_maxpool_gradients);
    RUN(test_activation_gradients);
    RUN(test_relu_pool_fused);
    RUN(test_softmax_xent);
    RUN(test_model_gradients);
    RUN(test_model_specs);
    /* last: its draws from the shared stream would move the model cases'
     * (resnet:8,2's per-parameter differences are sensitive to the point) */
    RUN(test_lc_gradients);
    return TEST_END("test_layers");
}
