#include "guards.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "record.h"

void __attribute__((noreturn, format(printf, 2, 3))) run_abort(metrics_t *mx, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    metrics_close(mx, 0);
    die("%s", msg);
}

/* ---- divergence (guards.h) ---- */

/* An asynchronous paradigm's servers, which write the checkpoints, write
 * none from now on: their parameters have exploded too, and the job takes
 * a moment to stop. */
static void diverge_tell_servers(run_t *r)
{
    if (r->ops && r->ops->announce_stop) r->ops->announce_stop(r, COMM_STOP_DIVERGED);
}

void __attribute__((noreturn, format(printf, 4, 5)))
run_diverged_at(run_t *r, metrics_t *mx, const char *where, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    diverge_tell_servers(r);
    diverged_record(r, mx, why, where);
    char here[64];
    if (!*where) snprintf(here, sizeof here, "step %ld", r->step);
    die_status(DIVERGED_EXIT, "training diverged at %s: %s; lower --lr (the last checkpoint, if any, is kept)", *where ? where : here, why);
}

void diverge_notify(run_t *r, diverge_watch_t *dw, int lead_rank, const char *why)
{
    if (dw->since >= 0) return;
    dw->since = now_s();
    diverge_tell_servers(r);
    int n = snprintf(dw->note, NOTICE_LEN / 2, "step %ld of worker %d (rank %d)", r->step, r->wrank, r->comm->rank);
    if (n >= NOTICE_LEN / 2) n = NOTICE_LEN / 2 - 1;
    snprintf(dw->note + n + 1, (size_t)(NOTICE_LEN - n - 1), "%s", why);
    MPI_Request q;
    /* to a dead lead nothing is delivered: the deadline stops this rank then */
    if (MPI_Isend(dw->note, NOTICE_LEN, MPI_CHAR, lead_rank, TAG_DIVERGED, r->comm->world, &q) == MPI_SUCCESS) {
        MPI_Request_free(&q);
        r->comm->msgs_sent++;
    }
}

int diverge_check_due(double *last, double now)
{
    if (now - *last < 0.05) return 0;
    *last = now;
    return 1;
}

void diverge_heard(run_t *r, metrics_t *mx)
{
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_DIVERGED, r->comm->world, &flag, &st) != MPI_SUCCESS || !flag) return;
    char note[NOTICE_LEN];
    MPI_CHECK(r->comm, MPI_Recv(note, NOTICE_LEN, MPI_CHAR, st.MPI_SOURCE, TAG_DIVERGED, r->comm->world, MPI_STATUS_IGNORE));
    note[NOTICE_LEN - 1] = 0;
    const size_t n = strlen(note);
    run_diverged_at(r, mx, note, "%s", n + 1 < NOTICE_LEN ? note + n + 1 : "");
}

int params_finite(const model_t *m)
{
    int ok = 1;
    for (size_t i = 0; i < m->nparams; i++) ok &= isfinite(m->params[i]) != 0;
    return ok;
}

void take_lead(run_t *r, metrics_t *mx, const config_t *cfg, double t0)
{
    char err[512];
    r->lead = r->evaluates = 1;
    if (metrics_takeover(mx, cfg->metrics, t0, err, sizeof err) != 0)
        fprintf(stderr, "dsgd: %s; the run goes on without metrics\n", err);
    metrics_begin(mx, "takeover", now_s());
    metrics_long(mx, "step", r->step);
    metrics_long(mx, "worker", r->wrank);
    metrics_long(mx, "rank", r->comm->rank);
    metrics_end(mx);
    fprintf(stderr, "dsgd: the lead worker was lost; worker %d (rank %d) takes over the evaluations and the metrics at step %ld\n",
            r->wrank, r->comm->rank, r->step);
    fflush(stderr);
}

void leave_evicted(run_t *r, metrics_t *mx, const config_t *cfg)
{
    const comm_t *comm = r->comm;
    fprintf(stderr, "dsgd: worker %d (rank %d): evicted by the servers at step %ld after %.1f s of silence (--timeout %g); "
            "it stops training, the job goes on without it\n", r->wrank, comm->rank, comm->evicted_step,
            comm->evicted_silent_s, cfg->timeout);
    fflush(stderr);
    if (r->lead) {
        metrics_abandon(mx);
        r->lead = r->evaluates = 0;
    }
    r->left = 1;
}

/* ---- preemption (guards.h) ---- */

const char *preempt_source(void)
{
    return comm_preempt_signal() ? comm_preempt_name() : "a signal to another rank of the job";
}

int preempt_due(run_t *r, const bounds_t *b, preempt_watch_t *w, double *waited)
{
    if (sim_build()) return 0;   /* nobody is preempted in simulation */
    comm_t *c = r->comm;
    if (!comm_preempt_signal() && c->stop_heard != COMM_STOP_PREEMPT && r->lead && c->size > 1 &&
        diverge_check_due(&w->probed, now_s()) && comm_preempt_heard(c))
        c->stop_heard = COMM_STOP_PREEMPT;
    int f = comm_preempt_signal() != 0 || c->stop_heard == COMM_STOP_PREEMPT;
    if (f && w->seen_step < 0) {
        w->seen_step = r->step;
        w->seen_t = now_s();
    }
    comm_t *g = b->mode == STOP_AGREE && c->size > 1 ? c : b->mode == STOP_OWN_CLOCK && r->mp_size > 1 ? &r->mp_comm : NULL;
    if (g) {
        if (r->step < w->next) return 0;
        /* this rank's proposal: the steps its last ones took PREEMPT_AGREE_S for */
        int n = 1;
        if (w->checks > 0 && r->step > w->agreed_step) {
            const double per_step = (now_s() - w->agreed_t) / (double)(r->step - w->agreed_step);
            n = per_step * PREEMPT_EVERY <= PREEMPT_AGREE_S ? PREEMPT_EVERY : (int)(PREEMPT_AGREE_S / per_step);
            if (n < 1) n = 1;
        }
        int v[2] = { f, -n };   /* one all-reduce: the flag's maximum, the proposals' minimum */
        const double c0 = g->comm_s;
        comm_allreduce_int_uncounted(g, v, 2, MPI_MAX,
                                     g == c ? "the preemption decision all-reduce" : "the replica's preemption decision all-reduce");
        w->checks++;
        *waited += g->comm_s - c0;
        f = v[0];
        w->next = r->step - v[1];
        w->agreed_step = r->step;
        w->agreed_t = now_s();
    }
    if (f) {
        w->stop_t = now_s();
        if (w->seen_step < 0) {   /* another rank's signal, learnt in the agreement */
            w->seen_step = r->step;
            w->seen_t = w->stop_t;
        }
    }
    /* an asynchronous paradigm's other workers learn of it from the shards */
    if (f && !w->announced && b->mode == STOP_OWN_CLOCK && r->ops->announce_stop) {
        r->ops->announce_stop(r, COMM_STOP_PREEMPT);
        w->announced = 1;
    }
    return f;
}

void __attribute__((noreturn)) run_save_failed(const run_t *r, metrics_t *mx)
{
    save_failed_record(r, mx);
    die("%s; the previous checkpoint, if any, is kept, and so is the metrics record", r->err);
}

void servers_save_failed(run_t *r, metrics_t *mx)
{
    if (r->comm->stop_heard != COMM_STOP_SAVE_FAILED || !r->lead) return;
    snprintf(r->err, sizeof r->err, "server shard 0 could not write checkpoint '%s' (its line on stderr says why)", r->cfg->checkpoint);
    save_failed_record(r, mx);
    stop_job(1, r->comm->size);
}
