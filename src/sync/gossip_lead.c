/* --sync gossip: the lead's part (docs/algorithms.md §8). The lead (the
 * lowest live rank) evaluates the average of the live replicas' published
 * copies, reading them one-sidedly, so evaluation needs no collective; at
 * the end it waits for every live replica's final copy, averages them and
 * says goodbye. The consensus distance it logs is mean_i ‖θ_i − θ̄‖ over
 * the replicas averaged. Under pull and push a rank whose lower ranks are all dead
 * takes the lead's part over. */
#include <math.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "gossip.h"

/* Lead: θ̄ over the live ranks' published copies (its own and the ones not
 * stale), and the consensus distance. */
float *gossip_average(run_t *r)
{
    gossip_t *g = r->sync_state;
    int N = r->comm->size, me = r->comm->rank, live = 0;
    int64_t step;
    if (!g->avg) g->avg = xalloc_floats(g->n);   /* a rank that took over from a dead lead */
    memset(g->avg, 0, g->n * sizeof(float));
    for (int j = 0; j < N; j++) {
        g->used[j] = 0;
        if (j == me) {
            for (size_t i = 0; i < g->n; i++) g->avg[i] += r->model->params[i];
            g->used[j] = 1;
            live++;
            continue;
        }
        if (!g->alive[j] || gossip_read_peer(r, g, j, &step) != 1 || gossip_is_stale(r, g, j)) continue;
        const float *t = (const float *)(g->peer + sizeof(published_t));
        for (size_t i = 0; i < g->n; i++) g->avg[i] += t[i];
        g->used[j] = 1;
        live++;
    }
    for (size_t i = 0; i < g->n; i++) g->avg[i] /= (float)live;
    live = 0;
    double dist = 0;
    int counted = 0;
    for (int j = 0; j < N; j++) {
        if (!g->used[j]) continue;
        const float *t = r->model->params;
        if (j != me) {
            if (gossip_read_peer(r, g, j, &step) != 1) continue;
            t = (const float *)(g->peer + sizeof(published_t));
        }
        double ss = 0;
        for (size_t i = 0; i < g->np; i++) { double d = (double)t[i] - g->avg[i]; ss += d * d; }
        dist += sqrt(ss);
        counted++;
    }
    g->consensus = counted ? dist / counted : 0;
    g->averaged = counted;
    return g->avg;
}

/* The lead's part of the finish: wait until every live rank has published
 * its final parameters, take their average, say goodbye. */
static void gossip_lead_final(run_t *r, gossip_t *g)
{
    const int N = r->comm->size, me = r->comm->rank;
    comm_idle_t idle = comm_idle_start(r->comm);
    if (g->dead > 0 && g->mode != GOSSIP_ROUND) gossip_revive_frozen(r, g);
    for (int j = 0; j < N; j++) {
        int64_t step = -1;
        while (j != me && g->alive[j] && (gossip_read_peer(r, g, j, &step) != 1 || step <= r->total_steps)) {
            if (gossip_awake_now(r, g) - g->seen_time[j] > comm_deadline(r->comm, LIVE_SILENT)) { gossip_mark_dead(r, g, j, "it never finished", comm_deadline(r->comm, LIVE_SILENT)); break; }
            comm_idle(&idle);
        }
    }
    /* the final average takes every live replica, stale or not: all have finished */
    double now = gossip_awake_now(r, g);
    for (int j = 0; j < N; j++) g->seen_time[j] = now;
    memcpy(r->model->params, gossip_average(r), g->n * sizeof(float));
    int lost = r->comm->peer_lost;
    for (int j = 0; j < N; j++)
        if (j != me && g->alive[j]) MPI_Send(&lost, 1, MPI_INT, j, TAG_GOSSIP_BYE, r->comm->world);
}

/* Read each live rank below this one: a copy short of "finished" that has
 * not moved for --timeout is a dead rank's. */
