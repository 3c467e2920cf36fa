/* Batch normalization, global average pooling, the residual add and a
 * convolution without bias (the residual network's pieces), against finite
 * differences and closed-form values.
 *
 * Objective: Σ r·out for a fixed random r, so the analytic input gradient
 * is the backward pass fed dout = r. Finite differences in float with step
 * 1e-2 on values of order 1: the rounding error of the objective (~1e-6
 * relative over a few hundred terms) stays far below the tolerance
 * 2e-3 + 2%; the fused ReLU's kink is avoided by keeping the normalized
 * values away from 0 (checked, and such inputs skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "test.h"
#include "util/util.h"

static double SCR[2 * 4096];   /* bn_forward_train's moments: (B, C, 2), B·C <= 4096 here */

#define EPS 1e-2f
#define TOL(g) (2e-3 + 0.02 * fabs(g))

static rng_t R;

static void fill(float *x, long n, float lo, float hi)
{
    for (long i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)rng_uniform(&R);
}

static double dotd(const float *a, const float *b, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* ---------------- batch normalization ---------------- */
enum { BB = 3, BC = 2, BHW = 5, BN_N = BB * BC * BHW };

typedef struct bn_ctx {
    float x[BN_N], g[BC], b[BC], r[BN_N], out[BN_N];
    float mean[BC], istd[BC], rm[BC], rv[BC];
    int relu;
} bn_ctx_t;

static double bn_cb(void *p)
{
    bn_ctx_t *c = p;
    bn_forward_train(c->out, c->mean, c->istd, c->rm, c->rv, c->x, c->g, c->b, NULL, SCR, BB, BC, BHW, c->relu, 0.1f, 1e-5f, NULL, NULL);
    return dotd(c->out, c->r, BN_N);
}

/* 1 if perturbing v[i] by ±EPS moves some fused-ReLU input across 0 */
static int crosses_kink(bn_ctx_t *c, float *v, long i)
{
    float keep = v[i], lo[BN_N], hi[BN_N];
    int relu = c->relu;
    c->relu = 0;
    v[i] = keep - EPS; bn_cb(c); memcpy(lo, c->out, sizeof lo);
    v[i] = keep + EPS; bn_cb(c); memcpy(hi, c->out, sizeof hi);
    v[i] = keep;
    c->relu = relu;
    for (int k = 0; k < BN_N; k++)
        if ((lo[k] > 0) != (hi[k] > 0) || fabsf(lo[k]) < 1e-3f || fabsf(hi[k]) < 1e-3f) return 1;
    return 0;
}

static int check_fd(bn_ctx_t *c, float *v, long n, const float *analytic, const char *what)
{
    int checked = 0;
    for (long i = 0; i < n; i++) {
        if (c->relu && crosses_kink(c, v, i)) continue;
        float keep = v[i];
        v[i] = keep + EPS; double fp = bn_cb(c);
        v[i] = keep - EPS; double fm = bn_cb(c);
        v[i] = keep;
        double fd = (fp - fm) / (2.0 * EPS);
        CHECK(fabs(fd - analytic[i]) <= TOL(fd), "%s[%ld]: analytic %.6g vs finite difference %.6g", what, i, analytic[i], fd);
        checked++;
    }
    return checked;
}

static void bn_case(int relu)
{
    bn_ctx_t c;
    memset(&c, 0, sizeof c);
    c.relu = relu;
    fill(c.x, BN_N, -2, 3);
    fill(c.g, BC, 0.5f, 1.5f);
    fill(c.b, BC, -0.5f, 0.5f);
    fill(c.r, BN_N, -1, 1);
    bn_cb(&c);
    float dx[BN_N], dg[BC], db[BC];
    bn_backward(dx, dg, db, c.r, c.x, c.mean, c.istd, c.g, c.b, SCR, BB, BC, BHW, relu, NULL, NULL);
    int n = check_fd(&c, c.x, BN_N, dx, relu ? "bn+relu dinp" : "bn dinp");
    n += check_fd(&c, c.g, BC, dg, relu ? "bn+relu dgamma" : "bn dgamma");
    n += check_fd(&c, c.b, BC, db, relu ? "bn+relu dbeta" : "bn dbeta");
    CHECK(n >= BN_N / 2, "only %d of %d values could be checked away from the ReLU's kink", n, BN_N + 2 * BC);
}

static void test_bn_gradients(void)
{
    bn_case(0);
    bn_case(1);
}

/* The fused ReLU's mask in backward is recomputed from the input: with a
 * gradient of ones, dβ counts the outputs the forward pass let through,
 * exactly, on a large batch whose values cluster at the kink. */
static void test_bn_relu_mask(void)
{
    enum { MB = 8, MC = 3, MHW = 300, MN = MB * MC * MHW };
    float *x = xalloc_floats(MN), *y = xalloc_floats(MN), *ones = xalloc_floats(MN), *dx = xalloc_floats(MN);
    float g[MC], b[MC], mean[MC], istd[MC], rm[MC] = { 0 }, rv[MC] = { 1, 1, 1 }, dg[MC], db[MC];
    fill(x, MN, -1e-3f, 1e-3f);
    for (long i = 0; i < MN; i += 7) x[i] = 0.0f;
    fill(g, MC, 0.5f, 1.5f);
    for (int c = 0; c < MC; c++) b[c] = 0.0f;
    for (long i = 0; i < MN; i++) ones[i] = 1.0f;
    bn_forward_train(y, mean, istd, rm, rv, x, g, b, NULL, SCR, MB, MC, MHW, 1, 0.1f, 1e-5f, NULL, NULL);
    bn_backward(dx, dg, db, ones, x, mean, istd, g, b, SCR, MB, MC, MHW, 1, NULL, NULL);
    for (int c = 0; c < MC; c++) {
        long pass = 0;
        for (int bb = 0; bb < MB; bb++)
            for (int i = 0; i < MHW; i++) pass += y[((long)bb * MC + c) * MHW + i] > 0.0f;
        CHECK(db[c] == (float)pass, "channel %d: dbeta %.1f, but the forward pass let %ld values through", c, db[c], pass);
    }
    free(x); free(y); free(ones); free(dx);
}

/* One channel, x = 1, 2, 3, 4 (B = 4, HW = 1): mean 2.5, biased variance
 * 1.25, unbiased 5/3. Running statistics from 0 and 1 with momentum 0.1:
 * 0.25 and 0.9 + 0.1·5/3. With γ = 2, β = 1: y = 2(x − 2.5)/√(1.25 + ε) + 1.
 * dout = (1, 0, 0, 0): dβ = 1, dγ = x̂₀, and
 * dx = γ/σ·(g − 1/4 − x̂·x̂₀/4). Evaluation mode normalizes by the running
 * statistics instead. */
static void test_bn_closed_form(void)
{
    const float x[4] = { 1, 2, 3, 4 }, g = 2, b = 1, eps = 1e-5f;
    float out[4], mean, istd, rm = 0, rv = 1;
    bn_forward_train(out, &mean, &istd, &rm, &rv, x, &g, &b, NULL, SCR, 4, 1, 1, 0, 0.1f, eps, NULL, NULL);
    const double sd = sqrt(1.25 + 1e-5);
    CHECK_NEAR(mean, 2.5, 1e-6, "batch mean");
    CHECK_NEAR(istd, 1 / sd, 1e-6, "1/sigma");
    CHECK_NEAR(rm, 0.25, 1e-7, "running mean");
    CHECK_NEAR(rv, 0.9 + 0.1 * 5.0 / 3.0, 1e-6, "running variance (unbiased)");
    for (int i = 0; i < 4; i++) CHECK_NEAR(out[i], 2 * (x[i] - 2.5) / sd + 1, 1e-5, "normalized output");
    const float dout[4] = { 1, 0, 0, 0 };
    float dx[4], dg, db;
    bn_backward(dx, &dg, &db, dout, x, &mean, &istd, &g, &b, SCR, 4, 1, 1, 0, NULL, NULL);
    double xh[4];
    for (int i = 0; i < 4; i++) xh[i] = (x[i] - 2.5) / sd;
    CHECK_NEAR(db, 1, 1e-6, "dbeta");
    CHECK_NEAR(dg, xh[0], 1e-5, "dgamma");
    for (int i = 0; i < 4; i++) CHECK_NEAR(dx[i], g / sd * ((i == 0) - 0.25 - xh[i] * xh[0] / 4), 1e-5, "dinp");
    float ev[4];
    bn_forward_eval(ev, &rm, &rv, x, &g, &b, 4, 1, 1, 1, eps, NULL);
    for (int i = 0; i < 4; i++) {
        double want = 2 * (x[i] - 0.25) / sqrt(rv + 1e-5) + 1;
        CHECK_NEAR(ev[i], want > 0 ? want : 0, 1e-5, "evaluation with running statistics and ReLU");
    }
    /* a large mean: the two-pass variance keeps the small spread */
    const float big[4] = { 1000.001f, 1000.002f, 1000.003f, 1000.004f };
    bn_forward_train(out, &mean, &istd, &rm, &rv, big, &g, &b, NULL, SCR, 4, 1, 1, 0, 0.1f, 0.0f, NULL, NULL);
    double m4 = 0, v4 = 0;
    for (int i = 0; i < 4; i++) m4 += big[i] / 4.0;
    for (int i = 0; i < 4; i++) v4 += (big[i] - m4) * (big[i] - m4) / 4.0;
    CHECK_NEAR(istd, 1 / sqrt(v4), 0.01 / sqrt(v4), "1/sigma next to a large mean");
}

/* ---------------- batch normalization over replicas (--sync-bn) ----------------
 * Two replicas, played in one process: a gather that records what a replica
 * sends (and answers with it alone), and one that answers with the other
 * replica's recorded message after this one's. Replica 1 then computes with
 * the union's statistics, and must match one batch made of both replicas'
 * samples: its half of the output, the same mean, 1/σ and running
 * statistics, its half of the input gradient; and dγ, dβ summed over the
 * replicas equal the whole batch's. */
enum { SB = 3, SC = 2, SHW = 5, SN = SB * SC * SHW, SW = 2 * SC + 1 };

typedef struct script {
    int replay;         /* 0: record mine; 1: answer (mine, other) */
    double other[SW], sent[SW];
} script_t;

static int script_gather(void *ctx, const double *mine, double *all, int n)
{
    script_t *s = ctx;
    memcpy(s->sent, mine, sizeof(double) * (size_t)n);
    memcpy(all, mine, sizeof(double) * (size_t)n);
    if (!s->replay) return 1;
    memcpy(all + n, s->other, sizeof(double) * (size_t)n);
    return 2;
}

/* the samples of both replicas as one batch: (2·SB, SC, SHW) */
static void join(float *whole, const float *a, const float *b)
{
    memcpy(whole, a, sizeof(float) * SN);
    memcpy(whole + SN, b, sizeof(float) * SN);
}

static void sync_case(int relu)
{
    float x1[SN], x2[SN], d1[SN], d2[SN], g[SC], b[SC];
    fill(x1, SN, -2, 3);
    fill(x2, SN, -1, 5);    /* a shifted batch: the replicas' means differ */
    fill(d1, SN, -1, 1);
    fill(d2, SN, -1, 1);
    fill(g, SC, 0.5f, 1.5f);
    fill(b, SC, -0.5f, 0.5f);
    double mine[SW], all[2 * SW];
    script_t sc = { 0 };
    bn_sync_t sync = { .gather = script_gather, .ctx = &sc, .mine = mine, .all = all };

    /* the whole batch, on its own */
    float x[2 * SN], d[2 * SN], out[2 * SN], dx[2 * SN], mean[SC], istd[SC], rm[SC] = { 0 }, rv[SC] = { 1, 1 }, dg[SC], db[SC];
    join(x, x1, x2);
    join(d, d1, d2);
    bn_forward_train(out, mean, istd, rm, rv, x, g, b, NULL, SCR, 2 * SB, SC, SHW, relu, 0.1f, 1e-5f, NULL, NULL);
    bn_backward(dx, dg, db, d, x, mean, istd, g, b, SCR, 2 * SB, SC, SHW, relu, NULL, NULL);

    /* replica 2's forward message, then replica 1 with it */
    float o1[SN], o2[SN], m1[SC], s1[SC], m2[SC], s2[SC], rm1[SC] = { 0 }, rv1[SC] = { 1, 1 }, rm2[SC] = { 0 }, rv2[SC] = { 1, 1 };
    bn_forward_train(o2, m2, s2, rm2, rv2, x2, g, b, NULL, SCR, SB, SC, SHW, relu, 0.1f, 1e-5f, &sync, NULL);
    double fwd2[SW];
    memcpy(fwd2, sc.sent, sizeof fwd2);
    sc.replay = 1;
    memcpy(sc.other, fwd2, sizeof fwd2);
    bn_forward_train(o1, m1, s1, rm1, rv1, x1, g, b, NULL, SCR, SB, SC, SHW, relu, 0.1f, 1e-5f, &sync, NULL);
    double fwd1[SW];
    memcpy(fwd1, sc.sent, sizeof fwd1);
    for (int c = 0; c < SC; c++) {
        CHECK_NEAR(m1[c], mean[c], 1e-5, "synchronized batch mean");
        CHECK_NEAR(s1[c], istd[c], 1e-5 * istd[c], "synchronized 1/sigma");
        CHECK_NEAR(rm1[c], rm[c], 1e-6, "synchronized running mean");
        CHECK_NEAR(rv1[c], rv[c], 1e-5, "synchronized running variance (unbiased over both batches)");
    }
    for (int i = 0; i < SN; i++) CHECK_NEAR(o1[i], out[i], 1e-5, "synchronized output of replica 1");

    /* replica 2 again, answered with replica 1's message; then backward:
     * replica 2 records, replica 1 is answered with it */
    sc.replay = 1;
    memcpy(sc.other, fwd1, sizeof fwd1);
    bn_forward_train(o2, m2, s2, rm2, rv2, x2, g, b, NULL, SCR, SB, SC, SHW, relu, 0.1f, 1e-5f, &sync, NULL);
    for (int i = 0; i < SN; i++) CHECK_NEAR(o2[i], out[SN + i], 1e-5, "synchronized output of replica 2");
    float dx1[SN], dx2[SN], dg1[SC], db1[SC], dg2[SC], db2[SC];
    sc.replay = 0;
    bn_backward(dx2, dg2, db2, d2, x2, m2, s2, g, b, SCR, SB, SC, SHW, relu, &sync, NULL);
    double bwd2[SW];
    memcpy(bwd2, sc.sent, sizeof bwd2);
    sc.replay = 1;
    memcpy(sc.other, bwd2, sizeof bwd2);
    bn_backward(dx1, dg1, db1, d1, x1, m1, s1, g, b, SCR, SB, SC, SHW, relu, &sync, NULL);
    for (int i = 0; i < SN; i++) CHECK_NEAR(dx1[i], dx[i], 1e-5, "synchronized input gradient of replica 1");
    for (int c = 0; c < SC; c++) {
        CHECK_NEAR(dg1[c] + dg2[c], dg[c], 1e-5, "dgamma summed over the replicas");
        CHECK_NEAR(db1[c] + db2[c], db[c], 1e-5, "dbeta summed over the replicas");
    }
}

static void test_bn_sync(void)
{
    sync_case(0);
    sync_case(1);
}

/* one replica: the union is this batch */
static int alone_gather(void *ctx, const double *mine, double *all, int n)
{
    (void)ctx;
    memcpy(all, mine, sizeof(double) * (size_t)n);
    return 1;
}

/* Planes too large for the cache: bn_backward takes a few channels at a
 * time, sums then input gradient (here 3 + 3 + 1). The same bits as the
 * two passes over every channel that a synchronized normalization takes,
 * here with one replica. */
static void pieces_case(int relu)
{
    enum { PB = 4, PC = 7, PHW = 4099, PN = PB * PC * PHW };
    float *x = xalloc_floats(PN), *d = xalloc_floats(PN), *y = xalloc_floats(PN), *dx1 = xalloc_floats(PN),
          *dx2 = xalloc_floats(PN);
    float g[PC], b[PC], mean[PC], istd[PC], rm[PC] = { 0 }, rv[PC], dg1[PC], db1[PC], dg2[PC], db2[PC];
    for (int c = 0; c < PC; c++) rv[c] = 1.0f;
    fill(x, PN, -2, 3); fill(d, PN, -1, 1); fill(g, PC, 0.5f, 1.5f); fill(b, PC, -0.5f, 0.5f);
    double mine[2 * PC + 1], all[2 * PC + 1];
    bn_sync_t sync = { .gather = alone_gather, .mine = mine, .all = all };
    bn_forward_train(y, mean, istd, rm, rv, x, g, b, NULL, SCR, PB, PC, PHW, relu, 0.1f, 1e-5f, NULL, NULL);
    bn_backward(dx1, dg1, db1, d, x, mean, istd, g, b, SCR, PB, PC, PHW, relu, NULL, NULL);
    bn_backward(dx2, dg2, db2, d, x, mean, istd, g, b, SCR, PB, PC, PHW, relu, &sync, NULL);
    CHECK(!memcmp(dx1, dx2, sizeof(float) * PN), "relu %d: input gradient by pieces differs", relu);
    CHECK(!memcmp(dg1, dg2, sizeof dg1) && !memcmp(db1, db2, sizeof db1), "relu %d: dγ, dβ by pieces differ", relu);
    free(x); free(d); free(y); free(dx1); free(dx2);
}

static void test_bn_pieces(void)
{
    pieces_case(0);
    pieces_case(1);
}

/* ---------------- pooling, add, convolution without bias ---------------- */
static void test_gap_add(void)
{
    enum { B = 2, C = 3, HW = 4 };
    float x[B * C * HW], out[B * C], dout[B * C], dx[B * C * HW];
    fill(x, B * C * HW, -1, 1);
    fill(dout, B * C, -1, 1);
    gap_forward(out, x, B, C, HW);
    gap_backward(dx, dout, B, C, HW);
    for (int bc = 0; bc < B * C; bc++) {
        double s = 0;
        for (int i = 0; i < HW; i++) s += x[bc * HW + i];
        CHECK_NEAR(out[bc], s / HW, 1e-6, "average");
        for (int i = 0; i < HW; i++) CHECK_NEAR(dx[bc * HW + i], dout[bc] / HW, 1e-7, "average's gradient");
    }
    float a[6] = { 1, -2, 0.5f, -0.1f, 3, -3 }, b[6] = { 0.5f, 1, -1, 0.2f, -4, 1 }, s[6], ds[6];
    const float d[6] = { 1, 2, 3, 4, 5, 6 };
    add_forward(s, a, b, 6, 1);
    add_backward(ds, d, s, 6, 1);
    for (int i = 0; i < 6; i++) {
        float v = a[i] + b[i];
        CHECK_NEAR(s[i], v > 0 ? v : 0, 0, "add + relu");
        CHECK_NEAR(ds[i], v > 0 ? d[i] : 0, 0, "add + relu gradient");
    }
}

/* A convolution without bias (b = db = NULL) is the one with zero bias,
 * for the im2col path (C > 1: stride 2, padding 1, as in the residual
 * network's downsampling) and the direct one (C = 1: its stem). */
static void nobias_case(int C, int stride)
{
    conv_geom_t g = { .B = 2, .C = C, .H = 9, .W = 9, .OC = 4, .KH = 3, .KW = 3, .stride = stride, .pad = 1 };
    CHECK(conv_geom_init(&g) == 0, "geometry");
    const long nx = (long)g.B * C * 81, nw = 4L * C * 9, no = (long)g.B * 4 * g.OH * g.OW;
    float *x = xalloc_floats(nx), *w = xalloc_floats(nw), *zero = xcalloc(4, sizeof(float)), *dout = xalloc_floats(no);
    float *o1 = xalloc_floats(no), *o2 = xalloc_floats(no), *col = xalloc_floats(conv_col_size(&g));
    float *dx1 = xalloc_floats(nx), *dx2 = xalloc_floats(nx), *dw1 = xalloc_floats(nw), *dw2 = xalloc_floats(nw), db[4];
    fill(x, nx, -1, 1); fill(w, nw, -1, 1); fill(dout, no, -1, 1);
    conv2d_forward(o1, col, x, w, zero, &g);
    conv2d_backward(dx1, dw1, db, col, dout, w, &g);
    conv2d_forward(o2, col, x, w, NULL, &g);
    conv2d_backward(dx2, dw2, NULL, col, dout, w, &g);
    CHECK(!memcmp(o1, o2, sizeof(float) * (size_t)no), "C=%d stride %d: outputs differ without bias", C, stride);
    CHECK(!memcmp(dx1, dx2, sizeof(float) * (size_t)nx), "C=%d stride %d: input gradients differ", C, stride);
    CHECK(!memcmp(dw1, dw2, sizeof(float) * (size_t)nw), "C=%d stride %d: weight gradients differ", C, stride);
    free(x); free(w); free(zero); free(dout); free(o1); free(o2); free(col); free(dx1); free(dx2); free(dw1); free(dw2);
}

static void test_conv_without_bias(void)
{
    nobias_case(3, 2);
    nobias_case(3, 1);
    nobias_case(1, 1);
}

/* The moments a convolution takes of its output planes as it writes them
 * are the ones batch normalization would take itself: the same
 * normalization to the bit, on every path (flat: stride 1 with same
 * padding; im2col: stride 2; direct: one input channel). */
static void moments_case(int C, int stride, int relu)
{
    conv_geom_t g = { .B = 3, .C = C, .H = 10, .W = 10, .OC = 5, .KH = 3, .KW = 3, .stride = stride, .pad = 1 };
    CHECK(conv_geom_init(&g) == 0, "geometry");
    const long nx = (long)g.B * C * 100, nw = 5L * C * 9, HW = (long)g.OH * g.OW, no = g.B * 5 * HW;
    float *x = xalloc_floats(nx), *w = xalloc_floats(nw), *o = xalloc_floats(no), *y1 = xalloc_floats(no),
          *y2 = xalloc_floats(no);
    float *pad = xalloc_floats(conv_pad_size(&g)), *work = xalloc_floats(conv_col_size(&g) - conv_pad_size(&g));
    double *mom = xmalloc(sizeof(double) * 2 * 15);
    float gm[5], bt[5], mu1[5], is1[5], mu2[5], is2[5], rm1[5] = { 0 }, rv1[5] = { 1, 1, 1, 1, 1 }, rm2[5] = { 0 },
          rv2[5] = { 1, 1, 1, 1, 1 };
    fill(x, nx, -1, 2); fill(w, nw, -1, 1); fill(gm, 5, 0.5f, 1.5f); fill(bt, 5, -0.5f, 0.5f);
    conv2d_forward_ws(o, pad, work, x, w, NULL, mom, &g);
    bn_forward_train(y1, mu1, is1, rm1, rv1, o, gm, bt, mom, SCR, g.B, 5, (int)HW, relu, 0.1f, 1e-5f, NULL, NULL);
    bn_forward_train(y2, mu2, is2, rm2, rv2, o, gm, bt, NULL, SCR, g.B, 5, (int)HW, relu, 0.1f, 1e-5f, NULL, NULL);
    CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)no) && !memcmp(mu1, mu2, sizeof mu1) && !memcmp(is1, is2, sizeof is1) &&
              !memcmp(rv1, rv2, sizeof rv1),
          "C=%d stride %d: the convolution's moments normalize differently from batch normalization's own", C, stride);
    free(x); free(w); free(o); free(y1); free(y2); free(pad); free(work); free(mom);
}

