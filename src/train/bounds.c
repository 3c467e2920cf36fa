#include "bounds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"

/* Per-rank figures gathered at the end, in this order. */
enum { F_WORKER, F_WRANK, F_MP_INDEX, F_STEPS, F_SAMPLES, F_TRAIN_S, F_STOP_S, F_LAST_STEP_S, NF };

void bounds_start(bounds_t *b, run_t *r)
{
    const config_t *cfg = r->cfg;
    memset(b, 0, sizeof *b);
    b->limit = cfg->time_limit;
    b->target = cfg->target_acc;
    b->every_s = cfg->eval_every_s;
    b->active = b->limit > 0 || b->target > 0 || b->every_s > 0;
    b->agree_time = !strcmp(cfg->lr_horizon, "time");
    b->window = cfg->target_window > 1 ? (int)cfg->target_window : 1;
    b->accs = xcalloc((size_t)b->window, sizeof(double));
    b->mode = r->ops->stop_mode ? (int)r->ops->stop_mode(r) : STOP_AGREE;
    b->ttt_wall = b->ttt_train = NAN;
    b->sync_done_s = b->final_eval_s = NAN;
    b->ttt_step = -1;
    const int N = r->comm->size;
    b->workers = xcalloc((size_t)N, sizeof(int));
    /* who runs the loop and who leads, learned by every rank; and the barrier */
    int mine = (r->is_worker ? 1 : 0) | (r->lead ? 2 : 0);
    MPI_CHECK(r->comm, MPI_Allgather(&mine, 1, MPI_INT, b->workers, 1, MPI_INT, r->comm->world));
    for (int j = 0; j < N; j++) {
        if (b->workers[j] & 2) b->lead_rank = j;
        b->workers[j] &= 1;
    }
    b->t_start = now_s();
    if (sim_build()) {
        /* One simulated clock: ranks leave the all-gather at different
         * instants, so each would measure the limit from its own origin, and
         * a rank that stops on its replica's verdict (--model-parallel) could
         * leave a few microseconds before the limit by its own. The latest
         * exit is the origin of every rank. (Real hosts' clocks cannot be
         * compared so.) */
        double t0 = b->t_start;
        MPI_CHECK(r->comm, MPI_Allreduce(&t0, &b->t_start, 1, MPI_DOUBLE, MPI_MAX, r->comm->world));
    }
    b->next_eval = b->every_s;
}

double bounds_now(const bounds_t *b) { return now_s() - b->t_start; }

/* Has the lead's stop message arrived? (asynchronous paradigms, --target-acc) */
static int stop_message(bounds_t *b, run_t *r)
{
    int flag = 0;
    MPI_Status st;
    /* from any rank: a worker that took over from a dead lead tells too */
    MPI_CHECK(r->comm, MPI_Iprobe(MPI_ANY_SOURCE, TAG_BOUNDS_STOP, r->comm->world, &flag, &st));
    if (!flag) return 0;
    int v;
    MPI_CHECK(r->comm, MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, TAG_BOUNDS_STOP, r->comm->world, MPI_STATUS_IGNORE));
    return 1;
}

int bounds_after_step(bounds_t *b, run_t *r, double step_t0, double *t_end, int *eval)
{
    *eval = 0;
    b->last_step_s = *t_end - step_t0;
    if (!b->active) return 0;
    const double t = *t_end - b->t_start, prev = b->prev_check;
    b->prev_check = t;
    /* why stop; evaluate now; with --lr-horizon time, the time in ms */
    int f[3] = { BOUNDS_NONE, 0, (int)fmin(t * 1e3, 2e9) };
    const int nf = b->agree_time ? 3 : 2;
    if (b->limit > 0 && t >= b->limit) f[0] = BOUNDS_TIME;
    if (b->every_s > 0 && r->lead && t >= b->next_eval) f[1] = 1;
    if (b->mode == STOP_OWN_CLOCK && b->target > 0 && !r->lead &&
        (r->comm->stop_heard == COMM_STOP_TARGET || (!r->ops->announce_stop && stop_message(b, r))))
        f[0] = BOUNDS_TARGET;
    /* one verdict from integers every rank holds alike */
    int agreed = 1;
    comm_t *c = b->mode == STOP_AGREE && r->comm->size > 1 ? r->comm : b->mode == STOP_OWN_CLOCK && r->mp_size > 1 ? &r->mp_comm : NULL;
    if (c) {
        /* the wait for the slowest peer lands here: communication, and the stop check's own share */
        const double c0 = c->comm_s;
        comm_allreduce_int(c, f, nf, MPI_MAX, c == r->comm ? "the stop decision all-reduce" : "the replica's stop decision all-reduce");
        b->check_s += c->comm_s - c0;
    } else {
        agreed = 0;
    }
    /* the schedule reads integers every rank of a lockstep run holds alike */
    b->sched_t = agreed ? f[2] * 1e-3 : t;
    if (agreed || (!r->lead && b->mode == STOP_OWN_CLOCK)) *t_end = now_s();   /* MPI was called: the step ends later */
    if (f[1] && r->lead && b->next_eval <= t)   /* the next slot of the grid k·every_s after t (missed ones skipped) */
        b->next_eval = (floor(t / b->every_s) + 1) * b->every_s;
    *eval = f[1];
    /* from the previous decision (taken before the limit, or the loop would
     * have stopped there) to this one's end: the agreement is part of the
     * step, so a worker that stops has overrun the limit by less than this */
    b->last_step_s = *t_end - b->t_start - prev;
    if (f[0]) b->why = f[0];
    return f[0] != BOUNDS_NONE;
}

