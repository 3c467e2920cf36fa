/* --sync bsp: bulk-synchronous SGD over all-reduce (ALGORITHMS §1).
 *
 *   g_i = ∇ on the local batch B;  g = (Σ_i g_i) / N;  every replica applies
 *   the same optimizer step, so the replicas stay identical (global batch N·B).
 *
 * Overlap: model_backward reports each layer's gradient span as soon as it
 * is final (last layer first) and a nonblocking all-reduce starts on it at
 * once; step() waits for all of them before the optimizer step. Equals SSP
 * with staleness 0; on one rank it is exactly --sync none. */
#include <stdlib.h>

#include "../util/util.h"
#include "sync.h"

typedef struct bsp {
    run_t *r;
    MPI_Request reqs[64];   /* one per parameter layer */
    int nreq;
} bsp_t;

static void bsp_grad_ready(void *ctx, size_t off, size_t len)
{
    bsp_t *s = ctx;
    if (s->nreq == 64) die("bsp: more than 64 parameter layers");
    comm_iallreduce_sum(s->r->comm, s->r->model->grads + off, len, &s->reqs[s->nreq++]);
    /* give MPI a chance to progress the earlier layers' reductions */
    int flag;
    MPI_Testall(s->nreq, s->reqs, &flag, MPI_STATUSES_IGNORE);
}

static int bsp_init(run_t *r)
{
    bsp_t *s = xcalloc(1, sizeof *s);
    s->r = r;
    r->sync_state = s;
    r->model->grad_ready = bsp_grad_ready;
    r->model->grad_ctx = s;
    return sync_bcast_params(r);
}

static int bsp_step(run_t *r)
{
    bsp_t *s = r->sync_state;
    comm_waitall(r->comm, s->nreq, s->reqs, "the gradient all-reduce");
    s->nreq = 0;
    float *g = r->model->grads;
    const float inv = 1.0f / (float)r->nworkers;
    for (size_t i = 0; i < r->model->nparams; i++) g[i] *= inv;
    optim_step(r->opt, r->model->params, g, 0, r->model->nparams, r->lr);
    return 0;
}

static void bsp_destroy(run_t *r)
{
    r->model->grad_ready = NULL;
    free(r->sync_state);
    r->sync_state = NULL;
}

const sync_ops_t sync_bsp = {
    .name = "bsp",
    .help = "gradient all-reduce every step, overlapped with backward",
    .layout = sync_layout_all_workers,
    .init = bsp_init,
    .step = bsp_step,
    .destroy = bsp_destroy,
};
