/* Sandblaster's coordinator: the portion scheduler of one pass and the
 * messages to the shards (sb_coord.c). Owned by the coordinator's state in
 * sandblaster.c. */
#ifndef DSGD_SB_COORD_H
#define DSGD_SB_COORD_H

#include "sb.h"

typedef struct sb_rep {
    int alive, parked, stopped;
    int returned;            /* declared dead, then heard from: it was frozen, not dead */
    int cur;                 /* portion it is computing, or -1 */
    int64_t cur_pass;
    int64_t kept, pushed;    /* portions granted to it / pushed by it (whole run) */
    double last_heard, started;
    double dur;              /* moving average of its time per portion (0: unknown) */
} sb_rep_t;

enum { PENDING, ISSUED, KEPT };   /* a portion's state in a pass */

typedef struct sb_coord {
    comm_t *c;
    int S, R, P, first_replica, no_backup;
    int64_t pass;            /* passes begun − 1 */
    long batch;              /* L-BFGS batch of the current pass */
    int open;                /* portions are being handed out */
    unsigned char *state;    /* (P) PENDING, ISSUED, KEPT */
    unsigned char *solo;     /* (P) reissued after a failure: pushed alone */
    int *copies;             /* (P) copies being computed */
    int *kept_by;            /* (P) replica whose result counts */
    double *issued_at;       /* (P) */
    double *loss;            /* (P) summed loss of each portion */
    unsigned char *have;     /* (S, P) portions each shard holds, after an eviction */
    int npending, nkept, next;
    sb_rep_t *rep;           /* (R) */
    sb_reply_t *rep_in;      /* (S) */
    MPI_Request *req;        /* (S) */
    double last_ping;        /* the last operation sent to the shards */
    double last_ka;          /* the last keep-alive sent to waiting replicas */
    /* figures for the done event */
    long passes, issued, dup_issued, dup_discarded, reissued, evictions, counted, shard_discarded;
    double pass_s;
} sb_coord_t;

void sb_coord_init(sb_coord_t *co, comm_t *c, int S, int R, int P, int no_backup);
void sb_coord_free(sb_coord_t *co);
/* Send operation op to every shard (no reply). */
void sb_coord_op(sb_coord_t *co, int op, int a, int b, double alpha, int who);
/* Send op and wait for every shard's sb_reply_t (in co->rep_in). */
void sb_coord_replies(sb_coord_t *co, int op, int a, int b, const char *what);
/* One pass over batch k at the shards' X: the summed loss; the shards'
 * GX holds the summed gradient. */
double sb_coord_pass(sb_coord_t *co, long batch);
/* End of run: stop every replica, then the shards. */
void sb_coord_stop(sb_coord_t *co);
/* The next portion to hand out: the lowest pending one (from co->next on),
 * else, with backup tasks, the outstanding portion with a single copy that
 * was issued first (*dup = 1); -1 if none. Reads only the portion table. */
int sb_coord_pick(sb_coord_t *co, int *dup);

#endif
