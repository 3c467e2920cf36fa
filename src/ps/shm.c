/* The parameter server's shared window per host (see shm.h). */
#include "shm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "ps.h"

struct ps_shm {
    MPI_Win win;
    int servers, workers, npool;
    float **pool;            /* (servers × npool) shard k's buffer i, or NULL */
    float **slot;            /* (workers × servers) worker p's slot for shard k, or NULL */
    _Atomic uint64_t **prog; /* (servers) shard k's progress words, one per line per pool buffer, or NULL */
};

/* a progress word: the tag above PROG_BITS bits of chunks done */
enum { PROG_BITS = 16, WORD_STRIDE = 64 / sizeof(uint64_t) };

int ps_transport_parse(const char *s, ps_transport_t *out)
{
    if (!strcmp(s, "messages")) *out = PS_MESSAGES;
    else if (!strcmp(s, "auto")) *out = PS_AUTO;
    else if (!strcmp(s, "shm")) *out = PS_AUTO;   /* the same (shm.h) */
    else return -1;
    return 0;
}

/* Each buffer starts on its own page (no two ranks write one cache line). */
static size_t stride_of(size_t floats) { return comm_window_bytes(floats * sizeof(float)); }

static size_t words_bytes(int npool) { return comm_window_bytes((size_t)npool * 64); }

static size_t slice_of(size_t nparams, int servers, int k)
{
    size_t lo, n;
    ps_shard_range(nparams, servers, k, &lo, &n);
    return n;
}

ps_shm_t *ps_shm_open(comm_t *c, int servers, int workers, size_t nparams, ps_transport_t mode)
{
    /* the simulated build passes messages only (shm.h) */
    if (sim_build() || mode == PS_MESSAGES || c->size != servers + workers) return NULL;
    MPI_Comm host;
    MPI_CHECK(c, MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &host));
    /* which world ranks share this host, and their ranks in it */
    int hn;
    MPI_Comm_size(host, &hn);
    MPI_Group wg, hg;
    MPI_Comm_group(c->world, &wg);
    MPI_Comm_group(host, &hg);
    int *all = xmalloc(sizeof(int) * (size_t)c->size), *at = xmalloc(sizeof(int) * (size_t)c->size);
    for (int i = 0; i < c->size; i++) all[i] = i;
    MPI_CHECK(c, MPI_Group_translate_ranks(wg, c->size, all, hg, at));
    MPI_Group_free(&wg);
    MPI_Group_free(&hg);
    int hs = 0, hw = 0;   /* shards and workers on this host */
    for (int i = 0; i < c->size; i++)
        if (at[i] != MPI_UNDEFINED) {
            if (i < servers) hs++;
            else hw++;
        }
    /* Every rank of this host decides alike: shared memory wherever a shard
     * has a worker on its host (auto and shm are the same). Auto once left
     * a shard with one worker to messages: the shard's update then reads the
     * slot the worker has just written on the other core, line by line, and
     * the worker copied the reply out only after the whole update; on a
     * 2-core AMD EPYC virtual machine that cost more than the message
     * path's two copies, which the transport pipelines over both cores
     * (isolated push+pull of the mlp 172 us, by message 143 us). Since the
     * worker copies the reply as the update proceeds (progress words), one
     * worker is faster through shared memory too: on a 2-core Xeon virtual
     * machine push+pull 146-153 us against 175-183 us by message, and the
     * shard's one-worker throughput 6400-6900 updates/s against 5500. */
    if (hs == 0 || hw == 0) {
        free(all); free(at);
        MPI_Comm_free(&host);
        return NULL;
    }
    ps_shm_t *m = xcalloc(1, sizeof *m);
    m->servers = servers;
    m->workers = workers;
    /* one buffer for the current parameters, one per worker of the host
     * still reading a reply, and one spare */
    m->npool = hw + 2;
    size_t mine = 0;
    if (c->rank < servers) {
        mine = (size_t)m->npool * stride_of(slice_of(nparams, servers, c->rank)) + words_bytes(m->npool);
    } else {
        for (int k = 0; k < servers; k++)
            if (at[k] != MPI_UNDEFINED) mine += stride_of(slice_of(nparams, servers, k));
    }
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void *base = NULL;
    MPI_CHECK(c, MPI_Win_allocate_shared((MPI_Aint)(mine ? mine : 1), 1, info, host, &base, &m->win));
    MPI_Info_free(&info);
    MPI_CHECK(c, MPI_Win_lock_all(MPI_MODE_NOCHECK, m->win));
    m->pool = xcalloc((size_t)servers * (size_t)m->npool, sizeof(float *));
    m->slot = xcalloc((size_t)workers * (size_t)servers, sizeof(float *));
    m->prog = xcalloc((size_t)servers, sizeof *m->prog);
    for (int i = 0; i < c->size; i++) {
        if (at[i] == MPI_UNDEFINED) continue;
        MPI_Aint size;
        int disp;
        char *b = NULL;
        MPI_CHECK(c, MPI_Win_shared_query(m->win, at[i], &size, &disp, &b));
        if (i < servers) {
            for (int j = 0; j < m->npool; j++)
                m->pool[(size_t)i * (size_t)m->npool + (size_t)j] = (float *)(b + (size_t)j * stride_of(slice_of(nparams, servers, i)));
            m->prog[i] = (_Atomic uint64_t *)(void *)(b + (size_t)m->npool * stride_of(slice_of(nparams, servers, i)));
        } else {
            size_t o = 0;
            for (int k = 0; k < servers; k++) {
                if (at[k] == MPI_UNDEFINED) continue;
                m->slot[(size_t)(i - servers) * (size_t)servers + (size_t)k] = (float *)(b + o);
                o += stride_of(slice_of(nparams, servers, k));
            }
        }
    }
    /* a shard's words start at tag 0 before any worker can read them */
    if (c->rank < servers)
        for (int j = 0; j < m->npool; j++) atomic_init(&m->prog[c->rank][(size_t)j * WORD_STRIDE], 0);
    MPI_CHECK(c, MPI_Win_sync(m->win));
    MPI_CHECK(c, MPI_Barrier(host));
    MPI_CHECK(c, MPI_Win_sync(m->win));
    comm_keep_window(c, m->win, host);
    free(all); free(at);
    return m;
}

