/* The state --sync gossip shares between its files (docs/algorithms.md §8):
 *   gossip.c         the algorithm: the local step, then pull, push or round
 *   gossip_window.c  the published copies (a seqlock in an RMA window), the
 *                    bounded reads, and each rank's judgement of its peers'
 *                    liveness
 *   gossip_lead.c    the evaluated average, the finish, and a lead's takeover
 *   gossip_ckpt.c    the checkpoint of every replica and the resume from it */
#ifndef DSGD_SYNC_GOSSIP_H
#define DSGD_SYNC_GOSSIP_H

#include "sync.h"

enum { TAG_GOSSIP = TAG_GOSSIP_BASE, TAG_GOSSIP_DONE, TAG_GOSSIP_BYE, TAG_GOSSIP_FIN, NSEND = 4 };

typedef struct published {
    int64_t step;            /* steps completed; total_steps + 1 once finished */
    int64_t seq;             /* odd while the copy is being written */
    /* followed by n floats */
} published_t;

typedef enum gossip_mode { GOSSIP_PULL, GOSSIP_PUSH, GOSSIP_ROUND, GOSSIP_BAD = -1 } gossip_mode_t;

/* push: a message whose receive is posted, not yet complete */
typedef struct gossip_inbox {
    MPI_Request req;
    float *buf;              /* (n) */
    int src;
    double since;            /* posted, on the gossip_awake_now clock */
} gossip_inbox_t;

typedef struct gossip {
    gossip_mode_t mode;      /* --gossip */
    float beta;
    rng_t rng;               /* peer choice, per rank */
    size_t n, np, bytes;    /* floats of a replica (parameters + state), of its parameters; window bytes */
    unsigned char *pub;      /* window memory: published_t + n floats */
    MPI_Win win;
    unsigned char *peer;     /* a peer's published copy */
    float *mix;              /* (n) push: Σ received; round: partner's θ' */
    gossip_inbox_t *inbox;   /* (max_inbox) push: receives in flight, the first ninbox of them */
    int ninbox, max_inbox;
    int *alive;              /* (ranks) */
    int *done_from;          /* (ranks) push: that rank's DONE marker has arrived */
    int64_t *seen_step;      /* (ranks) last published step read */
    double *seen_time;       /* (ranks) when it last moved, on the gossip_awake_now clock */
    int64_t *mixed_step;     /* (ranks) pull: the version of that peer last mixed in */
    unsigned char *sbuf[NSEND];
    MPI_Request sreq[NSEND];
    int sdest[NSEND];
    double stime[NSEND];     /* when each push was sent, on the gossip_awake_now clock */
    published_t *seq_a, *seq_b;   /* a read's two sequence gets */
    int *used;               /* (ranks) lead: replicas in the last average */
    int64_t seq;             /* own publication count x 2 */
    long mixes, dead, stale_skips;
    double consensus;        /* at the last evaluation */
    int averaged;            /* replicas the last evaluation averaged (the lead's own, and peers read whole and not stale) */
    float *avg;              /* (n) lead: average of the published replicas */
    sync_rows_t rows;        /* round: every replica's state, gathered for a checkpoint */
    float *saved;            /* (ranks, n) lead, pull/push: the replicas read for a checkpoint */
    float *saved_avg;        /* (n) their mean */
    ckpt_tensor_t tensor;
    int64_t fin_step;        /* "alive after all", to the lead (sent from here) */
    double last_step_t;      /* when the last step began: a gap past --timeout was a freeze */
    double revive_t;         /* the lead: when it last looked for a frozen peer's word */
    live_clock_t awake;      /* gossip_awake_now: this rank's awake clock */
} gossip_t;

/* gossip_window.c */
/* Push: receive every message that has arrived without waiting for any:
 * post a receive for each, mix (sum into g->mix; first: the first one
 * replaces it) those that are complete, declare dead a sender whose message
 * stays incomplete for --timeout. Returns how many were mixed. */
void gossip_window_open(run_t *r, gossip_t *g);
void gossip_window_close(gossip_t *g);
double gossip_awake_now(const run_t *r, gossip_t *g);
void gossip_publish(run_t *r, gossip_t *g, int64_t step);
int gossip_read_peer(run_t *r, gossip_t *g, int j, int64_t *step);
int gossip_is_stale(run_t *r, gossip_t *g, int j);
void gossip_mark_dead(run_t *r, gossip_t *g, int j, const char *why, double secs);
int gossip_drain_inbox(run_t *r, gossip_t *g, int first);
void gossip_tell_alive(run_t *r, gossip_t *g);
void gossip_revive_frozen(run_t *r, gossip_t *g);

/* gossip_lead.c */
float *gossip_average(run_t *r);
void gossip_finish(run_t *r);
int gossip_lead_lost(const run_t *r);

/* gossip_ckpt.c */
int gossip_ckpt_state(run_t *r, ckpt_meta_t *meta);
int gossip_resume(run_t *r, const ckpt_t *ck);

#endif
