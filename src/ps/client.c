/* The worker's side of the parameter server: push and pull of the whole
 * vector to all shards in parallel, nonblocking with an explicit wait that
 * gives up (and stops the job, naming the shard) when a shard stays silent. */
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "ps.h"

ps_client_t *ps_client_create(comm_t *c, const ps_config_t *cfg, int worker, size_t nparams)
{
    ps_client_t *pc = xcalloc(1, sizeof *pc);
    const int S = cfg->servers;
    pc->comm = c;
    pc->cfg = cfg;
    pc->worker = worker;
    pc->nparams = nparams;
    pc->lo = xcalloc((size_t)S, sizeof(size_t));
    pc->n = xcalloc((size_t)S, sizeof(size_t));
    pc->shdr = xcalloc((size_t)S, sizeof(ps_hdr_t));
    pc->rhdr = xcalloc((size_t)S, sizeof(ps_hdr_t));
    pc->qhdr = xcalloc((size_t)S, sizeof(ps_hdr_t));
    pc->rbuf = xalloc_floats(nparams);
    pc->push_req = xcalloc((size_t)(2 * S), sizeof(MPI_Request));
    pc->pull_req = xcalloc((size_t)(2 * S), sizeof(MPI_Request));
    pc->stamp = xcalloc((size_t)S, sizeof(int64_t));
    pc->version = xcalloc((size_t)S, sizeof(int64_t));
    pc->off = xcalloc((size_t)S, sizeof(size_t));
    pc->cnt = xcalloc((size_t)S, sizeof(size_t));
    pc->slot = xcalloc((size_t)S, sizeof(float *));
    pc->read = xcalloc((size_t)S, sizeof(int64_t));
    pc->applied = xcalloc((size_t)S, sizeof(int64_t));
    pc->slot_until = xcalloc((size_t)S, sizeof(int64_t));
    pc->guess_tag = xcalloc((size_t)S, sizeof(uint64_t));
    pc->guess_buf = xcalloc((size_t)S, sizeof(int));
    pc->guess_done = xcalloc((size_t)S, sizeof(size_t));
    for (int k = 0; k < S; k++) {
        pc->slot[k] = ps_shm_slot(cfg->shm, worker, k);
        ps_shard_range(nparams, S, k, &pc->lo[k], &pc->n[k]);
        pc->push_req[k] = pc->push_req[S + k] = MPI_REQUEST_NULL;
        pc->pull_req[k] = pc->pull_req[S + k] = MPI_REQUEST_NULL;
    }
    ps_client_set_range(pc, 0, nparams);
    return pc;
}

void ps_client_set_range(ps_client_t *pc, size_t klo, size_t kn)
{
    if (klo + kn > pc->nparams) die("ps_client_set_range: keys [%zu, %zu) exceed the %zu keys", klo, klo + kn, pc->nparams);
    pc->klo = klo;
    pc->kn = kn;
    for (int k = 0; k < pc->cfg->servers; k++) {
        size_t a = pc->lo[k] > klo ? pc->lo[k] : klo;
        size_t b = pc->lo[k] + pc->n[k] < klo + kn ? pc->lo[k] + pc->n[k] : klo + kn;
        pc->off[k] = b > a ? a - pc->lo[k] : 0;
        pc->cnt[k] = b > a ? b - a : 0;
    }
}

/* Where shard k's part starts in the worker's range vector. */
static size_t local_at(const ps_client_t *pc, int k) { return pc->lo[k] + pc->off[k] - pc->klo; }

static void hdr_init(const ps_client_t *pc, int k, ps_hdr_t *h)
{
    memset(h, 0, sizeof *h);
    h->worker = pc->worker;
    h->off = (int64_t)pc->off[k];
    h->cnt = (int64_t)pc->cnt[k];
    h->read = pc->read[k];
    h->buf = -1;
}

void ps_client_free(ps_client_t *pc)
{
    if (!pc) return;
    free(pc->shdr); free(pc->rhdr); free(pc->qhdr); free(pc->rbuf);
    free(pc->lo); free(pc->n); free(pc->push_req); free(pc->pull_req); free(pc->stamp); free(pc->version);
    free(pc->off); free(pc->cnt);
    free(pc->slot); free(pc->read); free(pc->applied); free(pc->slot_until);
    free(pc->guess_tag); free(pc->guess_buf); free(pc->guess_done);
    free(pc);
}

