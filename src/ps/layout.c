/* Where a parameter server's pieces lie: each shard's slice of the flat
 * vector, and a message of a header and floats as one MPI datatype (client
 * and shard alike). */
#include "../util/util.h"
#include "ps.h"

void ps_shard_range(size_t nparams, int servers, int k, size_t *lo, size_t *n)
{
    *lo = nparams * (size_t)k / (size_t)servers;
    *n = nparams * (size_t)(k + 1) / (size_t)servers - *lo;
}

MPI_Datatype ps_msg_type(const ps_hdr_t *h, const float *data, size_t cnt)
{
    int len[2] = { (int)sizeof *h, (int)(cnt * sizeof(float)) };
    MPI_Aint at[2];
    MPI_Datatype types[2] = { MPI_BYTE, MPI_BYTE }, t;
    MPI_Get_address(h, &at[0]);
    MPI_Get_address(data, &at[1]);
    if (MPI_Type_create_struct(2, len, at, types, &t) != MPI_SUCCESS || MPI_Type_commit(&t) != MPI_SUCCESS)
        die("cannot build the message datatype of %zu floats", cnt);
    return t;
}
