/* --sync lbfgs: L-BFGS in one process over large batches, the reference
 * Sandblaster is tested against. Its vector operations run on full local
 * vectors with the kernels the shards run on their slices, and a batch's
 * gradient is summed portion by portion in the groups a single Sandblaster
 * replica pushes; so Sandblaster with one shard and one replica adds the
 * same floats in the same order. Also: the batch and portion helpers of sb.h. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/util.h"
#include "sb.h"

long sb_step_samples(run_t *r)
{
    return r->cfg->batch_total > 0 ? r->cfg->batch_total : r->train.n;
}

int sb_data_init(sb_data_t *b, run_t *r, int replicas)
{
    const config_t *cfg = r->cfg;
    memset(b, 0, sizeof *b);
    b->d = &r->train;
    b->n = r->train.n;
    b->BT = sb_step_samples(r);
    if (strcmp(cfg->portion, "auto")) parse_long(cfg->portion, &b->PS);   /* checked by config_validate */
    else b->PS = (b->BT + 10L * replicas - 1) / (10L * replicas);
    if (b->PS < 1) b->PS = 1;
    if (b->BT < b->PS) {
        snprintf(r->err, sizeof r->err, "--batch-total %ld is smaller than one --portion of %ld samples; lower --portion",
                 b->BT, b->PS);
        return -1;
    }
    if (cfg->push_portions > SB_MAX_PUSH) {
        snprintf(r->err, sizeof r->err, "--push-portions must be at most %d (got %ld)", SB_MAX_PUSH, cfg->push_portions);
        return -1;
    }
    if ((b->BT + b->PS - 1) / b->PS > 1000000) {
        snprintf(r->err, sizeof r->err, "--portion %ld makes more than 10^6 portions per batch; raise it", b->PS);
        return -1;
    }
    b->P = (int)((b->BT + b->PS - 1) / b->PS);
    b->K = (int)cfg->push_portions;
    b->perm = xmalloc(sizeof(int32_t) * (size_t)b->n);
    for (long i = 0; i < b->n; i++) b->perm[i] = (int32_t)i;
    rng_t g;
    rng_seed(&g, (uint64_t)cfg->seed, 0x5b1a);
    rng_shuffle(&g, b->perm, (size_t)b->n);
    b->x = xalloc_floats((size_t)r->model->max_batch * (size_t)dataset_dim(b->d));
    b->y = xmalloc(sizeof(int32_t) * (size_t)r->model->max_batch);
    return 0;
}

void sb_data_free(sb_data_t *b)
{
    free(b->perm);
    free(b->x);
    free(b->y);
    memset(b, 0, sizeof *b);
}

double sb_portion_grad(sb_data_t *b, model_t *m, long k, int p, float *g)
{
    const long dim = dataset_dim(b->d), first = (long)p * b->PS;
    const long cnt = b->BT - first < b->PS ? b->BT - first : b->PS;
    double loss = 0;
    memset(g, 0, m->nparams * sizeof(float));
    for (long at = 0; at < cnt; at += m->max_batch) {
        int B = (int)(cnt - at < m->max_batch ? cnt - at : m->max_batch);
        for (int j = 0; j < B; j++) {
            long s = b->perm[(k * b->BT + first + at + j) % b->n];
            dataset_row(b->d, s, b->x + (size_t)j * (size_t)dim);
            b->y[j] = b->d->y[s];
        }
        model_forward(m, b->x, B);
        loss += (double)model_loss(m, b->y, B) * B;
        model_backward(m, b->y, B);
        lbfgs_kaxpy((double)B, m->grads, g, m->nparams);   /* mean gradient × B = the chunk's sum */
    }
    return loss;
}

/* ---- the one-process paradigm ---- */
typedef struct local {
    sb_data_t data;
    lbfgs_t lb;
    lbfgs_vops_t vops;
    model_t *m;
    float **v;               /* (nvecs) full vectors, views into block */
    float *block;            /* (nvecs, n): S_0..S_{m−1} and Y_0..Y_{m−1} lie end to end */
    float *gp, *grp;         /* (n) a portion's sum; a push group's sum */
    double *scalars;         /* (m + 3) ρ_0..ρ_{m−1}, γ, f, t: for a checkpoint */
    ckpt_tensor_t tensors[4];
} local_t;

/* the L-BFGS state's sync_state: the history's bookkeeping and counters */
static const ckpt_key_t LBFGS_KEYS[] = { { "history", 1, 1000 }, { "head", 0, 999 }, { "count", 0, 1000 }, { "have_g", 0, 1 },
                                          { "g_batch", 0, LONG_MAX }, { "evals", 0, LONG_MAX }, { "ls_failures", 0, LONG_MAX },
                                          { "resets", 0, LONG_MAX } };

static double l_dot(void *c, int a, int b)
{
    local_t *l = c;
    return lbfgs_kdot(l->v[a], l->v[b], l->m->nparams);
}
static void l_axpy(void *c, double al, int x, int y) { local_t *l = c; lbfgs_kaxpy(al, l->v[x], l->v[y], l->m->nparams); }
static void l_scale(void *c, double al, int x) { local_t *l = c; lbfgs_kscale(al, l->v[x], l->m->nparams); }
static void l_copy(void *c, int s, int d) { local_t *l = c; memcpy(l->v[d], l->v[s], l->m->nparams * sizeof(float)); }

