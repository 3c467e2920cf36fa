#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../run/checkpoint.h"
#include "../run/faults.h"
#include "../sync/sync.h"
#include "../util/cpu.h"
#include "../util/util.h"
#include "bounds.h"
#include "console.h"
#include "evaluate.h"
#include "guards.h"
#include "loop.h"
#include "metrics.h"
#include "outputs.h"
#include "record.h"
#include "setup.h"

static void loop_start(loop_t *L, run_t *r, double t0)
{
    const config_t *cfg = r->cfg;
    memset(L, 0, sizeof *L);
    L->t0 = t0;
    /* a clock schedule (--eval-every-s) replaces the per-epoch one */
    L->eval_every = cfg->eval_every > 0 ? cfg->eval_every : cfg->eval_every_s > 0 ? 0 : r->steps_per_epoch;
    L->own_data = r->ops->step_samples != NULL;
    L->no_compute = !strcmp(cfg->compute, "none");
    L->start_step = r->step;
    L->samples_per_step = L->own_data ? r->ops->step_samples(r) : (long)r->it->nb * r->replicas;
    L->beat_last = now_s();
    L->tty = live_line(r);
    L->beat = r->lead && !cfg->quiet && !L->tty;
    L->leading = r->lead;
    L->t_carry = L->t_stop = -1;
    L->dw = (diverge_watch_t){ .since = -1 };
    L->pw.seen_step = -1;
}

/* The next batch's loss and gradient, from ts (the step's start; cs:
 * comm_seconds then); returns when it ended, *cc: comm_seconds then. */
static double compute_gradient(run_t *r, faults_t *faults, loop_t *L, double ts, double cs, double *cc)
{
    batch_iter_next(r->it);
    if (L->no_compute) {   /* --compute none: the communication alone */
        r->loss = 0;
        model_zero_backward(r->model);
    } else {
        augment_batch(&r->aug, r->it->x, r->it->nb, (uint64_t)r->cfg->seed, (uint64_t)r->replica, r->step);
        model_forward(r->model, r->it->x, r->it->nb);
        r->loss = model_loss(r->model, r->it->y, r->it->nb);
        model_backward(r->model, r->it->y, r->it->nb);
    }
    if (faults->slowdown > 1.0) { double t = now_s(); faults_delay(faults, t - ts, t); }
    /* the batch, forward and backward (a --slowdown's delay included),
     * without the communication they started and waited for: bsp's
     * all-reduce during backward (blocking in the simulated build), a
     * model-parallel replica's activations and halos; and without the
     * preemption decision between the previous step's end and this one's */
    const double tc = now_s();
    *cc = run_comm_seconds(r);
    L->compute_s += tc - ts - (*cc - cs);
    return tc;
}

/* A loss past --diverge-loss (or not finite) here or, said by another
 * rank, at the lead: the run stops with status diverged. */
static void watch_divergence(run_t *r, metrics_t *mx, loop_t *L, const bounds_t *bd, double te)
{
    const config_t *cfg = r->cfg;
    if (!isfinite(r->loss) || r->loss > cfg->diverge_loss) {
        char why[160];
        snprintf(why, sizeof why, "the loss is %g (--diverge-loss %g)", (double)r->loss, cfg->diverge_loss);
        if (r->lead || bd->lead_rank == r->comm->rank) run_diverged(r, mx, "%s", why);
        diverge_notify(r, &L->dw, bd->lead_rank, why);
    }
    if (L->dw.since >= 0 && now_s() - L->dw.since > live_deadline(cfg->timeout, LIVE_NOTICE))
        run_diverged_at(r, mx, L->dw.note, "%s (the lead did not stop the job within --timeout + 5 s)", L->dw.note + strlen(L->dw.note) + 1);
    if (r->lead && r->comm->size > 1 && diverge_check_due(&L->dw.probed, te)) diverge_heard(r, mx);
}

/* An evaluation during the run: the training loss and speed since the last
 * one, the paradigm's model's test accuracy; returns the bounds' verdict. */
