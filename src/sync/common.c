/* Pieces every collective paradigm shares. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
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

void sync_average_params(run_t *r, float *dst, float weight, const char *what)
{
    const float *w = r->model->params;   /* the state follows in the same allocation */
    const size_t n = r->model->nparams + r->model->nstate;
    for (size_t i = 0; i < n; i++) dst[i] = w[i] * weight;
    comm_allreduce_sum(r->dp, dst, n, what);
}

/* ---- every worker's state in a checkpoint (collective paradigms) ---- */

int sync_worker_vectors(run_t *r, float **v, const char **names)
{
    int n = 0;
    v[n] = r->model->params; names[n++] = "sync.worker_params";
    if (r->opt->velocity) { v[n] = r->opt->velocity; names[n++] = "sync.worker_velocity"; }
    if (r->opt->accum) { v[n] = r->opt->accum; names[n++] = "sync.worker_accum"; }
    return n;
}

static void rows_add(run_t *r, sync_rows_t *sr, const char *name, const void *v, size_t n, int f64)
{
    if (sr->nt == SYNC_ROWS_MAX) die("sync_rows: more than %d tensors (a defect)", SYNC_ROWS_MAX);
    if (n > (size_t)INT32_MAX / 2) die("a vector of %zu values is too large to checkpoint per worker; use fewer parameters", n);
    const size_t N = (size_t)r->nworkers, size = f64 ? sizeof(double) : sizeof(float);
    const int i = sr->nt++;
    if (r->lead && !sr->buf[i]) sr->buf[i] = xmalloc(N * n * size);
    /* bounded by --timeout: a dead worker is named, not waited for */
    MPI_Request req;
    MPI_CHECK(r->comm, MPI_Igather(v, (int)n, f64 ? MPI_DOUBLE : MPI_FLOAT, r->lead ? sr->buf[i] : NULL, (int)n,
                                   f64 ? MPI_DOUBLE : MPI_FLOAT, 0, r->comm->world, &req));
    comm_waitall(r->comm, 1, &req, "the checkpoint's gather of every worker's state");
    sr->t[i] = (ckpt_tensor_t){ .name = name, .rows = (long)N, .cols = (long)n };
    if (f64) sr->t[i].data64 = sr->buf[i];
    else sr->t[i].data = sr->buf[i];
}

void sync_rows_add(run_t *r, sync_rows_t *sr, const char *name, const float *v, size_t n) { rows_add(r, sr, name, v, n, 0); }
void sync_rows_add64(run_t *r, sync_rows_t *sr, const char *name, const double *v, size_t n) { rows_add(r, sr, name, v, n, 1); }

void sync_rows_meta(const run_t *r, sync_rows_t *sr, ckpt_meta_t *meta)
{
    if (r->lead) {
        meta->extra = sr->t;
        meta->nextra = sr->nt;
    }
    sr->nt = 0;   /* the buffers stay for the next checkpoint, slot by slot */
}

void sync_ckpt_meta(const run_t *r, ckpt_meta_t *meta, long step, opt_kind_t optimizer)
{
    const config_t *cfg = r->cfg;
    meta->step = step;
    meta->seed = cfg->seed;
    meta->c = r->model->in_c;
    meta->h = r->model->in_h;
    meta->w = r->model->in_w;
    meta->classes = r->model->classes;
    snprintf(meta->model, sizeof meta->model, "%s", cfg->model);
    snprintf(meta->sync, sizeof meta->sync, "%s", cfg->sync);
    snprintf(meta->optimizer, sizeof meta->optimizer, "%s", optim_kind_name(optimizer));
}

void sync_rows_free(sync_rows_t *sr)
{
    for (int i = 0; i < SYNC_ROWS_MAX; i++) free(sr->buf[i]);
    memset(sr, 0, sizeof *sr);
}

int sync_rows_read(run_t *r, const ckpt_t *ck, const char *name, float *dst, size_t n)
{
    if (ckpt_read_row(ck, name, r->wrank, dst, n) == 0) return 0;
    snprintf(r->err, sizeof r->err, "checkpoint has no %s for %d workers of %zu values (saved by another run's settings?)",
             name, r->nworkers, n);
    return -1;
}

int sync_rows_read64(run_t *r, const ckpt_t *ck, const char *name, double *dst, size_t n)
{
    if (ckpt_read_row64(ck, name, r->wrank, dst, n) == 0) return 0;
    snprintf(r->err, sizeof r->err, "checkpoint has no finite F64 %s for %d workers of %zu values", name, r->nworkers, n);
    return -1;
}

void sync_worker_rows_add(run_t *r, sync_rows_t *sr)
{
    float *v[3];
    const char *names[3];
    int nv = sync_worker_vectors(r, v, names);
    for (int i = 0; i < nv; i++) sync_rows_add(r, sr, names[i], v[i], r->model->nparams);
    if (r->model->nstate) sync_rows_add(r, sr, "sync.worker_state", r->model->state, r->model->nstate);
}

int sync_worker_rows_read(run_t *r, const ckpt_t *ck)
{
    float *v[3];
    const char *names[3];
    int nv = sync_worker_vectors(r, v, names);
    for (int i = 0; i < nv; i++)
        if (sync_rows_read(r, ck, names[i], v[i], r->model->nparams) != 0) return -1;
    if (r->model->nstate && sync_rows_read(r, ck, "sync.worker_state", r->model->state, r->model->nstate) != 0) return -1;
    return 0;
}

int sync_state_load(run_t *r, const ckpt_meta_t *m, int n, const ckpt_key_t keys[], long vals[], const char *what)
{
    if (ckpt_state_read(m->sync_state, n, keys, vals) != 0) {
        snprintf(r->err, sizeof r->err, "checkpoint's state of %s ('%.64s') is malformed or out of range", what, m->sync_state);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i].name, "workers") && sync_same_workers(r, (int)vals[i], what) != 0) return -1;
    return 0;
}

int sync_same_workers(run_t *r, int workers, const char *what)
{
    if (workers == r->nworkers) return 0;
    snprintf(r->err, sizeof r->err, "checkpoint holds %s of %d workers, not %d; resume with %d workers",
             what, workers, r->nworkers, workers);
    return -1;
}

/* ---- batch-norm statistics recomputed at given parameters ---- */

enum { RECALIBRATE_SAMPLES = 2048 };

void sync_bn_recalibrate(run_t *r, const float *params)
{
    model_t *m = r->model;
    const dataset_t *d = &r->train;
    if (!m->nstate || d->n < 2) return;
    float *own = m->params, *x = xalloc_floats((size_t)m->max_batch * (size_t)dataset_dim(d));
    m->params = (float *)params;
    const long n = d->n < RECALIBRATE_SAMPLES ? d->n : RECALIBRATE_SAMPLES;
    int k = 0, training = m->training;
    model_set_training(m, 1);
    for (long at = 0; at < n; at += m->max_batch) {
        int B = (int)(n - at < m->max_batch ? n - at : m->max_batch);
        if (B < 2) break;   /* a batch of one has no variance */
        dataset_rows(d, at, B, x);
        m->bn_momentum = 1.0f / (float)++k;   /* the mean over the batches so far */
        model_forward(m, x, B);
    }
    m->bn_momentum = 0.1f;
    model_set_training(m, training);
    m->params = own;
    free(x);
}
