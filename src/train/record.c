#include "record.h"

#include <stdlib.h>
#include <string.h>

#include "../util/blas.h"
#include "../util/sim.h"
#include "../util/util.h"

/* The done event's first fields; the caller adds its own and ends it. */
static void done_begin(metrics_t *mx, long step, const char *status)
{
    metrics_begin(mx, "done", now_s());
    metrics_long(mx, "steps", step);
    metrics_str(mx, "status", status);
}

/* comm's fault hook: the run's record so far goes into place, ending with
 * a done event that says what was lost, at which step. */
void record_fault(void *ctx, const char *what, const int *lost, int nlost)
{
    fault_rec_t *f = ctx;
    if (!f->mx->f) return;
    char ranks[512] = "[";
    size_t at = 1;
    for (int i = 0; i < nlost && at < sizeof ranks - 16; i++)
        at += (size_t)snprintf(ranks + at, sizeof ranks - at, "%s%d", i ? "," : "", lost[i]);
    snprintf(ranks + at, sizeof ranks - at, "]");
    done_begin(f->mx, f->r->step, "fault");
    metrics_raw(f->mx, "lost_ranks", ranks);
    metrics_long(f->mx, "fault_step", f->r->step);
    metrics_str(f->mx, "fault", what);
    metrics_end(f->mx);
    metrics_close(f->mx, 1);
}

/* The eval event; offline: evaluated after the run, from a snapshot taken at m->time. */
void eval_record(run_t *r, metrics_t *mx, const evaluator_t *ev, const snap_meta_t *m, int offline)
{
    metrics_begin(mx, "eval", m->time);
    metrics_long(mx, "step", m->step);
    metrics_double(mx, "epoch", (double)m->step / (double)r->steps_per_epoch);
    metrics_long(mx, "samples", m->samples);
    metrics_double(mx, "run_s", m->run_s);
    metrics_double(mx, "train_s", m->train_s);
    metrics_double(mx, "test_acc", ev->acc);
    metrics_double(mx, "test_loss", ev->loss);
    metrics_double(mx, "train_loss", m->train_loss);
    metrics_double(mx, "samples_per_s", m->sps);
    metrics_double(mx, "lr", m->lr);
    if (offline) metrics_long(mx, "offline", 1);
    for (int i = 0; i < m->nstats; i++) metrics_double(mx, m->key[i], m->value[i]);
    metrics_end(mx);
}

/* The metrics record's start: a new one, or (--resume) the record of the
 * run it resumes continued, with a resume event; returns 1 if continued. */
int open_record(run_t *r, metrics_t *mx, double t0)
{
    const config_t *cfg = r->cfg;
    comm_t *comm = r->comm;
    const int lead = r->lead;
    char err[512];
    int continued = *cfg->resume ? metrics_continue(mx, lead ? cfg->metrics : NULL, t0, r->step, err, sizeof err)
                                 : metrics_open(mx, lead ? cfg->metrics : NULL, t0, err, sizeof err);
    if (continued < 0) die("%s", err);
    if (continued > 0) {   /* a resume event, in place of the record's second config event */
        /* where the record stood at the step: its clocks and totals go on from there */
        const metrics_prior_t *p = &mx->prior;
        metrics_begin(mx, "resume", now_s());
        metrics_long(mx, "step", r->step);
        metrics_str(mx, "checkpoint", cfg->resume);
        metrics_long(mx, "segment", p->segment);
        metrics_double(mx, "prior_time", p->time);
        metrics_double(mx, "prior_run_s", p->run_s);
        metrics_double(mx, "prior_train_s", p->train_s);
        metrics_long(mx, "prior_samples", p->samples);
        metrics_str(mx, "prior_from", p->from);
    } else {
        metrics_begin(mx, "config", now_s());
    }
    if (mx->f) { fputs(",\"config\":{", mx->f); config_json(mx->f, cfg, config_train_opts); fputc('}', mx->f); }
    metrics_long(mx, "nparams", (long)r->model->full_nparams);
    /* FLOPs of one training sample's forward and backward (model_train_flops;
     * with --model-parallel, the lead's partition): with the batch and the
     * bytes a step sends, the run's computation per byte communicated */
    metrics_double(mx, "train_flops_per_sample", model_train_flops(r->model));
    /* which BLAS kernels ran, and why (util/blas.h) */
    char blas[256], cpu[256];
    blas_describe(blas, sizeof blas);
    blas_cpu(cpu, sizeof cpu);
    metrics_str(mx, "blas_core", blas_core());
    metrics_str(mx, "blas", blas);
    metrics_str(mx, "cpu", cpu);
    /* the lead's compute threads (--threads; util/par.h) and where the number came from */
    metrics_long(mx, "threads", comm->threads);
    metrics_str(mx, "threads_from", comm->threads_from);
    metrics_str(mx, "allreduce", comm->allreduce);
    metrics_long(mx, "ranks", comm->size);
    metrics_long(mx, "workers", r->nworkers);
    metrics_long(mx, "replicas", r->replicas);
    metrics_long(mx, "model_parallel", r->mp_size);
    if (r->mp_size > 1) metrics_long(mx, "nparams_per_rank", (long)r->model->nparams);   /* the lead's partition */
    metrics_long(mx, "train_samples", r->train.n);
    metrics_long(mx, "test_samples", r->test.n);
    /* the idle policy's parameters on this (the lead's) host: comm_idle */
    metrics_double(mx, "wake_us", comm->wake_s * 1e6);
    metrics_double(mx, "poll_us", (comm->wait_spin ? 50e-6 : comm->poll_s) * 1e6);
    metrics_long(mx, "oversubscribed", comm->oversubscribed);
    metrics_str(mx, "clock", sim_build() ? "simulated" : "real");   /* simulated: times are simulated seconds (dsgd-plot says so) */
    if (sim_build()) metrics_object(mx, "platform", sim_platform());   /* the simulated cluster (scripts/dsgd-sim) */
    metrics_end(mx);
    return continued;
}