static int evaluate_during(run_t *r, metrics_t *mx, loop_t *L, bounds_t *bd, evaluator_t *ev)
{
    double tl = L->loss_sum / (double)L->loss_n, sps = L->seg_t > 0 ? L->seg_samples / L->seg_t : 0;
    const double at = mx->prior.run_s + bounds_now(bd), train_s = mx->prior.train_s + L->train_s;
    L->beat_last = now_s();
    if (r->ops->sync_bn) r->ops->sync_bn(r);
    if (r->ops->eval_prepare) r->ops->eval_prepare(r);
    const long samples = r->step * L->samples_per_step;
    if (r->evaluates && r->cfg->eval_offline) {
        char err[512];
        if (snapshot_take(r, ev, tl, sps, at, train_s, samples, err, sizeof err) != 0) run_abort(mx, "%s", err);
        if (L->beat) print_heartbeat(r, tl, sps, now_s() - L->t0);
    } else if (r->evaluates) {
        evaluate(r, ev, 1);
        ev->step = r->step;
        snap_meta_t m;
        eval_meta(r, tl, sps, at, train_s, samples, &m);
        print_progress(r, ev, &m, now_s() - L->t0);
        eval_record(r, mx, ev, &m, 0);
    }
    int stop = bounds_after_eval(bd, r, r->cfg->eval_offline ? NAN : ev->acc, at, train_s);
    L->loss_sum = 0; L->loss_n = 0; L->seg_t = 0; L->seg_samples = 0;
    return stop;
}

static void checkpoint_during(run_t *r, metrics_t *mx, const loop_t *L, const bounds_t *bd)
{
    ckpt_meta_t state = { .nextra = 0 };
    if (r->evaluates && !params_finite(r->model)) run_diverged(r, mx, "the parameters hold NaN or infinite values");
    if (r->ops->sync_bn) r->ops->sync_bn(r);
    if (r->ops->ckpt_state && r->ops->ckpt_state(r, &state) != 0) run_abort(mx, "%s", r->err);
    if (r->evaluates && save_checkpoint(r, &state) != 0) run_save_failed(r, mx);
    checkpoint_record(r, mx, L, bd);
}

/* Everything after a step that ended at te and began at ts (cs:
 * comm_seconds then): the bounds, preemption, divergence, progress,
 * evaluation and checkpoint schedules. Returns 1 when the loop stops. */
static int after_step(run_t *r, metrics_t *mx, loop_t *L, bounds_t *bd, evaluator_t *ev, double ts, double te, double cs)
{
    const config_t *cfg = r->cfg;
    int eval_due, stop = bounds_after_step(bd, r, ts, &te, &eval_due);
    const double ce = run_comm_seconds(r);   /* the step's end, its stop decision included */
    L->step_comm_s += ce - cs;
    double pw = 0;   /* the preemption decision: the next step's, if it starts at te */
    if (!stop && preempt_due(r, bd, &L->pw, &pw)) {
        stop = L->preempted = 1;
        if (r->lead)
            fprintf(stderr, "dsgd: %s: stopping after step %ld, saving what the run has%s; send it again to stop at once\n",
                    preempt_source(), r->step, *cfg->checkpoint ? " (checkpoint)" : "");
    }
    double dt = te - ts;
    L->train_s += dt;
    L->seg_t += dt;
    L->seg_samples += L->samples_per_step;
    L->loss_sum += r->loss;
    L->loss_n++;
    watch_divergence(r, mx, L, bd, te);
    servers_save_failed(r, mx);
    if (L->tty && now_s() - L->tty_last > 0.25) {
        L->tty_last = now_s();
        printf("\r\033[Kstep %ld/%ld  loss %.4f", r->step, r->total_steps, L->loss_sum / (double)L->loss_n);
        fflush(stdout);
    }
    /* a run that stops here is evaluated after its final synchronization */
    int periodic = L->eval_every > 0 && r->step % L->eval_every == 0 && r->step < r->total_steps;
    if (r->step >= r->total_steps) eval_due = 0;   /* the final evaluation follows: one record, not two */
    int idle_tail = 1;   /* nothing but bookkeeping after the step's end (te) */
    if (L->beat && te - L->beat_last >= cfg->progress_every && !periodic && !eval_due) {
        L->beat_last = te;
        idle_tail = 0;
        print_heartbeat(r, L->loss_sum / (double)L->loss_n, L->seg_t > 0 ? L->seg_samples / L->seg_t : 0, L->beat_last - L->t0);
    }
    if ((periodic || eval_due) && !stop) stop = evaluate_during(r, mx, L, bd, ev);
    if ((periodic || eval_due) && !stop) idle_tail = 0;
    if (cfg->checkpoint_every > 0 && r->step % cfg->checkpoint_every == 0 && !r->server_ckpt) {
        idle_tail = 0;
        checkpoint_during(r, mx, L, bd);
    }
    if (stop) {
        /* stopped by the decision at te: that is when the rank left */
        if (idle_tail) L->t_stop = te;
        return 1;
    }
    if (idle_tail && !L->tty) L->t_carry = te, L->c_carry = ce, bd->check_s += pw;
    return 0;
}

