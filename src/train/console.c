#include "console.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../util/blas.h"
#include "guards.h"

/* The paradigm's figures as " key value" pairs. */
static void stats_text(run_t *r, char *out, size_t len)
{
    sync_stat_t st[16];
    int n = r->ops->stats ? r->ops->stats(r, st, 16, 1) : 0;
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < n && at < len; i++)
        if (!st[i].raw) at += (size_t)snprintf(out + at, len - at, "  %s %.4g", st[i].key, st[i].value);
}

/* A live status line only for a single process on a terminal: under
 * mpirun, stdout is a pseudo-terminal even when the user pipes it. Other
 * runs get a plain line every --progress-every seconds instead. */
int live_line(const run_t *r)
{
    return r->lead && r->comm->size == 1 && !r->cfg->quiet && isatty(STDOUT_FILENO);
}

/* L-BFGS paradigms draw a step's samples themselves: a step is an
 * iteration over --batch-total samples, and epochs say little about it. */
int counts_iterations(const run_t *r) { return r->ops->step_samples != NULL; }

/* "epoch E  step S" or, for L-BFGS, "iter S" */
static void print_position_at(const run_t *r, long step)
{
    if (counts_iterations(r)) printf("iter %6ld", step);
    else printf("epoch %6.2f  step %7ld", (double)step / (double)r->steps_per_epoch, step);
}

static void print_position(const run_t *r) { print_position_at(r, r->step); }

/* Decimals that give a time in seconds four significant digits (one from
 * 100 s up): a simulated run of a small model lasts milliseconds of
 * simulated time, which one decimal printed as 0.0. */
static int time_decimals(double t)
{
    return t < 1 ? 4 : t < 10 ? 3 : t < 100 ? 2 : 1;
}

/* An evaluation's line: where (m), what (ev), t seconds since the process began. */
void print_progress(run_t *r, const evaluator_t *ev, const snap_meta_t *m, double t)
{
    if (r->cfg->quiet || !r->lead) return;
    if (live_line(r)) fputs("\r\033[K", stdout);
    print_position_at(r, m->step);
    printf("  loss %.4f  test_acc %.4f  test_loss %.4f  samples/s %9.0f  time %7.*fs",
           m->train_loss, ev->acc, ev->loss, m->sps, time_decimals(t), t);
    for (int i = 0; i < m->nstats; i++) printf("  %s %.4g", m->key[i], m->value[i]);
    putchar('\n');
    fflush(stdout);
}

/* Between evaluations when there is no live line: where the run is. */
void print_heartbeat(const run_t *r, double train_loss, double sps, double t)
{
    print_position(r);
    printf("  of %ld  loss %.4f  samples/s %9.0f  time %7.*fs\n", r->total_steps, train_loss, sps, time_decimals(t), t);
    fflush(stdout);
}

/* What the run is: the whole model, the data, the ranks' roles. */
void print_header(const run_t *r)
{
    const config_t *cfg = r->cfg;
    size_t nparams = r->model->full_nparams;
    printf("model %s: %zu parameters; data: %ld train, %ld test samples of %dx%dx%d, %d classes\n",
           cfg->model, nparams, r->train.n, r->test.n, r->train.c, r->train.h, r->train.w, r->train.classes);
    if (r->train.note[0]) printf("data: %s\n", r->train.note);
    int others = r->comm->size - r->nworkers;
    if (r->ops->coordinator)
        printf("ranks: 1 coordinator, %d shard%s, %d replica%s", others - 1, others > 2 ? "s" : "", r->replicas,
               r->replicas > 1 ? "s" : "");
    else if (r->mp_size > 1)
        printf("ranks: %d replica%s x %d model-parallel partitions (each rank holds %zu parameters)", r->replicas,
               r->replicas > 1 ? "s" : "", r->mp_size, r->model->nparams);
    else
        printf("ranks: %d worker%s", r->nworkers, r->nworkers > 1 ? "s" : "");
    if (others > 0 && !r->ops->coordinator) printf(", %d server shard%s", others, others > 1 ? "s" : "");
    if (counts_iterations(r))
        printf("; %ld iterations of %ld samples each\n", r->total_steps, r->ops->step_samples((run_t *)r));
    else
        printf("; %ld steps per epoch, %ld steps\n", r->steps_per_epoch, r->total_steps);
    char blas[256];
    blas_describe(blas, sizeof blas);
    printf("blas: OpenBLAS %s\n", blas);
    printf("threads: %d per rank (%s)\n", r->comm->threads, r->comm->threads_from);
    if (r->comm->size > 1) printf("all-reduce: %s\n", r->comm->allreduce);
}

/* The lead's closing lines on stdout. */
void print_done(run_t *r, const loop_t *L, const bounds_t *bd, const evaluator_t *ev)
{
    const config_t *cfg = r->cfg;
    const long steps = r->step - L->start_step;
    char extra[512];
    stats_text(r, extra, sizeof extra);
    if (L->tty) fputs("\r\033[K", stdout);
    const double wall = now_s() - L->t0;
    printf("done: test accuracy %.4f, test loss %.4f after %ld %s (%.2f epochs) in %.*f s (%.*f s training, %.0f samples/s)%s\n",
           ev->acc, ev->loss, r->step, counts_iterations(r) ? "iterations" : "steps",
           (double)r->step / (double)r->steps_per_epoch, time_decimals(wall), wall, time_decimals(L->train_s), L->train_s,
           L->train_s > 0 ? steps * L->samples_per_step / L->train_s : 0.0, extra);
    if (bd->why) printf("stopped early: %s\n", bd->why == BOUNDS_TIME ? "time limit reached" : "target accuracy reached");
    /* a preempted run saves instead of evaluating at the end */
    if (L->preempted && ev->step < 0) printf("(no evaluation before the preemption: the run was preempted before its first)\n");
    else if (L->preempted && ev->step != r->step) printf("(the accuracy above is the last evaluation's, at step %ld)\n", ev->step);
    if (L->preempted)
        printf("preempted (%s) at step %ld%s%s%s; exit status %d\n", preempt_source(), r->step,
               *cfg->checkpoint ? ": resume with --resume " : "", cfg->checkpoint, *cfg->checkpoint ? "" : " (no --checkpoint: nothing to resume from)",
               PREEMPT_EXIT);
    if (bd->reached) printf("time to target %.4f: %.2f s training, %.2f s since start (step %ld)\n", cfg->target_acc,
                            bd->ttt_train, bd->ttt_wall, bd->ttt_step);
    fflush(stdout);
}

void print_start(const run_t *r, int continued)
{
    const config_t *cfg = r->cfg;
    if (!r->lead) return;
    if (!cfg->quiet) {
        config_print(stdout, cfg, config_train_opts, r->ops->options);
        print_header(r);
        fflush(stdout);
    }
    if (*cfg->resume)   /* even with --quiet: where the run starts is part of its result */
        printf("resumed from step %ld of '%s'%s\n", r->step, cfg->resume,
               continued > 0 ? "; the metrics continue the resumed run's record" : "");
}
