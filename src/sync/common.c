/* Pieces every collective paradigm shares. */
#include "sync.h"

int sync_layout_all_workers(run_t *r)
{
    r->is_worker = 1;
    r->nworkers = r->comm->size;
    r->wrank = r->comm->rank;
    r->lead = r->comm->rank == 0;
    return 0;
}

int sync_bcast_params(run_t *r)
{
    comm_bcast(r->dp, r->model->params, r->model->nparams * sizeof(float), 0, "the initial parameter broadcast");
    return 0;
}

void sync_average_params(run_t *r, float weight, const char *what)
{
    float *w = r->model->params;
    const size_t n = r->model->nparams;
    for (size_t i = 0; i < n; i++) w[i] *= weight;
    comm_allreduce_sum(r->dp, w, n, what);
}
