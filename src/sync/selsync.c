/* --sync selsync: selective synchronization (Tyagi & Swany, CLUSTER 2023;
 * docs/algorithms.md §9). Each step, on every worker, after backward:
 *
 *   n_t = Σ_tensors ‖g_tensor‖₂           (each weight and bias tensor)
 *   cur = EWMA_W(n);  Δ_t = |cur − prev| / prev  (0 while prev = 0);  prev = cur
 *   sm  = EWMA_W(Δ)
 *   flag = (t < W) or (sm ≥ δ)            warm-up always synchronizes
 *   F = allreduce_sum(flag)               one int, every step: the decision is
 *                                         collective, never a local float
 *   if F > 0: w = allreduce_sum(w)/N      --aggregation parameter (default), before the step
 *             g = allreduce_sum(g)/N      --aggregation gradient
 *   apply the local optimizer step
 *
 * EWMA_W is the normalized sliding-window mean over the last W values with
 * weight (1−a)^j for the j-th newest (j = 1..W), a = --smoothing.
 * δ = 0 synchronizes every step; with gradient aggregation that is BSP. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "rules.h"
#include "sync.h"

typedef struct window {
    double *v;       /* (W) ring buffer */
    long count;      /* values pushed so far */
} window_t;

typedef struct selsync {
    long W;
    double a, delta, prev;
    int grad_agg;
    window_t norms, deltas;
    long syncs, steps;
    double last_sm;
    double *mine;            /* (2W + 2) this worker's EWMA state, for a checkpoint */
    sync_rows_t rows;
} selsync_t;

static const ckpt_key_t STATE_KEYS[] = { { "steps", 0, LONG_MAX }, { "syncs", 0, LONG_MAX }, { "workers", 1, INT_MAX }, { "window", 1, LONG_MAX } };   /* the checkpoint's sync_state */

static void window_push(window_t *w, long W, double x) { w->v[w->count++ % W] = x; }

double selsync_ewma(const double *v, long count, long W, double a)
{
    long have = count < W ? count : W;
    double num = 0, den = 0, weight = 1;
    for (long j = 1; j <= have; j++) {      /* j-th newest */
        weight *= 1.0 - a;
        num += weight * v[(count - j) % W];
        den += weight;
    }
    return den > 0 ? num / den : 0;
}

static double window_ewma(const window_t *w, long W, double a) { return selsync_ewma(w->v, w->count, W, a); }

static int selsync_init(run_t *r)
{
    selsync_t *s = xcalloc(1, sizeof *s);
    r->sync_state = s;
    s->W = r->cfg->window;
    s->a = r->cfg->smoothing;
    s->delta = r->cfg->delta;
    s->grad_agg = !strcmp(r->cfg->aggregation, "gradient");
    s->norms.v = xcalloc((size_t)s->W, sizeof(double));
    s->deltas.v = xcalloc((size_t)s->W, sizeof(double));
    s->mine = xcalloc((size_t)(2 * s->W + 2), sizeof(double));
    return sync_bcast_params(r);
}

/* Σ over weight and bias tensors of their L2 norms. */
static double tensor_norm_sum(const model_t *m)
{
    double total = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        const size_t spans[2][2] = { { l->w_off, l->w_len }, { l->b_off, l->b_len } };
        for (int k = 0; k < 2; k++) {
            if (!spans[k][1]) continue;
            double ss = 0;
            const float *g = m->grads + spans[k][0];
            for (size_t j = 0; j < spans[k][1]; j++) ss += (double)g[j] * g[j];
            total += sqrt(ss);
        }
    }
    return total;
}

static int selsync_step(run_t *r)
{
    selsync_t *s = r->sync_state;
    model_t *m = r->model;
    window_push(&s->norms, s->W, tensor_norm_sum(m));
    double cur = window_ewma(&s->norms, s->W, s->a);
    double d = s->prev > 0 ? fabs(cur - s->prev) / s->prev : 0.0;
    s->prev = cur;
    window_push(&s->deltas, s->W, d);
    s->last_sm = window_ewma(&s->deltas, s->W, s->a);
    int flag = (r->step < s->W) || (s->last_sm >= s->delta);
    comm_allreduce_int(r->comm, &flag, 1, MPI_SUM, "the selsync decision all-reduce");
    s->steps++;
    if (flag > 0) {
        s->syncs++;
        const float inv = 1.0f / (float)r->nworkers;
        if (s->grad_agg) {
            comm_allreduce_sum(r->comm, m->grads, m->nparams, "the selsync gradient all-reduce");
            for (size_t i = 0; i < m->nparams; i++) m->grads[i] *= inv;
        } else {
            /* the batch-norm statistics (the state after the parameters) too */
            comm_allreduce_sum(r->comm, m->params, m->nparams + m->nstate, "the selsync parameter all-reduce");
            for (size_t i = 0; i < m->nparams + m->nstate; i++) m->params[i] *= inv;
        }
    }
    optim_step(r->opt, m->params, m->grads, 0, m->nparams, r->lr);
    return 0;
}

