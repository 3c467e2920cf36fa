/* Pure pieces of the paradigms' rules: no MPI, no run state, so that unit
 * tests (tests/test_rules.c) check them against values worked by hand. */
#ifndef DSGD_SYNC_RULES_H
#define DSGD_SYNC_RULES_H

#include <stdint.h>

/* SelSync's smoothing (selsync.c): the normalized EWMA of the last W values
 * of a ring buffer v (W slots) that has had `count` values pushed, weight
 * (1 − a)^j for the j-th newest (j = 1 .. min(count, W)); 0 when empty. */
double selsync_ewma(const double *v, long count, long W, double a);

/* FedAvg's round (localsgd.c): which of N workers are sampled in a round
 * (chosen[k] = 1): all when m = ceil(fraction N) is N, else m distinct
 * workers drawn from a generator seeded by (seed, round), the same on every
 * rank. */
void fedavg_sample(uint64_t seed, long round, int N, double fraction, int *chosen);
/* Worker k's weight in that round's average: n_k / Σ_{chosen} n_j if k is
 * chosen, else 0. */
float fedavg_weight(const double *n_k, const int *chosen, int N, int k);

/* Gossip's partition rule (gossip_window.c): a rank that sees `live` of n
 * ranks alive (itself included) is in a minority, and stops, when live is
 * under half of n, or exactly half without rank 0 (so that of two equal
 * halves one goes on: the one with rank 0). */
int gossip_minority(int n, int live, int has_rank0);

#endif
