/* L-BFGS (optim/lbfgs.c) on a quadratic it must solve: f(w) = ½ Σ a_i
 * (w_i − c_i)² with curvatures a_i from 1 to 100, through the same vector
 * operations interface the distributed implementation uses. */
#include <string.h>

#include "optim/lbfgs.h"
#include "test.h"

#define N 10
#define M 10

typedef struct quad {
    float v[LB_FIXED + 2 * M][N];
    double a[N], c[N];
    long evals;
    long flat_at;     /* evaluations of batch k == flat_at report the gradient at w (y = 0) */
} quadf_t;

static double q_dot(void *ctx, int a, int b) { quadf_t *q = ctx; return lbfgs_kdot(q->v[a], q->v[b], N); }
static void q_axpy(void *ctx, double al, int x, int y) { quadf_t *q = ctx; lbfgs_kaxpy(al, q->v[x], q->v[y], N); }
static void q_scale(void *ctx, double al, int x) { quadf_t *q = ctx; lbfgs_kscale(al, q->v[x], N); }
static void q_copy(void *ctx, int s, int d) { quadf_t *q = ctx; memcpy(q->v[d], q->v[s], sizeof q->v[d]); }
static double q_eval(void *ctx, long k)
{
    quadf_t *q = ctx;
    double f = 0;
    q->evals++;
    for (int i = 0; i < N; i++) {
        double e = q->v[LB_X][i] - q->c[i];
        f += 0.5 * q->a[i] * e * e;
        q->v[LB_GX][i] = (float)(q->a[i] * e);
    }
    if (k == q->flat_at) memcpy(q->v[LB_GX], q->v[LB_G], sizeof q->v[LB_GX]);
    return f;
}

static double solve(lbfgs_ls_t ls, int iters, int *monotone)
{
    static quadf_t q;
    memset(&q, 0, sizeof q);
    q.flat_at = -1;
    for (int i = 0; i < N; i++) {
        q.a[i] = pow(100.0, (double)i / (N - 1));
        q.c[i] = 1.0 - 0.3 * i;
    }
    lbfgs_vops_t v = { &q, q_dot, q_axpy, q_scale, q_copy, q_eval };
    lbfgs_t lb;
    lbfgs_init(&lb, M, ls, 0, 1);
    double prev = INFINITY;
    *monotone = 1;
    for (int it = 0; it < iters; it++) {
        double f = lbfgs_iterate(&lb, &v, it);
        if (f > prev) *monotone = 0;
        prev = f;
    }
    double err = 0;
    for (int i = 0; i < N; i++) err = fmax(err, fabs(q.v[LB_W][i] - q.c[i]));
    lbfgs_free(&lb);
    return err;
}

/* Every accepted step satisfies sufficient decrease, so f never rises; and
 * the minimiser c is found to float precision: the gradient a_i·(w_i − c_i)
 * is rounded to 2^-24 relative, which moves the computed minimiser by about
 * κ·2^-24·|c| ≈ 100 · 6e-8 · 2 ≈ 1e-5; allow 1e-4. */
static void test_wolfe_solves_quadratic(void)
{
    int mono;
    double err = solve(LS_WOLFE, 40, &mono);
    CHECK(mono, "f rose during the iterations");
    CHECK(err <= 1e-4, "max |w - c| = %g after 40 iterations", err);
}

static void test_armijo_solves_quadratic(void)
{
    int mono;
    double err = solve(LS_ARMIJO, 60, &mono);
    CHECK(mono, "f rose during the iterations");
    CHECK(err <= 1e-4, "max |w - c| = %g after 60 iterations", err);
}

/* The curvature pairs pay: gradient descent with the best fixed step
 * 2/(a_min + a_max) contracts the error by (κ − 1)/(κ + 1) = 99/101 per
 * iteration, so after 30 iterations it keeps more than half of the initial
 * error (max |c| = 1.7); L-BFGS converges superlinearly and must be three
 * orders of magnitude closer by then. */
static void test_curvature_pays(void)
{
    int mono;
    double err = solve(LS_WOLFE, 30, &mono);
    CHECK(err <= 1e-3, "max |w - c| = %g after 30 iterations", err);
}

/* A curvature pair with y·s <= 0 is not stored. When the history is full its
 * slot is the oldest pair's, whose vectors it has already overwritten: that
 * pair must leave the history too, or the two-loop recursion pairs the new
 * vectors with the old ρ. Every stored pair must satisfy ρ_j (y_j·s_j) = 1. */
static void test_rejected_pair_in_full_history(void)
{
    enum { m = 3 };
    static quadf_t q;
    memset(&q, 0, sizeof q);
    for (int i = 0; i < N; i++) {
        q.a[i] = pow(100.0, (double)i / (N - 1));
        q.c[i] = 1.0 - 0.3 * i;
    }
    q.flat_at = 5;   /* iterations 0..4 fill the 3 slots, 5 brings y = 0 */
    lbfgs_vops_t v = { &q, q_dot, q_axpy, q_scale, q_copy, q_eval };
    lbfgs_t lb;
    lbfgs_init(&lb, m, LS_ARMIJO, 0, 1);
    for (int it = 0; it <= 5; it++) lbfgs_iterate(&lb, &v, it);
    CHECK(lb.count >= 1, "no curvature pair kept");
    for (int i = 0; i < lb.count; i++) {
        int j = ((lb.head - 1 - i) % m + m) % m;
        double ys = lbfgs_kdot(q.v[LB_Y(m, j)], q.v[LB_S(j)], N);
        CHECK(fabs(lb.rho[j] * ys - 1.0) < 1e-6, "stored pair %d (slot %d): rho*(y.s) = %g, not 1", i, j, lb.rho[j] * ys);
    }
    lbfgs_free(&lb);
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_wolfe_solves_quadratic);
    RUN(test_armijo_solves_quadratic);
    RUN(test_curvature_pays);
    RUN(test_rejected_pair_in_full_history);
    return TEST_END("test_lbfgs");
}
