/* L-BFGS on named vectors (lbfgs.h): Nocedal & Wright, algorithms 7.4
 * (two-loop recursion) and 3.5-style bracketing for the weak Wolfe
 * conditions (bisection, as in Lewis & Overton). */
#include "lbfgs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

#define C1 1e-4              /* sufficient decrease: f(x) ≤ f + c1·t·g·d */
#define C2 0.9               /* curvature: ∇f(x)·d ≥ c2·g·d */
#define LS_MAX 20            /* evaluations per line search */

int lbfgs_ls_parse(const char *s, lbfgs_ls_t *out)
{
    if (!strcmp(s, "wolfe")) *out = LS_WOLFE;
    else if (!strcmp(s, "armijo")) *out = LS_ARMIJO;
    else return -1;
    return 0;
}

void lbfgs_init(lbfgs_t *lb, int m, lbfgs_ls_t ls, double wd, int same_batch)
{
    memset(lb, 0, sizeof *lb);
    lb->m = m;
    lb->ls = ls;
    lb->wd = wd;
    lb->same_batch = same_batch;
    lb->rho = xcalloc((size_t)m, sizeof(double));
    lb->alpha = xcalloc((size_t)m, sizeof(double));
    lb->gamma = 1;
}

void lbfgs_free(lbfgs_t *lb)
{
    free(lb->rho);
    free(lb->alpha);
    lb->rho = lb->alpha = NULL;
}

double lbfgs_kdot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

void lbfgs_kaxpy(double alpha, const float *x, float *y, size_t n)
{
    const float a = (float)alpha;
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

void lbfgs_kscale(double alpha, float *x, size_t n)
{
    const float a = (float)alpha;
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

void lbfgs_kadd(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* f_k(X) with ∇f_k(X) in GX: the data term from eval plus wd/2·X·X. */
static double objective(lbfgs_t *lb, const lbfgs_vops_t *v, long k)
{
    double f = v->eval(v->ctx, k);
    lb->evals++;
    if (lb->wd > 0 && isfinite(f)) {
        f += 0.5 * lb->wd * v->dot(v->ctx, LB_X, LB_X);
        v->axpy(v->ctx, lb->wd, LB_X, LB_GX);
    }
    return f;
}

/* d = −H g by the two-loop recursion over the stored pairs (newest first,
 * then oldest first), with H_0 = γ I. */
static void direction(lbfgs_t *lb, const lbfgs_vops_t *v)
{
    const int m = lb->m;
    void *c = v->ctx;
    v->copy(c, LB_G, LB_D);                                /* q = g */
    for (int i = 0; i < lb->count; i++) {
        int j = ((lb->head - 1 - i) % m + m) % m;
        lb->alpha[j] = lb->rho[j] * v->dot(c, LB_S(j), LB_D);   /* α_j = ρ_j s_j·q */
        v->axpy(c, -lb->alpha[j], LB_Y(m, j), LB_D);            /* q −= α_j y_j */
    }
    if (lb->count) v->scale(c, lb->gamma, LB_D);                /* r = H_0 q */
    for (int i = lb->count - 1; i >= 0; i--) {
        int j = ((lb->head - 1 - i) % m + m) % m;
        double beta = lb->rho[j] * v->dot(c, LB_Y(m, j), LB_D); /* β = ρ_j y_j·r */
        v->axpy(c, lb->alpha[j] - beta, LB_S(j), LB_D);          /* r += (α_j − β) s_j */
    }
    v->scale(c, -1.0, LB_D);
}

static void reset(lbfgs_t *lb)
{
    lb->count = 0;
    lb->head = 0;
    lb->gamma = 1;
    lb->resets++;
}

double lbfgs_iterate(lbfgs_t *lb, const lbfgs_vops_t *v, long k)
{
    void *c = v->ctx;
    const int m = lb->m;
    /* a new batch needs the gradient at W on it; with one fixed batch the
     * gradient at the last accepted point is already that */
    if (!lb->have_g || (!lb->same_batch && lb->g_batch != k)) {
        v->copy(c, LB_W, LB_X);
        lb->f = objective(lb, v, k);
        if (!isfinite(lb->f)) return lb->f;
        v->copy(c, LB_GX, LB_G);
        lb->have_g = 1;
        lb->g_batch = k;
    }
    direction(lb, v);
    double gd = v->dot(c, LB_G, LB_D);
    if (!(gd < 0)) {   /* not a descent direction (the batch changed under the pairs): steepest descent */
        reset(lb);
        v->copy(c, LB_G, LB_D);
        v->scale(c, -1.0, LB_D);
        gd = -v->dot(c, LB_G, LB_G);
        if (!(gd < 0)) return lb->f;   /* g = 0: stationary */
    }
    /* without curvature information the first step moves by at most 1 in norm */
    double t = lb->count ? 1.0 : fmin(1.0, 1.0 / sqrt(-gd));
    double lo = 0, hi = INFINITY, fx = NAN, te = t;
    int accepted = 0, armijo = 0;
    for (int e = 0; e < LS_MAX && !accepted; e++) {
        te = t;
        v->copy(c, LB_W, LB_X);
        v->axpy(c, t, LB_D, LB_X);                          /* x = w + t d */
        fx = objective(lb, v, k);
        armijo = fx <= lb->f + C1 * t * gd;                 /* false for NaN too */
        if (!armijo) hi = t;
        else if (lb->ls == LS_WOLFE && v->dot(c, LB_GX, LB_D) < C2 * gd) lo = t;
        else accepted = 1;
        if (!accepted) t = isfinite(hi) ? 0.5 * (lo + hi) : 2.0 * t;
    }
    if (!accepted && armijo) accepted = 1;   /* out of evaluations at a point that decreases f: take it */
    t = te;                                  /* X and GX hold the last point evaluated */
    if (!accepted) {               /* no decrease along d: forget the curvature pairs */
        lb->ls_failures++;
        reset(lb);
        return lb->f;
    }
    lb->t = t;
    /* s = x − w = t d; y = ∇f(x) − ∇f(w), both on batch k */
    int j = lb->head;
    v->copy(c, LB_D, LB_S(j));
    v->scale(c, t, LB_S(j));
    v->copy(c, LB_GX, LB_Y(m, j));
    v->axpy(c, -1.0, LB_G, LB_Y(m, j));
    double ys = v->dot(c, LB_Y(m, j), LB_S(j)), yy = v->dot(c, LB_Y(m, j), LB_Y(m, j));
    if (ys > 1e-10 * yy && yy > 0) {   /* keep only pairs with positive curvature: H stays positive definite */
        lb->rho[j] = 1.0 / ys;
        lb->gamma = ys / yy;
        lb->head = (j + 1) % m;
        if (lb->count < m) lb->count++;
    } else if (lb->count == m) {
        lb->count--;   /* slot j held the oldest pair, whose vectors are gone now */
    }
    v->copy(c, LB_X, LB_W);
    v->copy(c, LB_GX, LB_G);
    lb->f = fx;
    return fx;
}
