/* comm/mpi_defaults: the MPI settings dsgd makes before MPI_Init, as
 * environment variables the MPI reads when it starts; each one a user has
 * set is left as it is (mpi_defaults.h). */
#include "mpi_defaults.h"

#include <stdio.h>
#include <stdlib.h>

#include "../util/sim.h"

/* The data-parallel communicator that all-reduces is the world, or the
 * world over P model partitions (P divides it), so it is a power of two
 * whenever the world is. The choice is made before MPI starts (the variable
 * is read when libnbc loads) and said in c->allreduce for the start-up
 * lines and the config event.
 *
 * With the ring, and a paradigm whose large messages all meet posted
 * receives, messages up to TCP_EAGER go eagerly over TCP. Open MPI sends
 * the rest of a message above its TCP eager limit (64 KiB) only once the
 * receiver has posted its receive, and in the ring a rank posts round k+1's
 * only when its round k is over, so each of the 2(N - 1) rounds waited for
 * the neighbour's last one: eager, the mlp's bsp step on namespaced hosts
 * went 127 -> 108 ms at 3 hosts over 100 Mbit/s links, 14 -> 11 ms at 1
 * Gbit/s, 182 -> 135 ms at 5 hosts, 197 -> 163 ms at 6 (docs/simulation.md,
 * "The ring's rounds"). Rabenseifner's algorithm got slower (4 hosts 128 ->
 * 154 ms, 8 hosts 185 -> 243), and a shard's pushes would all come in at
 * once (asp, 4 workers: 724 -> 620 samples/s), so only then. The eager ring
 * beats Rabenseifner's at 4 hosts too (100 Mbit/s 124-129 against 127-135
 * ms, 1 Gbit/s 12-15 against 14-22) and at 8 (100 Mbit/s 165-177 against
 * 177-183, bucketed 153-157 against 160-168; 1 Gbit/s bucketed 18.6-19.7
 * against 25.4-29.5), so with eager sends Rabenseifner's is kept for powers
 * of two from 16, where the ring's 2(N - 1) latencies start to tell (the
 * namespaced clusters measured went to 8). A user's own eager limit wins. */
#define TCP_EAGER "1048576"
static void allreduce_choose(comm_t *c, int posted_receives)
{
    static const char *const names[] = {"its own choice", "ring", "binomial tree", "Rabenseifner's", "recursive doubling"};
    if (sim_build()) {
        snprintf(c->allreduce, sizeof c->allreduce, "simulated: SimGrid's blocking all-reduce (dsgd-sim --coll)");
        return;
    }
#ifdef OMPI_MAJOR_VERSION
    const char *var = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
    const char *mine = getenv(var);
    long a = mine ? strtol(mine, NULL, 10) : 1;
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    const long wn = ws ? strtol(ws, NULL, 10) : 1;
    const int can_eager =
        posted_receives && !getenv("OMPI_MCA_btl_tcp_eager_limit") && !getenv("OMPI_MCA_btl_tcp_max_send_size");
    const int rab = (wn >= 16 || (wn >= 4 && !can_eager)) && (wn & (wn - 1)) == 0;
    char why[48];
    if (mine) {
        snprintf(why, sizeof why, "%s=%s", var, mine);
    } else {
        a = rab ? 3 : 1;
        setenv(var, rab ? "3" : "1", 1);
        snprintf(why, sizeof why, "%s %ld", rab ? "a power-of-two world of" : "a world of", wn);
    }
    const char *eager = "";
    if (a == 1 && wn > 2 && can_eager) {
        setenv("OMPI_MCA_btl_tcp_eager_limit", TCP_EAGER, 1);
        setenv("OMPI_MCA_btl_tcp_max_send_size", TCP_EAGER, 1);
        eager = "; eager over TCP to 1 MiB";
    }
    snprintf(c->allreduce, sizeof c->allreduce, "Open MPI libnbc %s (%s)%s", a >= 0 && a <= 4 ? names[a] : "algorithm",
             why, eager);
#else
    /* MPICH (4.0, over UCX): its own choice of nonblocking all-reduce took
     * 281 ms a step of the mlp on 3 namespaced hosts over 100 Mbit/s links
     * (2.8x the ring's bandwidth cost) and 226 ms on 4; its ring 127 and
     * 192, and with UCX's rendezvous above 1 MiB instead of its default
     * (the ring's rounds wait on it as Open MPI's do) 110 and 126
     * (docs/simulation.md, "The ring's rounds"). A user's own settings win. */
    (void)names;
    const char *var = "MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM";
    const char *mine = getenv(var);
    const char *eager = "";
    if (posted_receives && !getenv("UCX_RNDV_THRESH")) {
        setenv("UCX_RNDV_THRESH", "1m", 1);
        eager = "; eager over UCX to 1 MiB";
    }
    if (mine) {
        snprintf(c->allreduce, sizeof c->allreduce, "MPICH %s (%s=%s)%s", mine, var, mine, eager);
    } else {
        setenv(var, "tsp_ring", 1);
        snprintf(c->allreduce, sizeof c->allreduce, "MPICH ring (tsp_ring)%s", eager);
    }
#endif
}

void comm_mpi_defaults(comm_t *c, int posted_receives)
{
    /* bsp's gradients go through MPI_Iallreduce, which Open MPI runs in its
     * libnbc component. Its own choice is 1.6x slower than the blocking
     * all-reduce for gradient-sized vectors on 2 ranks (make bench), and
     * 2.3x slower than a ring on 4 hosts; the ring is within 3% of the
     * blocking one. With a power-of-two world of 4 or more, Rabenseifner's
     * reduce-scatter and allgather (2 log2 N rounds, not the ring's
     * 2(N-1), each waiting for the one before) is faster than the ring
     * sent by rendezvous: 4 namespaced hosts on 100 Mbit/s links, the mlp's
     * 0.94 MB (113 ms of bandwidth) 162 -> 125 ms a step; 8 hosts 198 ->
     * 167-174 ms; 8 hosts at 1 Gbit/s 30-41 -> 23-24 ms. Elsewhere it is
     * worse (3 hosts: 129 -> 236 ms), so it is chosen only there, and at 4
     * only when the ring cannot send eagerly (allreduce_choose above;
     * docs/simulation.md, "Real links"). A user's own setting wins. */
    allreduce_choose(c, posted_receives);
    /* Open MPI's shared-memory transport reads large messages straight from
     * the sender's memory (CMA); when the sender has died that read fails
     * inside MPI and takes the receiver down with it. Copying through the
     * shared segment instead lets a parameter-server shard time out on a
     * dead worker's half-sent message and evict it. */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    /* Without it a large message goes through 32 KB fragments, and by
     * default the sender keeps only 3 of them in flight, so it must be
     * scheduled again every 96 KB. Whenever ranks share cores, and on this
     * 2-core machine even with 2 ranks, a transfer then waits on the
     * scheduler: a bare send/receive of the mlp's 0.94 MB took 215-245 us,
     * or 89 us when lucky. With 64 in flight the sender hands the whole
     * message over at once: 75-82 us every time, push+pull 240-280 us ->
     * 98-115 us, and 5-rank asp on 2 cores 64k -> 73k samples/s (medians of
     * 8, spread 61-80k -> 70-77k). */
    setenv("OMPI_MCA_pml_ob1_send_pipeline_depth", "64", 0);
    /* Started without a launcher (one process: --sync none, dsgd eval), Open
     * MPI forks a runtime daemon for the lone process, which a program that
     * never spawns processes does not need: isolated, a run starts 0.11 s
     * sooner (0.39 -> 0.27 s for a 1-step run here). No effect under mpirun. */
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
}
