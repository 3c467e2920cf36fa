/* Sandblaster's coordinator (rank 0): one pass hands the P portions of a
 * batch to whichever replica asks (load balancing), duplicates outstanding
 * portions to idle replicas near the end (backup tasks: the first result
 * wins, later copies are discarded by portion id), reissues the portions of
 * a replica that died, and ends once every shard holds every portion. It
 * sees scalars only: one loss per portion, summed in portion order. */
#include <stdlib.h>
#include <string.h>

#include "../../util/util.h"
#include "sb_coord.h"

static void send_task(sb_coord_t *co, int q, int action, int verdict, int portion, int flags)
{
    sb_task_t t = { action, verdict, portion, flags, co->pass, co->batch, co->c->peer_lost, 0 };
    if (MPI_Send(&t, (int)sizeof t, MPI_BYTE, co->first_replica + q, SB_TASK, co->c->world) != MPI_SUCCESS) {
        /* MPI knows it is dead: let the clock evict it at once */
        co->rep[q].parked = 0;
        co->rep[q].last_heard = -1e30;
        return;
    }
    co->c->bytes_sent += sizeof t;
    co->c->msgs_sent++;
}

void sb_coord_op(sb_coord_t *co, int op, int a, int b, double alpha, int who)
{
    sb_op_t o = { op, a, b, who, co->pass, alpha };
    for (int k = 0; k < co->S; k++) {
        MPI_CHECK(co->c, MPI_Send(&o, (int)sizeof o, MPI_BYTE, 1 + k, SB_OP, co->c->world));
        co->c->bytes_sent += sizeof o;
        co->c->msgs_sent++;
    }
    co->last_ping = now_s();
}

void sb_coord_replies(sb_coord_t *co, int op, int a, int b, const char *what)
{
    for (int k = 0; k < co->S; k++)
        MPI_CHECK(co->c, MPI_Irecv(&co->rep_in[k], (int)sizeof(sb_reply_t), MPI_BYTE, 1 + k, SB_REPLY, co->c->world, &co->req[k]));
    sb_coord_op(co, op, a, b, 0, 0);
    comm_waitall(co->c, co->S, co->req, what);
}

/* Would the other replicas, at their measured speeds, hand in the rest of
 * the pending portions before q finishes this one? Then q's held results
 * must be pushed first, or the pass would wait for a straggler's push. */
static int near_end(const sb_coord_t *co, int q)
{
    double mine = co->rep[q].dur, others = 0;
    for (int j = 0; j < co->R; j++) {
        if (j == q || !co->rep[j].alive) continue;
        double d = co->rep[j].dur;
        others += (mine > 0 && d > 0) ? mine / d : 1.0;
    }
    return others >= (double)co->npending;
}

int sb_coord_pick(sb_coord_t *co, int *dup)
{
    *dup = 0;
    for (int p = co->next; p < co->P; p++)
        if (co->state[p] == PENDING) { co->next = p; return p; }
    if (co->no_backup) return -1;
    int best = -1;
    for (int p = 0; p < co->P; p++)
        if (co->state[p] == ISSUED && co->copies[p] == 1 && (best < 0 || co->issued_at[p] < co->issued_at[best])) best = p;
    *dup = best >= 0;
    return best;
}

/* Answer replica q (its verdict, a task) or park it until there is work. */
static void assign(sb_coord_t *co, int q, int verdict)
{
    sb_rep_t *rp = &co->rep[q];
    int dup = 0, p = co->open ? sb_coord_pick(co, &dup) : -1;
    if (p >= 0) {
        if (dup) co->dup_issued++;
        else { co->npending--; co->issued++; co->issued_at[p] = now_s(); }
        co->state[p] = ISSUED;
        co->copies[p]++;
        rp->cur = p;
        rp->cur_pass = co->pass;
        rp->started = now_s();
        if (rp->parked) rp->last_heard = rp->started;   /* its silence starts now, not when it asked */
        rp->parked = 0;
        int flags = co->solo[p] ? SB_SOLO | SB_FLUSH_FIRST : 0;
        if (dup || near_end(co, q)) flags |= SB_FLUSH_FIRST;
        send_task(co, q, ACT_WORK, verdict, p, flags);
        return;
    }
    if (verdict != V_NONE || rp->kept > rp->pushed) {   /* it pushes what it holds, then asks again */
        rp->parked = 0;
        send_task(co, q, ACT_IDLE, verdict, -1, 0);
    } else {
        rp->parked = 1;
    }
}

