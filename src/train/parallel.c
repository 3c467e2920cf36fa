#include "parallel.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

int par_layout(run_t *r)
{
    const int M = (int)r->cfg->model_parallel;
    r->replica = r->wrank;
    r->replicas = r->nworkers;
    r->mp_index = 0;
    r->mp_size = 1;
    r->dp = r->comm;
    r->evaluates = r->lead;
    if (M == 1) return 0;
    if (!r->ops->model_parallel) {
        snprintf(r->err, sizeof r->err, "--sync %s does not combine with --model-parallel; use none, bsp or downpour",
                 r->cfg->sync);
        return -1;
    }
    if (r->nworkers % M != 0) {
        snprintf(r->err, sizeof r->err,
                 "--model-parallel %d needs the worker ranks (%d here) to be a multiple of %d: start replicas x %d workers",
                 M, r->nworkers, M, M);
        return -1;
    }
    r->mp_size = M;
    if (r->is_worker) {
        r->replica = r->wrank / M;
        r->mp_index = r->wrank % M;
    }
    r->replicas = r->nworkers / M;
    /* the lead is worker 0: partition 0 of replica 0, whose ranks evaluate together */
    r->evaluates = r->is_worker && r->replica == 0;
    return 0;
}

void par_groups(run_t *r)
{
    if (r->mp_size == 1) return;
    /* servers get groups of their own, which they never use */
    const int solo = r->nworkers + r->comm->rank;
    comm_split(r->comm, r->is_worker ? r->replica : solo, r->mp_index, &r->mp_comm);
    comm_split(r->comm, r->is_worker ? r->mp_index : solo, r->replica, &r->dp_comm);
    r->dp = &r->dp_comm;
    r->mp = comm_mp_create(&r->mp_comm, 0);
}

int par_check_model(run_t *r)
{
    if (r->mp_size == 1) return 0;
    const dataset_t *d = &r->train;
    return model_part_check(r->cfg->model, d->c, d->h, d->w, d->classes, r->mp_size, r->err, sizeof r->err);
}

model_t *par_model_create(run_t *r, int max_batch)
{
    const dataset_t *d = &r->train;
    if (r->mp_size == 1) return model_create(r->cfg->model, d->c, d->h, d->w, d->classes, max_batch);
    model_part_t part = { .index = r->mp_index, .count = r->mp_size, .gather = comm_mp_gather,
                          .sum = comm_mp_sum, .halo_start = comm_mp_halo_start, .halo_wait = comm_mp_halo_wait,
                          .ctx = r->mp };
    model_t *m = model_create_part(r->cfg->model, d->c, d->h, d->w, d->classes, max_batch, &part);
    /* the gather stage holds the widest split output of a whole batch */
    size_t cap = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        size_t n = (size_t)max_batch * (size_t)l->out_c * (size_t)l->out_h * (size_t)l->out_w;
        if (l->pb && n > cap) cap = n;
    }
    free(r->mp->stage);
    r->mp->stage = xalloc_floats(cap);
    r->mp->cap = cap;
    return m;
}

/* The local optimizer-state vectors parallel to the parameters. */
static int state_vectors(const model_t *m, const optim_t *o, float **v)
{
    int n = 0;
    v[n++] = m->params;
    if (o && o->velocity) v[n++] = o->velocity;
    if (o && o->accum) v[n++] = o->accum;
    return n;
}

int par_restore(run_t *r, const ckpt_t *ck, char *why, size_t len)
{
    if (r->mp_size == 1) return ckpt_restore(ck, r->model, r->opt, why, len);
    /* every rank reads the whole checkpoint and keeps its slice */
    const dataset_t *d = &r->train;
    model_t *full = model_create(r->cfg->model, d->c, d->h, d->w, d->classes, 1);
    optim_t *fo = optim_create(&r->opt->cfg, full->nparams);
    int rc = ckpt_restore(ck, full, fo, why, len);
    if (rc == 0) {
        const int ns = model_spans(r->model, NULL, 0);
        model_span_t *sp = xmalloc(sizeof *sp * (size_t)ns);
        model_spans(r->model, sp, ns);
        float *dst[3], *src[3];
        int nv = state_vectors(r->model, r->opt, dst);
        state_vectors(full, fo, src);
        for (int v = 0; v < nv; v++)
            for (int i = 0; i < ns; i++)
                memcpy(dst[v] + sp[i].off, src[v] + sp[i].full_off, sizeof(float) * sp[i].len);
        free(sp);
    }
    optim_free(fo);
    model_free(full);
    return rc;
}

