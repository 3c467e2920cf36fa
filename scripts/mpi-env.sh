# The MPI launcher for a dsgd build, Open MPI or MPICH (sourced, not run:
# by the tests, scripts/demo and experiments/).
#   . scripts/mpi-env.sh; mpi_env BUILD_DIR
# sets
#   MPI_IMPL      openmpi | mpich: the library BUILD_DIR/dsgd is linked with
#                 (its `dsgd version` line "mpi: ...")
#   MPIRUN        the launcher: Open MPI's `mpirun -q`, MPICH's `mpiexec`
#   MPI_RECOVER   keep the other processes running when one exits (Open MPI
#                 --enable-recovery, MPICH -disable-auto-cleanup)
#   MPI_TCP       make ranks on one machine talk over TCP instead of shared
#                 memory (Open MPI: the ob1 PML with the tcp BTL; MPICH built
#                 on UCX: UCX's tcp transport, MPICH's shared memory off)
#   MPI_RANK_VAR  the variable each launched process finds its rank in
# and lets both run as root and start more processes than cores, and Open
# MPI start without the PML it does not use.

# Open MPI refuses root unless told so, and more ranks than cores unless
# oversubscription is allowed; MPICH's mpiexec does both as it is.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI opens its cm PML in every MPI_Init only to pick ob1 in the end,
# and cm loads the PSM and PSM2 libraries (True Scale, Omni-Path), about
# 0.1 s each without that hardware: leaving cm out (and ucx, as Debian's own
# configuration does) starts 2 ranks in 0.11 s instead of 0.32, and
# tests/resume.sh took 32 s instead of 50. A value you export wins.
export OMPI_MCA_pml=${OMPI_MCA_pml-^ucx,cm}

# mpi_impl DSGD: openmpi or mpich, from the binary's own report
mpi_impl() {
    local line
    line=$("$1" version 2>/dev/null | grep '^mpi:') || true
    case "$line" in
        *MPICH*) echo mpich ;;
        *) echo openmpi ;;
    esac
}

# first_cmd NAME...: the first of the commands that exists
first_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" > /dev/null 2>&1 && { echo "$c"; return; }
    done
    echo "$1"
}

mpi_env() {
    MPI_IMPL=$(mpi_impl "${1:-build}/dsgd")
    if [ "$MPI_IMPL" = mpich ]; then
        MPIRUN=("$(first_cmd mpiexec.mpich mpiexec.hydra mpiexec)")
        MPI_RECOVER=(-disable-auto-cleanup)
        # MPICH 4.0 over UCX 1.13's tcp: in MPI_Finalize a rank flushes each
        # endpoint and waits for the peer's acknowledgement, which a peer past
        # its own flush may never send, so the rank waits forever (UCX's tcp
        # flush needs the peer's progress; MPICH 4.2 adds a barrier first).
        # dsgd enters MPI_Finalize with a barrier, which makes it rare; no
        # setting removes it (UCX_TCP_PUT_ENABLE=n, UCX_NET_DEVICES=lo do not).
        MPI_TCP=(-genv UCX_TLS tcp,self -genv MPIR_CVAR_NOLOCAL 1)
        MPI_RANK_VAR=PMI_RANK
    else
        MPIRUN=("$(first_cmd mpirun.openmpi mpirun)" -q)
        MPI_RECOVER=(--enable-recovery)
        MPI_TCP=(--mca pml ob1 --mca btl tcp,self)
        MPI_RANK_VAR=OMPI_COMM_WORLD_RANK
    fi
}
