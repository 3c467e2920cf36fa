/* train/parallel — model parallelism's plumbing in the run
 * (docs/algorithms.md §11): which replica and partition a worker rank is,
 * the replica and data-parallel groups, the partitioned model with its
 * gather/sum hooks, and assembling or splitting the whole model for
 * checkpoints and resume.
 * With --model-parallel 1 every function is a no-op (replica = wrank). */
#ifndef DSGD_PARALLEL_H
#define DSGD_PARALLEL_H

#include "../sync/sync.h"
#include "../run/checkpoint.h"

/* After the paradigm's layout: replica/partition of this rank; -1 with
 * r->err set if the paradigm or the worker count does not allow M. */
int  par_layout(run_t *r);
/* Collective over every rank: the replica and data-parallel groups. */
void par_groups(run_t *r);
/* -1 with r->err set if the model cannot be split M ways. */
int  par_check_model(run_t *r);
/* Build this rank's (partition of the) model. */
model_t *par_model_create(run_t *r, int max_batch);
/* Copy this partition's slice of a checkpoint into the model (and opt). */
int  par_restore(run_t *r, const ckpt_t *ck, char *why, size_t len);
/* Collective over the lead's replica: the whole model and optimizer state
 * on the lead, in *m and *o (the local ones when M = 1). */
void par_assemble(run_t *r, const model_t **m, const optim_t **o);
void par_free(run_t *r);

#endif
