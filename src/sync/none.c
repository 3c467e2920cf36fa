/* --sync none: plain single-process SGD. The reference every distributed
 * paradigm is tested against (e.g. bsp on one rank must equal it). */
#include <stdio.h>

#include "sync.h"

static int none_layout(run_t *r)
{
    const long M = r->cfg->model_parallel;
    if (M == 1 && r->comm->size > 1) {
        snprintf(r->err, sizeof r->err,
                 "--sync none trains in one process but %d ranks were started; run without mpirun or choose a distributed --sync",
                 r->comm->size);
        return -1;
    }
    if (r->comm->size != M) {
        snprintf(r->err, sizeof r->err,
                 "--sync none --model-parallel %ld trains one replica over %ld ranks but %d were started; use mpirun -np %ld",
                 M, M, r->comm->size, M);
        return -1;
    }
    return sync_layout_all_workers(r);
}

static int none_step(run_t *r)
{
    optim_step(r->opt, r->model->params, r->model->grads, 0, r->model->nparams, r->lr);
    return 0;
}

const sync_ops_t sync_none = {
    .name = "none",
    .help = "single process, no communication",
    .layout = none_layout,
    .step = none_step,
    .model_parallel = 1,
};
