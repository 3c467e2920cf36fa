#include "evaluate.h"

#include <string.h>

#include "../util/util.h"
#include "parallel.h"

/* The model the paradigm delivers during the run (e.g. the parameter
 * server's), its parameters and its batch-normalization statistics. */
float *delivered_model(run_t *r, float **state)
{
    float *p = r->model->params;
    *state = r->model->state;
    if (r->ops->eval_params) {
        p = r->ops->eval_params(r);
        if (r->ops->eval_has_state) *state = p + r->model->nparams;
    }
    return p;
}

/* Test accuracy and loss of the model with these parameters and
 * statistics (the model's own when NULL). */
void evaluate_model(run_t *r, evaluator_t *ev, float *params, float *state)
{
    model_t *m = r->model;
    float *own = m->params, *own_state = m->state;
    if (params) m->params = params;
    if (state) m->state = state;
    const dataset_t *d = &r->test;
    const long dim = dataset_dim(d);
    long correct = 0;
    double loss = 0;
    if (!ev->x) ev->x = xalloc_floats((size_t)m->max_batch * (size_t)dim);
    if (r->ops && r->ops->recalibrate_bn && m->nstate) sync_bn_recalibrate(r, m->params);   /* (dsgd eval: no paradigm) */
    model_set_training(m, 0);   /* batch normalization by its running statistics */
    /* an lc model's halos while evaluating are not the training step's */
    const uint64_t halo_bytes = r->mp ? r->mp->halo_bytes : 0;
    const double halo_wait = r->mp ? r->mp->halo_wait_s : 0;
    for (long at = 0; at < d->n; at += m->max_batch) {
        int B = (int)((d->n - at) < m->max_batch ? d->n - at : m->max_batch);
        dataset_rows(d, at, B, ev->x);
        model_forward(m, ev->x, B);
        loss += (double)model_loss(m, ev->labels + at, B) * B;
        correct += model_correct(m, ev->labels + at, B);
    }
    ev->acc = (double)correct / (double)d->n;
    ev->loss = loss / (double)d->n;
    m->params = own;
    m->state = own_state;
    model_set_training(m, 1);
    if (r->mp) { r->mp->halo_bytes = halo_bytes; r->mp->halo_wait_s = halo_wait; }
}

/* Test accuracy and loss of the paradigm's model to evaluate (during the
 * run, global = 1: e.g. the parameter server's), or of the local replica. */
void evaluate(run_t *r, evaluator_t *ev, int global)
{
    float *state = NULL, *params = global ? delivered_model(r, &state) : NULL;
    evaluate_model(r, ev, params, state);
}

/* What an evaluation's record says besides the accuracy, as of now (after
 * the paradigm handed out the model to evaluate, whose reply may carry its
 * figures). run_s: seconds since the common start; train_s: the lead's
 * training time so far. */
void eval_meta(run_t *r, double train_loss, double sps, double run_s, double train_s, long samples, snap_meta_t *m)
{
    memset(m, 0, sizeof *m);
    m->step = r->step;
    m->samples = samples;
    m->time = now_s();
    m->run_s = run_s;
    m->train_s = train_s;
    m->train_loss = train_loss;
    m->sps = sps;
    m->lr = r->lr;
    sync_stat_t st[16];
    int n = r->ops->stats ? r->ops->stats(r, st, 16, 1) : 0;
    for (int i = 0; i < n && m->nstats < SNAP_STATS; i++) {
        if (st[i].raw) continue;
        snprintf(m->key[m->nstats], sizeof m->key[0], "%s", st[i].key);
        m->value[m->nstats++] = st[i].value;
    }
}

/* --eval-offline, during the run: keep the delivered model and go on. */
int snapshot_take(run_t *r, evaluator_t *ev, double train_loss, double sps, double run_s, double train_s,
                  long samples, char *err, size_t errlen)
{
    float *state, *p = delivered_model(r, &state);
    snap_meta_t m;
    eval_meta(r, train_loss, sps, run_s, train_s, samples, &m);
    return snapshots_add(&ev->snaps, p, r->model->nparams, state, r->model->nstate, &m, err, errlen);
}
