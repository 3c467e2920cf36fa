/* --sync downpour: Downpour SGD (DistBelief; docs/algorithms.md §3).
 *
 *   step = 0; acc = 0
 *   loop:
 *     g = ∇(w; batch);  acc += g;  w -= η g      local step between fetches
 *     if (step+1) % n_push == 0:  push acc (nonblocking);  acc = 0
 *     if a fetch is in flight:    wait;  w = fetched + (w − w₀)
 *     if (step+1) % n_fetch == 0: start a fetch (nonblocking, no gate);  w₀ = w
 *
 * A fetch started at the end of one step travels while the next step
 * computes, and lands when that step ends. The worker's own progress since
 * the fetch started (w − w₀) is not in the fetched copy: its gradients were
 * pushed after the request. So the fetched copy is rebased on it rather than
 * taken as it is, and a worker's next gradient sees its own last step, as
 * in asp; only the other workers' pushes arrive a step late. (Taken as it
 * is, the copy set every worker one step back: resnet:8,8 on 4 workers
 * ended an epoch 0.6–1.7 points under asp.) Shards
 * apply pushes with --server-opt (Adagrad: G += Δ², W −= γ Δ / (√G + ε),
 * γ = --adagrad-lr, one accumulator per shard shared by all replicas).
 * Warm start (--warmup-steps K): worker 0 trains K steps alone; the other
 * workers spend their first step on a fetch that the shards hold until then,
 * so they start from its parameters.
 *
 * An evaluation on the lead asks the shards for the global model while its
 * own fetch may be in flight: the fetch is taken first, into a buffer of its
 * own (`landed`), and the next step applies it as if it had waited then, so
 * that evaluating does not change the run (before: the evaluation's request
 * replaced the fetch's, which was lost).
 *
 * Model parallel (--model-parallel M, docs/algorithms.md §11): a replica is M
 * ranks, and each pushes and pulls only the slices of the layers it holds,
 * as a client of its own; worker 0's whole replica warms up together. */
#include <stdlib.h>
#include <string.h>

#include "../../util/util.h"
#include "ps_sync.h"

typedef struct downpour {
    ps_sync_t ps;            /* the shards and client; must stay first */
    float *local_acc;        /* gradients accumulated since the last push */
    float *acc_sent;         /* the accumulator of the push in flight (sent without a copy) */
    float *at_fetch;         /* w₀: the parameters when the fetch in flight started */
    float *landed;           /* a fetch an evaluation took early, for the next step (lead only) */
    int has_landed;          /* landed holds it */
    long since_push;
} downpour_t;

static int downpour_init(run_t *r)
{
    downpour_t *s = xcalloc(1, sizeof *s);
    r->sync_state = s;
    if (ps_sync_setup(r, &s->ps, GATE_ASP, r->cfg->warmup_steps) != 0) return -1;
    if (r->is_worker) {
        s->local_acc = xalloc_floats(r->model->nparams);
        s->acc_sent = xalloc_floats(r->model->nparams);
        s->at_fetch = xalloc_floats(r->model->nparams);
    }
    return 0;
}

static int downpour_step(run_t *r)
{
    downpour_t *s = r->sync_state;
    model_t *m = r->model;
    const size_t n = m->nparams;
    if (r->step == 0 && r->replica != 0 && r->cfg->warmup_steps > 0) {
        /* warm start: this step only fetches worker 0's parameters, which
         * the shards hand out once it has trained --warmup-steps alone */
        ps_pull_start(s->ps.client, 0, m->params);
        ps_pull_wait(s->ps.client, m->params);
        return 0;
    }
    for (size_t i = 0; i < n; i++) s->local_acc[i] += m->grads[i];
    optim_step(r->opt, m->params, m->grads, 0, n, r->lr);
    if (++s->since_push >= r->cfg->push_every) {
        /* the push goes from local_acc as it is; accumulate into the other
         * buffer, whose own push the start of this one has completed */
        ps_push_start(s->ps.client, s->local_acc, r->lr, r->step + 1);
        float *sent = s->local_acc;
        s->local_acc = s->acc_sent;
        s->acc_sent = sent;
        memset(s->local_acc, 0, n * sizeof(float));
        s->since_push = 0;
    }
    if (s->ps.client->pull_active || s->has_landed) {
        float *w = m->params, *d = s->at_fetch;
        for (size_t i = 0; i < n; i++) d[i] = w[i] - d[i];   /* this worker's progress since the request */
        if (s->has_landed) memcpy(w, s->landed, n * sizeof(float));
        else ps_pull_wait(s->ps.client, w);
        s->has_landed = 0;
        if (!r->comm->evicted)   /* evicted: no reply, w stays as it was */
            for (size_t i = 0; i < n; i++) w[i] += d[i];
    }
    /* the next forward and backward read params while this fetch is in flight: it lands in the client's buffer */
    if ((r->step + 1) % r->cfg->fetch_every == 0) {
        memcpy(s->at_fetch, m->params, n * sizeof(float));
        ps_pull_start(s->ps.client, 0, NULL);
    }
    return 0;
}

/* The global model for an evaluation: a fetch in flight is taken first
 * (the shards answer in order), kept for the next step. */
static float *downpour_eval_params(run_t *r)
{
    downpour_t *s = r->sync_state;
    if (s->ps.client->pull_active) {
        const size_t n = r->model->nparams;
        if (!s->landed) s->landed = xalloc_floats(n);
        ps_pull_wait(s->ps.client, s->landed);
        s->has_landed = !r->comm->evicted;   /* evicted: no reply; the next step leaves w as it is */
    }
    return ps_sync_eval_params(r);
}

static void downpour_finish(run_t *r)
{
    downpour_t *s = r->sync_state;
    if (s->since_push > 0) ps_push_start(s->ps.client, s->local_acc, r->lr, r->step);
    ps_sync_finish(r);
}

static void downpour_destroy(run_t *r)
{
    downpour_t *s = r->sync_state;
    if (!s) return;
    ps_sync_release(&s->ps);
    free(s->local_acc);
    free(s->acc_sent);
    free(s->at_fetch);
    free(s->landed);
    free(s);
    r->sync_state = NULL;
}

const sync_ops_t sync_downpour = {
    .name = "downpour",
    .help = "Downpour SGD: local steps, fetch every n_fetch, push every n_push, server Adagrad",
    .options = (const char *const[]){ SYNC_PS_OPTIONS, "fetch-every", "push-every", "warmup-steps", NULL },
    .layout = ps_sync_layout,
    .init = downpour_init,
    .step = downpour_step,
    .serve = ps_sync_serve,
    .finish = downpour_finish,
    .destroy = downpour_destroy,
    .stats = ps_sync_stats,
    .eval_params = downpour_eval_params,
    .resume = ps_sync_resume,
    .model_parallel = 1,
    .stop_mode = ps_sync_stop_mode,
    .announce_stop = ps_sync_announce_stop,
    .lead_lost = ps_sync_lead_lost,
};
