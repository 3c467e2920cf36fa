/* A parameter-server shard's receives (shard.h, "Receives"): a header
 * receive posted for every worker, and the queue of gradients taken one at
 * a time in the order their headers came; and what happens to them when a
 * worker is evicted, or comes back. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "shard.h"

/* Post worker p's next header receive. */
void post_header(shard_t *s, int p)
{
    MPI_CHECK(s->c, MPI_Irecv(&s->hin[p], (int)sizeof(ps_hdr_t), MPI_BYTE, worker_rank(s, p), MPI_ANY_TAG,
                              s->c->world, &s->rreq[p]));
}

/* The lane worker p's gradient is coming in on, or −1. */
int lane_of(const shard_t *s, int p)
{
    for (int l = 0; l < s->lanes; l++)
        if (s->inflight[l] == p) return l;
    return -1;
}

/* Start receiving the next queued gradients, while a lane is free. Each
 * goes straight to its offset in its lane's copy of the slice. */
void next_gradient(shard_t *s, double now)
{
    const int W = s->cfg->workers;
    for (int l = 0; l < s->lanes && s->fifo_len > 0; l++) {
        if (s->inflight[l] >= 0) continue;
        int p = s->fifo[s->fifo_head];
        s->fifo_head = (s->fifo_head + 1) % W;
        s->fifo_len--;
        worker_state_t *w = &s->ws[p];
        float *g = (float *)(s->in[l] + sizeof(ps_hdr_t)) + w->qh.off;
        MPI_CHECK(s->c, MPI_Irecv(g, (int)w->qh.cnt, MPI_FLOAT, worker_rank(s, p), PS_PUSH_DATA, s->c->world,
                                  &s->rreq[W + l]));
        s->inflight[l] = p;
        w->last_seen = now;   /* its silence counts from now, not from its wait in the queue */
    }
}

/* Worker p is evicted: a gradient of its still to come is left to MPI (one
 * of a dead worker never arrives; one of a frozen worker lands in a buffer
 * no one reads), and the queue moves on. */
void drop_gradient(shard_t *s, int p)
{
    worker_state_t *w = &s->ws[p];
    if (!w->queued) return;
    w->queued = 0;
    const int W = s->cfg->workers;
    int l = lane_of(s, p);
    if (l >= 0) {
        MPI_Request_free(&s->rreq[W + l]);
        s->in[l] = xmalloc(msg_bytes(s->n));   /* the old buffer stays with the abandoned receive */
        s->inflight[l] = -1;
    } else {
        for (int i = 0; i < s->fifo_len; i++) {
            int j = (s->fifo_head + i) % W;
            if (s->fifo[j] != p) continue;
            for (int m = i; m + 1 < s->fifo_len; m++) s->fifo[(s->fifo_head + m) % W] = s->fifo[(s->fifo_head + m + 1) % W];
            s->fifo_len--;
            break;
        }
        float *sink = xalloc_floats((size_t)w->qh.cnt ? (size_t)w->qh.cnt : 1);   /* MPI's until the end */
        MPI_Request r;
        MPI_CHECK(s->c, MPI_Irecv(sink, (int)w->qh.cnt, MPI_FLOAT, worker_rank(s, p), PS_PUSH_DATA, s->c->world, &r));
        MPI_Request_free(&r);
    }
    post_header(s, p);   /* its later messages are still read: a frozen worker may say it is done */
    next_gradient(s, shard_now(s));
}

/* At the end: take back the receives still posted. One that a message
 * which never ends has matched keeps its buffer (comm_withdraw). */
void cancel_receives(shard_t *s)
{
    for (int j = 0; j < s->nrreq; j++) {
        if (comm_withdraw(&s->rreq[j], COMM_WITHDRAW_S)) continue;
        if (j < s->cfg->workers) s->hin = NULL;
        else if (j < snap_slot(s)) s->in[j - s->cfg->workers] = NULL;
        else s->snap_in = NULL;
    }
}

void evict(shard_t *s, int p, double silent)
{
    s->ws[p].alive = 0;
    s->ws[p].parked = 0;
    drop_gradient(s, p);
    if (s->st.evicted < 8) s->st.evicted_list[s->st.evicted] = p;
    s->st.evicted++;
    s->c->peer_lost = 1;
    if (s->k == 0)
        fprintf(stderr, "dsgd: server: evicting worker %d (rank %d): silent for %.1f s (--timeout %g)\n", p,
                worker_rank(s, p), silent, s->cfg->timeout_s);
    /* the notice: a dead worker never reads it; a frozen one does when it wakes */
    ps_hdr_t *h = &s->ev_hdr[p];
    memset(h, 0, sizeof *h);
    h->stamp = s->ws[p].step;
    h->silent_s = (float)silent;
    if (MPI_Isend(h, (int)sizeof *h, MPI_BYTE, worker_rank(s, p), PS_EVICTED, s->c->world, &s->ev_req[p]) != MPI_SUCCESS)
        s->ev_req[p] = MPI_REQUEST_NULL;
    s->c->msgs_sent++;
}

/* An evicted worker that says it is done was frozen, not dead: it ends
 * with the others, and once every evicted worker has, no peer is lost. */
void on_returned(shard_t *s, int p)
{
    worker_state_t *w = &s->ws[p];
    if (w->returned) return;
    w->returned = 1;
    s->st.returned++;
    s->c->peer_lost = s->st.evicted > s->st.returned;
}
