/* conv2d with every vector kernel set this CPU can run (the baseline one
 * always, x86-64-v3 and -v4 where present), not only the one the library
 * picks, against a double-precision direct convolution and its gradients.
 * Includes conv.c to reach the sets.
 *
 * Tolerance: every compared value is a float sum of at most n products of
 * magnitude <= 1 (n = C·K² for out, B·OH·OW for dw and db, OC·K² for dinp);
 * float rounding adds at most ~n·6e-8 per term order; 1e-6·n + 1e-5 leaves
 * room for reassociation and FMA. */
#include "nn/conv.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "util/util.h"

static rng_t R;

static void fill(float *x, long n)
{
    for (long i = 0; i < n; i++) x[i] = (float)(2.0 * rng_uniform(&R) - 1.0);
}

static double max_diff(const float *a, const double *ref, long n)
{
    double m = 0;
    for (long i = 0; i < n; i++) m = fmax(m, fabs(a[i] - ref[i]));
    return m;
}

static void conv_set_case(const conv_kernels_t *k, const char *set, int B, int C, int H, int W,
                          int OC, int K, int s, int p)
{
    conv_geom_t g = { .B = B, .C = C, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .stride = s, .pad = p };
    CHECK(conv_geom_init(&g) == 0, "geometry");
    const int OH = g.OH, OW = g.OW;
    const long nx = (long)B * C * H * W, nw = (long)OC * C * K * K, no = (long)B * OC * OH * OW;
    float *x = xalloc_floats(nx), *w = xalloc_floats(nw), *b = xalloc_floats(OC), *dout = xalloc_floats(no);
    float *out = xalloc_floats(no), *col = xalloc_floats(conv_col_size(&g));
    float *dx = xalloc_floats(nx), *dw = xalloc_floats(nw), *db = xalloc_floats(OC);
    double *rout = xcalloc((size_t)no, sizeof(double)), *rdx = xcalloc((size_t)nx, sizeof(double));
    double *rdw = xcalloc((size_t)nw, sizeof(double)), *rdb = xcalloc((size_t)OC, sizeof(double));
    fill(x, nx); fill(w, nw); fill(b, OC); fill(dout, no);
    for (int i = 0; i < B; i++)
        for (int oc = 0; oc < OC; oc++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    const long o = (((long)i * OC + oc) * OH + oh) * OW + ow;
                    rout[o] = b[oc];
                    rdb[oc] += dout[o];
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < K; ki++)
                            for (int kj = 0; kj < K; kj++) {
                                const int ih = oh * s - p + ki, iw = ow * s - p + kj;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                const long xi = (((long)i * C + c) * H + ih) * W + iw;
                                const long wi = (((long)oc * C + c) * K + ki) * K + kj;
                                rout[o] += (double)w[wi] * x[xi];
                                rdw[wi] += (double)dout[o] * x[xi];
                                rdx[xi] += (double)dout[o] * w[wi];
                            }
                }
    conv2d_forward_with(k, out, col, col + conv_pad_size(&g), x, w, b, NULL, &g);
    conv2d_backward_with(k, dx, dw, db, col, col + conv_pad_size(&g), dout, w, &g, 0);
    const double e_out = max_diff(out, rout, no), e_dw = max_diff(dw, rdw, nw);
    const double e_db = max_diff(db, rdb, OC), e_dx = max_diff(dx, rdx, nx);
    const double t_out = 1e-6 * C * K * K + 1e-5, t_w = 1e-6 * B * OH * OW + 1e-5;
    const double t_dx = 1e-6 * OC * K * K + 1e-5;
    CHECK(e_out < t_out && e_dw < t_w && e_db < t_w && e_dx < t_dx,
          "%s set, B%d C%d %dx%d OC%d k%d s%d p%d: out %g dw %g db %g dinp %g", set, B, C, H, W,
          OC, K, s, p, e_out, e_dw, e_db, e_dx);
    if (conv_layout(&g).wino) {
        /* the input gradient added to what dinp holds: the bits of adding
         * it afterwards, and nothing else changed (the vector stores that
         * run past a row must leave the next row's values) */
        float *acc = xalloc_floats(nx), *want = xalloc_floats(nx);
        fill(acc, nx);
        for (long i = 0; i < nx; i++) want[i] = acc[i] + dx[i];
        conv2d_backward_with(k, acc, dw, db, col, col + conv_pad_size(&g), dout, w, &g, 1);
        CHECK(!memcmp(acc, want, sizeof(float) * (size_t)nx), "%s set, B%d C%d %dx%d OC%d: the added input gradient",
              set, B, C, H, W, OC);
        free(acc); free(want);
    }
    free(x); free(w); free(b); free(dout); free(out); free(col); free(dx); free(dw); free(db);
    free(rout); free(rdx); free(rdw); free(rdb);
}

