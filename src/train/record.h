/* train/record — the run's metrics record (README, "Analysing results"):
 * its start (config, or a resumed record's resume event), the evaluations,
 * the checkpoints, and the done event, written here for every ending: a
 * normal end or a preemption (record_done), a fault, a divergence, a
 * failed checkpoint. Written by the lead only (metrics_t without a file elsewhere). */
#ifndef DSGD_TRAIN_RECORD_H
#define DSGD_TRAIN_RECORD_H

#include "../run/faults.h"
#include "../sync/sync.h"
#include "bounds.h"
#include "evaluate.h"
#include "loop.h"
#include "metrics.h"

/* The metrics record's start: a new one, or (--resume) the record of the
 * run it resumes continued, with a resume event; returns 1 if continued. */
int  open_record(run_t *r, metrics_t *mx, double t0);
/* The eval event; offline: evaluated after the run, from a snapshot taken at m->time. */
void eval_record(run_t *r, metrics_t *mx, const evaluator_t *ev, const snap_meta_t *m, int offline);
/* A checkpoint the lead wrote: where the run stood (a resumed run goes on from there). */
void checkpoint_record(const run_t *r, metrics_t *mx, const loop_t *L, const bounds_t *bd);
/* The done event of a run that ended normally or was preempted. */
void record_done(run_t *r, metrics_t *mx, const loop_t *L, bounds_t *bd, const evaluator_t *ev, const faults_t *faults);
/* The done event of a checkpoint that could not be written (r->err says
 * why), and the record closed, kept. */
void save_failed_record(const run_t *r, metrics_t *mx);
/* The done event of a run that diverged (why; where: "" or a worker's
 * notice's "step S of worker W (rank R)"), and the record closed, kept. */
void diverged_record(const run_t *r, metrics_t *mx, const char *why, const char *where);

/* What the lead's metrics need to close on a peer's fault. */
typedef struct fault_rec {
    metrics_t *mx;
    const run_t *r;
} fault_rec_t;
/* comm's fault hook (ctx: a fault_rec_t): the record so far goes into
 * place, ending with a done event that says what was lost, at which step. */
void record_fault(void *ctx, const char *what, const int *lost, int nlost);

/* The groups this rank communicates in (its world, its replica and
 * data-parallel groups, the paradigm's own); returns how many of g's 4. */
int  run_comm_groups(const run_t *r, const comm_t *g[4]);
/* Seconds this rank has spent in (or waiting for) communication, in every group. */
double run_comm_seconds(const run_t *r);

#endif