/* How long a shard may keep a worker waiting before it counts as dead: a
 * gated pull waits for slow peers, and a shard may spend up to the timeout
 * on a dead worker's half-sent message before evicting it; twice the
 * timeout plus slack covers both. */
static double shard_limit(const ps_client_t *pc) { return live_deadline(pc->cfg->timeout_s, LIVE_SHARD); }

/* Has a shard said that it evicted this worker? (It was frozen past the
 * timeout.) Then the receives still posted are cancelled, the sends left
 * to complete (the shards keep draining them), and the worker stops
 * training (comm->evicted). */
/* Has an eviction notice come? (each shard sends one: the first tells) */
static int take_notice(ps_client_t *pc)
{
    comm_t *c = pc->comm;
    if (c->evicted) return 1;
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, PS_EVICTED, c->world, &flag, &st) != MPI_SUCCESS || !flag) return 0;
    ps_hdr_t h;
    MPI_CHECK(c, MPI_Recv(&h, (int)sizeof h, MPI_BYTE, st.MPI_SOURCE, PS_EVICTED, c->world, MPI_STATUS_IGNORE));
    c->evicted = 1;
    c->evicted_step = (long)h.stamp;
    c->evicted_silent_s = h.silent_s;
    return 1;
}

static int heard_evicted(ps_client_t *pc, int n, MPI_Request *reqs)
{
    if (!take_notice(pc)) return 0;
    for (int i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        int f = 0;
        MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE);
        if (f) continue;
        if (reqs == pc->pull_req + 0 && i >= pc->cfg->servers) {   /* a reply that will not come */
            MPI_Cancel(&reqs[i]);
            /* MPICH cannot cancel a receive whose shard began to answer
             * and then finished: after 1 s it is abandoned (nothing will
             * write into the buffer, and this worker stops training) */
            comm_wait_t w = comm_wait_start(pc->comm, 1.0);
            while (reqs[i] != MPI_REQUEST_NULL) {
                MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE);
                if (reqs[i] != MPI_REQUEST_NULL && comm_wait_over(&w)) break;
            }
            if (reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[i]);
        } else {
            MPI_Request_free(&reqs[i]);   /* a send: the shard receives it and drops it */
        }
    }
    return 1;
}

/* Copy the chunks of the awaited parameters that the shards have finished
 * (shm.h, progress): from the pool buffer whose word carries this worker's
 * tag, into the pull's destination. Only a guess until the reply comes
 * (take_parts). */
static int guess_copy(ps_client_t *pc)
{
    const ps_shm_t *m = pc->cfg->shm;
    int copied = 0;
    for (int k = 0; k < pc->cfg->servers; k++) {
        if (!pc->guess_tag[k]) continue;
        uint64_t tag;
        size_t done;
        if (pc->guess_buf[k] < 0) {
            for (int i = 0; i < ps_shm_npool(m) && pc->guess_buf[k] < 0; i++) {
                ps_shm_progress_get(m, k, i, &tag, &done);
                if (tag == pc->guess_tag[k]) pc->guess_buf[k] = i;
            }
            if (pc->guess_buf[k] < 0) continue;
        }
        ps_shm_progress_get(m, k, pc->guess_buf[k], &tag, &done);
        if (tag != pc->guess_tag[k]) { pc->guess_tag[k] = 0; continue; }   /* the buffer was taken again */
        if (done <= pc->guess_done[k]) continue;
        const size_t ch = ps_shm_chunk(pc->n[k]);
        size_t a = pc->guess_done[k] * ch, e = done * ch < pc->n[k] ? done * ch : pc->n[k];
        memcpy(pc->pull_into + local_at(pc, k) + a, ps_shm_pool(m, k, pc->guess_buf[k]) + a, (e - a) * sizeof(float));
        pc->guess_done[k] = done;
        copied = 1;
    }
    return copied;
}

/* Wait for n requests; a shard silent past the limit stops the job. The
 * first rank to stop ends the job (MPI_Abort; MPICH's launcher kills every
 * rank at once), so a worker other than the lead waits timeout + 5 s longer:
 * the lead, which writes the metrics, is the one that records the fault. */
