/* --sync gossip: gossiping SGD (Jin, Yuan, Iandola, Keutzer 2016;
 * docs/algorithms.md §8). No server and no barrier in the step loop. Each
 * step every rank takes its local optimizer step, θ_i' = θ_i − η g_i, then:
 *
 *   pull   pick a peer j uniformly among the live others (a per-rank seeded
 *          generator, fresh each step); read θ_j' with a one-sided MPI_Get
 *          from j's published copy, j does not stop; θ_i = (1−β) θ_i' + β θ_j'
 *   push   send θ_i' to a random peer; mix every message received since the
 *          last step: θ_i = (1−β) θ_i' + β mean(received)
 *   round  a random perfect matching per round from a seed shared by all
 *          ranks; partners exchange θ' and mix (deterministic; for tests)
 *
 * This file is the algorithm; gossip.h lists the files of the protocol
 * around it (the published copies, liveness, the finish, checkpoints). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "gossip.h"

static gossip_mode_t gossip_mode_of(const char *m)
{
    return !strcmp(m, "pull") ? GOSSIP_PULL : !strcmp(m, "push") ? GOSSIP_PUSH : !strcmp(m, "round") ? GOSSIP_ROUND
                                                                                                    : GOSSIP_BAD;
}

static int pick_peer(run_t *r, gossip_t *g)
{
    int N = r->comm->size, live = 0;
    for (int j = 0; j < N; j++) live += g->alive[j] && j != r->comm->rank;
    if (!live) return -1;
    int k = (int)rng_below(&g->rng, (uint32_t)live);
    for (int j = 0; j < N; j++)
        if (g->alive[j] && j != r->comm->rank && k-- == 0) return j;
    return -1;
}

static int gossip_init(run_t *r)
{
    gossip_t *g = xcalloc(1, sizeof *g);
    r->sync_state = g;
    const char *m = r->cfg->gossip;
    g->mode = gossip_mode_of(m);
    if (g->mode == GOSSIP_BAD) {
        snprintf(r->err, sizeof r->err, "unknown --gossip '%s'; choose pull, push or round", m);
        return -1;
    }
    if (r->comm->size < 2) {
        snprintf(r->err, sizeof r->err, "--sync gossip needs at least 2 ranks");
        return -1;
    }
    int N = r->comm->size;
    g->beta = (float)r->cfg->beta;
    rng_seed(&g->rng, (uint64_t)r->cfg->seed, 0x6055000ULL + (uint64_t)r->comm->rank);
    /* a replica is its parameters and its batch-norm statistics (the state
     * vector, right after them): both are published and mixed */
    g->np = r->model->nparams;
    g->n = r->model->nparams + r->model->nstate;
    g->bytes = sizeof(published_t) + g->n * sizeof(float);
    g->peer = xmalloc(g->bytes);
    g->seq_a = xmalloc(sizeof(published_t));
    g->seq_b = xmalloc(sizeof(published_t));
    g->used = xcalloc((size_t)N, sizeof(int));
    g->mix = xalloc_floats(g->n);
    g->alive = xcalloc((size_t)N, sizeof(int));
    g->done_from = xcalloc((size_t)N, sizeof(int));
    g->max_inbox = 2 * N;
    g->inbox = xcalloc((size_t)g->max_inbox, sizeof(gossip_inbox_t));
    g->seen_step = xcalloc((size_t)N, sizeof(int64_t));
    g->seen_time = xcalloc((size_t)N, sizeof(double));
    g->mixed_step = xcalloc((size_t)N, sizeof(int64_t));
    double now = gossip_awake_now(r, g);
    for (int j = 0; j < N; j++) { g->alive[j] = 1; g->seen_step[j] = g->mixed_step[j] = -1; g->seen_time[j] = now; }
    for (int k = 0; k < NSEND; k++) { g->sbuf[k] = xmalloc(g->n * sizeof(float)); g->sreq[k] = MPI_REQUEST_NULL; }
    if (r->lead) g->avg = xalloc_floats(g->n);
    gossip_window_open(r, g);
    sync_bcast_params(r);
    gossip_publish(r, g, 0);
    MPI_CHECK(r->comm, MPI_Barrier(r->comm->world));   /* every window holds θ_0 before anyone reads */
    return 0;
}

