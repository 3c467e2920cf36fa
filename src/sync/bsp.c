/* --sync bsp: bulk-synchronous SGD over all-reduce (docs/algorithms.md §1).
 *
 *   g_i = ∇ on the local batch B;  g = (Σ_i g_i) / N;  every replica applies
 *   the same optimizer step, so the replicas stay identical (global batch N·B).
 *
 * Overlap: model_backward reports each layer's gradient span as soon as it
 * is final (last layer first) and a nonblocking all-reduce starts on it at
 * once; step() waits for all of them before the optimizer step. With
 * --bucket-kb K, adjacent spans are fused into one all-reduce of at least K
 * KiB (the last with what is left), started when it is full: fewer,
 * larger messages where each all-reduce's latency costs more than its
 * bytes (many small layers, many ranks). Equals SSP
 * with staleness 0; on one rank it is exactly --sync none. With
 * --model-parallel M, each rank all-reduces the slices it owns among the
 * ranks of the other replicas that own the same slices (r->dp).
 *
 * --sync-bn: batch normalization over every replica's batch together
 * (nn/bn.c merges the replicas' per-channel sums), so N replicas of batch
 * B compute what one process with batch N·B would. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "sync.h"

/* Spans wait in a queue and one all-reduce is in flight at a time, in
 * backward order: every MPI (SimGrid's included) keeps concurrent
 * nonblocking collectives apart only by call order, and one in flight is
 * enough to hide the reduction behind the layers still computing. */
typedef struct bsp {
    run_t *r;
    size_t off[64], len[64];   /* queued spans, one per parameter layer or bucket */
    size_t bucket;             /* --bucket-kb in floats (0: a span per layer) */
    size_t lo, hi;             /* the bucket being filled: [lo, hi), empty if lo == hi */
    int queued, started;       /* spans queued / all-reduces started this step */
    MPI_Request req;           /* the one in flight, or MPI_REQUEST_NULL */
    sync_rows_t rows;          /* checkpoints: every replica's batch-norm statistics */
    /* --sync-bn: the gathers run on a communicator of their own, since
     * whether a gradient all-reduce has started when one is made differs
     * from rank to rank */
    bn_sync_t bn;
    comm_t bn_comm;
} bsp_t;

/* Start the next queued span if nothing is in flight. */
static void bsp_pump(bsp_t *s)
{
    if (s->req != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
        if (!done) return;
    }
    if (s->started < s->queued) {
        comm_iallreduce_sum(s->r->dp, s->r->model->grads + s->off[s->started], s->len[s->started], &s->req);
        s->started++;
    }
}

static void bsp_queue(bsp_t *s, size_t off, size_t len)
{
    if (s->queued == 64) die("bsp: more than 64 parameter layers");
    s->off[s->queued] = off;
    s->len[s->queued] = len;
    s->queued++;
    bsp_pump(s);
}

/* The bucket being filled goes to the queue. */
static void bsp_flush(bsp_t *s)
{
    if (s->hi > s->lo) bsp_queue(s, s->lo, s->hi - s->lo);
    s->lo = s->hi = 0;
}

static void bsp_grad_ready(void *ctx, size_t off, size_t len)
{
    bsp_t *s = ctx;
    if (!s->bucket) { bsp_queue(s, off, len); return; }
    /* backward reports spans from the end of the vector towards its start:
     * one that ends where the bucket begins joins it (up to one MPI call) */
    if (s->hi > s->lo && (off + len != s->lo || s->hi - off > COMM_MAX_SPAN)) bsp_flush(s);
    if (s->hi == s->lo) s->hi = off + len;
    s->lo = off;
    if (s->hi - s->lo >= s->bucket) bsp_flush(s);
}

/* --sync-bn: every replica's per-channel sums, rank by rank */
static int bsp_bn_gather(void *ctx, const double *mine, double *all, int n)
{
    bsp_t *s = ctx;
    comm_allgather_double(&s->bn_comm, mine, all, n, "the batch-norm sums of --sync-bn");
    return s->bn_comm.size;
}