static void wait_shards(ps_client_t *pc, int n, MPI_Request *reqs, double limit, const char *what)
{
    comm_t *c = pc->comm;
    double t0 = now_s();
    if (pc->worker != 0) limit += live_deadline(pc->cfg->timeout_s, LIVE_NOTICE);
    if (sim_build()) {
        /* simulated shards never die, and every failed test would be a
         * simulated event: a polling worker costs the simulator more than
         * its computation */
        if (sim_waitall(n, reqs) != MPI_SUCCESS)
            die("%s failed: a server shard is unreachable; stopping", what);
        c->comm_s += now_s() - t0;
        return;
    }
    /* A reply in flight moves only while this worker is in an MPI call
     * (the shared-memory transport hands a large message over in fragments
     * that the receiver must take), so the worker yields but does not sleep
     * for the first 20 ms: sleeping there made a 5-rank asp run on 2 cores
     * 1.4x slower, while the shards sleeping when idle costs nothing. Longer
     * waits (a gate held by a slow worker) back off. */
    comm_wait_t w = comm_wait_start(c, limit);
    w.idle.yield_s = 20e-3;
    for (;;) {
        int done = 0;
        if (comm_testall(n, reqs, &done) != MPI_SUCCESS) {
            int k = -1;   /* the shard whose request failed, if MPI says */
            for (int i = 0; i < n && k < 0; i++) {
                int f = 0;
                if (reqs[i] != MPI_REQUEST_NULL && MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE) != MPI_SUCCESS) k = i % pc->cfg->servers;
            }
            comm_fault(c, what, &k, k >= 0);
            die("%s failed: a server shard is unreachable (dead?); stopping", what);
        }
        if (done) break;
        /* (a fast round trip never probes: only a wait past 1 ms can be an eviction's) */
        if (comm_wait_s(&w) > 1e-3 && heard_evicted(pc, n, reqs)) break;
        /* copying is this wait's work: no idling while there are chunks to take */
        int copied = pc->guessing && reqs == pc->pull_req && guess_copy(pc);
        if (comm_wait_late(&w)) {
            int k = 0;
            for (int i = 0; i < n; i++) {
                int f = 0;
                MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE);
                if (!f) { k = i % pc->cfg->servers; break; }
            }
            comm_fault(c, what, &k, 1);
            die("server shard %d (rank %d) did not answer %s within %.0f s (dead or hung); stopping the job",
                k, k, what, limit);
        }
        if (!copied) comm_idle(&w.idle);
    }
    c->comm_s += now_s() - t0;
}

void ps_push_start(ps_client_t *pc, const float *g, float lr, int64_t step)
{
    const int S = pc->cfg->servers;
    ps_push_wait(pc);
    for (int k = 0; k < S; k++) {
        ps_hdr_t *h = &pc->shdr[k];
        hdr_init(pc, k, h);
        h->clock = pc->clock;
        h->stamp = pc->stamp[k];
        h->version = pc->version[k];
        h->step = step;
        h->lr = lr;
        /* through the shared slot when the shard has applied every push
         * this worker made (so it is not reading the slot) */
        if (pc->slot[k] && (pc->slot_until[k] == 0 || pc->applied[k] >= pc->slot_until[k])) {
            memcpy(pc->slot[k] + pc->off[k], g + local_at(pc, k), pc->cnt[k] * sizeof(float));
            ps_shm_sync(pc->cfg->shm);
            h->buf = 0;
            pc->slot_until[k] = pc->clock + 1;
            MPI_CHECK(pc->comm, MPI_Isend(h, (int)sizeof *h, MPI_BYTE, k, PS_PUSH, pc->comm->world, &pc->push_req[k]));
            pc->comm->bytes_sent += sizeof *h;
        } else {
            /* the header, then the gradient as a message of its own: the
             * shard answers headers at once and takes gradients one at a
             * time, in the order their headers came (server.c) */
            MPI_CHECK(pc->comm, MPI_Isend(h, (int)sizeof *h, MPI_BYTE, k, PS_PUSH, pc->comm->world, &pc->push_req[k]));
            if (pc->cnt[k] > 0) {
                MPI_CHECK(pc->comm, MPI_Isend(g + local_at(pc, k), (int)pc->cnt[k], MPI_FLOAT, k, PS_PUSH_DATA,
                                              pc->comm->world, &pc->push_req[S + k]));
                pc->comm->msgs_sent++;
            }
            pc->comm->bytes_sent += sizeof *h + pc->cnt[k] * sizeof(float);
        }
        pc->comm->msgs_sent++;
    }
    pc->clock++;
    pc->push_active = 1;
}

