/* One parameter-server shard's state, shared by the files that make the
 * shard: server.c (the loop, the updates and the replies), shard_recv.c
 * (the receives: every worker's next header, gradients one at a time) and
 * shard_snap.c (checkpoint pieces, assembled on shard 0). Private to
 * src/ps. */
#ifndef DSGD_PS_SHARD_H
#define DSGD_PS_SHARD_H

#include "ps.h"
#include "gate.h"

typedef struct worker_state {
    int64_t t;               /* pushes received: the worker's clock */
    int64_t applied;         /* pushes applied (t, less a push held for its turn) */
    unsigned char *held;     /* bsp-ps / ssp 0: the receive buffer (header + n floats) of a push that
                              * arrived before its turn, handed over without a copy; kept as the
                              * spare the next held push swaps with; or NULL */
    ps_hdr_t held_h;         /* its header */
    float *held_g;           /* the held gradient, at its offset in the slice: in held or in slot */
    int has_held;
    float *slot;             /* its slot in the host's shared window (shm.h), or NULL */
    int64_t read;            /* replies it has read out of the pool (from its last message) */
    int64_t shm_sent;        /* replies sent to it through the pool */
    int64_t served;          /* its clock when its last pull was answered */
    int64_t step;            /* its step count (warm start) */
    double last_seen;
    int parked;              /* a pull is waiting for the gate */
    int queued;              /* its push's header is in and its gradient is queued or coming in */
    ps_hdr_t qh;             /* that header */
    int alive, done;
    int returned;            /* evicted, then said it is done: it gets the final message */
    size_t off, cnt;         /* its part of this shard's slice (from its messages) */
} worker_state_t;