static void mix_into(float *theta, const float *other, float beta, size_t n)
{
    for (size_t i = 0; i < n; i++) theta[i] = (1.0f - beta) * theta[i] + beta * other[i];
}

static void step_pull(run_t *r, gossip_t *g)
{
    for (int tries = 0; tries < r->comm->size; tries++) {
        int j = pick_peer(r, g);
        if (j < 0) return;
        int64_t step;
        int got = gossip_read_peer(r, g, j, &step);
        if (!sim_build() && faults_should_freeze(r->faults, r->step)) raise(SIGSTOP);   /* --fail W@S:freeze */
        if (got < 0) continue;
        /* a peer that has finished (a rank that evaluates runs behind) is
         * not dead: nothing new to mix, and the lead still awaits it */
        if (got && step > r->total_steps) { g->stale_skips++; continue; }
        if (gossip_awake_now(r, g) - g->seen_time[j] > comm_deadline(r->comm, LIVE_SILENT)) { gossip_mark_dead(r, g, j, "its parameters did not change", comm_deadline(r->comm, LIVE_SILENT)); continue; }
        if (!got || step == g->mixed_step[j]) { g->stale_skips++; continue; }
        mix_into(r->model->params, (const float *)(g->peer + sizeof(published_t)), g->beta, g->n);
        g->mixed_step[j] = step;
        g->mixes++;
        return;
    }
}

static void step_push(run_t *r, gossip_t *g)
{
    /* a free send slot; a send pending past twice the timeout means a dead
     * receiver (twice: a live receiver may itself spend up to --timeout on a
     * frozen or dead sender's half-received message before it drains ours) */
    int slot = -1;
    for (int k = 0; k < NSEND && slot < 0; k++) {
        int done = 1;
        if (g->sreq[k] != MPI_REQUEST_NULL) MPI_Test(&g->sreq[k], &done, MPI_STATUS_IGNORE);
        if (done) slot = k;
        else if (gossip_awake_now(r, g) - g->stime[k] > comm_deadline(r->comm, LIVE_SEND)) {
            gossip_mark_dead(r, g, g->sdest[k], "it took no message", comm_deadline(r->comm, LIVE_SEND));
            g->sbuf[k] = xmalloc(g->n * sizeof(float));   /* abandon the buffer to MPI */
            g->sreq[k] = MPI_REQUEST_NULL;
            slot = k;
        }
    }
    int j = pick_peer(r, g);
    if (slot >= 0 && j >= 0) {
        memcpy(g->sbuf[slot], r->model->params, g->n * sizeof(float));
        MPI_CHECK(r->comm, MPI_Isend(g->sbuf[slot], (int)g->n, MPI_FLOAT, j, TAG_GOSSIP, r->comm->world, &g->sreq[slot]));
        g->sdest[slot] = j;
        g->stime[slot] = gossip_awake_now(r, g);
        r->comm->bytes_sent += g->n * sizeof(float);
        r->comm->msgs_sent++;
    }
    int got = gossip_drain_inbox(r, g, 1);
    if (got) {
        const float inv = 1.0f / (float)got;
        for (size_t i = 0; i < g->n; i++) g->mix[i] *= inv;
        mix_into(r->model->params, g->mix, g->beta, g->n);
        g->mixes++;
    }
}

static void step_round(run_t *r, gossip_t *g)
{
    int N = r->comm->size, me = r->comm->rank;
    int32_t *perm = (int32_t *)g->mix;   /* scratch: N ints fit in n floats for any real model */
    if ((size_t)N > g->n) die("gossip round: more ranks than parameters");
    for (int j = 0; j < N; j++) perm[j] = j;
    rng_t shared;
    rng_seed(&shared, (uint64_t)r->cfg->seed, 0x60550000ULL + (uint64_t)r->step);
    rng_shuffle(&shared, perm, (size_t)N);
    int partner = -1;
    for (int k = 0; k + 1 < N; k += 2) {
        if (perm[k] == me) partner = perm[k + 1];
        if (perm[k + 1] == me) partner = perm[k];
    }
    if (partner < 0) return;   /* odd N: this rank sits the round out */
    float *other = (float *)g->peer;
    MPI_Request q[2];
    MPI_CHECK(r->comm, MPI_Irecv(other, (int)g->n, MPI_FLOAT, partner, TAG_GOSSIP, r->comm->world, &q[0]));
    MPI_CHECK(r->comm, MPI_Isend(r->model->params, (int)g->n, MPI_FLOAT, partner, TAG_GOSSIP, r->comm->world, &q[1]));
    r->comm->bytes_sent += g->n * sizeof(float);
    r->comm->msgs_sent++;
    comm_waitall(r->comm, 2, q, "the gossip exchange with this round's partner");
    mix_into(r->model->params, other, g->beta, g->n);
    g->mixes++;
}