/* The groups this rank communicates in: its world, its replica and
 * data-parallel groups (--model-parallel), the paradigm's own; returns how
 * many of g's 4 it filled. */
int run_comm_groups(const run_t *r, const comm_t *g[4])
{
    int n = 0;
    g[n++] = r->comm;
    if (r->mp_size > 1) { g[n++] = &r->mp_comm; g[n++] = &r->dp_comm; }
    if (r->own_comm) g[n++] = r->own_comm;
    return n;
}

/* Seconds this rank has spent in (or waiting for) communication, in every
 * group it has. */
double run_comm_seconds(const run_t *r)
{
    const comm_t *g[4];
    double s = 0;
    for (int i = 0, n = run_comm_groups(r, g); i < n; i++) s += g[i]->comm_s;
    return s;
}

/* The done event of a run that diverged (why; where: a notice's "step S of
 * worker W (rank R)", or ""), and the record closed, kept. */
void diverged_record(const run_t *r, metrics_t *mx, const char *why, const char *where)
{
    if (!mx->f) return;
    done_begin(mx, r->step, "diverged");
    metrics_str(mx, "diverged", why);
    if (*where) metrics_str(mx, "diverged_at", where);
    metrics_end(mx);
    metrics_close(mx, 1);
}

/* A checkpoint that could not be written (a full disk, say): the previous
 * one stays (ckpt_save replaces it only when the new one is whole), and the
 * record so far is kept, closed by a done event of status
 * "checkpoint_failed", so that a run resumed from the previous checkpoint
 * continues it. Then every rank stops. */
void save_failed_record(const run_t *r, metrics_t *mx)
{
    if (!mx->f) return;
    done_begin(mx, r->step, "checkpoint_failed");
    metrics_str(mx, "error", r->err);
    metrics_end(mx);
    metrics_close(mx, 1);
}

/* A checkpoint the lead wrote, in the record: where the run stood when it
 * was taken, so that a run resumed from it continues the record's clocks
 * and totals from there (metrics_continue). */
void checkpoint_record(const run_t *r, metrics_t *mx, const loop_t *L, const bounds_t *bd)
{
    metrics_begin(mx, "checkpoint", now_s());
    metrics_long(mx, "step", r->step);
    metrics_long(mx, "samples", mx->prior.samples + (r->step - L->start_step) * L->samples_per_step);
    metrics_double(mx, "run_s", mx->prior.run_s + bounds_now(bd));
    metrics_double(mx, "train_s", mx->prior.train_s + L->train_s);
    metrics_str(mx, "path", r->cfg->checkpoint);
    metrics_end(mx);
}