/* The Winograd form computes each 2x2 tile alone, so a sample's output
 * and input gradient must be the same bits whichever samples share its
 * group and wherever it lies in it: samples 8 and 9 of a batch of 10 (7x7
 * planes: groups of 8, so these two start the second group) against the
 * same two as the second and third of a batch of 3 (one group). */
static void wino_group_case(const conv_kernels_t *k, const char *set)
{
    const int C = 5, OC = 6, H = 7, W = 7;
    const long sx = (long)C * H * W, so = (long)OC * H * W, nw = (long)OC * C * 9;
    float *x = xalloc_floats(13 * sx), *dout = xalloc_floats(13 * so), *w = xalloc_floats(nw);
    float *dw = xalloc_floats(nw), *out = xalloc_floats(13 * so), *dx = xalloc_floats(13 * sx);
    fill(x, 10 * sx); fill(dout, 10 * so); fill(w, nw);
    /* the batch of 3 after the batch of 10: sample 0, then 8 and 9 */
    memcpy(x + 10 * sx, x, sizeof(float) * (size_t)sx);
    memcpy(x + 11 * sx, x + 8 * sx, sizeof(float) * (size_t)(2 * sx));
    memcpy(dout + 10 * so, dout, sizeof(float) * (size_t)so);
    memcpy(dout + 11 * so, dout + 8 * so, sizeof(float) * (size_t)(2 * so));
    for (int r = 0; r < 2; r++) {
        conv_geom_t g = { .B = r ? 3 : 10, .C = C, .H = H, .W = W, .OC = OC, .KH = 3, .KW = 3, .stride = 1, .pad = 1 };
        CHECK(conv_geom_init(&g) == 0, "geometry");
        const conv_layout_t L = conv_layout(&g);
        CHECK(L.wino && L.wg == (r ? 3 : 4) && L.ng == (r ? 1 : 3) && L.wtiles == 16,
              "%s: %d groups of %d samples, %ld tiles a sample, at batch %d", set, L.ng, L.wg, L.wtiles, g.B);
        int nb_last, b_last = conv_wino_group(&L, g.B, L.ng - 1, &nb_last);   /* the last group: 8-9 of 10, 0-2 of 3 */
        CHECK(b_last == (r ? 0 : 8) && nb_last == (r ? 3 : 2), "%s: the last group at batch %d starts at %d, %d samples",
              set, g.B, b_last, nb_last);
        float *col = xalloc_floats(conv_col_size(&g));
        const long b0 = r ? 10 : 0;
        conv2d_forward_with(k, out + b0 * so, col, col + conv_pad_size(&g), x + b0 * sx, w, NULL, NULL, &g);
        conv2d_backward_with(k, dx + b0 * sx, dw, NULL, col, col + conv_pad_size(&g), dout + b0 * so, w, &g, 0);
        free(col);
    }
    CHECK(memcmp(out + 8 * so, out + 11 * so, sizeof(float) * (size_t)(2 * so)) == 0 &&
              memcmp(dx + 8 * sx, dx + 11 * sx, sizeof(float) * (size_t)(2 * sx)) == 0,
          "%s set: the Winograd form's outputs depend on the samples grouped with them", set);
    free(x); free(dout); free(w); free(dw); free(out); free(dx);
}

