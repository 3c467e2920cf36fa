/* The parameter server's shared-memory path, for a shard and the workers
 * that run on its host.
 *
 * Over MPI messages a push or a pull of the whole vector is copied twice:
 * into the transport's shared fragments by the sender and out of them by
 * the receiver (Open MPI's single-copy read of the sender's memory is off:
 * it fails inside MPI when the sender has died, and on some machines it is
 * slower than the two copies). Within one host the shard and its workers
 * can instead share memory, with one MPI-3 shared window per host:
 *
 *   slots  each worker owns one slot per shard on its host, laid out as the
 *          shard's slice; it copies its gradient part there and sends only
 *          the header. The shard applies the update straight from the slot.
 *          The worker writes a slot again only once the shard has reported
 *          (in a reply header) that every push it made was applied.
 *   pool   each shard owns npool buffers of its slice, and keeps its current
 *          parameters in one of them. A reply is only a header naming the
 *          buffer; the worker copies its part out. The buffer is not written
 *          again until the worker has said, in a later message, that it has
 *          finished reading (updates then go to another buffer).
 *
 * So each way costs one copy instead of two, and the message that signals
 * it is a header that the transport sends at once.
 *
 *   progress  one word per pool buffer, which the shard sets before it
 *          writes the buffer and advances chunk by chunk as an update of
 *          the whole slice from a push proceeds: (tag of the push, chunks
 *          done). A worker waiting for the reply to its own push copies
 *          the chunks already done while the shard computes the rest, so
 *          the shard's update and the worker's copy overlap instead of
 *          following each other. The copy is only a guess until the reply
 *          comes: it is kept when the reply names the buffer the worker
 *          copied from and that buffer's word still holds the worker's
 *          tag, complete (every write of a pool buffer first changes its
 *          word, and a buffer a reply names is not written again until the
 *          worker has read it); otherwise the worker copies the reply's
 *          buffer whole, as without the guess. Nothing here is read
 * through MPI: a peer that dies leaves its memory mapped in the others, and
 * it is never read again after its eviction. Headers still go by message,
 * so clocks, gates, liveness and eviction are exactly those of the message
 * path; anything that cannot use the shared path (a worker on another host,
 * a slot still in use, a pool with no free buffer) falls back to it. */
#ifndef DSGD_PS_SHM_H
#define DSGD_PS_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "../comm/comm.h"

typedef struct ps_shm ps_shm_t;

/* --ps-transport: messages only; or shared memory wherever a shard and a
 * worker share a host (auto, the default; "shm" names the same since auto
 * covers one worker too, and stays valid). */
typedef enum ps_transport { PS_MESSAGES, PS_AUTO } ps_transport_t;
/* "messages" | "auto" | "shm" -> 0 and *out, else -1 */
int ps_transport_parse(const char *s, ps_transport_t *out);

/* Collective over c->world: every rank (the S shards, ranks 0..S-1, and the
 * W workers after them) calls it at the same point. Returns NULL for
 * messages only, in the simulated build, or where the mode finds no use for
 * it on this rank's host. The window lives until comm_finalize. */
ps_shm_t *ps_shm_open(comm_t *c, int servers, int workers, size_t nparams, ps_transport_t mode);
void ps_shm_close(ps_shm_t *m);   /* frees the table only (the window goes at comm_finalize) */

int ps_shm_npool(const ps_shm_t *m);
/* Shard k's pool buffer i (its slice's length), or NULL when shard k is not
 * on this rank's host. */
float *ps_shm_pool(const ps_shm_t *m, int k, int i);
/* Worker p's slot for shard k (shard k's slice's length), or NULL when the
 * two are on different hosts (or either is not on this rank's host). */
float *ps_shm_slot(const ps_shm_t *m, int p, int k);
/* The memory barrier between writing shared memory and the message that
 * announces it, and between that message and reading it. */
void ps_shm_sync(const ps_shm_t *m);

/* Progress words (above). A push's tag is nonzero and unique per worker
 * and clock; tag 0 marks a write no worker may guess from (part of the
 * slice, or nothing yet). Chunks are ps_shm_chunk(n) floats of a slice of
 * n, the last one shorter. */
uint64_t ps_shm_tag(int worker, int64_t clock);
size_t ps_shm_chunk(size_t n);
/* The shard, about buffer i of its own pool: `done` chunks of the write
 * tagged `tag` are in place. Orders every store to the buffer before it,
 * the non-temporal ones included. */
void ps_shm_progress_set(const ps_shm_t *m, int k, int i, uint64_t tag, size_t done);
/* A worker: the word of shard k's buffer i, as *tag and *done. */
void ps_shm_progress_get(const ps_shm_t *m, int k, int i, uint64_t *tag, size_t *done);

#endif
