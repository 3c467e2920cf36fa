/* One parameter-server shard: the receive loop, the server-side optimizer,
 * per-worker clocks, Downpour's warm start, staleness bookkeeping and the
 * replies. Its state is in shard.h; its receives and eviction in
 * shard_recv.c, its checkpoint pieces in shard_snap.c; the consistency
 * gate the paradigm chose (ASP / SSP / DSSP) in gate.c. */
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "shard.h"

/* Is a reply still reading buffer b? Completes the replies that are done. */
static int buffer_busy(shard_t *s, const float *b)
{
    int busy = 0;
    for (int j = 0; j < 2 * s->cfg->workers; j++) {
        if (s->out_from[j] != b) continue;
        if (s->out_seq[j]) {   /* through the pool: until the worker says it has read it */
            if (s->ws[j / 2].read >= s->out_seq[j]) { s->out_from[j] = NULL; s->out_seq[j] = 0; }
            else busy = 1;
            continue;
        }
        if (s->out_req[j] == MPI_REQUEST_NULL) continue;
        if (sim_build()) {
            /* SimGrid 3.32 keeps a message completed by MPI_Test in its
             * sender's list of activities for good and scans that whole list at
             * every later completion, so a shard that tests its replies slows
             * the simulation down quadratically (95% of the time in that scan;
             * 3.34 fixed it). The simulated shard never tests a reply: a buffer
             * is busy until send_params waits for the reply of its slot, which
             * keeps at most 2·workers + 1 buffers. */
            busy = 1;
            continue;
        }
        int done = 0;
        MPI_CHECK(s->c, MPI_Test(&s->out_req[j], &done, MPI_STATUS_IGNORE));
        if (done) s->out_from[j] = NULL;
        else busy = 1;
    }
    return busy;
}

/* b's index in the shared pool, or -1 (a private buffer) */
static int pool_index(const shard_t *s, const float *b)
{
    for (int i = 0; i < s->npool; i++)
        if (s->wb[i] == b) return i;
    return -1;
}

/* Where the next update of the slice goes: the current buffer when no reply
 * is reading it (the usual case: a worker asks again only after receiving),
 * else a free one. */
static float *update_target(shard_t *s, int whole)
{
    /* Through the pool, an update of the whole slice goes to the next free
     * pool buffer rather than in place: writing lines that a worker on
     * another core has just read costs an invalidation each, and in the
     * buffer read longest ago they have left that core's cache (measured:
     * the shard's update of the mlp slice 150 -> 80 us). It costs no copy. */
    if (whole && s->npool > 1) {
        int cur = pool_index(s, s->w);
        if (cur < 0) cur = s->npool;
        for (int d = 1; d < s->npool; d++) {
            float *b = s->wb[(cur + d) % s->npool];
            if (!buffer_busy(s, b)) return b;
        }
    }
    if (!buffer_busy(s, s->w)) return s->w;
    for (int i = 0; i < s->nwb; i++)
        if (s->wb[i] != s->w && !buffer_busy(s, s->wb[i])) return s->wb[i];
    if (s->nwb == s->npool + 2 * s->cfg->workers + 1) die("server shard %d: no free parameter buffer (a bug)", s->k);
    s->wb[s->nwb] = xalloc_floats(s->n ? s->n : 1);
    return s->wb[s->nwb++];
}

/* Minimum clock over live workers still training: those evicted, and those
 * that finished (a bounded run stops workers at different clocks), hold no
 * one back. */
static int64_t min_clock(const shard_t *s, int *slow)
{
    int64_t m = INT64_MAX;
    *slow = -1;
    for (int p = 0; p < s->cfg->workers; p++)
        if (s->ws[p].alive && !s->ws[p].done && s->ws[p].t < m) { m = s->ws[p].t; *slow = p; }
    return m == INT64_MAX ? 0 : m;
}

static int fastest(const shard_t *s)
{
    int f = -1;
    for (int p = 0; p < s->cfg->workers; p++)
        if (s->ws[p].alive && !s->ws[p].done && (f < 0 || s->ws[p].t > s->ws[f].t)) f = p;
    return f;
}

