/* train/guards — how a run stops when something goes wrong or is asked of
 * it: a run-time failure (run_abort), divergence (this rank's or, told by
 * a notice, another worker's), a preemption signal (to any rank), a
 * checkpoint that could not be written, a lead lost (another worker takes
 * over) or this worker evicted. Each keeps the metrics record whole where
 * it can (record.h) and ends with one line. */
#ifndef DSGD_TRAIN_GUARDS_H
#define DSGD_TRAIN_GUARDS_H

#include "../sync/sync.h"
#include "bounds.h"
#include "metrics.h"

/* A run-time failure after the metrics file is open: remove the partial
 * file, then stop every rank. */
void __attribute__((noreturn, format(printf, 2, 3))) run_abort(metrics_t *mx, const char *fmt, ...);

/* Divergence: a loss that is not finite or exceeds --diverge-loss, or
 * parameters that are not finite when a checkpoint is due. The run stops
 * with DIVERGED_EXIT on every rank and one line; the lead keeps the record
 * so far, closed by a done event of status "diverged"; no checkpoint is
 * written (the previous one stays). where: "" for this rank's own step, or
 * the notice's "step S of worker W (rank R)". */
enum { DIVERGED_EXIT = 3 };
void __attribute__((noreturn, format(printf, 4, 5)))
run_diverged_at(run_t *r, metrics_t *mx, const char *where, const char *fmt, ...);
#define run_diverged(r, mx, ...) run_diverged_at(r, mx, "", __VA_ARGS__)

/* A worker other than the lead whose loss diverges does not stop the job
 * itself: MPI_Abort would kill the lead before it closed the metrics. It
 * tells the lead where and why, and goes on stepping, so that no
 * collective, gate or gossip exchange waits for it; the lead, which looks
 * for the notice after each of its steps and before its done event, stops
 * the job as for its own divergence. A notice no lead answers within
 * --timeout + 5 s (a lead blocked or dead) stops the worker itself. */
enum { NOTICE_LEN = 256 };
typedef struct diverge_watch {
    double since;            /* when this rank diverged and told the lead; < 0: it has not */
    double probed;           /* the lead: when it last looked for a notice */
    char note[NOTICE_LEN];   /* "step S of worker W (rank R)", a NUL, then why (sent from here) */
} diverge_watch_t;
void diverge_notify(run_t *r, diverge_watch_t *dw, int lead_rank, const char *why);
/* 1 at most every 50 ms (*last: when it last said 1): a probe makes MPI
 * poll its transports, which costs a small model's step several times its
 * time (and SimGrid charges each probe simulated time). */
int  diverge_check_due(double *last, double now);
/* On the lead: a worker's notice, if one has arrived, ends the run. */
void diverge_heard(run_t *r, metrics_t *mx);
/* 1 if every parameter is finite. */
int  params_finite(const model_t *m);

/* Preemption (comm.h, comm_preempt_arm): the loop stops at a step every
 * worker agrees on; the paradigm's final synchronization and the
 * checkpoint follow, and the metrics close with status "preempted",
 * without a final evaluation (a launcher kills soon after it passes a
 * signal on: Open MPI's mpirun 1 s later); the process exits with
 * PREEMPT_EXIT. Lockstep workers agree in a two-integer all-reduce about
 * every PREEMPT_AGREE_S seconds of steps: each proposes how many steps
 * that is by its own clock, and the fewest is taken (at least 1, at most
 * PREEMPT_EVERY), so a signal is acted on within about that time or one
 * step, however long a step takes (a fixed 16 steps of 60 ms, as under
 * the sanitizers, outlasted mpirun's second), leaving most of the second
 * to the save. An agreement is a point where the workers wait for each
 * other, as every step of a bounded run is: paradigms whose workers drift
 * apart between synchronizations (localsgd, selsync) are held together
 * there too, so it is not more often than it needs to be. Their number
 * follows the clock, so they stay out of the traffic counters
 * (preempt_checks in the done event counts them). Asynchronous workers learn
 * of another rank's signal from the paradigm's stop announcement (the
 * shards' replies); the lead looks every 50 ms for a serving rank's
 * notice (Sandblaster's shards and replicas). */
#define PREEMPT_AGREE_S 0.2
enum { PREEMPT_EVERY = 16, PREEMPT_EXIT = 143 };
/* Where the preemption came from, for the lead's lines. */
const char *preempt_source(void);
/* A worker's preemption bookkeeping (zeroed at the loop's start, seen_step -1). */
typedef struct preempt_watch {
    double probed;     /* the lead: when it last looked for another rank's preemption notice */
    int announced;     /* the paradigm's stop has been announced for a preemption */
    long next;         /* lockstep: the step after which the workers next agree */
    long agreed_step;  /* ... and the step and time of the last agreement (if checks > 0) */
    double agreed_t;
    long checks;       /* lockstep: the agreements taken (outside the traffic counters: their number follows the clock) */
    long seen_step;    /* the step after which this rank first knew of a preemption (-1: not yet) */
    double seen_t, stop_t;   /* ... when, and when the loop's stop was agreed */
} preempt_watch_t;
/* After step r->step: 1 if the loop stops for a preemption signal (every
 * worker of a lockstep paradigm returns the same). *waited: seconds in
 * the decision's all-reduce, added. */
int  preempt_due(run_t *r, const bounds_t *b, preempt_watch_t *w, double *waited);

/* A checkpoint that could not be written: the record is kept, closed with
 * status "checkpoint_failed" (record.h), and every rank stops. */
void __attribute__((noreturn)) run_save_failed(const run_t *r, metrics_t *mx);
/* The same when the parameter-server shard that writes the checkpoints
 * failed (it says so in the replies, COMM_STOP_SAVE_FAILED, and has
 * printed the job's one line): the lead keeps the record and stops the
 * job; the other workers go on until it does. */
void servers_save_failed(run_t *r, metrics_t *mx);

/* The lead worker was lost and this worker is next in line (parameter-server
 * paradigms): it evaluates from now on, and continues the dead lead's
 * metrics file with a takeover event, so the run's record is not lost. */
void take_lead(run_t *r, metrics_t *mx, const config_t *cfg, double t0);
/* Evicted after a silence past --timeout (frozen, not dead): the servers
 * went on without this worker. It says so in one line and stops training;
 * a former lead leaves the metrics file to the worker that took it over. */
void leave_evicted(run_t *r, metrics_t *mx, const config_t *cfg);

#endif