int bounds_record_eval(bounds_t *b, const run_t *r, double acc, double at_s, double train_s, long step)
{
    if (!r->lead || b->target <= 0) return 0;
    b->accs[b->nacc++ % b->window] = acc;
    double mean = 0;
    for (int i = 0; i < b->window; i++) mean += b->accs[i];
    mean /= b->window;
    int hit = b->nacc >= b->window && mean >= b->target;
    if (hit && !b->reached) {
        b->reached = 1;
        b->ttt_wall = at_s;
        b->ttt_train = train_s;
        b->ttt_step = step;
    }
    return hit;
}

int bounds_after_eval(bounds_t *b, run_t *r, double acc, double at_s, double train_s)
{
    int hit = bounds_record_eval(b, r, acc, at_s, train_s, r->step);
    if (b->target <= 0) return 0;
    if (b->mode == STOP_AGREE && r->comm->size > 1) {
        comm_bcast(r->comm, &hit, sizeof hit, b->lead_rank, "the target verdict broadcast");
    } else if (b->mode == STOP_OWN_CLOCK) {
        if (r->mp_size > 1) comm_bcast(&r->mp_comm, &hit, sizeof hit, 0, "the replica's target verdict broadcast");
        if (r->lead && hit && r->ops->announce_stop) {
            r->ops->announce_stop(r, COMM_STOP_TARGET);
        } else if (r->lead && hit) {
            int one = 1;
            for (int j = 0; j < r->comm->size; j++)
                if (b->workers[j] && j != r->comm->rank) {
                    MPI_Send(&one, 1, MPI_INT, j, TAG_BOUNDS_STOP, r->comm->world);   /* a dead peer: nothing to tell */
                    r->comm->msgs_sent++;
                }
        }
    }
    if (hit) b->why = BOUNDS_TARGET;
    return hit;
}

void bounds_gather(bounds_t *b, run_t *r, long steps, long samples, double train_s)
{
    /* a dead peer would never join the collective */
    if (r->comm->peer_lost) return;
    const int N = r->comm->size;
    double mine[NF] = { r->is_worker, r->wrank, r->mp_index, (double)steps, (double)samples, train_s, b->stop_s, b->last_step_s };
    b->all = xcalloc((size_t)N * NF, sizeof(double));
    if (sim_build()) {
        MPI_CHECK(r->comm, MPI_Allgather(mine, NF, MPI_DOUBLE, b->all, NF, MPI_DOUBLE, r->comm->world));
    } else {
        MPI_Request q;
        MPI_CHECK(r->comm, MPI_Iallgather(mine, NF, MPI_DOUBLE, b->all, NF, MPI_DOUBLE, r->comm->world, &q));
        comm_waitall(r->comm, 1, &q, "gathering the per-worker figures");
    }
    b->gathered = 1;
}

/* A JSON array of field f (F_RATE: steps per second of training) over the
 * worker ranks, in worker order. */
#define F_RATE NF
static void worker_array(const bounds_t *b, int N, int f, metrics_t *mx, const char *key)
{
    size_t cap = (size_t)N * 26 + 4, at = 0;
    char *s = xmalloc(cap);
    at += (size_t)snprintf(s + at, cap - at, "[");
    int first = 1;
    for (int j = 0; j < N; j++) {
        const double *row = b->all + (size_t)j * NF;
        if (!row[F_WORKER]) continue;
        double v = f != F_RATE ? row[f] : row[F_TRAIN_S] > 0 ? row[F_STEPS] / row[F_TRAIN_S] : 0;
        at += (size_t)snprintf(s + at, cap - at, isfinite(v) ? "%s%.9g" : "%snull", first ? "" : ",", v);
        first = 0;
    }
    snprintf(s + at, cap - at, "]");
    metrics_raw(mx, key, s);
    free(s);
}

long bounds_samples(const bounds_t *b, const run_t *r, long fallback)
{
    if (!b->gathered) return fallback;
    /* every sample is processed by all M ranks of its replica: count partition 0 */
    long total = 0;
    for (int j = 0; j < r->comm->size; j++) {
        const double *row = b->all + (size_t)j * NF;
        if (row[F_WORKER] && row[F_MP_INDEX] == 0) total += (long)row[F_SAMPLES];
    }
    return total;
}

void bounds_write_done(const bounds_t *b, const run_t *r, metrics_t *mx)
{
    const int N = r->comm->size;
    metrics_str(mx, "stop_reason", b->why == BOUNDS_TIME ? "time_limit" : b->why == BOUNDS_TARGET ? "target_acc" : "steps");
    if (b->target > 0) metrics_raw(mx, "target_reached", b->reached ? "true" : "false");
    if (b->window > 1) metrics_long(mx, "target_window", b->window);
    metrics_double(mx, "ttt_train_s", b->ttt_train);
    metrics_double(mx, "ttt_wall_s", b->ttt_wall);
    if (b->reached) metrics_long(mx, "ttt_step", b->ttt_step);
    metrics_double(mx, "stop_s", b->stop_s);
    metrics_double(mx, "sync_done_s", b->sync_done_s);
    metrics_double(mx, "final_eval_s", b->final_eval_s);
    if (!b->gathered) return;
    worker_array(b, N, F_STEPS, mx, "worker_steps");
    worker_array(b, N, F_SAMPLES, mx, "worker_samples");
    worker_array(b, N, F_TRAIN_S, mx, "worker_train_s");
    worker_array(b, N, F_STOP_S, mx, "worker_stop_s");
    worker_array(b, N, F_LAST_STEP_S, mx, "worker_last_step_s");
    worker_array(b, N, F_RATE, mx, "worker_step_rate");
}

void bounds_free(bounds_t *b)
{
    free(b->workers);
    free(b->all);
    free(b->accs);
    b->workers = NULL;
    b->all = NULL;
    b->accs = NULL;
}