static void send_params(shard_t *s, int p, int tag, int64_t stamp)
{
    int slot = 2 * p + (tag == PS_EVAL_PARAMS);
    /* the worker has received the previous reply of this kind before it could ask again */
    MPI_CHECK(s->c, MPI_Wait(&s->out_req[slot], MPI_STATUS_IGNORE));
    ps_hdr_t *h = &s->out[slot];
    memset(h, 0, sizeof *h);
    h->stamp = stamp;
    h->stop = s->stop_all;
    h->stats = s->st;
    worker_state_t *w = &s->ws[p];
    if (tag == PS_PARAMS) w->served = w->t;
    h->applied = w->applied;
    h->version = s->version;
    h->buf = tag != PS_FINAL && w->slot ? pool_index(s, s->w) : -1;
    s->out_from[slot] = s->w;
    s->out_seq[slot] = 0;
    if (h->buf >= 0) {   /* the parameters stay in the pool: the header names the buffer */
        ps_shm_sync(s->cfg->shm);
        MPI_CHECK(s->c, MPI_Isend(h, (int)sizeof *h, MPI_BYTE, worker_rank(s, p), tag, s->c->world, &s->out_req[slot]));
        s->out_seq[slot] = ++w->shm_sent;
        s->c->bytes_sent += sizeof *h;
    } else {
        MPI_Datatype t = ps_msg_type(h, s->w + w->off, w->cnt);
        MPI_CHECK(s->c, MPI_Isend(MPI_BOTTOM, 1, t, worker_rank(s, p), tag, s->c->world, &s->out_req[slot]));
        MPI_Type_free(&t);
        s->c->bytes_sent += msg_bytes(w->cnt);
    }
    s->c->msgs_sent++;
}

/* May worker p's pull be answered now? Downpour's warm start (--warmup-steps
 * K) holds every other replica's first pull until worker 0 has trained K
 * steps alone; then the gate decides. */
static int gate_open(shard_t *s, int p)
{
    if (s->cfg->warmup_steps > 0 && p >= s->cfg->replica_size && s->ws[0].alive && !s->ws[0].done &&
        s->ws[0].step < s->cfg->warmup_steps)
        return 0;
    int slow;
    return ps_gate_open(&s->gate, p, s->ws[p].t, min_clock(s, &slow));
}

static void apply_in_order(shard_t *s);

static void answer_parked(shard_t *s)
{
    if (s->ordered) apply_in_order(s);
    int answered = 0;
    for (int p = 0; p < s->cfg->workers; p++) {
        worker_state_t *w = &s->ws[p];
        if (!w->parked || !gate_open(s, p)) continue;
        int slow;
        w->parked = 0;
        ps_gate_answered(&s->gate, p);
        w->last_seen = shard_now(s);   /* its silence starts now, not when it asked */
        send_params(s, p, PS_PARAMS, min_clock(s, &slow));
        answered = 1;
    }
    if (s->ordered && answered) apply_in_order(s);   /* a round that waited for those answers */
}

/* A push about to be applied: st updates were applied to the slice since
 * the reply it was computed on, and it is gap clocks behind. */
static void record_staleness(shard_t *s, int64_t st, int64_t gap)
{
    if (st < 0) st = 0;   /* a version cannot exceed the shard's; guard anyway */
    if (gap < 0) gap = 0;   /* nor a stamp the clock */
    if (s->st.updates == 0 || st < s->st.st_min) s->st.st_min = st;
    if (st > s->st.st_max) s->st.st_max = st;
    s->st.st_sum += (double)st;
    s->st.hist[st < PS_HIST - 1 ? st : PS_HIST - 1]++;
    if (s->st.updates == 0 || gap < s->st.gap_min) s->st.gap_min = gap;
    if (gap > s->st.gap_max) s->st.gap_max = gap;
    s->st.gap_sum += (double)gap;
    s->st.updates++;
}

