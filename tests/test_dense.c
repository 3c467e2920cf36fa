/* The dense layer against double-precision sums: forward on the tiles of
 * every vector kernel set this CPU can run (the baseline one always,
 * x86-64-v3 and -v4 where present), not only the one the library picks,
 * and the weight, bias and input gradients on the tiles and as the
 * library runs them (tiles or the BLAS, by the shapes). At the mlp's shapes and at shapes
 * that leave every edge (rows short of a tile, columns short of a vector,
 * a batch short of the 16 x 16 transpose blocks). Includes dense.c to
 * reach the sets.
 *
 * Tolerance: every compared value is a float sum of n products of
 * magnitude <= 1 (n = IN for out, B for dw and db, OUT for dinp), plus a
 * bias <= 1 for out; 1e-6·n + 1e-5 leaves room for rounding and FMA. */
#include "nn/dense.c"

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

static void dense_set_case(const dense_kernels_t *k, const char *set, int B, int IN, int OUT)
{
    float *x = xalloc_floats((size_t)B * IN), *w = xalloc_floats((size_t)OUT * IN), *b = xalloc_floats((size_t)OUT);
    float *d = xalloc_floats((size_t)B * OUT), *out = xalloc_floats((size_t)B * OUT);
    float *dx = xalloc_floats((size_t)B * IN), *dw = xalloc_floats((size_t)OUT * IN), *db = xalloc_floats((size_t)OUT);
    float *ws = xalloc_floats((size_t)dense_ws_size(B, IN, OUT));
    double *ro = xcalloc((size_t)B * OUT, sizeof(double)), *rx = xcalloc((size_t)B * IN, sizeof(double));
    double *rw = xcalloc((size_t)OUT * IN, sizeof(double)), *rb = xcalloc((size_t)OUT, sizeof(double));
    fill(x, (long)B * IN); fill(w, (long)OUT * IN); fill(b, OUT); fill(d, (long)B * OUT);
    for (int s = 0; s < B; s++)
        for (int o = 0; o < OUT; o++) {
            double t = b[o];
            for (int i = 0; i < IN; i++) t += (double)x[(long)s * IN + i] * w[(long)o * IN + i];
            ro[(long)s * OUT + o] = t;
            rb[o] += d[(long)s * OUT + o];
            for (int i = 0; i < IN; i++) {
                rw[(long)o * IN + i] += (double)d[(long)s * OUT + o] * x[(long)s * IN + i];
                rx[(long)s * IN + i] += (double)d[(long)s * OUT + o] * w[(long)o * IN + i];
            }
        }
    forward_tiles(k, out, ws, x, w, b, B, IN, OUT, 0);
    backward_tiles(k, dx, dw, db, d, x, w, B, IN, OUT, 0);
    const double to = 1e-6 * IN + 1e-5, tb = 1e-6 * B + 1e-5, ti = 1e-6 * OUT + 1e-5;
    double e;
    e = max_diff(out, ro, (long)B * OUT);
    CHECK(e <= to, "%s B=%d IN=%d OUT=%d: out off by %.3g (tolerance %.3g)", set, B, IN, OUT, e, to);
    e = max_diff(dw, rw, (long)OUT * IN);
    CHECK(e <= tb, "%s B=%d IN=%d OUT=%d: dw off by %.3g (tolerance %.3g)", set, B, IN, OUT, e, tb);
    e = max_diff(db, rb, OUT);
    CHECK(e <= tb, "%s B=%d IN=%d OUT=%d: db off by %.3g (tolerance %.3g)", set, B, IN, OUT, e, tb);
    e = max_diff(dx, rx, (long)B * IN);
    CHECK(e <= ti, "%s B=%d IN=%d OUT=%d: dinp off by %.3g (tolerance %.3g)", set, B, IN, OUT, e, ti);
    /* by strips of the batch: the same bits; with the ReLU, those of
     * relu_forward after it */
    float *o2 = xalloc_floats((size_t)B * OUT), *o3 = xalloc_floats((size_t)B * OUT);
    forward_strips(k, o2, ws, x, w, b, B, IN, OUT, 0);
    CHECK(!memcmp(out, o2, sizeof(float) * (size_t)B * OUT), "%s B=%d IN=%d OUT=%d: out by strips differs", set, B,
          IN, OUT);
    relu_forward(o3, out, (long)B * OUT);
    forward_tiles(k, o2, ws, x, w, b, B, IN, OUT, 1);
    CHECK(!memcmp(o3, o2, sizeof(float) * (size_t)B * OUT), "%s B=%d IN=%d OUT=%d: out with the ReLU differs", set,
          B, IN, OUT);
    forward_strips(k, o2, ws, x, w, b, B, IN, OUT, 1);
    CHECK(!memcmp(o3, o2, sizeof(float) * (size_t)B * OUT), "%s B=%d IN=%d OUT=%d: out by strips with the ReLU "
          "differs", set, B, IN, OUT);
    free(o2); free(o3);
    /* backward through the ReLU whose output x is: relu_backward's bits */
    float *dxr = xalloc_floats((size_t)B * IN), *dxm = xalloc_floats((size_t)B * IN);
    relu_backward(dxr, dx, x, (long)B * IN);
    backward_tiles(k, dxm, dw, db, d, x, w, B, IN, OUT, 1);
    CHECK(!memcmp(dxr, dxm, sizeof(float) * (size_t)B * IN), "%s B=%d IN=%d OUT=%d: dinp through the ReLU differs",
          set, B, IN, OUT);
    /* the first layer's backward: no input gradient, the rest the same bits */
    float *dw2 = xalloc_floats((size_t)OUT * IN);
    backward_tiles(k, NULL, dw2, db, d, x, w, B, IN, OUT, 0);
    CHECK(!memcmp(dw, dw2, sizeof(float) * (size_t)OUT * IN), "%s B=%d IN=%d OUT=%d: dw differs without dinp", set,
          B, IN, OUT);
    /* as the library runs them: backward on tiles or the BLAS, by the shapes */
    dense_forward(out, ws, x, w, b, B, IN, OUT, 0);
    e = max_diff(out, ro, (long)B * OUT);
    CHECK(e <= to, "B=%d IN=%d OUT=%d: dense_forward's out off by %.3g (tolerance %.3g)", B, IN, OUT, e, to);
    dense_backward(dxm, dw, db, d, x, w, B, IN, OUT, 1);
    dense_backward(dx, dw, db, d, x, w, B, IN, OUT, 0);
    relu_backward(dxr, dx, x, (long)B * IN);
    CHECK(!memcmp(dxr, dxm, sizeof(float) * (size_t)B * IN), "B=%d IN=%d OUT=%d: dense_backward's dinp through the "
          "ReLU differs", B, IN, OUT);
    e = max_diff(dw, rw, (long)OUT * IN);
    CHECK(e <= tb, "B=%d IN=%d OUT=%d: dense_backward's dw off by %.3g (tolerance %.3g)", B, IN, OUT, e, tb);
    e = max_diff(dx, rx, (long)B * IN);
    CHECK(e <= ti, "B=%d IN=%d OUT=%d: dense_backward's dinp off by %.3g (tolerance %.3g)", B, IN, OUT, e, ti);
    free(x); free(w); free(b); free(d); free(out); free(dx); free(dxr); free(dxm); free(dw); free(dw2); free(db);
    free(ws);
    free(ro); free(rx); free(rw); free(rb);
}