void ps_push_wait(ps_client_t *pc)
{
    if (!pc->push_active) return;
    wait_shards(pc, 2 * pc->cfg->servers, pc->push_req, shard_limit(pc), "a push");
    pc->push_active = 0;
}

/* Post the receives of one reply per shard, of the given tag, into dst
 * (the worker's range vector) and the reply headers. */
static void recv_replies(ps_client_t *pc, int tag, float *dst, MPI_Request *reqs)
{
    for (int k = 0; k < pc->cfg->servers; k++) {
        MPI_Datatype t = ps_msg_type(&pc->rhdr[k], dst + local_at(pc, k), pc->cnt[k]);
        MPI_CHECK(pc->comm, MPI_Irecv(MPI_BOTTOM, 1, t, k, tag, pc->comm->world, &reqs[k]));
        MPI_Type_free(&t);
    }
}

void ps_pull_start(ps_client_t *pc, int eval, float *into)
{
    const int S = pc->cfg->servers;
    /* one pull at a time: a second would replace the first's requests */
    if (pc->pull_active) die("ps_pull_start: a pull is already in flight (a bug in the caller)");
    pc->pull_tag = eval ? PS_EVAL_PARAMS : PS_PARAMS;
    pc->pull_into = into ? into : pc->rbuf;
    recv_replies(pc, pc->pull_tag, pc->pull_into, pc->pull_req + S);
    /* the reply to the push just made through a slot, into the caller's
     * vector: copy it as the shard computes it (shm.h, progress) */
    pc->guessing = 0;
    for (int k = 0; k < S; k++) {
        int whole = pc->off[k] == 0 && pc->cnt[k] == pc->n[k] && pc->n[k] > 0;
        pc->guess_tag[k] = !eval && into && whole && pc->slot[k] && pc->slot_until[k] == pc->clock
                         ? ps_shm_tag(pc->worker, pc->clock - 1) : 0;
        pc->guess_buf[k] = -1;
        pc->guess_done[k] = 0;
        pc->guessing |= pc->guess_tag[k] != 0;
    }
    for (int k = 0; k < S; k++) {
        ps_hdr_t *h = &pc->qhdr[k];
        hdr_init(pc, k, h);
        h->clock = pc->clock;
        MPI_CHECK(pc->comm, MPI_Isend(h, (int)sizeof *h, MPI_BYTE, k, eval ? PS_EVAL_PULL : PS_PULL,
                                      pc->comm->world, &pc->pull_req[k]));
        pc->comm->bytes_sent += sizeof *h;
        pc->comm->msgs_sent++;
    }
    pc->pull_active = 1;
}

static void merge_stats(ps_stats_t *into, const ps_stats_t *s, int first)
{
    if (first) { *into = *s; return; }
    if (s->updates && (!into->updates || s->st_min < into->st_min)) into->st_min = s->st_min;
    if (s->st_max > into->st_max) into->st_max = s->st_max;
    into->st_sum += s->st_sum;
    if (s->updates && (!into->updates || s->gap_min < into->gap_min)) into->gap_min = s->gap_min;
    if (s->gap_max > into->gap_max) into->gap_max = s->gap_max;
    into->gap_sum += s->gap_sum;
    into->updates += s->updates;
    for (int i = 0; i < PS_HIST; i++) into->hist[i] += s->hist[i];
    if (s->returned > into->returned) into->returned = s->returned;
    if (s->evicted > into->evicted) {   /* every shard evicts the same workers; keep the fullest list */
        into->evicted = s->evicted;
        memcpy(into->evicted_list, s->evicted_list, sizeof s->evicted_list);
    }
}