/* g: the pushed part at its offset in the slice (g[w->off .. w->off + w->cnt)) */
static void on_push(shard_t *s, int p, const ps_hdr_t *h, const float *g)
{
    worker_state_t *w = &s->ws[p];
    record_staleness(s, s->version - h->version, h->clock - h->stamp);
    float lr = s->cfg->fixed_lr > 0 ? s->cfg->fixed_lr : h->lr;
    if (w->cnt) {
        float *to = update_target(s, w->cnt == s->n);
        int b = pool_index(s, to);
        /* a pool buffer's progress word changes before the buffer does
         * (shm.h); only an update of the whole slice is one a worker may
         * copy from as it proceeds */
        uint64_t tag = b >= 0 && w->cnt == s->n ? ps_shm_tag(p, h->clock) : 0;
        if (b >= 0) ps_shm_progress_set(s->cfg->shm, s->k, b, 0, 0);
        if (to != s->w) {   /* out of place: the rest of the slice is carried over */
            memcpy(to, s->w, w->off * sizeof(float));
            memcpy(to + w->off + w->cnt, s->w + w->off + w->cnt, (s->n - w->off - w->cnt) * sizeof(float));
        }
        if (tag) {
            const size_t ch = ps_shm_chunk(s->n);
            for (size_t a = 0, i = 1; a < s->n; a += ch, i++) {
                optim_step_into_stream(s->opt, to, s->w, g, 1.0f, a, s->n - a < ch ? s->n - a : ch, lr);
                ps_shm_progress_set(s->cfg->shm, s->k, b, tag, i);
            }
        } else if (b >= 0) {
            optim_step_into_stream(s->opt, to, s->w, g, 1.0f, w->off, w->cnt, lr);
        } else {
            optim_step_into(s->opt, to, s->w, g, 1.0f, w->off, w->cnt, lr);
        }
        s->w = to;
        s->version++;
    }
    w->applied++;
    s->sum_step += h->step - w->step;
    w->step = h->step;
    if (s->cfg->snap_every > 0) {
        int64_t c = s->sum_step / ((int64_t)s->cfg->snap_every * s->cfg->workers);
        if (c > s->snap_index) { s->snap_index = c; snap_take(s, c); }
    }
    int slow, fast = fastest(s);
    int64_t m = min_clock(s, &slow);
    ps_gate_pushed(&s->gate, p, now_s(), w->t, m, slow, fast);
}

/* Staleness 0: is a worker that pushed in round `round` still to be
 * answered its pull of that round? Its pull must see exactly the rounds
 * before its next push, so the next round waits for it: a worker
 * descheduled between its push and its pull (ranks sharing cores) would
 * otherwise get parameters with some of the next round's pushes in them,
 * and the run would no longer repeat bit for bit. */
static int round_owed(const shard_t *s)
{
    for (int p = 0; p < s->cfg->workers; p++) {
        const worker_state_t *w = &s->ws[p];
        if (w->alive && !w->done && w->t > s->round && w->served <= s->round) return 1;
    }
    return 0;
}

/* Staleness 0: apply the held pushes whose turn has come. Round r holds
 * the pushes made at clock r; within it worker 0 goes first. A worker
 * that is evicted or done, or whose push of the round was applied before
 * (a resumed run), is passed over; one whose push has not arrived stops
 * the walk until it does (the gate holds every pull until then anyway).
 * A round starts once every pull of the one before it is answered. */
static void apply_in_order(shard_t *s)
{
    const int W = s->cfg->workers;
    for (;;) {
        int held = 0;
        for (int p = 0; p < W; p++) held |= s->ws[p].has_held;
        if (!held) return;   /* nothing to apply: the walk resumes at the next push */
        if (s->next == W) {
            if (round_owed(s)) return;   /* resumes when that pull is answered */
            s->next = 0;
            s->round++;
        }
        worker_state_t *w = &s->ws[s->next];
        if (w->has_held && w->held_h.clock <= s->round) {
            w->has_held = 0;
            w->off = (size_t)w->held_h.off;
            w->cnt = (size_t)w->held_h.cnt;
            on_push(s, s->next, &w->held_h, w->held_g);
        } else if (!w->has_held && w->alive && !w->done && w->t <= s->round) {
            return;   /* its push of the round is still to come */
        }
        s->next++;
    }
}