static void test_conv_moments(void)
{
    moments_case(4, 1, 1);
    moments_case(4, 2, 0);
    moments_case(1, 1, 1);
}

/* Batch normalization's input gradient written straight into the padded
 * output gradient of the convolution below (conv2d_dout_padded) gives that
 * convolution's backward pass the bits it computes from the gradient as it
 * is, and a bias gradient equal up to summation order. Rows shorter than
 * bn.c's block of rows (10), a block holding 3 rows of 300, and rows longer
 * than the block (1100); stride 2 pads nothing for a producer. */
static void into_conv_case(int B, int H, int W, int relu)
{
    conv_geom_t g = { .B = B, .C = 2, .H = H, .W = W, .OC = 3, .KH = 3, .KW = 3, .stride = 1, .pad = 1 };
    CHECK(conv_geom_init(&g) == 0, "geometry");
    const long HW = (long)H * W, nx = (long)B * 2 * HW, no = (long)B * 3 * HW, nw = 3L * 2 * 9;
    float *x = xalloc_floats(nx), *w = xalloc_floats(nw), *b = xalloc_floats(3), *o = xalloc_floats(no),
          *y = xalloc_floats(no), *r = xalloc_floats(no), *dy = xalloc_floats(no);
    float *dx1 = xalloc_floats(nx), *dx2 = xalloc_floats(nx), *dw1 = xalloc_floats(nw), *dw2 = xalloc_floats(nw);
    float *pad = xalloc_floats(conv_pad_size(&g)), *work = xalloc_floats(conv_col_size(&g) - conv_pad_size(&g));
    double *scr = xmalloc(sizeof(double) * 2 * (size_t)(B * 3 > 3 ? B * 3 : 3));
    float gm[3], bt[3], mu[3], is[3], rm[3] = { 0 }, rv[3] = { 1, 1, 1 }, dg1[3], db1[3], dg2[3], db2[3], cb1[3], cb2[3];
    fill(x, nx, -1, 1); fill(w, nw, -1, 1); fill(b, 3, -1, 1); fill(r, no, -1, 1);
    fill(gm, 3, 0.5f, 1.5f); fill(bt, 3, -0.5f, 0.5f);
    conv2d_forward_ws(o, pad, work, x, w, b, NULL, &g);
    bn_forward_train(y, mu, is, rm, rv, o, gm, bt, NULL, scr, B, 3, (int)HW, relu, 0.1f, 1e-5f, NULL, NULL);
    bn_backward(dy, dg1, db1, r, o, mu, is, gm, bt, scr, B, 3, (int)HW, relu, NULL, NULL);
    conv2d_backward_ws(dx1, dw1, cb1, pad, work, dy, w, &g);
    plane_pad_t pp;
    float *D = conv2d_dout_padded(&pp, work, &g);
    CHECK(D != NULL, "%dx%d: the flat path takes no padded output gradient", H, W);
    if (D) {
        bn_backward(D, dg2, db2, r, o, mu, is, gm, bt, scr, B, 3, (int)HW, relu, NULL, &pp);
        conv2d_backward_ws(dx2, dw2, cb2, pad, work, NULL, w, &g);
        CHECK(!memcmp(dg1, dg2, sizeof dg1) && !memcmp(db1, db2, sizeof db1), "%dx%d: dγ, dβ differ", H, W);
        CHECK(!memcmp(dx1, dx2, sizeof(float) * (size_t)nx), "%dx%d relu %d: input gradients differ", H, W, relu);
        CHECK(!memcmp(dw1, dw2, sizeof(float) * (size_t)nw), "%dx%d relu %d: weight gradients differ", H, W, relu);
        for (int c = 0; c < 3; c++)
            CHECK(fabsf(cb1[c] - cb2[c]) <= 1e-4f * (1 + fabsf(cb1[c])), "%dx%d: bias gradient %g against %g", H, W,
                  cb2[c], cb1[c]);
    }
    conv_geom_t g2 = g;
    g2.stride = 2;
    CHECK(conv_geom_init(&g2) == 0 && conv2d_dout_padded(&pp, work, &g2) == NULL,
          "stride 2: a padded output gradient offered");
    free(x); free(w); free(b); free(o); free(y); free(r); free(dy); free(dx1); free(dx2); free(dw1); free(dw2);
    free(pad); free(work); free(scr);
}

