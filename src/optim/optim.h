/* optim — optimizer updates on spans of the flat parameter vector.
 *
 * State (momentum buffer, Adagrad accumulator) is a flat vector parallel to
 * the parameters, so a paradigm can update any span (offset, count) and the
 * checkpoint saves the state as two more flat tensors.
 *
 * Conventions (those of PyTorch's SGD, so results compare directly):
 *   g  += wd·w                          (weight decay, if wd > 0, except on cfg.nodecay spans)
 *   sgd:       v = μ·v + g;  w -= η·v   (μ = 0: plain SGD, v unused)
 *   nesterov:  v = μ·v + g;  w -= η·(g + μ·v)
 *   adagrad:   G += g²;      w -= η·g / (√G + ε)
 */
#ifndef DSGD_OPTIM_H
#define DSGD_OPTIM_H

#include <stddef.h>

typedef enum opt_kind { OPT_SGD, OPT_NESTEROV, OPT_ADAGRAD } opt_kind_t;

typedef struct optim_cfg {
    opt_kind_t kind;
    float momentum;       /* μ */
    float weight_decay;   /* wd */
    float eps;            /* Adagrad ε */
    /* spans (off, len pairs, ascending, in the whole parameter vector) that
     * weight decay skips: batch-normalization parameters and biases with
     * --weight-decay-bn 0; NULL: decay everything. Not owned. */
    const size_t *nodecay;
    int nnodecay;
    /* (off, len, thread) triples, ascending from 0 and contiguous, that
     * say which thread updates each span (model_owner_spans: the one that
     * computed its gradient, so that the span is in its core's cache);
     * used when they cover exactly this optimizer's vector, thread taken
     * modulo the threads there are; NULL: the threads take pieces as they
     * come. Any cut gives the same bits. Not owned. */
    const size_t *owners;
    int nowners;
} optim_cfg_t;

typedef struct optim {
    optim_cfg_t cfg;
    size_t n;
    float *velocity;      /* (n) or NULL when unused */
    float *accum;         /* (n) Adagrad Σg², or NULL */
    size_t base;          /* offset of this optimizer's vector in the whole one (a shard's slice: its first key) */
} optim_t;

/* Parse "sgd" | "nesterov" | "adagrad"; -1 if unknown. */
int optim_kind_parse(const char *s, opt_kind_t *out);
const char *optim_kind_name(opt_kind_t k);

optim_t *optim_create(const optim_cfg_t *cfg, size_t n);
void optim_free(optim_t *o);
void optim_reset(optim_t *o);
/* One update of w[off, off+count) with gradient g[off, off+count) and rate lr.
 * g is not modified. */
void optim_step(optim_t *o, float *w, const float *g, size_t off, size_t count, float lr);
/* The same with the gradient taken as gscale·g (e.g. 1/N after a sum-all-
 * reduce), fused into the update instead of a separate pass. */
void optim_step_scaled(optim_t *o, float *w, const float *g, float gscale, size_t off, size_t count, float lr);
/* The same step written to dst[off, off + count) instead of w (dst == w: in
 * place); identical bits. The state (velocity, accumulator) is updated. */
void optim_step_into(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off, size_t count,
                     float lr);
/* optim_step_into for a dst that another core reads next (a parameter
 * server's reply buffer in shared memory): written with non-temporal
 * stores, so the lines that core holds are invalidated without being read
 * back first. Identical bits. */
void optim_step_into_stream(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off,
                            size_t count, float lr);

/* Learning-rate schedule: linear warm-up over `warmup` steps, then constant,
 * step decay (×gamma every `step_every` steps), or cosine: after warm-up,
 * base·(1 + cos(π·t/T))/2 with t the steps since warm-up and T = total −
 * warmup (PyTorch's CosineAnnealingLR with η_min = 0, stepped every step),
 * and 0 from `total` on. */
typedef enum lr_sched_kind { LR_CONSTANT, LR_STEP, LR_COSINE } lr_sched_kind_t;
typedef struct lr_sched {
    lr_sched_kind_t kind;
    float base;
    long warmup;
    long step_every;
    float gamma;
    long total;           /* cosine: the schedule's length in steps (lr_sched_length) */
    double horizon_s;     /* cosine: > 0: decays over this many seconds of the run's clock instead */
} lr_sched_t;

int lr_sched_parse(const char *s, lr_sched_kind_t *out);
/* The rate of step `step`, t seconds into the run (read only by a cosine
 * schedule over time, horizon_s > 0). */
float lr_at(const lr_sched_t *s, long step, double t);
/* The cosine schedule's length for a run of run_steps steps: the steps of
 * `epochs` epochs, so that a run that --steps stops sooner and is resumed
 * follows one schedule; but never shorter than the run, whose last steps
 * (every step, with --epochs 0) would otherwise train at rate 0. */
long lr_sched_length(long epochs, long steps_per_epoch, long run_steps);

#endif
