/* train/evaluate — test accuracy and loss of the model a paradigm delivers
 * (the parameter server's, EASGD's centre, the replicas' average...), of
 * the local replica, or of a snapshot (--eval-offline), in chunks of
 * EVAL_CHUNK test samples. */
#ifndef DSGD_TRAIN_EVALUATE_H
#define DSGD_TRAIN_EVALUATE_H

#include "../sync/sync.h"
#include "snapshots.h"

#define EVAL_CHUNK 256

typedef struct evaluator {
    int32_t *labels;     /* (test n) */
    float *x;            /* (max_batch, dim) test inputs as floats; allocated by
                            the first evaluation, so only evaluating ranks hold it */
    double acc, loss;
    long step;           /* of the last evaluation (-1: none yet) */
    snapshots_t snaps;   /* --eval-offline */
} evaluator_t;

/* The model the paradigm delivers during the run, its parameters and its
 * batch-normalization statistics (*state). */
float *delivered_model(run_t *r, float **state);
/* Accuracy and loss into ev of the model with these parameters and
 * statistics (the model's own when NULL). */
void evaluate_model(run_t *r, evaluator_t *ev, float *params, float *state);
/* The same for the paradigm's model to evaluate (global = 1: during the
 * run) or the local replica (global = 0). */
void evaluate(run_t *r, evaluator_t *ev, int global);
/* What an evaluation's record says besides the accuracy, as of now. */
void eval_meta(run_t *r, double train_loss, double sps, double run_s, double train_s, long samples, snap_meta_t *m);
/* --eval-offline, during the run: keep the delivered model; -1 with err set
 * if the snapshot could not be kept. */
int snapshot_take(run_t *r, evaluator_t *ev, double train_loss, double sps, double run_s, double train_s,
                  long samples, char *err, size_t errlen);

#endif
