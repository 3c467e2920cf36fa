/* train/bounds — runs bounded by time and by accuracy, the same way for
 * every paradigm, so that time to accuracy means one thing:
 *
 *   --time-limit S    every worker stops at the first step end S seconds
 *                     after the common start (a barrier after init); then
 *                     the paradigm's final synchronization and the final
 *                     evaluation run as after the last step
 *   --target-acc A    stop at the first evaluation that reaches A
 *   --eval-every-s T  evaluate every T seconds of the lead's clock
 *
 * The decision is taken together (sync.h, sync_stop_mode_t): lockstep
 * paradigms all-reduce two flags (stop, evaluate) after every step, so every
 * rank acts on the same integers; asynchronous paradigms stop on their own
 * clocks against the common start and learn of a reached target from the
 * lead's message; model-parallel replicas agree among their ranks too.
 * Per-worker figures (stop time, steps, samples, step rate) are gathered for
 * the done event. */
#ifndef DSGD_BOUNDS_H
#define DSGD_BOUNDS_H

#include "../sync/sync.h"
#include "metrics.h"

enum { BOUNDS_NONE, BOUNDS_TIME, BOUNDS_TARGET };

typedef struct bounds {
    double limit, target, every_s;   /* 0: off */
    int agree_time;                  /* lockstep ranks also agree on the time (--lr-horizon time) */
    double sched_t;                  /* the time the learning-rate schedule reads: seconds since the common
                                        start at the last stop decision (the latest rank's, if agreed) */
    int window;                      /* --target-window: evaluations whose mean decides */
    double *accs;                    /* (window) the last evaluations' accuracies, a ring */
    long nacc;                       /* evaluations recorded */
    int mode;                        /* sync_stop_mode_t */
    int active;                      /* any bound or clock schedule is set */
    double t_start;                  /* the common start (this rank's clock) */
    double next_eval;                /* lead: seconds after t_start of the next scheduled evaluation */
    int lead_rank;                   /* world rank of the lead */
    int *workers;                    /* (world size) 1 if that rank runs the worker loop */
    int why;                         /* BOUNDS_*: why the loop ended early */
    int reached;                     /* the target was reached at an evaluation */
    double ttt_wall, ttt_train;      /* lead: seconds since start / of training at that evaluation */
    long ttt_step;
    double prev_check;               /* when this rank took its previous stop decision */
    double stop_s, last_step_s;      /* when this rank left the loop; its last step (decision to decision) */
    double check_s;                  /* seconds in the stop decisions' all-reduces (in its comm_s too), and
                                        in the preemption decisions' within the training time (train.c) */
    double sync_done_s, final_eval_s;/* lead: when finish returned; when the final evaluation began */
    double *all;                     /* (world size, BOUNDS_FIELDS) gathered per-rank figures */
    int gathered;
} bounds_t;

/* Every rank, after init: the barrier that is the common start. */
void bounds_start(bounds_t *b, run_t *r);
/* Worker loop, after each step (begun at step_t0, ended at *t_end): agree
 * with the peers; returns 1 if the loop must stop now; *eval is set if a
 * scheduled evaluation is due; *t_end moves to after the agreement if that
 * took MPI calls. It reads the clock only then: under SMPI every clock read
 * ends a measured computation burst, and each costs a few microseconds of
 * simulated time. */
int  bounds_after_step(bounds_t *b, run_t *r, double step_t0, double *t_end, int *eval);
/* After an evaluation on the ranks that took part in it (in STOP_AGREE mode
 * every worker calls it, as every worker knows an evaluation happened):
 * records time to target (at_s: when the evaluation began, since the
 * common start; train_s: the lead's training time then): the target is
 * reached when the mean of the last --target-window evaluations reaches
 * it; returns 1 if the loop must stop. */
int  bounds_after_eval(bounds_t *b, run_t *r, double acc, double at_s, double train_s);
/* The same record, without telling anyone (the final evaluation, and
 * --eval-offline's snapshots of step `step`, evaluated after the run). */
int  bounds_record_eval(bounds_t *b, const run_t *r, double acc, double at_s, double train_s, long step);
/* Seconds since the common start. */
double bounds_now(const bounds_t *b);
/* Every rank (servers too) at the end: gather the per-worker figures. */
void bounds_gather(bounds_t *b, run_t *r, long steps, long samples, double train_s);
/* Training samples of all workers together (fallback if not gathered). */
long bounds_samples(const bounds_t *b, const run_t *r, long fallback);
/* Lead: the bounds' fields of the done event. */
void bounds_write_done(const bounds_t *b, const run_t *r, metrics_t *mx);
void bounds_free(bounds_t *b);

#endif