/* A push at staleness 0: held until its turn (worker order within the
 * round). A gradient in the worker's slot stays there (the worker does not
 * write the slot again before the shard says it applied it); one in the
 * receive buffer: the worker takes that buffer as it is, and the shard
 * receives on into the worker's spare. */
static void hold_push(shard_t *s, int p, const ps_hdr_t *h, const float *g)
{
    worker_state_t *w = &s->ws[p];
    if (w->has_held) die("server shard %d: worker %d pushed twice in one round at staleness 0 (a bug)", s->k, p);
    int l = 0;
    while (l < s->lanes && g != (const float *)(s->in[l] + sizeof(ps_hdr_t))) l++;
    if (l == s->lanes) {   /* in its slot, or an empty push */
        w->held_g = (float *)g;
    } else {
        unsigned char *spare = w->held ? w->held : xmalloc(msg_bytes(s->n));
        w->held = s->in[l];
        s->in[l] = spare;
        w->held_g = (float *)(w->held + sizeof(ps_hdr_t));
    }
    w->held_h = *h;
    w->has_held = 1;
}

/* A reply still on its way: it moves only while this shard is in an MPI
 * call (the shared-memory transport hands a large message over in
 * fragments), so the shard must not sleep then. Completes the finished ones. */
static int replies_in_flight(shard_t *s)
{
    int any = 0;
    for (int j = 0; j < 2 * s->cfg->workers; j++) {
        if (s->out_req[j] == MPI_REQUEST_NULL) continue;
        int done = 0;
        if (MPI_Test(&s->out_req[j], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) any = 1;
    }
    return any;
}

static int all_finished(const shard_t *s)
{
    for (int p = 0; p < s->cfg->workers; p++)
        if (s->ws[p].alive && !s->ws[p].done) return 0;
    return 1;
}

/* A push's gradient g (at its offset in the slice) is in. */
static void on_gradient(shard_t *s, int p, const ps_hdr_t *h, float *g)
{
    worker_state_t *w = &s->ws[p];
    w->t++;
    if (s->ordered) hold_push(s, p, h, g);
    else on_push(s, p, h, g);
    answer_parked(s);
}

/* Worker p's header has come into hin[p]. Returns 1 when p's next header
 * may be received, 0 when its gradient is to come first. */
static int on_message(shard_t *s, int p, int tag, int bytes, double now)
{
    const ps_config_t *cfg = s->cfg;
    if (bytes < (int)sizeof(ps_hdr_t)) return 1;   /* not the protocol's (e.g. a roll call): ignore */
    ps_hdr_t h = s->hin[p];
    worker_state_t *w = &s->ws[p];
    if (!w->alive) {                             /* an evicted worker stays out */
        if (tag == PS_DONE) on_returned(s, p);
        if (tag == PS_PUSH && h.buf < 0 && h.cnt > 0 && h.cnt <= (int64_t)s->n) {   /* its gradient: received, dropped */
            w->qh = h;
            w->queued = 1;
            drop_gradient(s, p);
            return 0;
        }
        return 1;
    }
    w->last_seen = now;
    if (h.read > w->read) w->read = h.read;
    if (h.off < 0 || h.cnt < 0 || (size_t)(h.off + h.cnt) > s->n)
        die("server shard %d: worker %d sent keys [%lld, %lld) outside its slice of %zu; the ranks disagree on the model",
            s->k, p, (long long)h.off, (long long)(h.off + h.cnt), s->n);
    w->off = (size_t)h.off;
    w->cnt = (size_t)h.cnt;
    switch (tag) {
    case PS_PUSH:
        if (h.buf >= 0) {   /* in the worker's slot, at its offset */
            if (!w->slot)
                die("server shard %d: worker %d pushed through a shared slot it does not have here; the ranks disagree on --ps-transport", s->k, p);
            ps_shm_sync(cfg->shm);
            on_gradient(s, p, &h, w->slot);
        } else if (h.cnt > 0) {   /* in a message of its own: queued */
            w->qh = h;
            w->queued = 1;
            s->fifo[(s->fifo_head + s->fifo_len++) % cfg->workers] = p;
            next_gradient(s, now);
            return 0;
        } else {   /* an empty push: nothing to receive (the receive buffer may be in use) */
            on_gradient(s, p, &h, w->slot);
        }
        break;
    case PS_PULL:
        w->parked = 1;
        answer_parked(s);
        break;
    case PS_EVAL_PULL: {
        int slow;
        send_params(s, p, PS_EVAL_PARAMS, min_clock(s, &slow));
        break;
    }
    case PS_STOP:
        if (h.stop == COMM_STOP_DIVERGED) s->no_snap = 1;
        else if (h.stop > s->stop_all) s->stop_all = h.stop;
        else if (!s->stop_all) s->stop_all = COMM_STOP_TARGET;
        break;
    case PS_DONE:
        w->done = 1;
        answer_parked(s);   /* a finished worker no longer holds the warm start */
        break;
    default:
        break;
    }
    return 1;
}

/* The shard's state, its slice copied from params (restored from a
 * checkpoint when resuming), replies' slots, and the receives posted. */
static void shard_open(shard_t *s, comm_t *c, const ps_config_t *cfg, int k, const float *params, size_t nparams)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->cfg = cfg;
    s->k = k;
    ps_shard_range(nparams, cfg->servers, k, &s->lo, &s->n);
    /* the pool's buffers first: they are the ones looked at first for an update */
    s->npool = ps_shm_pool(cfg->shm, k, 0) ? ps_shm_npool(cfg->shm) : 0;
    s->wb = xcalloc((size_t)(s->npool + 2 * cfg->workers + 1), sizeof(float *));
    for (int i = 0; i < s->npool; i++) s->wb[s->nwb++] = ps_shm_pool(cfg->shm, k, i);
    if (!s->npool) s->wb[s->nwb++] = xalloc_floats(s->n ? s->n : 1);
    s->w = s->wb[0];
    memcpy(s->w, params + s->lo, s->n * sizeof(float));
    s->opt = optim_create(&cfg->opt, s->n);
    s->opt->base = s->lo;   /* its nodecay spans are in whole-vector keys */
    s->ws = xcalloc((size_t)cfg->workers, sizeof(worker_state_t));
    ps_gate_init(&s->gate, cfg);
    s->nparams = nparams;
    double t0 = shard_now(s);
    for (int p = 0; p < cfg->workers; p++) {
        s->ws[p].alive = 1;
        s->ws[p].last_seen = t0;
        s->ws[p].cnt = s->n;   /* until its first message says otherwise */
        s->ws[p].slot = ps_shm_slot(cfg->shm, p, k);
    }
    if (cfg->restore) {   /* a resumed run: the slice's optimizer state, every worker's clock */
        const ps_restore_t *rs = cfg->restore;
        if (s->opt->velocity && rs->velocity) memcpy(s->opt->velocity, rs->velocity + s->lo, s->n * sizeof(float));
        if (s->opt->accum && rs->accum) memcpy(s->opt->accum, rs->accum + s->lo, s->n * sizeof(float));
        for (int p = 0; p < cfg->workers; p++) {
            s->ws[p].t = s->ws[p].applied = s->ws[p].served = rs->clock[p];
            s->ws[p].step = rs->step[p];
            s->sum_step += rs->step[p];
            s->st.updates += rs->clock[p];
        }
    }
    s->ordered = cfg->gate == GATE_SSP && cfg->staleness == 0;
    int slow;
    s->round = min_clock(s, &slow);   /* a resumed run's clocks differ by at most one */
    snap_setup(s);
    s->out = xcalloc((size_t)(2 * cfg->workers), sizeof(ps_hdr_t));
    s->out_req = xcalloc((size_t)(2 * cfg->workers), sizeof(MPI_Request));
    s->out_from = xcalloc((size_t)(2 * cfg->workers), sizeof(float *));
    s->out_seq = xcalloc((size_t)(2 * cfg->workers), sizeof(int64_t));
    for (int j = 0; j < 2 * cfg->workers; j++) s->out_req[j] = MPI_REQUEST_NULL;
    s->ev_hdr = xcalloc((size_t)cfg->workers, sizeof(ps_hdr_t));
    s->ev_req = xcalloc((size_t)cfg->workers, sizeof(MPI_Request));
    for (int p = 0; p < cfg->workers; p++) s->ev_req[p] = MPI_REQUEST_NULL;
    /* lanes (shard.h): the shard's link limits a step only where it serves
     * more workers than a worker serves shards; else each worker's own link
     * does, and gradients that came in together would only have their
     * replies go out together (measured: 4% slower with 2 workers, 2 shards) */
    s->lanes = cfg->servers > 1 && cfg->workers > cfg->servers ? cfg->servers : 1;
    s->nrreq = cfg->workers + s->lanes + (s->k == 0 && s->snap_in && cfg->servers > 1);
    s->hin = xcalloc((size_t)cfg->workers, sizeof(ps_hdr_t));
    s->rreq = xcalloc((size_t)s->nrreq, sizeof(MPI_Request));
    s->fifo = xcalloc((size_t)cfg->workers, sizeof(int));
    s->inflight = xmalloc(sizeof(int) * (size_t)s->lanes);
    s->in = xcalloc((size_t)s->lanes, sizeof(unsigned char *));
    for (int l = 0; l < s->lanes; l++) {
        s->inflight[l] = -1;
        s->in[l] = xmalloc(msg_bytes(s->n));
    }
    for (int j = 0; j < s->nrreq; j++) s->rreq[j] = MPI_REQUEST_NULL;
    for (int p = 0; p < cfg->workers; p++) post_header(s, p);
    snap_post(s);
}

