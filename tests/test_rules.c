/* The paradigms' pure rules against values worked by hand: SelSync's
 * smoothing, FedAvg's sample and weights, Sandblaster's portion picking,
 * gossip's partition rule. */
#include <string.h>

#include "sync/rules.h"
#include "sync/sandblaster/sb_coord.h"
#include "test.h"

static void test_selsync_ewma(void)
{
    double v[3] = { 0 };
    CHECK(selsync_ewma(v, 0, 3, 0.5) == 0, "an empty window smooths to 0");
    /* pushed 1, 2, 3, 4 into 3 slots: the ring holds 4 2 3, newest 4 */
    v[0] = 4; v[1] = 2; v[2] = 3;
    /* weights 0.5, 0.25, 0.125 for 4, 3, 2: 3.0 / 0.875 */
    CHECK_NEAR(selsync_ewma(v, 4, 3, 0.5), 3.0 / 0.875, 1e-12, "EWMA of the last 3 of 1..4, a = 0.5");
    CHECK_NEAR(selsync_ewma(v, 4, 3, 0.0), 3.0, 1e-12, "a = 0: the plain mean of the last W");
    /* two values pushed so far (1 then 2 in slots 0, 1): weights 0.9, 0.81 */
    double u[3] = { 1, 2, 0 };
    CHECK_NEAR(selsync_ewma(u, 2, 3, 0.1), (0.9 * 2 + 0.81 * 1) / (0.9 + 0.81), 1e-12, "a window not yet full");
}

static void test_fedavg(void)
{
    const int N = 4;
    const double n_k[4] = { 100, 300, 200, 400 };
    int chosen[4];
    fedavg_sample(7, 0, N, 1.0, chosen);
    CHECK(chosen[0] && chosen[1] && chosen[2] && chosen[3], "fraction 1 samples every worker");
    CHECK_NEAR(fedavg_weight(n_k, chosen, N, 1), 0.3, 1e-7, "weight n_k / n");
    int seen[4] = { 0 }, differ = 0, first[4];
    for (long round = 0; round < 40; round++) {
        fedavg_sample(7, round, N, 0.5, chosen);
        int m = 0;
        float wsum = 0;
        for (int k = 0; k < N; k++) { m += chosen[k]; seen[k] |= chosen[k]; wsum += fedavg_weight(n_k, chosen, N, k); }
        CHECK(m == 2, "fraction 0.5 of 4 samples %d workers in round %ld", m, round);
        CHECK_NEAR(wsum, 1.0, 1e-6, "the sampled weights sum to 1");
        for (int k = 0; k < N; k++)
            if (!chosen[k]) CHECK(fedavg_weight(n_k, chosen, N, k) == 0, "an unsampled worker weighs 0");
        int again[4];
        fedavg_sample(7, round, N, 0.5, again);
        CHECK(!memcmp(again, chosen, sizeof again), "the same seed and round sample the same workers (every rank agrees)");
        if (round == 0) memcpy(first, chosen, sizeof first);
        else differ |= memcmp(first, chosen, sizeof first) != 0;
    }
    CHECK(seen[0] && seen[1] && seen[2] && seen[3], "every worker is sampled in some round");
    CHECK(differ, "the sample changes from round to round");
    fedavg_sample(7, 3, N, 0.01, chosen);
    CHECK(chosen[0] + chosen[1] + chosen[2] + chosen[3] == 1, "a tiny fraction still samples one worker");
}

static void test_sandblaster_pick(void)
{
    unsigned char state[5] = { KEPT, ISSUED, PENDING, ISSUED, PENDING };
    int copies[5] = { 0, 1, 0, 1, 0 };
    double issued_at[5] = { 0, 5.0, 0, 3.0, 0 };
    sb_coord_t co;
    memset(&co, 0, sizeof co);
    co.P = 5;
    co.state = state;
    co.copies = copies;
    co.issued_at = issued_at;
    int dup = -1;
    CHECK(sb_coord_pick(&co, &dup) == 2 && dup == 0, "the lowest pending portion first");
    CHECK(co.next == 2, "the search resumes there");
    state[2] = ISSUED; copies[2] = 1; issued_at[2] = 7.0;
    CHECK(sb_coord_pick(&co, &dup) == 4 && dup == 0, "then the next pending one");
    state[4] = ISSUED; copies[4] = 1; issued_at[4] = 8.0;
    CHECK(sb_coord_pick(&co, &dup) == 3 && dup == 1, "none pending: a backup copy of the portion issued first");
    copies[3] = 2;
    CHECK(sb_coord_pick(&co, &dup) == 1 && dup == 1, "a portion already computed twice gets no third copy");
    co.no_backup = 1;
    CHECK(sb_coord_pick(&co, &dup) == -1, "without backup tasks nothing is handed out");
    co.no_backup = 0;
    for (int p = 0; p < 5; p++) { state[p] = KEPT; copies[p] = 0; }
    CHECK(sb_coord_pick(&co, &dup) == -1 && dup == 0, "every portion kept: nothing left");
}

static void test_gossip_minority(void)
{
    CHECK(!gossip_minority(4, 4, 1), "all 4 alive: go on");
    CHECK(!gossip_minority(4, 3, 0), "3 of 4 without rank 0 (the lead died): go on, a majority");
    CHECK(gossip_minority(4, 1, 0), "1 of 4 (a host cut off): stop");
    CHECK(gossip_minority(4, 2, 0), "2 of 4 without rank 0: stop");
    CHECK(!gossip_minority(4, 2, 1), "2 of 4 with rank 0: go on");
    CHECK(!gossip_minority(2, 1, 1), "rank 0 of 2 whose peer is gone: go on");
    CHECK(gossip_minority(2, 1, 0), "rank 1 of 2 whose rank 0 is gone: stop");
    CHECK(!gossip_minority(3, 2, 0), "2 of 3: go on");
    CHECK(gossip_minority(5, 2, 1), "2 of 5, rank 0 or not: stop");
    /* of any split into two non-empty sides, exactly one goes on */
    for (int n = 2; n <= 9; n++)
        for (int a = 1; a < n; a++) {
            int on_a = !gossip_minority(n, a, 1), on_b = !gossip_minority(n, n - a, 0);
            CHECK(on_a + on_b == 1, "n %d split %d (with rank 0) | %d: %d and %d go on", n, a, n - a, on_a, on_b);
        }
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_selsync_ewma);
    RUN(test_fedavg);
    RUN(test_sandblaster_pick);
    RUN(test_gossip_minority);
    return TEST_END("test_rules");
}