static void run_set(const dense_kernels_t *k, const char *set)
{
    dense_set_case(k, set, 64, 784, 256);   /* the mlp's first layer */
    dense_set_case(k, set, 64, 128, 10);    /* its classifier: 10 rows, 6 + 4 */
    dense_set_case(k, set, 1, 1, 1);
    dense_set_case(k, set, 3, 5, 4);
    dense_set_case(k, set, 17, 33, 7);      /* a batch one past a transpose block */
    dense_set_case(k, set, 37, 100, 13);    /* every edge at once */
    dense_set_case(k, set, 37, 1100, 13);   /* the same, backward through the BLAS */
    dense_set_case(k, set, 70, 300, 130);   /* a batch of a whole tile and a tail, on the library's tiles */
    dense_set_case(k, set, 48, 80, 32);     /* whole blocks, three of them */
    dense_set_case(k, set, 256, 64, 130);   /* a batch of 256: four strips */
    dense_set_case(k, set, 150, 40, 20);    /* strips of 64, 64 and 22 */
}

static void test_dense_base(void) { run_set(&dense_kernels_base, "baseline"); }

#ifdef DENSE_X86_SETS
TEST_KERNEL_SET(test_dense_v3, run_set, dense_kernels_v3, "x86-64-v3")
TEST_KERNEL_SET(test_dense_v4, run_set, dense_kernels_v4, "x86-64-v4")
#endif

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    rng_seed(&R, 47, 0);
    __builtin_cpu_init();
    RUN(test_dense_base);
#ifdef DENSE_X86_SETS
    RUN(test_dense_v3);
    RUN(test_dense_v4);
#endif
    return TEST_END("test_dense");
}