/* Every worker below `me` is among the evicted (the list holds the first 8). */
static int below_evicted(const ps_stats_t *st, int me)
{
    if (me == 0 || me > 8) return 0;
    for (int q = 0; q < me; q++) {
        int found = 0;
        for (int i = 0; i < st->evicted && i < 8; i++) found |= st->evicted_list[i] == q;
        if (!found) return 0;
    }
    return 1;
}

/* Read the reply headers: statistics, stamps, evictions. */
static void take_headers(ps_client_t *pc, int with_stats)
{
    for (int k = 0; k < pc->cfg->servers; k++) {
        const ps_hdr_t *h = &pc->rhdr[k];
        if (below_evicted(&h->stats, pc->worker)) pc->lead_gone = 1;
        if (!with_stats) pc->stamp[k] = h->stamp, pc->version[k] = h->version;   /* gated replies stamp the next gradient */
        if (h->stop > pc->comm->stop_heard) pc->comm->stop_heard = h->stop;
        if (with_stats) merge_stats(&pc->stats, &h->stats, k == 0);
    }
    /* a peer is lost while some evicted worker has not come back (then
     * MPI_Finalize would wait for it) */
    int lost = 0;
    for (int k = 0; k < pc->cfg->servers; k++) lost |= pc->rhdr[k].stats.evicted > pc->rhdr[k].stats.returned;
    if (lost) pc->comm->peer_lost = pc->lost_set = 1;
    else if (pc->lost_set) pc->comm->peer_lost = pc->lost_set = 0;
}

/* The replies' parameters into params: each shard's part from its pool
 * (shm.h) when the header names a buffer, else from where the message put
 * it (rbuf, or params itself). */
static void take_parts(ps_client_t *pc, float *params)
{
    int synced = 0;
    for (int k = 0; k < pc->cfg->servers; k++) {
        const ps_hdr_t *h = &pc->rhdr[k];
        float *dst = params + local_at(pc, k);
        if (h->applied > pc->applied[k]) pc->applied[k] = h->applied;
        if (h->buf >= 0) {
            const float *b = ps_shm_pool(pc->cfg->shm, k, h->buf);
            if (!b || !pc->slot[k])
                die("server shard %d answered through a shared buffer this worker cannot see; the ranks disagree on --ps-transport", k);
            if (!synced) ps_shm_sync(pc->cfg->shm), synced = 1;
            /* the chunks copied while waiting stand when the reply names
             * their buffer and it still holds that write, complete */
            size_t from = 0;
            if (pc->guess_tag[k] && h->buf == pc->guess_buf[k]) {
                uint64_t tag;
                size_t done;
                ps_shm_progress_get(pc->cfg->shm, k, h->buf, &tag, &done);
                const size_t ch = ps_shm_chunk(pc->n[k]);
                if (tag == pc->guess_tag[k] && done * ch >= pc->n[k]) from = pc->guess_done[k] * ch;
            }
            if (from < pc->cnt[k]) memcpy(dst + from, b + pc->off[k] + from, (pc->cnt[k] - from) * sizeof(float));
            pc->read[k]++;
        } else if (pc->pull_into == pc->rbuf) {
            memcpy(dst, pc->rbuf + local_at(pc, k), pc->cnt[k] * sizeof(float));
        }
    }
}

void ps_pull_wait(ps_client_t *pc, float *params)
{
    ps_push_wait(pc);   /* the shard answers after taking the push: this returns at once */
    if (!pc->pull_active) return;
    if (pc->pull_into != pc->rbuf && pc->pull_into != params)
        die("ps_pull_wait: the pull was started into another vector (a bug in the caller)");
    wait_shards(pc, 2 * pc->cfg->servers, pc->pull_req, shard_limit(pc), pc->pull_tag == PS_PARAMS ? "a pull" : "an evaluation pull");
    pc->pull_active = 0;
    /* no reply: the parameters stay as they were, but for chunks of the
     * shard's newer ones copied while waiting */
    if (pc->comm->evicted) return;
    take_headers(pc, pc->pull_tag == PS_EVAL_PARAMS);
    take_parts(pc, params);
}