/* --eval-offline, after the run: the snapshots in the order they were
 * taken, recorded with their times (t0: the process's start). */
static void evaluate_snapshots(run_t *r, metrics_t *mx, evaluator_t *ev, bounds_t *bd, double t0)
{
    snapshots_t *s = &ev->snaps;
    if (!s->n) return;
    float *buf = xalloc_floats(s->nparams + s->nstate);
    char err[512];
    for (long i = 0; i < s->n; i++) {
        const snap_meta_t *m = &s->meta[i];
        if (snapshots_read(s, i, buf, err, sizeof err) != 0) run_abort(mx, "%s", err);
        evaluate_model(r, ev, buf, s->nstate ? buf + s->nparams : NULL);
        print_progress(r, ev, m, m->time - t0);
        eval_record(r, mx, ev, m, 1);
        bounds_record_eval(bd, r, ev->acc, m->run_s, m->train_s, m->step);
    }
    free(buf);
    snapshots_free(s);
}

/* The loop has ended: the paradigm's state as the loop left it (a resumed
 * run goes on from there), its final synchronization, the final evaluation
 * and checkpoint. */
static void finish_run(run_t *r, metrics_t *mx, loop_t *L, bounds_t *bd, evaluator_t *ev)
{
    const config_t *cfg = r->cfg;
    ckpt_meta_t state = { .nextra = 0 };
    if (*cfg->checkpoint && !r->server_ckpt && r->ops->ckpt_state && r->ops->ckpt_state(r, &state) != 0) run_abort(mx, "%s", r->err);
    double tf = now_s();
    const double cf = run_comm_seconds(r);
    bd->stop_s = (L->t_stop >= 0 ? L->t_stop : tf) - bd->t_start;
    if (r->ops->finish) r->ops->finish(r);
    servers_save_failed(r, mx);
    /* a worker that woke past its time limit learns of its eviction only now */
    if (r->comm->evicted && !r->left) leave_evicted(r, mx, cfg);
    if (r->ops->sync_bn) r->ops->sync_bn(r);
    if (r->lead && !L->leading) take_lead(r, mx, cfg, L->t0);   /* the paradigm's finish found the lead dead */
    if (r->lead && r->comm->size > 1) diverge_heard(r, mx);   /* a worker that diverged near the end */
    L->train_s += now_s() - tf;
    L->step_comm_s += run_comm_seconds(r) - cf;
    bd->sync_done_s = bounds_now(bd);
    if (L->preempted) {
        /* the launcher may kill the ranks soon after it passed the signal on
         * (Open MPI's mpirun: 1 s): what the run has goes to disk first, and
         * the final evaluation is left out; the done event carries the last
         * evaluation's figures and its step (eval_step) */
        if (r->evaluates && *cfg->checkpoint && !r->server_ckpt) {
            if (save_checkpoint(r, &state) != 0) run_save_failed(r, mx);
            checkpoint_record(r, mx, L, bd);
        }
        return;
    }
    if (r->evaluates) {
        double tl = L->loss_n ? L->loss_sum / (double)L->loss_n : NAN, sps = L->seg_t > 0 ? L->seg_samples / L->seg_t : 0;
        bd->final_eval_s = bounds_now(bd);   /* (evaluating the snapshots does not delay it) */
        evaluate_snapshots(r, mx, ev, bd, L->t0);
        evaluate(r, ev, 0);   /* after finish the local model is the final one */
        ev->step = r->step;
        snap_meta_t m;
        const double at = mx->prior.run_s + bd->final_eval_s, train_s = mx->prior.train_s + L->train_s;
        eval_meta(r, tl, sps, at, train_s, r->step * L->samples_per_step, &m);
        print_progress(r, ev, &m, now_s() - L->t0);
        eval_record(r, mx, ev, &m, 0);
        bounds_record_eval(bd, r, ev->acc, at, train_s, r->step);
    }
    if (r->evaluates && *cfg->checkpoint && !r->server_ckpt) {
        if (save_checkpoint(r, &state) != 0) run_save_failed(r, mx);
        checkpoint_record(r, mx, L, bd);
    }
}