/* a replica declared dead that has not been heard from since */
static int any_lost(const sb_coord_t *co)
{
    for (int q = 0; q < co->R; q++)
        if (!co->rep[q].alive && !co->rep[q].returned) return 1;
    return 0;
}

static void on_req(sb_coord_t *co, int q, const sb_req_t *m)
{
    sb_rep_t *rp = &co->rep[q];
    double now = now_s();
    rp->last_heard = now;
    if (m->pushed > rp->pushed) rp->pushed = m->pushed;
    if (m->kind == REQ_NOTICE) return;
    if (!rp->alive) {   /* declared dead, yet here: frozen, not dead. Nothing it holds counts: it stops */
        if (!rp->returned) {
            rp->returned = 1;
            /* every replica declared dead is back: nobody is lost, and every rank may finalize */
            if (!any_lost(co)) co->c->peer_lost = 0;
            fprintf(stderr, "dsgd: sandblaster: replica %d (rank %d) was frozen, not dead; it waits for the end, its work stays reissued\n",
                    q, co->first_replica + q);
            fflush(stderr);
        }
        send_task(co, q, ACT_STOP, m->kind == REQ_DONE ? V_DISCARD : V_NONE, -1, SB_EVICTED);
        return;
    }
    int verdict = V_NONE;
    if (m->kind == REQ_DONE) {
        int p = m->portion;
        int current = m->pass == co->pass && p >= 0 && p < co->P;
        if (current && rp->cur == p) {
            double d = now - rp->started;
            rp->dur = rp->dur > 0 ? 0.7 * rp->dur + 0.3 * d : d;
        }
        rp->cur = -1;
        if (current) co->copies[p]--;
        if (current && co->open && co->state[p] != KEPT) {
            verdict = V_KEEP;
            co->state[p] = KEPT;
            co->kept_by[p] = q;
            co->loss[p] = m->loss;
            co->nkept++;
            rp->kept++;
        } else {
            verdict = V_DISCARD;   /* a later copy of a portion already counted */
            co->dup_discarded++;
        }
    }
    assign(co, q, verdict);
}

/* Replica q has been silent too long while it held work: forget it, and
 * reissue what it was computing and every portion it was granted that not
 * all shards hold (each shard reports its portions). */
static void evict(sb_coord_t *co, int q)
{
    sb_rep_t *rp = &co->rep[q];
    rp->alive = 0;
    co->evictions++;
    co->c->peer_lost = 1;
    fprintf(stderr, "dsgd: sandblaster: replica %d (rank %d) silent for %.1f s (--timeout %g); reissuing its portions\n", q,
            co->first_replica + q, now_s() - rp->last_heard, co->c->timeout_s);
    fflush(stderr);
    int p = rp->cur;
    if (p >= 0 && rp->cur_pass == co->pass && co->state[p] == ISSUED && --co->copies[p] == 0) {
        co->state[p] = PENDING;
        co->npending++;
    }
    rp->cur = -1;
    for (int k = 0; k < co->S; k++)
        MPI_CHECK(co->c, MPI_Irecv(co->have + (size_t)k * (size_t)co->P, co->P, MPI_BYTE, 1 + k, SB_BITMAP, co->c->world,
                                   &co->req[k]));
    sb_coord_op(co, OP_EVICT, 0, 0, 0, q);
    comm_waitall(co->c, co->S, co->req, "asking the shards which portions they hold");
    for (p = 0; p < co->P; p++) {
        if (co->state[p] != KEPT || co->kept_by[p] != q) continue;
        int everywhere = 1;
        for (int k = 0; k < co->S; k++) everywhere &= co->have[(size_t)k * (size_t)co->P + p];
        if (everywhere) continue;
        co->state[p] = PENDING;
        co->solo[p] = 1;   /* some shards may hold it: push it alone, so they can drop it */
        co->npending++;
        co->nkept--;
        co->reissued++;
    }
    if (co->next > 0) co->next = 0;
    for (int j = 0; j < co->R; j++)
        if (co->rep[j].alive && co->rep[j].parked) assign(co, j, V_NONE);
}

