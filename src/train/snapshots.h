/* train/snapshots — --eval-offline: at each scheduled evaluation the
 * evaluating rank only keeps a copy of the model the paradigm delivers
 * (its parameters and batch-normalization statistics) with what the
 * evaluation record needs, and goes on training; the copies are evaluated
 * after the run's final synchronization and recorded with the times they
 * were taken. The copies go to a temporary file that is unlinked as soon as
 * it is created, so a run that ends in any way leaves nothing behind. */
#ifndef DSGD_SNAPSHOTS_H
#define DSGD_SNAPSHOTS_H

#include <stddef.h>
#include <stdio.h>

enum { SNAP_STATS = 8 };

/* What an evaluation record says besides the accuracy, as it was when the
 * snapshot was taken. */
typedef struct snap_meta {
    long step, samples;
    double time;                   /* now_s() then */
    double run_s, train_s;         /* seconds since the common start; of training */
    double train_loss, sps;        /* since the previous evaluation */
    double lr;                     /* the learning rate of the last step */
    int nstats;                    /* the paradigm's figures (staleness, ...) */
    char key[SNAP_STATS][32];
    double value[SNAP_STATS];
} snap_meta_t;

typedef struct snapshots {
    FILE *f;                       /* the temporary file */
    size_t nparams, nstate;        /* floats per snapshot: nparams + nstate */
    snap_meta_t *meta;
    long n, cap;
} snapshots_t;

/* Create the temporary file (at the start of the run, so that a directory
 * that cannot take it stops the run before it trains); -1 with err set. */
int  snapshots_open(snapshots_t *s, char *err, size_t errlen);
/* Append one snapshot (opening the file if need be); -1 with err set if it cannot be written. */
int  snapshots_add(snapshots_t *s, const float *params, size_t nparams, const float *state, size_t nstate,
                   const snap_meta_t *m, char *err, size_t errlen);
/* Snapshot i into `into` (nparams + nstate floats); -1 with err set. */
int  snapshots_read(snapshots_t *s, long i, float *into, char *err, size_t errlen);
void snapshots_free(snapshots_t *s);

#endif