int train_main(const config_t *cfg, comm_t *comm)
{
    const double t0 = now_s();
    run_t run, *r = &run;
    ckpt_t resume;
    faults_t faults;
    outputs_lock_t locks = { .fd = { -1, -1 } };
    memset(&resume, 0, sizeof resume);
    cpu_compute_setup(comm_threads(comm, cfg->threads), strcmp(cfg->denormals, "keep") != 0);
    setup(r, cfg, comm, &resume, &faults);
    comm_setup_check(comm, r->ops->init && r->ops->init(r) != 0, r->err);
    if (comm_setup_failed(comm, *cfg->resume && r->ops->resume && r->ops->resume(r, &resume) != 0, r->err)) {
        /* every rank is here: the paradigm's collective teardown can run */
        if (r->ops->destroy) r->ops->destroy(r);
        MPI_Finalize();
        exit(1);
    }
    ckpt_free(&resume);
    /* the last check: rank 0 locks the outputs for the run (outputs.h) */
    comm_setup_check(comm, comm->rank == 0 && outputs_lock(cfg, &locks, r->err, sizeof r->err) != 0, r->err);
    comm_preempt_arm();
    bounds_t bd;
    bounds_start(&bd, r);
    if (!r->is_worker) {   /* server / coordinator ranks */
        if (r->ops->serve(r) != 0) die("--sync %s: server failed: %s", cfg->sync, r->err);
        bounds_gather(&bd, r, 0, 0, 0);
        bounds_free(&bd);
        teardown(r);
        outputs_unlock(&locks);
        return 0;
    }
    metrics_t mx;
    print_start(r, open_record(r, &mx, t0));
    fault_rec_t fault = { .mx = &mx, .r = r };
    comm->on_fault = record_fault;
    comm->fault_ctx = &fault;
    evaluator_t ev = { .labels = xmalloc(sizeof(int32_t) * (size_t)(r->test.n ? r->test.n : 1)), .acc = NAN, .loss = NAN,
                       .step = -1 };
    for (long i = 0; i < r->test.n; i++) ev.labels[i] = r->test.y[i];
    if (cfg->eval_offline && r->evaluates && snapshots_open(&ev.snaps, r->err, sizeof r->err) != 0) run_abort(&mx, "%s", r->err);
    loop_t L;
    loop_start(&L, r, t0);

    while (r->step < r->total_steps) {
        comm->step = r->step;
        if (!L.own_data) faults_exit_if_due(&faults, r->step, "worker", r->wrank, comm->rank, "at step");
        /* the clock is read once per step when nothing happens between
         * steps (see bounds_after_step on why that matters in simulation) */
        const double ts = L.t_carry >= 0 ? L.t_carry : now_s(), cs = L.t_carry >= 0 ? L.c_carry : run_comm_seconds(r);
        L.t_carry = -1;
        double cc = cs, tc = L.own_data ? ts : compute_gradient(r, &faults, &L, ts, cs, &cc);
        r->lr = lr_at(&r->sched, r->step, bd.sched_t);
        if (r->ops->step(r) != 0) run_abort(&mx, "--sync %s: step %ld failed: %s", cfg->sync, r->step, r->err);
        r->step++;
        if (!r->lead && r->ops->lead_lost && r->ops->lead_lost(r)) {
            take_lead(r, &mx, cfg, t0);
            L.beat = !cfg->quiet && !L.tty;
            L.leading = 1;
        }
        double te = now_s();
        if (comm->evicted) {   /* frozen past --timeout: the servers went on without this worker */
            leave_evicted(r, &mx, cfg);
            break;
        }
        L.update_s += te - tc - (run_comm_seconds(r) - cc);
        if (after_step(r, &mx, &L, &bd, &ev, ts, te, cs)) break;
    }

    finish_run(r, &mx, &L, &bd, &ev);
    faults_dump_state(&faults, comm->rank, r->model->state, r->model->nstate);
    const long steps = r->step - L.start_step;
    bounds_gather(&bd, r, steps, steps * (L.own_data ? L.samples_per_step : (long)r->it->nb), L.train_s);
    comm->on_fault = NULL;   /* from here on a fault is not the run's: it has ended */
    record_done(r, &mx, &L, &bd, &ev, &faults);
    if (metrics_close(&mx, 1) != 0) die("cannot write metrics file '%s': %s", cfg->metrics, strerror(errno));
    if (r->lead) print_done(r, &L, &bd, &ev);
    bounds_free(&bd);
    free(ev.labels);
    free(ev.x);
    snapshots_free(&ev.snaps);
    const int preempted = L.preempted;
    teardown(r);
    outputs_unlock(&locks);
    return preempted ? PREEMPT_EXIT : 0;
}