/* A replica waiting on the coordinator, which keeps it alive: parked
 * (nothing to do yet), or back from a freeze that got it evicted (it waits
 * for the end, so that every rank finishes together). */
static int benched(const sb_coord_t *co, int q)
{
    return (co->rep[q].alive && co->rep[q].parked) || co->rep[q].returned;
}

/* Receive a replica's message if one is waiting: 0 if none; else 1 with
 * *q its replica index (−1 if the sender is not a replica). */
static int recv_req(sb_coord_t *co, sb_req_t *m, int *q)
{
    int flag = 0;
    MPI_Status st;
    MPI_CHECK(co->c, MPI_Iprobe(MPI_ANY_SOURCE, SB_REQ, co->c->world, &flag, &st));
    if (!flag) return 0;
    MPI_CHECK(co->c, MPI_Recv(m, (int)sizeof *m, MPI_BYTE, st.MPI_SOURCE, SB_REQ, co->c->world, MPI_STATUS_IGNORE));
    *q = st.MPI_SOURCE - co->first_replica;
    if (*q >= co->R) *q = -1;
    return 1;
}

/* One message from a replica, or the clock's chores; returns 1 if a message was handled. */
static int poll_once(sb_coord_t *co)
{
    sb_req_t m;
    int from;
    if (recv_req(co, &m, &from)) {
        if (from >= 0) on_req(co, from, &m);
        return 1;
    }
    double now = now_s();
    for (int q = 0; q < co->R; q++) {
        sb_rep_t *rp = &co->rep[q];
        if (rp->alive && !rp->parked && (rp->cur >= 0 || rp->kept > rp->pushed || rp->last_heard < 0) &&
            now - rp->last_heard > comm_deadline(co->c, LIVE_SILENT))
            evict(co, q);
    }
    if (now - co->last_ping > comm_deadline(co->c, LIVE_KEEPALIVE)) sb_coord_op(co, OP_PING, 0, 0, 0, 0);
    /* on their own clock: the operations that keep the shards' silence short say nothing to replicas */
    if (now - co->last_ka > comm_deadline(co->c, LIVE_KEEPALIVE)) {
        for (int q = 0; q < co->R; q++)
            if (benched(co, q)) send_task(co, q, ACT_KEEPALIVE, V_NONE, -1, 0);
        co->last_ka = now;
    }
    return 0;
}

static int all_pushed(const sb_coord_t *co)
{
    for (int q = 0; q < co->R; q++)
        if (co->rep[q].alive && co->rep[q].kept > co->rep[q].pushed) return 0;
    return 1;
}

static int any_alive(const sb_coord_t *co)
{
    for (int q = 0; q < co->R; q++)
        if (co->rep[q].alive) return 1;
    return 0;
}

double sb_coord_pass(sb_coord_t *co, long batch)
{
    const double t0 = now_s();
    co->pass++;
    co->batch = batch;
    for (int p = 0; p < co->P; p++) {
        co->state[p] = PENDING;
        co->copies[p] = 0;
        co->solo[p] = 0;
        co->kept_by[p] = -1;
    }
    co->npending = co->P;
    co->nkept = 0;
    co->next = 0;
    sb_coord_op(co, OP_BEGIN, 0, 0, 0, 0);
    co->open = 1;
    for (int q = 0; q < co->R; q++)
        if (co->rep[q].alive && co->rep[q].parked) assign(co, q, V_NONE);
    comm_idle_t idle = comm_idle_start(co->c);
    while (co->nkept < co->P || !all_pushed(co)) {
        if (poll_once(co)) { comm_idle_reset(&idle); continue; }
        if (!any_alive(co)) die("sandblaster: every replica has died; stopping");
        comm_idle(&idle);
    }
    co->open = 0;
    sb_coord_replies(co, OP_END, 0, 0, "waiting for the shards to receive every portion");
    for (int k = 0; k < co->S; k++)
        if (co->rep_in[k].counted != co->P || co->rep_in[k].conflicts != 0)
            die("sandblaster: shard %d holds %lld of %d portions with %lld conflicting pushes: a portion was granted twice (a bug)",
                k, (long long)co->rep_in[k].counted, co->P, (long long)co->rep_in[k].conflicts);
    co->counted += co->rep_in[0].counted;
    co->shard_discarded = 0;
    for (int k = 0; k < co->S; k++) co->shard_discarded += co->rep_in[k].discarded;
    co->passes++;
    double loss = 0;
    for (int p = 0; p < co->P; p++) loss += co->loss[p];   /* portion order: the same sum whoever computed what */
    co->pass_s += now_s() - t0;
    return loss;
}

