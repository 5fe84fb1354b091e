#!/usr/bin/env bash
# Everything a GPU machine can show, in one go, without nox (for a lent box whose image
# already has torch + triton): the op report, the GPU registry jobs, the e2e CLI with and
# without speculation (eager and CUDA-graph verify), the benchmarks and renorm profiles, and -- with 2+ GPUs --
# the NCCL multi-rank equality check. Output lands under ${OUT:-gpu-report}/.
set -uo pipefail
out=${OUT:-gpu-report}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
py=${PYTHON:-python3}
$py -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0), 'x', torch.cuda.device_count())"
$py -m impl.testing.op_report 2>&1 | tee "$out/op_report.txt"
for job in per-commit/h200-1/kernels-cuda per-commit/h200-1/components per-commit/h200-1/components-gpu per-commit/h200-1/e2e-gpu; do
  $py -m ci.runner.run_suite --job "$job" 2>&1 | grep -E "^### |^\| [0-9]|FAILED|Error" | tee -a "$out/jobs.txt"
done
for args in "--algo none" "--algo dspark --draft noisy:0.3" "--algo dspark --draft noisy:0.3 --graph" "--algo mtp --draft noisy:0.3" "--algo dspark --draft oracle --graph"; do
  echo "== e2e dsv4 batch 8: $args" | tee -a "$out/e2e.txt"
  $py -m impl.e2e --preset dsv4 --gamma 5 --batch 8 --steps 48 $args 2>&1 | grep -vE "^  req " | tee -a "$out/e2e.txt"
done
$py -m impl.bench --out "$out/bench" 2>&1 | grep -v "^  measured" | tee "$out/bench.txt"
# Where renorm time goes: each launch's device time (256 rows and 1 row), and one full-row pass per binning.
for rows in 256 1; do $py -m impl.bench.renorm_kernel_profile --rows $rows 2>&1 | grep -v Warn | tee -a "$out/renorm_profile.txt"; done
$py -m impl.bench.renorm_pass_probe --out "$out/bench" 2>&1 | tee "$out/renorm_pass_probe.txt"
if [ "$($py -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  $py -m impl.distributed.check_nccl --world-size 2 --preset dsv4 2>&1 | tee "$out/nccl.txt"
fi
