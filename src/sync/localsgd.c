/* --sync localsgd / fedavg: local SGD and federated averaging
 * (docs/algorithms.md §2).
 *
 *   every worker takes H (--period) local optimizer steps, then
 *   θ ← Σ_k w_k θ_k   with w_k = 1/N (localsgd) or n_k / Σ_{j∈S} n_j (fedavg,
 *   n_k = worker k's sample count, S the round's sampled workers).
 *
 * FedAvg's client sampling (--fedavg-fraction C): each round ⌈C·N⌉ workers
 * are drawn from a generator seeded by (seed, round), so every rank draws
 * the same set without communicating. Every worker trains each round (the
 * unsampled ones' work is discarded by giving them weight 0), which is
 * equivalent to FedAvg where only the sampled clients train from the global
 * model. Momentum/Adagrad state stays local and is never averaged.
 *
 * The model evaluated during the run is the average θ̄ = Σ_k w_k θ_k with
 * this round's weights (what averaging now would give): mid-round it is
 * all-reduced into a buffer of its own on every worker at the evaluation,
 * so the workers' models, and the run, are what they would have been. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "rules.h"
#include "sync.h"

typedef struct localsgd {
    int fedavg;
    long rounds;
    double total_n;        /* Σ n_k over all workers */
    double *n_k;           /* (nworkers) sample counts */
    int *chosen;           /* (nworkers) this round's sample */
    sync_rows_t rows;      /* every worker's state, gathered for a checkpoint */
    float *avg;            /* (nparams + nstate) θ̄ for an evaluation mid-round */
    int eval_avg;          /* the next evaluation reads avg (else the workers hold θ̄ already) */
} localsgd_t;

static const ckpt_key_t STATE_KEYS[] = { { "rounds", 0, LONG_MAX }, { "workers", 1, INT_MAX } };   /* the checkpoint's sync_state */

static int localsgd_init(run_t *r)
{
    localsgd_t *s = xcalloc(1, sizeof *s);
    r->sync_state = s;
    s->fedavg = !strcmp(r->cfg->sync, "fedavg");
    s->n_k = xcalloc((size_t)r->nworkers, sizeof(double));
    s->chosen = xcalloc((size_t)r->nworkers, sizeof(int));
    s->avg = xalloc_floats(r->model->nparams + r->model->nstate);
    int mine = (int)r->part_n;
    int *counts = xcalloc((size_t)r->nworkers, sizeof(int));
    MPI_CHECK(r->comm, MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, r->comm->world));
    for (int k = 0; k < r->nworkers; k++) { s->n_k[k] = counts[k]; s->total_n += counts[k]; }
    free(counts);
    return sync_bcast_params(r);
}

void fedavg_sample(uint64_t seed, long round, int N, double fraction, int *chosen)
{
    int m = (int)ceil(fraction * N - 1e-9);
    if (m < 1) m = 1;
    memset(chosen, 0, sizeof(int) * (size_t)N);
    if (m == N) {
        for (int k = 0; k < N; k++) chosen[k] = 1;
    } else {
        rng_t g;
        rng_seed(&g, seed, 0xfeda0000ULL + (uint64_t)round);
        for (int got = 0; got < m;) {
            int k = (int)rng_below(&g, (uint32_t)N);
            if (!chosen[k]) { chosen[k] = 1; got++; }
        }
    }
}

float fedavg_weight(const double *n_k, const int *chosen, int N, int k)
{
    double sum = 0;
    for (int j = 0; j < N; j++) if (chosen[j]) sum += n_k[j];
    return chosen[k] ? (float)(n_k[k] / sum) : 0.0f;
}

/* This round's weight for this rank. */
static float round_weight(run_t *r, localsgd_t *s)
{
    if (!s->fedavg) return 1.0f / (float)r->nworkers;
    fedavg_sample((uint64_t)r->cfg->seed, s->rounds, r->nworkers, r->cfg->fedavg_fraction, s->chosen);
    return fedavg_weight(s->n_k, s->chosen, r->nworkers, r->wrank);
}

static void localsgd_average(run_t *r)
{
    localsgd_t *s = r->sync_state;
    sync_average_params(r, r->model->params, round_weight(r, s), "the parameter average");
    s->rounds++;
}

static int localsgd_step(run_t *r)
{
    optim_step(r->opt, r->model->params, r->model->grads, 0, r->model->nparams, r->lr);
    if ((r->step + 1) % r->cfg->period == 0) localsgd_average(r);
    return 0;
}

/* Every worker, before an evaluation: θ̄ into avg, by the round's own
 * average (so an evaluation mid-round scores exactly the model a run
 * ending there delivers), unless the round has just ended. */
