/* train — the one worker loop every paradigm shares, evaluation, progress,
 * metrics and checkpoints; and `dsgd eval`. */
#ifndef DSGD_TRAIN_H
#define DSGD_TRAIN_H

#include "../comm/comm.h"
#include "../run/config.h"

/* Run `dsgd train`; returns the process exit code. Setup errors die(). */
int train_main(const config_t *cfg, comm_t *comm);
/* Run `dsgd eval`; returns the process exit code. */
int eval_main(const config_t *cfg, comm_t *comm);

#endif