int eval_main(const config_t *cfg, comm_t *comm)
{
    char err[512];
    if (!*cfg->checkpoint) die("dsgd eval needs --checkpoint FILE");
    if (cfg->test_subset < 0) die("--test-subset must be >= 0");
    cpu_compute_setup(comm_threads(comm, cfg->threads), strcmp(cfg->denormals, "keep") != 0);
    ckpt_t ck;
    if (ckpt_load(cfg->checkpoint, &ck, err, sizeof err) != 0) die("%s", err);
    run_t run, *r = &run;
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->comm = comm;
    if (load_data(r, cfg, DATA_PARTIAL) != 0) die("%s", r->err);
    if (model_spec_check(ck.meta.model, r->test.c, r->test.h, r->test.w, r->test.classes, err, sizeof err) != 0)
        die("checkpoint '%s' holds model '%s', which does not fit this data: %s", cfg->checkpoint, ck.meta.model, err);
    r->model = model_create(ck.meta.model, r->test.c, r->test.h, r->test.w, r->test.classes, EVAL_CHUNK);
    if (ckpt_restore(&ck, r->model, NULL, err, sizeof err) != 0) die("'%s': %s", cfg->checkpoint, err);
    evaluator_t ev = { .labels = xmalloc(sizeof(int32_t) * (size_t)(r->test.n ? r->test.n : 1)) };
    for (long i = 0; i < r->test.n; i++) ev.labels[i] = r->test.y[i];
    evaluate(r, &ev, 0);
    if (comm->rank == 0)
        printf("model %s, step %ld: test accuracy %.4f, test loss %.4f on %ld samples\n",
               ck.meta.model, ck.meta.step, ev.acc, ev.loss, r->test.n);
    free(ev.labels);
    free(ev.x);
    ckpt_free(&ck);
    teardown(r);
    return 0;
}
