/* train/setup — a run from its configuration: flags and files checked,
 * data, model, optimizer, partition, the paradigm chosen and its resume
 * read, every rank agreeing that set-up succeeded (comm_setup_check); and
 * the teardown. Also the checkpoint a worker writes. */
#ifndef DSGD_TRAIN_SETUP_H
#define DSGD_TRAIN_SETUP_H

#include "../run/checkpoint.h"
#include "../run/faults.h"
#include "../sync/sync.h"

/* The data of --data, cut to --train-subset / --test-subset; flags:
 * dataset_load's. -1 with r->err set. */
int  load_data(run_t *r, const config_t *cfg, int flags);
/* Every rank: the run's set-up; a failure anywhere stops every rank with one line. */
void setup(run_t *r, const config_t *cfg, comm_t *comm, ckpt_t *resume, faults_t *faults);
void teardown(run_t *r);
/* Called on every rank of the lead's replica (they assemble a partitioned
 * model); the lead writes. -1 with r->err set. */
int  save_checkpoint(run_t *r, const ckpt_meta_t *state);

#endif