static double l_eval(void *c, long k)
{
    local_t *l = c;
    sb_data_t *b = &l->data;
    const size_t n = l->m->nparams;
    memcpy(l->m->params, l->v[LB_X], n * sizeof(float));
    memset(l->v[LB_GX], 0, n * sizeof(float));
    memset(l->grp, 0, n * sizeof(float));
    double loss = 0;
    for (int p = 0; p < b->P; p++) {
        loss += sb_portion_grad(b, l->m, k, p, l->gp);
        lbfgs_kadd(l->gp, l->grp, n);
        if (sb_single_push_after(p, b->P, b->K)) {
            lbfgs_kadd(l->grp, l->v[LB_GX], n);
            memset(l->grp, 0, n * sizeof(float));
        }
    }
    lbfgs_kscale(1.0 / (double)b->BT, l->v[LB_GX], n);
    return loss / (double)b->BT;
}

static int local_layout(run_t *r)
{
    if (r->comm->size > 1) {
        snprintf(r->err, sizeof r->err, "--sync lbfgs trains in one process but %d ranks were started; use --sync sandblaster",
                 r->comm->size);
        return -1;
    }
    return sync_layout_all_workers(r);
}

static int local_init(run_t *r)
{
    local_t *l = xcalloc(1, sizeof *l);
    r->sync_state = l;
    lbfgs_ls_t ls;
    lbfgs_ls_parse(r->cfg->line_search, &ls);   /* checked by config_validate */
    if (sb_data_init(&l->data, r, 1) != 0) return -1;
    l->m = r->model;
    const int m = (int)r->cfg->lbfgs_history, nv = lbfgs_nvecs(m);
    lbfgs_init(&l->lb, m, ls, r->cfg->weight_decay, l->data.BT == l->data.n);
    l->v = xcalloc((size_t)nv, sizeof(float *));
    l->block = xalloc_floats((size_t)nv * l->m->nparams);
    for (int i = 0; i < nv; i++) l->v[i] = l->block + (size_t)i * l->m->nparams;
    l->scalars = xcalloc((size_t)m + 3, sizeof(double));
    memcpy(l->v[LB_W], l->m->params, l->m->nparams * sizeof(float));
    l->gp = xalloc_floats(l->m->nparams);
    l->grp = xalloc_floats(l->m->nparams);
    l->vops = (lbfgs_vops_t){ l, l_dot, l_axpy, l_scale, l_copy, l_eval };
    return 0;
}

static int local_step(run_t *r)
{
    local_t *l = r->sync_state;
    r->loss = (float)lbfgs_iterate(&l->lb, &l->vops, r->step);
    memcpy(r->model->params, l->v[LB_W], r->model->nparams * sizeof(float));   /* what a checkpoint saves */
    return 0;
}

static float *local_eval_params(run_t *r)
{
    local_t *l = r->sync_state;
    return l->v[LB_W];
}

static void local_finish(run_t *r)
{
    local_t *l = r->sync_state;
    memcpy(r->model->params, l->v[LB_W], r->model->nparams * sizeof(float));
}

static void local_destroy(run_t *r)
{
    local_t *l = r->sync_state;
    if (!l) return;
    free(l->v);
    free(l->block);
    free(l->scalars);
    free(l->gp);
    free(l->grp);
    lbfgs_free(&l->lb);
    sb_data_free(&l->data);
    free(l);
    r->sync_state = NULL;
}

int sb_lbfgs_in(const ckpt_t *ck)
{
    return !strcmp(ck->meta.sync, "lbfgs") || !strcmp(ck->meta.sync, "sandblaster");
}

void sb_lbfgs_save(const lbfgs_t *lb, double *scalars, const float *g, const float *sv, const float *yv, size_t n,
                   ckpt_tensor_t tensors[4], ckpt_meta_t *meta)
{
    const int m = lb->m;
    tensors[0] = (ckpt_tensor_t){ .name = "sync.lbfgs_g", .data = g, .rows = 1, .cols = (long)n };
    tensors[1] = (ckpt_tensor_t){ .name = "sync.lbfgs_s", .data = sv, .rows = m, .cols = (long)n };
    tensors[2] = (ckpt_tensor_t){ .name = "sync.lbfgs_y", .data = yv, .rows = m, .cols = (long)n };
    tensors[3] = (ckpt_tensor_t){ .name = "sync.lbfgs_scalars", .data64 = scalars, .rows = 1, .cols = m + 3 };
    meta->extra = tensors;
    meta->nextra = 4;
    memcpy(scalars, lb->rho, (size_t)m * sizeof(double));
    scalars[m] = lb->gamma;
    scalars[m + 1] = lb->f;
    scalars[m + 2] = lb->t;
    ckpt_state_write(meta->sync_state, sizeof meta->sync_state, 8, LBFGS_KEYS,
                     (long[]){ m, lb->head, lb->count, lb->have_g, lb->g_batch, lb->evals, lb->ls_failures, lb->resets });
}