static int gossip_step(run_t *r)
{
    gossip_t *g = r->sync_state;
    const double now = now_s();
    gossip_awake_now(r, g);   /* a freeze since the last step is left out of the peers' silence */
    if (g->last_step_t > 0 && now - g->last_step_t > comm_deadline(r->comm, LIVE_SILENT)) gossip_tell_alive(r, g);   /* woken from a freeze */
    g->last_step_t = now;
    if (r->lead && g->dead > 0 && g->mode != GOSSIP_ROUND && now - g->revive_t > 0.05) { g->revive_t = now; gossip_revive_frozen(r, g); }
    optim_step(r->opt, r->model->params, r->model->grads, 0, g->np, r->lr);   /* θ' */
    if (g->mode == GOSSIP_PULL) step_pull(r, g);
    else if (g->mode == GOSSIP_PUSH) step_push(r, g);
    else step_round(r, g);
    gossip_publish(r, g, r->step + 1);
    return 0;
}

static void gossip_destroy(run_t *r)
{
    gossip_t *g = r->sync_state;
    if (!g) return;
    sync_rows_free(&g->rows);
    free(g->saved);
    free(g->saved_avg);
    /* MPI_Win_free is collective: with a dead peer it would wait forever */
    if (!r->comm->peer_lost) {
        /* a push to a peer that finished before it arrived is never taken:
         * given up after --timeout, its buffer left to MPI */
        for (int k = 0; k < NSEND; k++)
            if (comm_wait_bounded(r->comm, &g->sreq[k], comm_deadline(r->comm, LIVE_SILENT), NULL, NULL) == 0) free(g->sbuf[k]);
        gossip_window_close(g);
    }
    free(g->seq_a); free(g->seq_b); free(g->used);
    if (!r->comm->peer_lost)
        for (int k = 0; k < g->max_inbox; k++) free(g->inbox[k].buf);
    free(g->inbox);
    free(g->peer); free(g->mix); free(g->alive); free(g->done_from); free(g->seen_step); free(g->seen_time); free(g->mixed_step); free(g->avg);
    free(g);
    r->sync_state = NULL;
}

/* round mode pairs every rank each step: its ranks stop together */
static sync_stop_mode_t gossip_stop_mode(const run_t *r)
{
    return gossip_mode_of(r->cfg->gossip) == GOSSIP_ROUND ? STOP_AGREE : STOP_OWN_CLOCK;
}

static int gossip_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    gossip_t *g = r->sync_state;
    if (!g || max < 5) return 0;
    out[0] = (sync_stat_t){ "consensus_distance", g->consensus, NULL };
    out[1] = (sync_stat_t){ "mixes", (double)g->mixes, NULL };
    out[2] = (sync_stat_t){ "dead_peers", (double)g->dead, NULL };
    out[3] = (sync_stat_t){ "stale_skips", (double)g->stale_skips, NULL };
    out[4] = (sync_stat_t){ "replicas_averaged", (double)g->averaged, NULL };   /* the distance is over these */
    return 5;
}

const sync_ops_t sync_gossip = {
    .name = "gossip",
    .help = "gossiping SGD: pull, push or round-based pairwise averaging, no barrier",
    .options = (const char *const[]){ "gossip", "beta", NULL },
    .layout = sync_layout_all_workers,
    .init = gossip_init,
    .step = gossip_step,
    .finish = gossip_finish,
    .destroy = gossip_destroy,
    .stats = gossip_stats,
    .eval_params = gossip_average,
    .eval_has_state = 1,
    .ckpt_state = gossip_ckpt_state,
    .resume = gossip_resume,
    .stop_mode = gossip_stop_mode,
    .lead_lost = gossip_lead_lost,
};