static void run_set(const conv_kernels_t *k, const char *set)
{
    wino_group_case(k, set);
    conv_set_case(k, set, 4, 1, 28, 28, 6, 5, 1, 2);    /* LeNet's first layer */
    conv_set_case(k, set, 4, 6, 14, 14, 16, 5, 1, 0);   /* and its second */
    conv_set_case(k, set, 2, 1, 9, 20, 3, 3, 1, 1);     /* ragged tiles */
    conv_set_case(k, set, 2, 1, 6, 40, 2, 3, 1, 1);     /* rows of several blocks */
    conv_set_case(k, set, 1, 1, 13, 37, 2, 5, 2, 2);    /* strided direct path */
    conv_set_case(k, set, 2, 1, 10, 10, 2, 1, 3, 0);    /* stride larger than the kernel */
    conv_set_case(k, set, 2, 2, 5, 21, 2, 3, 1, 1);     /* im2col rows of several vectors */
    conv_set_case(k, set, 2, 3, 8, 9, 2, 5, 2, 2);      /* strided im2col path */
    /* the flat path: stride 1, "same" padding, several input channels */
    conv_set_case(k, set, 2, 16, 14, 14, 16, 3, 1, 1);  /* whole blocks of output channels */
    conv_set_case(k, set, 3, 3, 7, 7, 7, 3, 1, 1);      /* a block of 3 left over; a plane of one tile */
    conv_set_case(k, set, 2, 5, 6, 11, 9, 1, 1, 0);     /* 1x1: nothing padded; a block of 1 left over */
    conv_set_case(k, set, 1, 4, 9, 12, 6, 5, 1, 2);     /* 5x5; a block of 2 left over */
    conv_set_case(k, set, 2, 8, 40, 40, 8, 3, 1, 1);    /* large planes; a block of 2 (v4) left over */
    conv_set_case(k, set, 2, 4, 5, 20, 5, 3, 1, 1);     /* a plane's last 3 vectors (v4): tiles of 2 and 1 */
    /* the 3x3 weight gradient with output channels in the lanes (v4, 32 or more) */
    conv_set_case(k, set, 3, 5, 9, 11, 32, 3, 1, 1);    /* 2-vector tiles, one input channel each */
    conv_set_case(k, set, 2, 3, 6, 7, 40, 3, 1, 1);     /* 40 = 2 vectors + 8 lanes: a 1-vector tile, 2 channels + 1 */
    conv_set_case(k, set, 7, 32, 24, 24, 32, 3, 1, 1);  /* several chunks of samples */
    conv_set_case(k, set, 9, 16, 28, 28, 16, 3, 1, 1);  /* the weight gradient over chunks of samples */
    conv_set_case(k, set, 2, 3, 1, 3, 4, 3, 1, 1);      /* a plane shorter than the zeros after it: the masked tail */
    /* 8-channel tiles by rows of taps (v4): bands of positions, blocks of input channels */
    conv_set_case(k, set, 2, 5, 30, 33, 11, 3, 1, 1);   /* 3 bands, the last short; 4 + 1 input channels; 8 + 3 */
    conv_set_case(k, set, 3, 6, 9, 10, 20, 3, 1, 1);    /* one band; 4 + 2 input channels; 8 + 8 + 3 + 1 */
    conv_set_case(k, set, 2, 3, 1, 3, 8, 3, 1, 1);      /* the masked tail in a band tile */
    /* strided im2col path */
    conv_set_case(k, set, 10, 4, 7, 7, 9, 3, 1, 1);     /* Winograd: two groups of samples, the second short */
    conv_set_case(k, set, 2, 3, 5, 70, 4, 3, 1, 1);     /* three blocks of tile columns (v4), the last short */
    conv_set_case(k, set, 3, 16, 28, 28, 32, 3, 2, 1);  /* ResNet's 3x3 stride 2 */
    conv_set_case(k, set, 2, 5, 7, 9, 6, 3, 2, 1);      /* odd sizes */
    conv_set_case(k, set, 3, 16, 28, 28, 32, 1, 2, 0);  /* ResNet's 1x1 shortcut: nothing padded */
    conv_set_case(k, set, 2, 3, 11, 13, 5, 1, 3, 0);    /* a stride above the taps: two of three rows unread */
    conv_set_case(k, set, 2, 3, 10, 12, 4, 3, 3, 1);    /* stride 3 */
    conv_set_case(k, set, 1, 3, 23, 19, 8, 7, 2, 3);    /* a 7x7 stem */
    conv_set_case(k, set, 2, 2, 6, 6, 3, 4, 2, 2);      /* padding wider than the stride */
}

static void test_conv_base(void) { run_set(&kernels_base, "baseline"); }

#ifdef CONV_X86_SETS
TEST_KERNEL_SET(test_conv_v3, run_set, kernels_v3, "x86-64-v3")
TEST_KERNEL_SET(test_conv_v4, run_set, kernels_v4, "x86-64-v4")
#endif

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    rng_seed(&R, 43, 0);
    __builtin_cpu_init();
    RUN(test_conv_base);
#ifdef CONV_X86_SETS
    RUN(test_conv_v3);
    RUN(test_conv_v4);
#endif
    return TEST_END("test_conv");
}