typedef struct shard {
    comm_t *c;
    const ps_config_t *cfg;
    int k;
    size_t lo, n;
    /* The slice's parameters. Replies are sent from it without a copy, so
     * while a reply is in flight from a buffer, that buffer is not written:
     * an update then goes out of place into a buffer no reply is reading,
     * which becomes the current one. At most one buffer per reply slot plus
     * one are ever needed (a reply to a dead worker never completes, so its
 * buffer is simply never free again). */
    float *w;                /* (n) the current parameters: one of wb */
    float **wb;              /* (npool + 2·workers + 1) buffers: the shared pool's (shm.h),
                              * then private ones allocated when first needed */
    int nwb, npool;
    optim_t *opt;            /* state of the slice */
    worker_state_t *ws;      /* (workers) */
    ps_gate_t gate;
    /* Receives. Every worker has a small receive posted at all times for
     * its next message (a header: a push's, a pull, a stop, ...), so that
     * pulls are answered while pushes come in. A push's gradient follows its
     * header as a message of its own, and the shard takes these one at a
     * time in the order the headers came (first come, first served): over
     * TCP a message above the eager limit moves only once its receive is
     * posted, so the one being received has the link to itself while the
     * replies go out the other way. A shard that probed for any message and
     * received it whole took pushes ahead of the pulls that followed them
     * and used its link one direction at a time; one that posted every
     * push's receive at once shared its link among all of them, so they
     * finished together and the replies then went out together, again one
     * direction at a time. A worker's next header is received only once its
     * gradient is in: its messages are handled in the order it sent them.
     * With S > 1 shards and more than S workers a shard takes S gradients at
     * once (lanes): each worker sends its S pieces at once, so each piece gets
     * 1/S of the worker's link, and the shards' queues hold the workers in the
     * same order; taken one at a time, every shard would receive at 1/S of its
     * link's rate (docs/paradigms.md has the measurements).
     * rreq: (workers) the headers' receives into hin; then the lanes', into
     * in; then shard 0's receive of the other shards' checkpoint pieces,
     * when there are any. */
    ps_hdr_t *hin;           /* (workers) */
    MPI_Request *rreq;       /* (workers + lanes + 1) */
    int nrreq;               /* workers + lanes, + 1 with the pieces' receive */
    int *fifo;               /* (workers) workers whose gradient waits to be received, in order */
    int fifo_head, fifo_len;
    int lanes;               /* gradients received at once: 1, or the shards' number with more than one */
    int *inflight;           /* (lanes) the worker whose gradient is coming into in[l], or −1 */
    unsigned char **in;      /* (lanes) receive buffers of gradients: header + n floats */
    /* Replies go out with MPI_Isend, one slot per worker and kind (pull or
     * evaluation): a blocking send to a worker that died after asking would
     * never return (large messages wait for the receiver). */
    ps_hdr_t *out;           /* (2·workers) reply headers */
    ps_hdr_t *ev_hdr;        /* (workers) eviction notices */
    MPI_Request *ev_req;     /* (workers) */
    MPI_Request *out_req;    /* (2·workers) */
    const float **out_from;  /* (2·workers) the buffer each reply is sent from */
    int64_t *out_seq;        /* (2·workers) > 0: the reply went through the pool, and its buffer
                              * is in use until the worker has read this many replies */
    ps_stats_t st;
    int64_t version;         /* updates applied to the slice (replies carry it) */
    double last_keepalive;
    double now;              /* the awake clock at the last poll (shard_now) */
    live_clock_t awake;      /* the workers' times (last_seen): this shard's awake clock */
    int stop_all;            /* COMM_STOP_*: every worker is asked to stop: say so in every reply */
    int no_snap;             /* no checkpoint is written from now on: a worker's loss diverged, or a save failed */
    /* Staleness 0 (bsp-ps, ssp 0): a round's pushes are applied in worker
     * order, whatever order they arrive in, so runs repeat bit for bit. */
    int ordered;
    int64_t round;           /* the round being applied: pushes made at this clock */
    int next;                /* the worker whose push of the round comes next */
    /* Snapshots for checkpoints (ps_snapshot_t). */
    size_t nparams;
    int nopt;                /* optimizer vectors of the slice: 0, 1 or 2 */
    int64_t sum_step;        /* Σ over workers of their step counts */
    int64_t snap_index;      /* the last multiple of snap_every × workers crossed */
    float *snap_out;         /* ((1 + nopt) · n) a piece in flight to shard 0 */
    ps_hdr_t snap_hdr;       /* its header (the index in clock) */
    MPI_Request snap_req;
    /* shard 0: the assembly */
    float *asm_v[3];         /* (nparams) parameters, velocity, accumulator */
    int64_t *have;           /* (servers) index of the piece held from each shard; −1: none */
    int64_t target;          /* the index being assembled */
    int64_t *clk_t, *clk_step;   /* (workers) the clocks at shard 0's own piece */
    int64_t clk_updates;
    int final_done;          /* the final snapshot is complete */
    unsigned char *snap_in;  /* receive buffer: header + the largest piece */
    size_t snap_in_bytes;
} shard_t;

#define SNAP_FINAL INT64_MAX

static inline size_t msg_bytes(size_t n) { return sizeof(ps_hdr_t) + n * sizeof(float); }
static inline int worker_rank(const shard_t *s, int p) { return s->cfg->servers + p; }
/* rreq's index of shard 0's receive of checkpoint pieces */
static inline int snap_slot(const shard_t *s) { return s->cfg->workers + s->lanes; }

/* The shard's awake clock: a gap between its polls longer than
 * LIVE_AWAY_POLL was its own absence. */
static inline double shard_now(shard_t *s) { return live_awake(&s->awake, live_deadline(s->cfg->timeout_s, LIVE_AWAY_POLL)); }

/* shard_recv.c */
void post_header(shard_t *s, int p);
void next_gradient(shard_t *s, double now);
void drop_gradient(shard_t *s, int p);
int  lane_of(const shard_t *s, int p);
void cancel_receives(shard_t *s);
void evict(shard_t *s, int p, double silent);
void on_returned(shard_t *s, int p);

/* shard_snap.c */
void snap_setup(shard_t *s);
void snap_free(shard_t *s);
void snap_take(shard_t *s, int64_t c);
void snap_post(shard_t *s);
void snap_recv(shard_t *s, const MPI_Status *st);
void snap_final(shard_t *s);

#endif