static int bsp_init(run_t *r)
{
    bsp_t *s = xcalloc(1, sizeof *s);
    s->r = r;
    s->req = MPI_REQUEST_NULL;
    s->bucket = (size_t)r->cfg->bucket_kb * 1024 / sizeof(float);
    r->sync_state = s;
    r->model->grad_ready = bsp_grad_ready;
    r->model->grad_ctx = s;
    if (r->cfg->sync_bn) {
        const size_t w = 2 * (size_t)model_bn_channels(r->model) + 1;
        s->bn.gather = bsp_bn_gather;
        s->bn.ctx = s;
        comm_split(r->dp, 0, r->dp->rank, &s->bn_comm);
        s->bn.mine = xmalloc(sizeof(double) * w);
        s->bn.all = xmalloc(sizeof(double) * w * (size_t)r->replicas);
        r->model->bn_sync = &s->bn;
        r->own_comm = &s->bn_comm;
    }
    return sync_bcast_params(r);
}

static int bsp_step(run_t *r)
{
    bsp_t *s = r->sync_state;
    bsp_flush(s);
    for (;;) {
        comm_waitall(r->dp, 1, &s->req, "the gradient all-reduce");
        if (s->started == s->queued) break;
        bsp_pump(s);
    }
    s->queued = s->started = 0;
    optim_step_scaled(r->opt, r->model->params, r->model->grads, 1.0f / (float)r->replicas, 0, r->model->nparams, r->lr);
    return 0;
}

/* The replicas' batch-norm statistics differ (each normalizes its own
 * batches); before an evaluation or a checkpoint they become their mean on
 * every replica, so that the model evaluated and saved is the one every
 * replica holds. Training never reads them, so the trajectory is the same. */
static void bsp_sync_bn(run_t *r)
{
    model_t *m = r->model;
    /* with --sync-bn every replica's statistics are already the same bits */
    if (!m->nstate || r->replicas < 2 || m->bn_sync) return;
    comm_allreduce_sum(r->dp, m->state, m->nstate, "the batch-norm statistics average");
    const float inv = 1.0f / (float)r->replicas;
    for (size_t i = 0; i < m->nstate; i++) m->state[i] *= inv;
}

/* Between evaluations each replica's running statistics are its own: a
 * checkpoint keeps every replica's (the model's are their mean, from
 * bsp_sync_bn), so that a resumed run continues each one exactly. */
static int bsp_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    bsp_t *s = r->sync_state;
    if (!r->model->nstate || r->replicas < 2) return 0;
    sync_rows_add(r, &s->rows, "sync.worker_state", r->model->state, r->model->nstate);
    sync_rows_meta(r, &s->rows, meta);
    return 0;
}

/* A bsp checkpoint of as many replicas gives each its own statistics back;
 * any other checkpoint starts them all from the model's. */
static int bsp_resume(run_t *r, const ckpt_t *ck)
{
    if (!r->model->nstate || strcmp(ck->meta.sync, "bsp") || ckpt_rows(ck, "sync.worker_state") != r->replicas) return 0;
    return sync_rows_read(r, ck, "sync.worker_state", r->model->state, r->model->nstate);
}

static void bsp_destroy(run_t *r)
{
    bsp_t *s = r->sync_state;
    if (s) {
        sync_rows_free(&s->rows);
        free(s->bn.mine);
        free(s->bn.all);
        if (s->bn.gather) comm_split_free(&s->bn_comm);
    }
    r->model->grad_ready = NULL;
    r->model->bn_sync = NULL;
    r->own_comm = NULL;
    free(r->sync_state);
    r->sync_state = NULL;
}

const sync_ops_t sync_bsp = {
    .name = "bsp",
    .takes_sync_bn = 1,
    .help = "gradient all-reduce every step, overlapped with backward",
    .options = (const char *const[]){ "bucket-kb", "sync-bn", NULL },
    .layout = sync_layout_all_workers,
    .init = bsp_init,
    .step = bsp_step,
    .destroy = bsp_destroy,
    .sync_bn = bsp_sync_bn,
    .ckpt_state = bsp_ckpt_state,
    .resume = bsp_resume,
    .model_parallel = 1,
    .posted_receives = 1,
};