void sb_coord_stop(sb_coord_t *co)
{
    /* Two phases: first every live replica parks (busy ones when they
     * report; one that never does is dead), then all get ACT_STOP together,
     * carrying whether a peer died: a replica told too early would call
     * MPI_Finalize, which waits for the dead rank forever. Parked replicas
     * get keep-alives meanwhile, so they do not time out on us. */
    comm_wait_t w = comm_wait_start(co->c, comm_deadline(co->c, LIVE_SILENT));
    for (;;) {
        int left = 0;
        for (int q = 0; q < co->R; q++)
            if (co->rep[q].alive && !co->rep[q].parked) left++;
        if (!left) break;
        if (now_s() - co->last_ka > comm_deadline(co->c, LIVE_KEEPALIVE)) {
            for (int q = 0; q < co->R; q++)
                if (benched(co, q)) send_task(co, q, ACT_KEEPALIVE, V_NONE, -1, 0);
            co->last_ka = now_s();
        }
        sb_req_t m;
        int from;
        if (recv_req(co, &m, &from)) {
            comm_idle_reset(&w.idle);
            if (from < 0 || m.kind == REQ_NOTICE) continue;
            co->rep[from].last_heard = now_s();
            if (m.kind == REQ_DONE) co->dup_discarded++;   /* a backup copy still running at the end */
            co->rep[from].parked = 1;
        } else if (comm_wait_late(&w)) {   /* died after its last task: nothing of it counts */
            for (int q = 0; q < co->R; q++)
                if (co->rep[q].alive && !co->rep[q].parked) { co->rep[q].alive = 0; co->c->peer_lost = 1; }
        } else {
            if (now_s() - co->last_ping > comm_deadline(co->c, LIVE_KEEPALIVE)) sb_coord_op(co, OP_PING, 0, 0, 0, 0);
            comm_idle(&w.idle);
        }
    }
    for (int q = 0; q < co->R; q++)
        if ((co->rep[q].alive || co->rep[q].returned) && !co->rep[q].stopped) {
            send_task(co, q, ACT_STOP, V_NONE, -1, 0);
            co->rep[q].stopped = 1;
        }
    sb_coord_op(co, OP_STOP, 0, 0, 0, co->c->peer_lost);
}

void sb_coord_init(sb_coord_t *co, comm_t *c, int S, int R, int P, int no_backup)
{
    memset(co, 0, sizeof *co);
    co->c = c;
    co->S = S;
    co->R = R;
    co->P = P;
    co->first_replica = 1 + S;
    co->no_backup = no_backup;
    co->pass = -1;
    co->state = xcalloc((size_t)P, 1);
    co->solo = xcalloc((size_t)P, 1);
    co->copies = xcalloc((size_t)P, sizeof(int));
    co->kept_by = xcalloc((size_t)P, sizeof(int));
    co->issued_at = xcalloc((size_t)P, sizeof(double));
    co->loss = xcalloc((size_t)P, sizeof(double));
    co->have = xcalloc((size_t)P * (size_t)S, 1);
    co->rep = xcalloc((size_t)R, sizeof(sb_rep_t));
    co->rep_in = xcalloc((size_t)S, sizeof(sb_reply_t));
    co->req = xcalloc((size_t)S, sizeof(MPI_Request));
    double now = now_s();
    for (int q = 0; q < R; q++) co->rep[q] = (sb_rep_t){ .alive = 1, .cur = -1, .last_heard = now };
    co->last_ping = co->last_ka = now;
}

void sb_coord_free(sb_coord_t *co)
{
    free(co->state); free(co->solo); free(co->copies); free(co->kept_by); free(co->issued_at); free(co->loss);
    free(co->have); free(co->rep); free(co->rep_in); free(co->req);
    memset(co, 0, sizeof *co);
}
