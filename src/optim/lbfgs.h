/* optim/lbfgs — limited-memory BFGS (two-loop recursion, Wolfe or Armijo
 * line search), written once against a handful of vector operations on
 * named vectors. One implementation of those operations works on full
 * local vectors (--sync lbfgs); the other sends each operation to the
 * parameter-server shards, which run it on their slice and return partial
 * dot products (--sync sandblaster). The algorithm itself holds scalars
 * only: ρ_i, α_i, γ, f, step sizes.
 *
 * Objective on batch k:  f_k(w) = mean loss over the batch + wd/2 · w·w.
 *
 * Named vectors (each of the model's length):
 *   W   the iterate w
 *   G   ∇f_k(w) on the batch of the current iteration
 *   D   the search direction d (also q of the two-loop recursion)
 *   X   the trial point w + t·d, where the data term is evaluated
 *   GX  the data gradient at X (filled by eval), then ∇f_k(X)
 *   S_i, Y_i  the history: s = t·d, y = ∇f_k(w + t·d) − ∇f_k(w), i < m
 */
#ifndef DSGD_LBFGS_H
#define DSGD_LBFGS_H

#include <stddef.h>

enum { LB_W, LB_G, LB_D, LB_X, LB_GX, LB_FIXED };
#define LB_S(i) (LB_FIXED + (i))
#define LB_Y(m, i) (LB_FIXED + (m) + (i))
static inline int lbfgs_nvecs(int m) { return LB_FIXED + 2 * m; }

typedef struct lbfgs_vops {
    void *ctx;
    double (*dot)(void *ctx, int a, int b);                  /* a·b */
    void   (*axpy)(void *ctx, double alpha, int x, int y);   /* y += α x */
    void   (*scale)(void *ctx, double alpha, int x);         /* x *= α */
    void   (*copy)(void *ctx, int src, int dst);             /* dst = src */
    /* The mean loss at X over batch k, with its gradient (mean over the
     * batch) in GX; returns NAN if the evaluation failed. */
    double (*eval)(void *ctx, long k);
} lbfgs_vops_t;

typedef enum lbfgs_ls { LS_WOLFE, LS_ARMIJO } lbfgs_ls_t;

typedef struct lbfgs {
    int m;                   /* history length */
    lbfgs_ls_t ls;
    double wd;               /* L2 term of the objective */
    int same_batch;          /* every batch is the same sample set (full batch) */
    int head, count;         /* ring of pairs: the newest is at (head − 1) mod m */
    double *rho;             /* (m) ρ_i = 1 / (y_i·s_i) */
    double *alpha;           /* (m) the two-loop α_i */
    double gamma;            /* H_0 = γ I, γ = s·y / y·y of the newest pair */
    double f;                /* f_k(W) on batch g_batch, when have_g */
    int have_g;
    long g_batch;
    double t;                /* last accepted step */
    long evals, ls_failures, resets;
} lbfgs_t;

int  lbfgs_ls_parse(const char *s, lbfgs_ls_t *out);
void lbfgs_init(lbfgs_t *lb, int m, lbfgs_ls_t ls, double wd, int same_batch);
void lbfgs_free(lbfgs_t *lb);
/* One iteration on batch k: gradient at W (unless known), direction by the
 * two-loop recursion, line search, history update, W ← X. Returns f_k at the
 * new W (at the old one if the line search failed), NAN if an evaluation
 * failed. */
double lbfgs_iterate(lbfgs_t *lb, const lbfgs_vops_t *v, long k);

/* The kernels every implementation of the operations runs on its span, so
 * a shard's slice and a local vector see the same float arithmetic. Dot
 * products accumulate in double, in element order. */
double lbfgs_kdot(const float *a, const float *b, size_t n);
void   lbfgs_kaxpy(double alpha, const float *x, float *y, size_t n);
void   lbfgs_kscale(double alpha, float *x, size_t n);
void   lbfgs_kadd(const float *x, float *y, size_t n);    /* y += x */

#endif