/* Nothing came in: evict workers silent for too long (a parked worker is
 * waiting on us, not silent; one that died in the middle of a message
 * never completes its receive, and is evicted the same way), and tell the
 * finished ones that this shard is alive. */
static void shard_quiet(shard_t *s, double now)
{
    const ps_config_t *cfg = s->cfg;
    for (int p = 0; p < cfg->workers; p++) {
        worker_state_t *w = &s->ws[p];
        if (w->alive && !w->done && !w->parked && !(w->queued && lane_of(s, p) < 0) &&
            now - w->last_seen > live_deadline(cfg->timeout_s, LIVE_SILENT)) {
            evict(s, p, now - w->last_seen);
            answer_parked(s);
        }
    }
    if (now_s() - s->last_keepalive > live_deadline(cfg->timeout_s, LIVE_KEEPALIVE)) {
        ps_hdr_t h;
        memset(&h, 0, sizeof h);
        for (int p = 0; p < cfg->workers; p++)
            if ((s->ws[p].alive && s->ws[p].done) || s->ws[p].returned)
                MPI_CHECK(s->c, MPI_Send(&h, (int)sizeof h, MPI_BYTE, worker_rank(s, p), PS_KEEPALIVE, s->c->world));
        s->last_keepalive = now_s();
    }
}