static void gossip_watch_lower(run_t *r, gossip_t *g)
{
    for (int j = 0; j < r->comm->rank; j++) {
        if (!g->alive[j]) continue;
        int64_t step = -1;
        int rc = gossip_read_peer(r, g, j, &step);
        if (rc < 0 || (rc == 1 && step > r->total_steps)) continue;   /* dead already, or finished */
        if (gossip_awake_now(r, g) - g->seen_time[j] > comm_deadline(r->comm, LIVE_SILENT)) gossip_mark_dead(r, g, j, "it stopped before finishing", comm_deadline(r->comm, LIVE_SILENT));
    }
}

void gossip_finish(run_t *r)
{
    gossip_t *g = r->sync_state;
    int N = r->comm->size, me = r->comm->rank;
    gossip_publish(r, g, r->total_steps + 1);   /* "finished" */
    if (g->mode == GOSSIP_PUSH) {
        /* deliver the pushes in flight: DONE to every live peer, then drain until
         * every live peer's DONE is in (messages from one sender arrive in order) */
        int one = 1;
        for (int j = 0; j < N; j++)
            if (j != me && g->alive[j]) MPI_Send(&one, 1, MPI_INT, j, TAG_GOSSIP_DONE, r->comm->world);
        comm_wait_t w = comm_wait_start(r->comm, comm_deadline(r->comm, LIVE_FINISH));
        for (;;) {
            gossip_drain_inbox(r, g, 0);
            int missing = -1;
            for (int j = 0; j < N; j++) if (j != me && g->alive[j] && !g->done_from[j]) missing = j;
            if (missing < 0 && g->ninbox == 0) break;   /* every DONE in, every message received */
            if (missing >= 0 && comm_wait_late(&w)) { gossip_mark_dead(r, g, missing, "it never finished", comm_deadline(r->comm, LIVE_FINISH)); comm_wait_heard(&w); }
            comm_idle(&w.idle);
        }
    }
    /* nobody dies in simulation, and polling a peer's window until it has
     * finished costs the simulator a 1 MB read per poll: wait for all once */
    if (sim_build()) MPI_Barrier(r->comm->world);
    if (r->lead) {
        gossip_lead_final(r, g);
    } else {
        /* keep the window up until the lead has read it */
        int lost = 0;
        MPI_Request q;
        /* from the lead, or from the rank that took over from a dead one */
        MPI_CHECK(r->comm, MPI_Irecv(&lost, 1, MPI_INT, MPI_ANY_SOURCE, TAG_GOSSIP_BYE, r->comm->world, &q));
        double checked = now_s();
        int got = 0;
        comm_wait_t w = comm_wait_start(r->comm, comm_deadline(r->comm, LIVE_GOODBYE));
        while (!got) {
            MPI_Test(&q, &got, MPI_STATUS_IGNORE);
            if (got) break;
            /* a lead that died before finishing says no goodbye: the next
             * live rank in line does the lead's part */
            if (g->mode != GOSSIP_ROUND && now_s() - checked > comm_deadline(r->comm, LIVE_LOOK)) {
                checked = now_s();
                gossip_watch_lower(r, g);
                if (gossip_lead_lost(r)) {
                    MPI_Cancel(&q);
                    MPI_Wait(&q, MPI_STATUS_IGNORE);
                    r->lead = r->evaluates = 1;
                    fprintf(stderr, "dsgd: rank %d: the lead died before finishing; this rank gathers the final average\n", me);
                    gossip_lead_final(r, g);
                    return;
                }
            }
            if (comm_wait_over(&w)) { gossip_mark_dead(r, g, 0, "the lead never said goodbye", comm_deadline(r->comm, LIVE_GOODBYE)); break; }
        }
        if (got) r->comm->peer_lost = lost;   /* the lead's verdict: every rank finalizes, or none */
    }
}

/* Pull and push: every rank below this one is dead, so this one takes over
 * the evaluations, the metrics and the checkpoints (round mode, collective,
 * does not survive a death at all). */
int gossip_lead_lost(const run_t *r)
{
    const gossip_t *g = r->sync_state;
    if (!g || g->mode == GOSSIP_ROUND || r->lead || r->comm->rank == 0) return 0;
    for (int j = 0; j < r->comm->rank; j++)
        if (g->alive[j]) return 0;
    return 1;
}
