/* run/faults — heterogeneity and fault injection, for every paradigm.
 *
 *   --slowdown R=F[,R=F...]   worker R runs F times slower
 *   --slowdown FRAC:F         the last ⌈FRAC·N⌉ workers run F times slower
 *   --fail R@S[,R@S...]       worker R exits abruptly at its step S
 *
 * A slowdown is a delay of (F−1)·(the step's measured compute time) after
 * backward, so it scales with the model and machine. R is the worker index
 * (equal to the MPI rank for collective paradigms; for Sandblaster the
 * replica index, and S counts the portions it starts). */
#ifndef DSGD_FAULTS_H
#define DSGD_FAULTS_H

#include <stddef.h>

typedef struct faults {
    double slowdown;   /* this worker's factor (1: none) */
    long fail_step;    /* step at which this worker exits (-1: never) */
} faults_t;

/* Parse both specs for worker `wrank` of `nworkers`; -1 with err on error. */
int faults_parse(faults_t *f, const char *slowdown, const char *fail, int wrank, int nworkers,
                 char *err, size_t errlen);
/* Sleep (F−1)·compute_s; no-op when F = 1. */
void faults_delay(const faults_t *f, double compute_s);

#endif