/* Receive j (shard.h, rreq) has completed with status st. */
static void shard_take(shard_t *s, int j, MPI_Status *st, double now)
{
    const int W = s->cfg->workers;
    if (j >= snap_slot(s)) { snap_recv(s, st); return; }
    if (j >= W) {   /* a gradient is in */
        int l = j - W, p = s->inflight[l];
        s->inflight[l] = -1;
        worker_state_t *w = &s->ws[p];
        w->queued = 0;
        w->last_seen = now;
        on_gradient(s, p, &w->qh, (float *)(s->in[l] + sizeof(ps_hdr_t)));   /* base of the slice */
        post_header(s, p);
        next_gradient(s, now);
        return;
    }
    int bytes;
    MPI_Get_count(st, MPI_BYTE, &bytes);
    if (on_message(s, j, st->MPI_TAG, bytes, now)) post_header(s, j);
}

/* Every worker is done or evicted: the final checkpoint first, so that the
 * final replies can say whether it was written; then each survivor gets
 * the final slice and statistics (the lead keeps the parameters; all learn
 * of evictions); then what is still in flight is waited for or abandoned. */
static void shard_close(shard_t *s)
{
    const ps_config_t *cfg = s->cfg;
    comm_t *c = s->c;
    if (s->ordered) apply_in_order(s);
    snap_final(s);
    int slow;
    int64_t m = min_clock(s, &slow);
    for (int p = 0; p < cfg->workers; p++)
        if (s->ws[p].alive || s->ws[p].returned) send_params(s, p, PS_FINAL, m);
    if (s->snap_out) MPI_CHECK(c, MPI_Wait(&s->snap_req, MPI_STATUS_IGNORE));
    cancel_receives(s);
    snap_free(s);
    int keep = 0;   /* a reply to a dead worker that MPI may still read from: its buffer is not freed */
    for (int p = 0; p < cfg->workers; p++) {
        for (int j = 0; j < 2; j++) {
            MPI_Request *q = &s->out_req[2 * p + j];
            if (s->ws[p].alive || (s->ws[p].returned && j == 0)) MPI_CHECK(c, MPI_Wait(q, MPI_STATUS_IGNORE));
            else if (*q != MPI_REQUEST_NULL) { MPI_Request_free(q); keep = 1; }   /* to a dead worker: abandon */
        }
        MPI_Request *e = &s->ev_req[p];
        if (s->ws[p].returned) MPI_CHECK(c, MPI_Wait(e, MPI_STATUS_IGNORE));   /* it read the notice */
        else if (*e != MPI_REQUEST_NULL) { MPI_Request_free(e); keep = 1; }
    }
    if (!keep) {
        for (int i = s->npool; i < s->nwb; i++) free(s->wb[i]);   /* the pool's go with the window */
        free(s->out);
        free(s->ev_hdr);
    }
    free(s->ev_req);
    for (int p = 0; p < cfg->workers; p++) free(s->ws[p].held);
    for (int l = 0; l < s->lanes; l++) free(s->in[l]);
    free(s->in); free(s->inflight); free(s->hin); free(s->fifo); free(s->rreq); free(s->out_req); free(s->out_from); free(s->out_seq); free(s->wb); free(s->ws);
    ps_gate_free(&s->gate);
    optim_free(s->opt);
}

