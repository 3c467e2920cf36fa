/* run/faults — heterogeneity and fault injection, for every paradigm.
 *
 *   --slowdown R=F[,R=F...]   worker R runs F times slower
 *   --slowdown FRAC:F         the last ⌈FRAC·N⌉ workers run F times slower
 *   --slowdown transient:F:SLOW:FAST[:FRAC]
 *                             stragglers that come and go: every worker (or
 *                             the last ⌈FRAC·N⌉) alternates between full
 *                             speed, for intervals of mean FAST seconds, and
 *                             F times slower, for intervals of mean SLOW
 *                             seconds; the intervals are exponential, drawn
 *                             per worker from --seed, and the first state is
 *                             slow with probability SLOW/(SLOW+FAST) (the
 *                             share of time slowed is that from the start)
 *   --fail W@S[,W@S...]       worker W exits abruptly at its step S
 *   --fail W@S:publishing     gossip: worker W exits halfway through
 *                             publishing its step S's parameters, its copy
 *                             left marked as being written for good (a death
 *                             that kill -9 lands on only by chance)
 *   --fail W@S:freeze         gossip: worker W stops itself (SIGSTOP, for
 *                             whoever runs it to continue) at step S between
 *                             reading a peer's step and judging how long the
 *                             peer has been silent: the one moment where its
 *                             own absence could pass for the peer's
 *   --fail dump-state:PREFIX  not a fault, for tests: every worker writes its
 *                             non-trained state (batch normalization's
 *                             running statistics) as raw floats to
 *                             PREFIX.RANK after the final evaluation
 *
 * The kinds mix in one comma-separated list; PREFIX holds no comma.
 *
 * A slowdown is a delay of (F−1)·(the step's measured compute time) after
 * backward, so it scales with the model and machine. R is the worker index
 * (equal to the MPI rank for collective paradigms; for Sandblaster the
 * replica index, and S counts the portions it starts). Times are the run's
 * clock (MPI_Wtime: simulated seconds on a simulated cluster). */
#ifndef DSGD_FAULTS_H
#define DSGD_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "../util/util.h"

typedef struct faults {
    double slowdown;   /* this worker's factor while slowed (1: none) */
    long fail_step;    /* step at which this worker exits (-1: never) */
    long publishing_step;   /* gossip: exits while publishing this step (-1: never) */
    long freeze_step;       /* gossip: stops itself between a read and its judgement at this step (-1: never) */
    char dump_prefix[256];  /* dump-state's PREFIX ("": none) */
    /* a transient schedule: this worker's state, switched at next_switch */
    int transient;     /* 1: the factor applies only within slowed intervals */
    double slow_s, fast_s;   /* the intervals' means, seconds */
    int slowed;        /* in a slowed interval */
    double next_switch;   /* the clock at the next change (< 0: not started) */
    rng_t rng;
    long steps, slowed_steps;   /* steps delayed, of the steps seen */
} faults_t;

/* Parse both specs for worker `wrank` of `nworkers` (seed: --seed, for a
 * transient schedule's draws); -1 with err on error. */
int faults_parse(faults_t *f, const char *slowdown, const char *fail, int wrank, int nworkers,
                 uint64_t seed, char *err, size_t errlen);
/* The factor this worker runs at, at clock `now` (advances a transient
 * schedule; the first call starts it). */
double faults_factor(faults_t *f, double now);
/* Sleep (F−1)·compute_s where F is the factor at clock `now`; counts the
 * step. No-op when F = 1. */
void faults_delay(faults_t *f, double compute_s, double now);
/* --fail W@S: at `step` == S this worker exits abruptly (status 3, no
 * goodbye to its peers) after one line, "dsgd: WHO INDEX (rank RANK) exits
 * WHEN STEP as --fail asked" (WHEN: "at step", "before its portion"). */
void faults_exit_if_due(const faults_t *f, long step, const char *who, int index, int rank, const char *when);
/* W@S:publishing: this worker is to die halfway through publishing `step`. */
int faults_should_die_publishing(const faults_t *f, long step);
/* W@S:freeze: this worker is to stop itself now, at `step`; once. */
int faults_should_freeze(faults_t *f, long step);
/* dump-state:PREFIX: writes the n floats of `state` to PREFIX.RANK (quietly
 * nothing without it, or when the file cannot be written). */
void faults_dump_state(const faults_t *f, int rank, const float *state, size_t n);

#endif