/* The done event: the run's outcome, its traffic and its regime. */
void record_done(run_t *r, metrics_t *mx, const loop_t *L, bounds_t *bd, const evaluator_t *ev,
                        const faults_t *faults)
{
    const long steps = r->step - L->start_step, samples = bounds_samples(bd, r, steps * L->samples_per_step);
    const metrics_prior_t *p = &mx->prior;
    done_begin(mx, r->step, L->preempted ? "preempted" : "ok");
    /* totals over the record (a resumed run's continue the resumed one's);
     * the rest of the event is this process's: its traffic and regime */
    metrics_long(mx, "samples", p->samples + samples);
    /* the lead's traffic in every group it has */
    const comm_t *g[4];
    uint64_t bytes = 0, msgs = 0, colls = 0;
    const double comm_s = run_comm_seconds(r);
    for (int i = 0, n = run_comm_groups(r, g); i < n; i++) {
        bytes += g[i]->bytes_sent; msgs += g[i]->msgs_sent; colls += g[i]->collectives;
    }
    metrics_long(mx, "bytes_sent", (long)bytes);
    metrics_long(mx, "msgs_sent", (long)msgs);
    metrics_long(mx, "collectives", (long)colls);
    metrics_double(mx, "comm_s", comm_s);
    /* of which within the training time, and of that the stop decisions */
    metrics_double(mx, "train_comm_s", L->step_comm_s);
    metrics_double(mx, "stop_check_s", bd->check_s);
    if (L->pw.checks) metrics_long(mx, "preempt_checks", L->pw.checks);
    /* the regime: computing against communicating (or waiting for it), per
     * step of the lead; a paradigm whose step draws its own samples
     * (Sandblaster's coordinator) computes nothing here */
    if (!L->own_data && steps > 0) {
        metrics_double(mx, "compute_s", L->compute_s);
        metrics_double(mx, "compute_s_per_step", L->compute_s / (double)steps);
        metrics_double(mx, "comm_s_per_step", L->step_comm_s / (double)steps);
        if (L->step_comm_s > 0) metrics_double(mx, "compute_comm_ratio", L->compute_s / L->step_comm_s);
    }
    /* where the training time went, as shares of train_s that add up to 1 */
    if (steps > 0 && L->train_s > 0) {
        const double T = L->train_s;
        if (!L->own_data) metrics_double(mx, "compute_share", L->compute_s / T);
        metrics_double(mx, "comm_share", L->step_comm_s / T);
        metrics_double(mx, "stop_check_share", bd->check_s / T);
        metrics_double(mx, "update_share", L->update_s / T);
        metrics_double(mx, "other_share", (T - L->compute_s - L->step_comm_s - L->update_s) / T);
    }
    if (faults->transient && faults->steps > 0)   /* the lead's share of steps slowed by a transient schedule */
        metrics_double(mx, "slowed_share", (double)faults->slowed_steps / (double)faults->steps);
    if (r->mp_size > 1) {   /* of which within the replica: activations and input gradients */
        metrics_long(mx, "mp_bytes_sent", (long)r->mp_comm.bytes_sent);
        metrics_double(mx, "mp_comm_s", r->mp_comm.comm_s);
        if (r->model->spatial && steps > 0) {   /* an lc model's blocks: the halos, forward and backward */
            metrics_long(mx, "halo_bytes_per_step", (long)(r->mp->halo_bytes / (uint64_t)steps));
            metrics_double(mx, "halo_wait_share", L->train_s > 0 ? r->mp->halo_wait_s / L->train_s : 0.0);
        }
    }
    metrics_double(mx, "peak_rss_mib", peak_rss_mib());   /* the lead's */
    metrics_double(mx, "wall_s", p->time + now_s() - L->t0);
    metrics_double(mx, "train_s", p->train_s + L->train_s);
    if (p->segment > 1) {   /* this process's part of a resumed record */
        metrics_long(mx, "segment", p->segment);
        metrics_long(mx, "segment_steps", steps);
        metrics_long(mx, "segment_samples", samples);
        metrics_double(mx, "segment_wall_s", now_s() - L->t0);
        metrics_double(mx, "segment_train_s", L->train_s);
    }
    metrics_double(mx, "test_acc", ev->acc);
    metrics_double(mx, "test_loss", ev->loss);
    if (ev->step >= 0) metrics_long(mx, "eval_step", ev->step);   /* the evaluation test_acc is from */
    if (L->preempted) {
        metrics_str(mx, "final_eval", "skipped: preempted (the checkpoint went first)");
        /* how soon the workers agreed to stop after this one knew */
        metrics_long(mx, "preempt_seen_step", L->pw.seen_step);
        metrics_double(mx, "preempt_wait_s", L->pw.stop_t - L->pw.seen_t);
    }
    bounds_write_done(bd, r, mx);
    sync_stat_t st[16];
    int nst = r->ops->stats ? r->ops->stats(r, st, 16, 0) : 0;
    for (int i = 0; i < nst; i++) {
        if (st[i].raw) metrics_raw(mx, st[i].key, st[i].raw);
        else metrics_double(mx, st[i].key, st[i].value);
    }
    metrics_end(mx);
}