/* ---- the shard as comm_serve's handlers ---- */

static int served(void *ctx) { return all_finished(ctx); }

/* A worker is silent only while this shard listens: the workers' times are
 * the shard's awake clock, which leaves out a gap of more than a quarter
 * of --timeout, or 0.25 s, between its polls (the shard itself stopped,
 * descheduled or held inside MPI). Without it a shard frozen past
 * --timeout evicted every healthy worker the moment it came back. */
static void polled(void *ctx)
{
    shard_t *s = ctx;
    s->now = shard_now(s);
    /* a preemption signal to this shard stops every worker (they see it in their replies) */
    if (comm_preempt_signal() && s->stop_all < COMM_STOP_PREEMPT) s->stop_all = COMM_STOP_PREEMPT;
}

static void took(void *ctx, int j, MPI_Status *st) { shard_take(ctx, j, st, ((shard_t *)ctx)->now); }

static int quiet(void *ctx)
{
    shard_t *s = ctx;
    shard_quiet(s, s->now);
    return replies_in_flight(s);
}

int ps_server_run(comm_t *c, const ps_config_t *cfg, int k, const float *params, size_t nparams)
{
    shard_t sh, *s = &sh;
    shard_open(s, c, cfg, k, params, nparams);
    const comm_serve_t h = { .done = served, .polled = polled, .take = took, .quiet = quiet };
    comm_serve(c, s->nrreq, s->rreq, &h, s);
    shard_close(s);
    return 0;
}
