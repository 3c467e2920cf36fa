/* train/console — what the lead prints on stdout: the configuration and
 * the run's header, a line per evaluation, heartbeats between them (or a
 * live line on a terminal), and the closing lines. */
#ifndef DSGD_TRAIN_CONSOLE_H
#define DSGD_TRAIN_CONSOLE_H

#include "../sync/sync.h"
#include "bounds.h"
#include "evaluate.h"
#include "loop.h"

/* The configuration, the header and, for a resumed run, where it resumed
 * (continued: its metrics continue the resumed run's record). */
void print_start(const run_t *r, int continued);
/* What the run is: the whole model, the data, the ranks' roles. */
void print_header(const run_t *r);
/* An evaluation's line: where (m), what (ev), t seconds since the process began. */
void print_progress(run_t *r, const evaluator_t *ev, const snap_meta_t *m, double t);
/* Between evaluations when there is no live line: where the run is. */
void print_heartbeat(const run_t *r, double train_loss, double sps, double t);
/* The lead's closing lines. */
void print_done(run_t *r, const loop_t *L, const bounds_t *bd, const evaluator_t *ev);
/* A live status line: a single process on a terminal. */
int  live_line(const run_t *r);
/* L-BFGS paradigms count iterations, not steps. */
int  counts_iterations(const run_t *r);

#endif