void par_assemble(run_t *r, const model_t **mo, const optim_t **oo)
{
    *mo = r->model;
    *oo = r->opt;
    if (r->mp_size == 1) return;
    comm_t *c = &r->mp_comm;
    const int M = c->size, root = 0;
    /* each partition's spans (an lc model's blocks differ in rows, so in
     * how many): counts first, then the (off, full_off, len) triples */
    const int ns = model_spans(r->model, NULL, 0);
    model_span_t *sp = xmalloc(sizeof *sp * (size_t)ns);
    model_spans(r->model, sp, ns);
    uint64_t *mine = xmalloc(sizeof(uint64_t) * (size_t)(1 + 3 * ns));
    mine[0] = r->model->nparams;
    for (int i = 0; i < ns; i++) {
        mine[1 + 3 * i] = sp[i].off;
        mine[2 + 3 * i] = sp[i].full_off;
        mine[3 + 3 * i] = sp[i].len;
    }
    free(sp);
    const int lead = c->rank == root;
    int per = 1 + 3 * ns, *pers = lead ? xmalloc(sizeof(int) * (size_t)M) : NULL, *pdis = NULL;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(c, MPI_Igather(&per, 1, MPI_INT, pers, 1, MPI_INT, root, c->world, &req));
    comm_waitall(c, 1, &req, "the checkpoint's model-parallel gather");
    uint64_t *spans = NULL;
    if (lead) {
        pdis = xmalloc(sizeof(int) * (size_t)M);
        for (int q = 0, at = 0; q < M; q++) { pdis[q] = at; at += pers[q]; }
        spans = xmalloc(sizeof(uint64_t) * (size_t)(pdis[M - 1] + pers[M - 1]));
    }
    MPI_CHECK(c, MPI_Igatherv(mine, per, MPI_UINT64_T, spans, pers, pdis, MPI_UINT64_T, root, c->world, &req));
    comm_waitall(c, 1, &req, "the checkpoint's model-parallel gather");
    free(mine);
    int *counts = NULL, *displs = NULL;
    float *stage = NULL;
    if (lead) {
        /* the whole model: made the first time the lead writes a checkpoint */
        const dataset_t *d = &r->train;
        if (!r->full) r->full = model_create(r->cfg->model, d->c, d->h, d->w, d->classes, 1);
        if (!r->full_opt) r->full_opt = optim_create(&r->opt->cfg, r->full->nparams);
        counts = xmalloc(sizeof(int) * (size_t)M);
        displs = xmalloc(sizeof(int) * (size_t)M);
        for (int q = 0, at = 0; q < M; q++) { counts[q] = (int)spans[pdis[q]]; displs[q] = at; at += counts[q]; }
        stage = xalloc_floats(r->full->nparams);
    }
    float *loc[3], *dst[3] = { NULL, NULL, NULL };
    const int nv = state_vectors(r->model, r->opt, loc);
    if (lead) state_vectors(r->full, r->full_opt, dst);
    for (int v = 0; v < nv; v++) {
        MPI_CHECK(c, MPI_Igatherv(loc[v], (int)r->model->nparams, MPI_FLOAT, stage, counts, displs, MPI_FLOAT, root,
                                  c->world, &req));
        comm_waitall(c, 1, &req, "the checkpoint's model-parallel gather");
        if (!lead) continue;
        for (int q = 0; q < M; q++)
            for (int i = 0; i < (pers[q] - 1) / 3; i++) {
                const uint64_t *s = spans + pdis[q] + 1 + 3 * i;
                memcpy(dst[v] + s[1], stage + displs[q] + s[0], sizeof(float) * s[2]);
            }
    }
    free(spans); free(counts); free(displs); free(stage); free(pers); free(pdis);
    if (lead) { *mo = r->full; *oo = r->full_opt; }
}

void par_free(run_t *r)
{
    model_free(r->full);
    optim_free(r->full_opt);
    r->full = NULL;
    r->full_opt = NULL;
    comm_mp_free(r->mp);
    r->mp = NULL;
    if (r->mp_size > 1) {
        comm_split_free(&r->mp_comm);
        comm_split_free(&r->dp_comm);
    }
}
