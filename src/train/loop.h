/* train/loop — the step loop's bookkeeping (train.c runs the loop; the
 * record's done event and the console's last lines read it). */
#ifndef DSGD_TRAIN_LOOP_H
#define DSGD_TRAIN_LOOP_H

#include "guards.h"

/* The step loop's bookkeeping: what it measures and when it reports. */
typedef struct loop {
    double t0;                   /* the run's start */
    int own_data;                /* the paradigm's step draws its samples (Sandblaster's coordinator) */
    int no_compute;              /* --compute none: no forward or backward, a zero gradient */
    long eval_every;             /* steps between evaluations (0: none by steps) */
    long start_step, samples_per_step;
    /* Where the training time goes: train_s = compute_s + step_comm_s +
     * update_s + the rest (the loop's bookkeeping). A step runs from its
     * start ts to the end of its stop decision te, and the next starts
     * there when nothing happened in between (t_carry); the communication
     * counters are read at the same points (run_comm_seconds), so every
     * wait is counted once. */
    double train_s, compute_s;   /* stepping (all of it); computing the batch's gradient */
    double step_comm_s;          /* in or waiting for communication within train_s (the final synchronization too) */
    double update_s;             /* the paradigm's step outside its communication (the optimizer update, averaging arithmetic) */
    double loss_sum, seg_t;      /* since the last evaluation: training loss, time */
    long loss_n, seg_samples;
    int tty, beat, leading;      /* a live line; heartbeats; this rank has led */
    double tty_last, beat_last;
    double t_carry;              /* the last step's end, when nothing happened after it (-1: read the clock) */
    double c_carry;              /* run_comm_seconds then */
    double t_stop;               /* when the rank left the loop, if it left at a step's end */
    int preempted;
    preempt_watch_t pw;
    diverge_watch_t dw;
} loop_t;

#endif