void ps_client_stop(ps_client_t *pc, int why)
{
    for (int k = 0; k < pc->cfg->servers; k++) {
        ps_hdr_t h;
        hdr_init(pc, k, &h);
        h.stop = why;
        MPI_CHECK(pc->comm, MPI_Send(&h, (int)sizeof h, MPI_BYTE, k, PS_STOP, pc->comm->world));
        pc->comm->msgs_sent++;
    }
}

/* The end of a worker's run: it tells every shard it is done and waits for
 * the final message, which the shards send when every worker is done or
 * evicted; until then they send keep-alives, so only a silent shard runs
 * into the limit. A worker the shards evicted (frozen past --timeout) that
 * woke up learns it here at the latest: it still says it is done, so shards
 * still running count it as returned and answer; shards that finished while
 * it was frozen answer nothing, and after --timeout + 5 s without a
 * keep-alive it leaves without them (and without MPI_Finalize, which would
 * wait for ranks that are gone). Nothing here blocks on a shard: a send to
 * a finished shard may never complete. */
void ps_finish(ps_client_t *pc, int lead, float *params)
{
    const int S = pc->cfg->servers;
    comm_t *c = pc->comm;
    ps_push_wait(pc);
    if (pc->pull_active) ps_pull_wait(pc, params);
    MPI_Request *done = xcalloc((size_t)S, sizeof(MPI_Request));
    ps_hdr_t *dh = xcalloc((size_t)S, sizeof(ps_hdr_t));
    for (int k = 0; k < S; k++) {
        hdr_init(pc, k, &dh[k]);
        MPI_CHECK(c, MPI_Isend(&dh[k], (int)sizeof dh[k], MPI_BYTE, k, PS_DONE, c->world, &done[k]));
    }
    recv_replies(pc, PS_FINAL, lead ? params : pc->rbuf, pc->pull_req);
    int all = 0;
    comm_wait_t w = comm_wait_start(c, 0);   /* its limit depends on what was heard: below */
    if (sim_build()) {
        /* shards do not send keep-alives in simulation (see the shard loop) */
        if (sim_waitall(S, pc->pull_req) != MPI_SUCCESS)
            die("waiting for the final parameters failed: a server shard is unreachable; stopping");
        all = 1;
    }
    while (!all) {
        if (comm_testall(S, pc->pull_req, &all) != MPI_SUCCESS) {
            if (take_notice(pc)) break;
            comm_fault(c, "the final parameters", NULL, 0);
            die("waiting for the final parameters failed: a server shard is unreachable; stopping");
        }
        if (all) break;
        int ka = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, PS_KEEPALIVE, c->world, &ka, &st);
        if (ka) {
            ps_hdr_t h;
            MPI_Recv(&h, (int)sizeof h, MPI_BYTE, st.MPI_SOURCE, PS_KEEPALIVE, c->world, MPI_STATUS_IGNORE);
            comm_wait_heard(&w);
        }
        if (comm_wait_s(&w) > (take_notice(pc) ? live_deadline(c->timeout_s, LIVE_NOTICE) : shard_limit(pc))) {
            if (c->evicted) break;
            comm_fault(c, "the final parameters", NULL, 0);
            die("the server shards sent neither the final parameters nor a keep-alive within %.0f s; stopping",
                shard_limit(pc));
        }
        comm_idle(&w.idle);
    }
    if (all) {
        for (int k = 0; k < S; k++) MPI_CHECK(c, MPI_Wait(&done[k], MPI_STATUS_IGNORE));
        free(dh);
        take_headers(pc, 1);   /* the lead keeps the final statistics; everyone learns of evictions */
        /* keep-alives still in flight are harmless: nothing receives them */
    } else {
        fprintf(stderr, "dsgd: worker %d (rank %d): the server shards finished while it was frozen; it leaves without them\n",
                pc->worker, c->rank);
        for (int k = 0; k < S; k++) {
            if (pc->pull_req[k] != MPI_REQUEST_NULL) { MPI_Cancel(&pc->pull_req[k]); MPI_Request_free(&pc->pull_req[k]); }
            if (done[k] != MPI_REQUEST_NULL) MPI_Request_free(&done[k]);
        }
        c->peer_lost = 1;   /* dh stays with the abandoned sends */
    }
    free(done);
}