static void test_bn_into_conv(void)
{
    into_conv_case(3, 10, 10, 1);
    into_conv_case(2, 7, 300, 0);
    into_conv_case(1, 2, 1100, 1);
}

/* Batch normalization written straight into the padded input of the
 * convolution above it (conv2d_in_padded) gives that convolution the
 * output it computes from the normalization's output as it is, and the
 * same gradients, bit for bit: in training and in evaluation, on every
 * path (flat: stride 1 with same padding; im2col: stride 2; direct: one
 * channel), with rows shorter and longer than a vector. */
static void feeds_conv_case(int C, int H, int W, int K, int stride, int relu, int training)
{
    const int B = 2, OC = 3;
    conv_geom_t g = { .B = B, .C = C, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .stride = stride, .pad = K / 2 };
    CHECK(conv_geom_init(&g) == 0, "geometry");
    const long HW = (long)H * W, nx = (long)B * C * HW, no = (long)B * OC * g.OH * g.OW, nw = (long)OC * C * K * K;
    float *x = xalloc_floats(nx), *y = xalloc_floats(nx), *w = xalloc_floats(nw), *o1 = xalloc_floats(no),
          *o2 = xalloc_floats(no), *dy = xalloc_floats(no), *dx1 = xalloc_floats(nx), *dx2 = xalloc_floats(nx),
          *dw1 = xalloc_floats(nw), *dw2 = xalloc_floats(nw);
    float *pad1 = xalloc_floats(conv_pad_size(&g)), *pad2 = xalloc_floats(conv_pad_size(&g)),
          *work = xalloc_floats(conv_col_size(&g) - conv_pad_size(&g));
    double *scr = xmalloc(sizeof(double) * 2 * (size_t)(B * C));
    float gm[8], bt[8], mu[8], is[8], rm[8] = { 0 }, rv[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, rm2[8] = { 0 },
          rv2[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    fill(x, nx, -1, 2); fill(w, nw, -1, 1); fill(dy, no, -1, 1); fill(gm, C, 0.5f, 1.5f); fill(bt, C, -0.5f, 0.5f);
    for (long i = 0; i < conv_pad_size(&g); i++) pad2[i] = 7.0f;   /* what the producer must overwrite or zero */
    plane_pad_t pp;
    if (!conv2d_in_padded(&pp, &g)) {   /* a 1x1 convolution at stride 2 keeps its input subsampled */
        CHECK(K == 1 && stride > 1, "C=%d %dx%d stride %d: no padded input offered", C, K, K, stride);
        goto done;
    }
    if (training) {
        bn_forward_train(y, mu, is, rm, rv, x, gm, bt, NULL, scr, B, C, (int)HW, relu, 0.1f, 1e-5f, NULL, NULL);
        bn_forward_train(pad2, mu, is, rm2, rv2, x, gm, bt, NULL, scr, B, C, (int)HW, relu, 0.1f, 1e-5f, NULL, &(bn_out_t){ .pad = &pp });
    } else {
        bn_forward_eval(y, rm, rv, x, gm, bt, B, C, (int)HW, relu, 1e-5f, NULL);
        bn_forward_eval(pad2, rm, rv, x, gm, bt, B, C, (int)HW, relu, 1e-5f, &(bn_out_t){ .pad = &pp });
    }
    conv2d_forward_ws(o1, pad1, work, y, w, NULL, NULL, &g);
    conv2d_forward_ws(o2, pad2, work, NULL, w, NULL, NULL, &g);
    CHECK(!memcmp(o1, o2, sizeof(float) * (size_t)no), "C=%d %dx%d stride %d relu %d training %d: outputs differ", C, H,
          W, stride, relu, training);
    conv2d_backward_ws(dx1, dw1, NULL, pad1, work, dy, w, &g);
    conv2d_backward_ws(dx2, dw2, NULL, pad2, work, dy, w, &g);
    CHECK(!memcmp(dx1, dx2, sizeof(float) * (size_t)nx) && !memcmp(dw1, dw2, sizeof(float) * (size_t)nw),
          "C=%d %dx%d stride %d: gradients differ", C, H, W, stride);
done:
    free(x); free(y); free(w); free(o1); free(o2); free(dy); free(dx1); free(dx2); free(dw1); free(dw2);
    free(pad1); free(pad2); free(work); free(scr);
}

static void test_bn_feeds_conv(void)
{
    for (int relu = 0; relu < 2; relu++)
        for (int training = 0; training < 2; training++) {
            feeds_conv_case(4, 7, 7, 3, 1, relu, training);     /* flat, rows shorter than a vector */
            feeds_conv_case(3, 5, 37, 3, 1, relu, training);    /* flat, rows of several vectors */
            feeds_conv_case(4, 10, 9, 3, 2, relu, training);    /* im2col */
            feeds_conv_case(1, 11, 20, 3, 1, relu, training);   /* direct */
            feeds_conv_case(4, 10, 9, 1, 2, relu, training);    /* subsampled: none offered */
        }
}

/* A normalization with the residual add above it fused (bn_out_t.add):
 * the bits of the normalization, then add_forward, with and without the
 * add's ReLU, in training and evaluation */
static void test_bn_into_add(void)
{
    enum { AB = 5, AC = 6, AHW = 49 };
    const long n = (long)AB * AC * AHW;
    float *x = xalloc_floats(n), *a = xalloc_floats(n), *y = xalloc_floats(n), *s1 = xalloc_floats(n),
          *s2 = xalloc_floats(n);
    double *scr = xmalloc(sizeof(double) * 2 * AB * AC);
    float gm[AC], bt[AC], mu[AC], is[AC], rm[AC] = { 0 }, rv[AC], rm2[AC] = { 0 }, rv2[AC];
    fill(x, n, -1, 2); fill(a, n, -1, 1); fill(gm, AC, 0.5f, 1.5f); fill(bt, AC, -0.5f, 0.5f);
    for (int c = 0; c < AC; c++) rv[c] = rv2[c] = 1.0f;
    for (int relu = 0; relu < 2; relu++)
        for (int training = 0; training < 2; training++) {
            /* and the add's output padded for a 3x3 convolution above it
             * (7x7: flat rows of 8), written as well */
            conv_geom_t g = { .B = AB, .C = AC, .H = 7, .W = 7, .OC = 2, .KH = 3, .KW = 3, .stride = 1, .pad = 1 };
            plane_pad_t pp;
            CHECK(conv_geom_init(&g) == 0 && conv2d_in_padded(&pp, &g), "a 3x3 convolution takes its input padded");
            const long np = (long)AB * AC * pp.HP * pp.WP;
            float *padded = xalloc_floats(np), *want = xalloc_floats(np);
            for (long i = 0; i < np; i++) padded[i] = want[i] = 1e9f;   /* every place must be written */
            const bn_out_t o = { .add = a, .also = padded, .also_pad = &pp };
            if (training) {
                bn_forward_train(y, mu, is, rm, rv, x, gm, bt, NULL, scr, AB, AC, AHW, 0, 0.1f, 1e-5f, NULL, NULL);
                bn_forward_train(s2, mu, is, rm2, rv2, x, gm, bt, NULL, scr, AB, AC, AHW, relu, 0.1f, 1e-5f, NULL, &o);
            } else {
                bn_forward_eval(y, rm, rv, x, gm, bt, AB, AC, AHW, 0, 1e-5f, NULL);
                bn_forward_eval(s2, rm, rv, x, gm, bt, AB, AC, AHW, relu, 1e-5f, &o);
            }
            add_forward(s1, y, a, n, relu);
            CHECK(!memcmp(s1, s2, sizeof(float) * (size_t)n), "relu %d training %d: the fused add differs", relu, training);
            CHECK(!memcmp(rm, rm2, sizeof rm) && !memcmp(rv, rv2, sizeof rv), "relu %d: running statistics differ", relu);
            for (long q = 0; q < (long)AB * AC; q++)
                for (long r = 0; r < pp.HP; r++)
                    for (long c = 0; c < pp.WP; c++) {
                        const long ir = r - pp.pad, ic = c - pp.pad;
                        want[(q * pp.HP + r) * pp.WP + c] =
                            ir >= 0 && ir < pp.H && ic >= 0 && ic < pp.W ? s1[q * AHW + ir * pp.W + ic] : 0.0f;
                    }
            CHECK(!memcmp(padded, want, sizeof(float) * (size_t)np), "relu %d training %d: the padded copy differs",
                  relu, training);
            free(padded); free(want);
        }
    free(x); free(a); free(y); free(s1); free(s2); free(scr);
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    rng_seed(&R, 7, 0);
    RUN(test_bn_gradients);
    RUN(test_bn_relu_mask);
    RUN(test_bn_closed_form);
    RUN(test_bn_sync);
    RUN(test_bn_pieces);
    RUN(test_gap_add);
    RUN(test_conv_without_bias);
    RUN(test_conv_moments);
    RUN(test_bn_into_conv);
    RUN(test_bn_feeds_conv);
    RUN(test_bn_into_add);
    return TEST_END("test_bn");
}