static void selsync_finish(run_t *r)
{
    selsync_t *s = r->sync_state;
    /* the run ends on one model: the replicas' average */
    if (!s->grad_agg || s->syncs < s->steps || r->model->nstate)   /* batch-norm statistics always differ */
        sync_average_params(r, r->model->params, 1.0f / (float)r->nworkers, "the final parameter average");
}

/* Between synchronizations the replicas differ, and each worker's gradient
 * norms, and so its EWMA windows, always do: a checkpoint keeps every
 * worker's parameters, optimizer state and windows (the rings as they are,
 * in double precision: a decision sm ≥ δ must come out the same), with the
 * step and sync counts, which all workers share. */
static int selsync_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    selsync_t *s = r->sync_state;
    const size_t W = (size_t)s->W;
    sync_worker_rows_add(r, &s->rows);
    memcpy(s->mine, s->norms.v, W * sizeof(double));
    memcpy(s->mine + W, s->deltas.v, W * sizeof(double));
    s->mine[2 * W] = s->prev;
    s->mine[2 * W + 1] = s->last_sm;
    sync_rows_add64(r, &s->rows, "sync.worker_ewma", s->mine, 2 * W + 2);
    sync_rows_meta(r, &s->rows, meta);
    ckpt_state_write(meta->sync_state, sizeof meta->sync_state, 4, STATE_KEYS, (long[]){ s->steps, s->syncs, r->nworkers, s->W });
    return 0;
}

/* Each worker takes back its own row; a checkpoint of another paradigm
 * resumes from its one model with empty windows. */
static int selsync_resume(run_t *r, const ckpt_t *ck)
{
    selsync_t *s = r->sync_state;
    const ckpt_meta_t *m = &ck->meta;
    if (strcmp(m->sync, "selsync")) return 0;
    long kv[4];   /* steps, syncs, workers, window */
    if (sync_state_load(r, m, 4, STATE_KEYS, kv, "the selsync state") != 0) return -1;
    if (kv[0] > m->step || kv[1] > kv[0]) {
        snprintf(r->err, sizeof r->err, "checkpoint's selsync state '%.64s' counts more steps or syncs than its %ld steps",
                 m->sync_state, m->step);
        return -1;
    }
    const long steps = kv[0], syncs = kv[1], W = kv[3];
    if (W != s->W) {
        snprintf(r->err, sizeof r->err, "checkpoint's selsync windows hold W = %ld values, not --window %ld; resume with --window %ld",
                 W, s->W, W);
        return -1;
    }
    if (sync_worker_rows_read(r, ck) != 0) return -1;
    if (sync_rows_read64(r, ck, "sync.worker_ewma", s->mine, (size_t)(2 * W + 2)) != 0) return -1;
    memcpy(s->norms.v, s->mine, (size_t)W * sizeof(double));
    memcpy(s->deltas.v, s->mine + W, (size_t)W * sizeof(double));
    s->prev = s->mine[2 * W];
    s->last_sm = s->mine[2 * W + 1];
    s->norms.count = s->deltas.count = steps;
    s->steps = steps;
    s->syncs = syncs;
    return 0;
}

static void selsync_destroy(run_t *r)
{
    selsync_t *s = r->sync_state;
    sync_rows_free(&s->rows);
    free(s->mine);
    free(s->norms.v);
    free(s->deltas.v);
    free(s);
    r->sync_state = NULL;
}

static int selsync_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    selsync_t *s = r->sync_state;
    if (max < 3 || !s) return 0;
    out[0] = (sync_stat_t){ "sync_fraction", s->steps ? (double)s->syncs / (double)s->steps : 0.0, NULL };
    out[1] = (sync_stat_t){ "syncs", (double)s->syncs, NULL };
    /* this worker's smoothed relative change at its last step: what --delta
     * is compared with, so that a user can place delta in its range */
    out[2] = (sync_stat_t){ "smoothed_change", s->last_sm, NULL };
    return 3;
}

const sync_ops_t sync_selsync = {
    .name = "selsync",
    .help = "synchronize only the steps whose update is significant",
    .options = (const char *const[]){ "delta", "window", "smoothing", "aggregation", NULL },
    .layout = sync_layout_all_workers,
    .init = selsync_init,
    .step = selsync_step,
    .finish = selsync_finish,
    .destroy = selsync_destroy,
    .stats = selsync_stats,
    .ckpt_state = selsync_ckpt_state,
    .resume = selsync_resume,
    .posted_receives = 1,
};