int sb_lbfgs_load(lbfgs_t *lb, const ckpt_t *ck, double *scalars, char *err, size_t len)
{
    const ckpt_meta_t *md = &ck->meta;
    if (!sb_lbfgs_in(ck)) return 0;
    long v[8];
    if (ckpt_state_read(md->sync_state, 8, LBFGS_KEYS, v) != 0 || v[1] >= v[0] || v[2] > v[0] || v[4] > md->step) {
        snprintf(err, len, "checkpoint's L-BFGS state '%.100s' is malformed or out of range", md->sync_state);
        return -1;
    }
    const int m = (int)v[0], head = (int)v[1], count = (int)v[2], have_g = (int)v[3];
    const long g_batch = v[4], evals = v[5], lsf = v[6], resets = v[7];
    if (m != lb->m) {
        snprintf(err, len, "checkpoint holds %d L-BFGS curvature pairs, not --lbfgs-history %d; resume with --lbfgs-history %d",
                 m, lb->m, m);
        return -1;
    }
    if (ckpt_read_row64(ck, "sync.lbfgs_scalars", 0, scalars, (size_t)m + 3) != 0 || !(scalars[m] > 0) || scalars[m + 2] < 0) {
        snprintf(err, len, "checkpoint's L-BFGS scalars (sync.lbfgs_scalars) are missing, of another shape, or out of range");
        return -1;
    }
    memcpy(lb->rho, scalars, (size_t)m * sizeof(double));
    lb->gamma = scalars[m];
    lb->f = scalars[m + 1];
    lb->t = scalars[m + 2];
    lb->head = head;
    lb->count = count;
    lb->have_g = have_g;
    lb->g_batch = g_batch;
    lb->evals = evals;
    lb->ls_failures = lsf;
    lb->resets = resets;
    return 0;
}

/* The iterate W is the model the checkpoint holds; the rest of the state
 * is the gradient G at W (kept across iterations on a fixed batch), the
 * curvature pairs S_i, Y_i as they lie in the ring, the scalars ρ_i, γ, f
 * (in double precision, as the algorithm holds them) and the ring's
 * position. D, X and GX are recomputed before they are read. */
static int local_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    local_t *l = r->sync_state;
    sb_lbfgs_save(&l->lb, l->scalars, l->v[LB_G], l->v[LB_S(0)], l->v[LB_Y(l->lb.m, 0)], l->m->nparams, l->tensors,
                  meta);
    return 0;
}

/* A checkpoint of another paradigm starts L-BFGS afresh from its model; one
 * of Sandblaster holds the same state. */
static int local_resume(run_t *r, const ckpt_t *ck)
{
    local_t *l = r->sync_state;
    if (!sb_lbfgs_in(ck)) return 0;
    if (sb_lbfgs_load(&l->lb, ck, l->scalars, r->err, sizeof r->err) != 0) return -1;
    const int m = l->lb.m;
    const size_t n = l->m->nparams;
    int bad = ckpt_rows(ck, "sync.lbfgs_s") != m || ckpt_rows(ck, "sync.lbfgs_y") != m ||
              ckpt_read_row(ck, "sync.lbfgs_g", 0, l->v[LB_G], n) != 0;
    for (int i = 0; i < m && !bad; i++)
        bad = ckpt_read_row(ck, "sync.lbfgs_s", i, l->v[LB_S(i)], n) != 0 || ckpt_read_row(ck, "sync.lbfgs_y", i, l->v[LB_Y(m, i)], n) != 0;
    if (bad) {
        snprintf(r->err, sizeof r->err, "checkpoint's L-BFGS vectors (sync.lbfgs_g, _s, _y) are missing or of another shape");
        return -1;
    }
    memcpy(l->v[LB_W], l->m->params, n * sizeof(float));   /* the iterate: the checkpoint's model */
    return 0;
}

static int local_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    local_t *l = r->sync_state;
    if (!l || max < 4) return 0;
    int n = 0;
    out[n++] = (sync_stat_t){ "lbfgs_evals", (double)l->lb.evals, NULL };
    out[n++] = (sync_stat_t){ "lbfgs_step", l->lb.t, NULL };
    if (progress) return n;
    out[n++] = (sync_stat_t){ "ls_failures", (double)l->lb.ls_failures, NULL };
    out[n++] = (sync_stat_t){ "portions_per_batch", (double)l->data.P, NULL };
    return n;
}

const sync_ops_t sync_lbfgs = {
    .name = "lbfgs",
    .help = "L-BFGS in one process over --batch-total samples per iteration (Sandblaster's reference)",
    .options = (const char *const[]){ "batch-total", "portion", "lbfgs-history", "line-search", NULL },
    .layout = local_layout,
    .init = local_init,
    .step = local_step,
    .finish = local_finish,
    .destroy = local_destroy,
    .stats = local_stats,
    .ckpt_state = local_ckpt_state,
    .resume = local_resume,
    .eval_params = local_eval_params,
    .recalibrate_bn = 1,
    .step_samples = sb_step_samples,
};
