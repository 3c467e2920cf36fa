# Helpers shared by the shell test suites (sourced, not run).
# Open MPI: allow root (CI runs as root) and more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun -q)
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
# json_field FILE EVENT FIELD: the field of the last record with that event
json_field() {
    python3 -c 'import json,sys
v=None
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["event"]==sys.argv[2]: v=r[sys.argv[3]]
print(v)' "$@"
}
# summary NAME: the closing line tests/run.sh reads; exit status = any failure
summary() { echo "$1: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