static void localsgd_eval_prepare(run_t *r)
{
    localsgd_t *s = r->sync_state;
    s->eval_avg = r->step % r->cfg->period != 0;
    if (!s->eval_avg) return;
    sync_average_params(r, s->avg, round_weight(r, s), "the evaluated model's average");
}

/* The lead: the parameters to evaluate, the state after them. */
static float *localsgd_eval_params(run_t *r)
{
    localsgd_t *s = r->sync_state;
    return s->eval_avg ? s->avg : r->model->params;
}

static void localsgd_finish(run_t *r)
{
    /* the run ends on a common model */
    if (r->step % r->cfg->period != 0) localsgd_average(r);
}

/* A worker's state: its parameters, its optimizer's vectors and its
 * batch-norm statistics (len: each one's floats). */
static int state_vectors(run_t *r, float **v, const char **names, size_t *len)
{
    int n = 0;
    const size_t np = r->model->nparams;
    v[n] = r->model->params; len[n] = np; names[n++] = "sync.worker_params";
    if (r->opt->velocity) { v[n] = r->opt->velocity; len[n] = np; names[n++] = "sync.worker_velocity"; }
    if (r->opt->accum) { v[n] = r->opt->accum; len[n] = np; names[n++] = "sync.worker_accum"; }
    if (r->model->nstate) { v[n] = r->model->state; len[n] = r->model->nstate; names[n++] = "sync.worker_state"; }
    return n;
}

/* Mid-period the workers' models differ, and their momentum or Adagrad
 * state always does: a checkpoint keeps every worker's, gathered on the
 * lead (rank 0), with the round count fedavg's sampling follows. */
static int localsgd_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    localsgd_t *s = r->sync_state;
    float *v[4];
    const char *names[4];
    size_t len[4];
    int nv = state_vectors(r, v, names, len);
    for (int i = 0; i < nv; i++) sync_rows_add(r, &s->rows, names[i], v[i], len[i]);
    sync_rows_meta(r, &s->rows, meta);
    if (!r->lead) return 0;
    ckpt_state_write(meta->sync_state, sizeof meta->sync_state, 2, STATE_KEYS, (long[]){ s->rounds, r->nworkers });
    return 0;
}

/* Each worker takes back its own row. A checkpoint without worker state
 * (another paradigm's) continues from its single saved model. */
static int localsgd_resume(run_t *r, const ckpt_t *ck)
{
    localsgd_t *s = r->sync_state;
    const ckpt_meta_t *m = &ck->meta;
    if (strcmp(m->sync, "localsgd") && strcmp(m->sync, "fedavg")) return 0;
    long kv[2];   /* rounds, workers */
    if (sync_state_load(r, m, 2, STATE_KEYS, kv, "the local models") != 0) return -1;
    const long rounds = kv[0];
    float *v[4];
    const char *names[4];
    size_t len[4];
    int nv = state_vectors(r, v, names, len);
    for (int i = 0; i < nv; i++)
        if (sync_rows_read(r, ck, names[i], v[i], len[i]) != 0) return -1;
    s->rounds = rounds;
    return 0;
}

static void localsgd_destroy(run_t *r)
{
    localsgd_t *s = r->sync_state;
    sync_rows_free(&s->rows);
    free(s->n_k);
    free(s->chosen);
    free(s->avg);
    free(s);
    r->sync_state = NULL;
}

static int localsgd_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    localsgd_t *s = r->sync_state;
    if (max < 1 || !s) return 0;
    out[0] = (sync_stat_t){ "rounds", (double)s->rounds, NULL };
    return 1;
}

#define LOCALSGD_OPS(NAME, HELP, OPTIONS) {                                                                     \
        .name = NAME, .help = HELP, .options = OPTIONS, .layout = sync_layout_all_workers, .init = localsgd_init,           \
        .step = localsgd_step, .finish = localsgd_finish, .destroy = localsgd_destroy,                  \
        .stats = localsgd_stats, .ckpt_state = localsgd_ckpt_state, .resume = localsgd_resume,          \
        .eval_prepare = localsgd_eval_prepare, .eval_params = localsgd_eval_params, .eval_has_state = 1,       \
        .posted_receives = 1 }

static const char *const localsgd_options[] = { "period", NULL };
static const char *const fedavg_options[] = { "period", "fedavg-fraction", NULL };
const sync_ops_t sync_localsgd = LOCALSGD_OPS("localsgd", "H local steps, then parameter averaging", localsgd_options);
const sync_ops_t sync_fedavg = LOCALSGD_OPS("fedavg", "local SGD with per-round client sampling and sample-count weights",
                                               fedavg_options);