void ps_shm_close(ps_shm_t *m)
{
    if (!m) return;
    free(m->pool);
    free(m->slot);
    free(m->prog);
    free(m);
}

int ps_shm_npool(const ps_shm_t *m) { return m ? m->npool : 0; }

float *ps_shm_pool(const ps_shm_t *m, int k, int i)
{
    if (!m || k < 0 || k >= m->servers || i < 0 || i >= m->npool) return NULL;
    return m->pool[(size_t)k * (size_t)m->npool + (size_t)i];
}

float *ps_shm_slot(const ps_shm_t *m, int p, int k)
{
    if (!m || p < 0 || p >= m->workers || k < 0 || k >= m->servers) return NULL;
    /* both ends must be on this rank's host: a slot of a worker elsewhere is NULL,
     * and a shard elsewhere has no pool here */
    if (!ps_shm_pool(m, k, 0)) return NULL;
    return m->slot[(size_t)p * (size_t)m->servers + (size_t)k];
}

void ps_shm_sync(const ps_shm_t *m)
{
    if (m) MPI_Win_sync(m->win);
}

uint64_t ps_shm_tag(int worker, int64_t clock)
{
    /* 20 bits of worker + 1 and 28 of clock: a buffer is rewritten long
     * before a worker's clock comes round again */
    return ((uint64_t)(worker + 1) & 0xfffff) << 28 | ((uint64_t)clock & 0xfffffff);
}

size_t ps_shm_chunk(size_t n)
{
    /* 32 KB: small enough that the worker starts copying early, large
     * enough that the words cost nothing; more chunks than the word can
     * count take longer ones */
    size_t ch = 8192, most = ((size_t)1 << PROG_BITS) - 1;
    if (n / ch >= most) ch = n / most + 1;
    return ch;
}

void ps_shm_progress_set(const ps_shm_t *m, int k, int i, uint64_t tag, size_t done)
{
    /* a full fence: the update's non-temporal stores are not ordered by a release */
    atomic_thread_fence(memory_order_seq_cst);
    atomic_store_explicit(&m->prog[k][(size_t)i * WORD_STRIDE], tag << PROG_BITS | (uint64_t)done, memory_order_release);
}

void ps_shm_progress_get(const ps_shm_t *m, int k, int i, uint64_t *tag, size_t *done)
{
    uint64_t v = atomic_load_explicit(&m->prog[k][(size_t)i * WORD_STRIDE], memory_order_acquire);
    *tag = v >> PROG_BITS;
    *done = (size_t)(v & (((uint64_t)1 << PROG_BITS) - 1));
}
