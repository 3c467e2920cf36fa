/* --sync gossip: checkpoints (docs/algorithms.md §8). */
#include <limits.h>
#include <string.h>

#include "../util/util.h"
#include "gossip.h"

/* A checkpoint holds every replica as sync.worker_params ([ranks, n]) and
 * their mean as the model (mid-run; the final checkpoint's model is the
 * final average, as before). Round mode, which pairs every rank every step,
 * gathers each rank's parameters and optimizer state collectively, so a
 * resume continues bit for bit. Pull and push have no barrier and survive
 * dead peers, so no collective: the lead reads each live replica's
 * published copy one-sidedly, as it is (a peer may be a few steps behind or
 * ahead; the lead does not wait for it: a rank waiting here, not in MPI,
 * stalled its own pushes in flight and with them the peer it waited for),
 * and a dead one's row is the others' mean. Their optimizer state stays local (a momentum
 * buffer restarts at zero on resume). */
static const ckpt_key_t STATE_KEYS[] = { { "workers", 2, INT_MAX } };   /* the checkpoint's sync_state */

int gossip_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    gossip_t *g = r->sync_state;
    const int N = r->comm->size, me = r->comm->rank;
    const size_t n = g->n;
    if (g->mode == GOSSIP_ROUND) {
        float *v[3];
        const char *names[3];
        int nv = sync_worker_vectors(r, v, names);   /* the replica (with its statistics), then the optimizer's */
        for (int i = 0; i < nv; i++) sync_rows_add(r, &g->rows, names[i], v[i], i ? g->np : n);
        sync_rows_meta(r, &g->rows, meta);
        if (r->lead && r->step < r->total_steps) {
            if (!g->saved_avg) g->saved_avg = xalloc_floats(n);
            const float *rows = meta->extra[0].data;
            memset(g->saved_avg, 0, n * sizeof(float));
            for (int j = 0; j < N; j++)
                for (size_t i = 0; i < n; i++) g->saved_avg[i] += rows[(size_t)j * n + i];
            for (size_t i = 0; i < n; i++) g->saved_avg[i] /= (float)N;
            meta->params = g->saved_avg;
            meta->state = g->saved_avg + g->np;
        }
        ckpt_state_write(meta->sync_state, sizeof meta->sync_state, 1, STATE_KEYS, (long[]){ N });
        return 0;
    }
    if (!r->lead) return 0;
    if (!g->saved) { g->saved = xalloc_floats((size_t)N * n); g->saved_avg = xalloc_floats(n); }
    int *have = g->used, got = 0;
    memset(g->saved_avg, 0, n * sizeof(float));
    comm_idle_t idle = comm_idle_start(r->comm);
    for (int j = 0; j < N; j++) {
        float *row = g->saved + (size_t)j * n;
        have[j] = 0;
        if (j == me) {
            memcpy(row, r->model->params, n * sizeof(float));
            have[j] = 1;
        }
        while (j != me && g->alive[j]) {   /* 0: the copy was being written; read again */
            int64_t step = -1;
            int rc = gossip_read_peer(r, g, j, &step);
            if (rc < 0) break;   /* dead */
            /* a rank killed while publishing leaves its copy half-written
             * for good: without this the lead would read it forever */
            if (rc == 0 && gossip_awake_now(r, g) - g->seen_time[j] > comm_deadline(r->comm, LIVE_SILENT)) {
                gossip_mark_dead(r, g, j, "its copy stayed half-written", comm_deadline(r->comm, LIVE_SILENT));
                break;
            }
            if (rc == 1) {
                memcpy(row, g->peer + sizeof(published_t), n * sizeof(float));
                have[j] = 1;
                break;
            }
            comm_idle(&idle);
        }
        if (!have[j]) continue;
        for (size_t i = 0; i < n; i++) g->saved_avg[i] += row[i];
        got++;
    }
    for (size_t i = 0; i < n; i++) g->saved_avg[i] /= (float)got;
    for (int j = 0; j < N; j++)
        if (!have[j]) memcpy(g->saved + (size_t)j * n, g->saved_avg, n * sizeof(float));
    g->tensor = (ckpt_tensor_t){ .name = "sync.worker_params", .data = g->saved, .rows = N, .cols = (long)n };
    meta->extra = &g->tensor;
    meta->nextra = 1;
    if (r->step < r->total_steps) { meta->params = g->saved_avg; meta->state = g->saved_avg + g->np; }
    ckpt_state_write(meta->sync_state, sizeof meta->sync_state, 1, STATE_KEYS, (long[]){ N });
    return 0;
}

/* Each rank takes back its replica (and, from a round-mode checkpoint, its
 * optimizer state) and publishes it; a checkpoint of another paradigm
 * starts every replica from its one model. Needs the same number of ranks. */
int gossip_resume(run_t *r, const ckpt_t *ck)
{
    gossip_t *g = r->sync_state;
    const ckpt_meta_t *m = &ck->meta;
    if (strcmp(m->sync, "gossip")) return 0;
    /* the final checkpoint of a rank that took over from a lead dead before
     * the end holds the final average only: every replica starts from it */
    if (!*m->sync_state && ckpt_rows(ck, "sync.worker_params") == 0) return 0;
    long workers;
    if (ckpt_state_read(m->sync_state, 1, STATE_KEYS, &workers) != 0) {
        snprintf(r->err, sizeof r->err, "checkpoint's gossip state '%.64s' is malformed or out of range", m->sync_state);
        return -1;
    }
    if (workers != r->comm->size) {
        snprintf(r->err, sizeof r->err, "checkpoint holds the replicas of %ld gossip ranks, not %d; resume with %ld ranks",
                 workers, r->comm->size, workers);
        return -1;
    }
    float *v[3];
    const char *names[3];
    int nv = sync_worker_vectors(r, v, names);
    for (int i = 0; i < nv; i++) {
        if (i > 0 && ckpt_rows(ck, names[i]) == 0) { memset(v[i], 0, g->np * sizeof(float)); continue; }   /* pull/push: local */
        if (sync_rows_read(r, ck, names[i], v[i], i ? g->np : g->n) != 0) return -1;
    }
    gossip_publish(r, g, r->step);
    return 0;
}
