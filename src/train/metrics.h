/* train/metrics — JSON-lines metrics (the records: README.md, "Files dsgd
 * writes" and "Analysing results").
 * Written to FILE.part while the run goes on and renamed to FILE when the
 * run ends normally, so a failed run never leaves a file that looks whole. */
#ifndef DSGD_METRICS_H
#define DSGD_METRICS_H

#include <stdio.h>

/* Where a continued record stood at the resumed step: this run's times
 * and totals go on from there, so that a run resumed any number of times
 * is one record on one clock. time: seconds since the record's first
 * process started; run_s since its first common start; train_s of
 * training; samples trained on. All 0 in a new record. */
typedef struct metrics_prior {
    double time, run_s, train_s;
    long samples;
    int segment;             /* this process's part of the record: 1 for the first run, +1 per resume */
    const char *from;        /* what the figures were read from: "checkpoint" (the checkpoint event
                                of the resumed step), "eval" (the last evaluation at or before it: an
                                underestimate), "start" (nothing earlier) */
} metrics_prior_t;

typedef struct metrics {
    FILE *f;                 /* NULL: metrics disabled */
    char *path, *tmp;
    double t0;               /* MPI_Wtime at start */
    int keep;                /* a continued record: kept as FILE.part even if the run fails */
    metrics_prior_t prior;   /* an event's time is prior.time + (now - t0) */
} metrics_t;

int  metrics_open(metrics_t *m, const char *path, double t0, char *err, size_t errlen);
/* A resumed run (--resume) continuing the metrics of the run it resumes:
 * the closed FILE, or the FILE.part an interrupted run left, is copied to
 * the new FILE.part without its done event and without records past the
 * resumed step (they are done again); returns 1 if there was such a record
 * (then it is never deleted, whatever happens to this run), 0 if a new file
 * was started, -1 with err set. m->prior says where the record stood at
 * the step (the time, training time and samples to continue from). */
int  metrics_continue(metrics_t *m, const char *path, double t0, long step, char *err, size_t errlen);
/* Continue the metrics of a lead that was lost: its FILE.part, cut after
 * its last whole line, copied to a new file that replaces FILE.part (a lost
 * lead that was only frozen writes on into the replaced one), or a new
 * FILE.part if it wrote none. The record's clock goes on from where the
 * lost lead's did (the prior of its last resume event). */
int  metrics_takeover(metrics_t *m, const char *path, double t0, char *err, size_t errlen);
/* {"event":"NAME","time":T  … then fields … metrics_end closes the object. */
void metrics_begin(metrics_t *m, const char *event, double now);
void metrics_long(metrics_t *m, const char *key, long v);
void metrics_double(metrics_t *m, const char *key, double v);
void metrics_str(metrics_t *m, const char *key, const char *v);
/* A value that is already JSON text (an array, say). */
void metrics_raw(metrics_t *m, const char *key, const char *json);
/* A JSON object from outside the program (an environment variable): written
 * as cJSON reads it, or not at all if it is not one. */
void metrics_object(metrics_t *m, const char *key, const char *json);
void metrics_end(metrics_t *m);
/* Another rank has taken the file over (a lead evicted while frozen):
 * close it without writing what this rank still buffers. */
void metrics_abandon(metrics_t *m);
/* ok: rename into place; otherwise remove the partial file. */
int  metrics_close(metrics_t *m, int ok);
/* dsgd status: how the run recorded in path ended, as one line in out, and
 * the exit status a batch script can trust (the launcher's may not be:
 * Open MPI's mpirun --enable-recovery exits 0 after a crash): 0 for a done
 * event of status ok, 143 preempted, 3 diverged, 1 any other (a fault, a
 * failed checkpoint), 2 no done event (the run has not ended, or was
 * killed) or no readable record. */
int  metrics_status(const char *path, char *out, size_t len);

#endif
