#!/bin/bash
# Call 2: batch-1 renorm A (v7 defaults) vs B (top-k finish path at every batch), alternating, then the
# per-commit/h200-1 jobs on B in parallel, CLI checks; everything tarred into one file.
set -u
ROOT=$(pwd); R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --target /tmp/site .peer/whl/*.whl || exit 1
nvidia-smi > $R/gpu.txt 2>&1
i=0
for v in A B A B; do
  i=$((i+1)); cd $ROOT/.s5$v
  OUT=$R/peer-$i-$v PYTHONPATH=/tmp/site:$ROOT/.peer/site timeout 120 python3 $ROOT/.peer/peer_bench.py --project . \
    --fi-build prebuilt --batches 1 --graph-batches 1 --skip vllm --param-form tensor > $R/peer-$i-$v.log 2>&1
  echo "peer $i $v rc=$?"
  timeout 60 python3 $ROOT/.s5run/host_probe.py > $R/host-$i-$v.txt 2>&1; echo "host $i $v rc=$?"
  grep -E "project\[|flashinfer\[" $R/peer-$i-$v/peer_table.txt | head -8
  head -3 $R/host-$i-$v.txt
done
cd $ROOT/.s5B
export PYTEST_ADDOPTS="-p no:cacheprovider"
for job in foundation components components-gpu e2e-gpu kernels kernels-cuda kernels-properties; do
  timeout 320 python3 -m ci.run_suite --job per-commit/h200-1/$job --results $R/ci-results/$job > $R/job-$job.log 2>&1 &
done
( timeout 300 python3 -m impl.testing.op_report > $R/op-report.txt 2>&1; echo "op_report rc=$?" >> $R/op-report.txt ) &
( DSPARK_KERNEL_BACKEND=triton-interpret timeout 200 python3 -m impl.e2e --kernel-backend triton --steps 4 > $R/e2e-cli.txt 2>&1;
  echo "e2e rc=$?" >> $R/e2e-cli.txt ) &
( timeout 300 python3 -m impl.bench --smoke --only scatter,norm_rope,verify_step --out $R/bench-smoke > $R/bench-smoke.txt 2>&1;
  echo "bench rc=$?" >> $R/bench-smoke.txt ) &
wait
for job in foundation components components-gpu e2e-gpu kernels kernels-cuda kernels-properties; do
  echo "== $job: $(grep -E '^(jobs|tests):' $R/job-$job.log | tr '\n' ' ')"; grep -E "attestation|FAIL" $R/job-$job.log | head -3
done
tail -2 $R/op-report.txt; tail -3 $R/e2e-cli.txt; tail -3 $R/bench-smoke.txt
tar czf $OUT/results.tgz -C $OUT r
