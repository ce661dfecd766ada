#!/usr/bin/env bash
# Everything issue 30 measures on one GPU, one command a part (each under 4 minutes on an H100/H200):
#
#   bash benchmarks/gpu_check.sh PART [--tiny]      PART = speed | train | sweep | sync | members | profile | all, or a list: sync,speed
#
#   speed  framework overhead (ablate's real step / a bare PyTorch loop, quickstart), and model-only throughput with
#          MFU against nn.Transformer and MarianMT for base and big (bf16, fused Adam; big also compiled)
#   train  `ablate train` of multi30k-small (bf16, 150 s): tokens/s, MFU, validation share, GPU utilisation by
#          nvidia-smi; and of big on Multi30k with validation excluded: MFU
#   sweep  a packed sweep (trials_per_gpu N, 2N quickstart-size trials) against one trial at a time (3 trials, the
#          median from the second on), same sweep file, warm tokenizer cache: trials per hour and their ratio
#   sync   the gpu-marked test: 20 training steps under torch.cuda.set_sync_debug_mode
#   profile  where a step's time goes (benchmarks/profile_step.py: cProfile and torch.profiler, 10 steps after 20) for one
#          table3-gpu run and for 8 of its seeds as members: host and device milliseconds a step, the tables in the logs
#   members  the table3-gpu base row's seeds as one member model (K = 8, 16) against the same runs one after another
#          and one run alone (benchmarks/members.py, bf16): per-member tokens/s, their ratio, MFU, peak memory; against
#          the row's runs packed N processes at once as trials_per_gpu auto packs them (benchmarks/packed_runs.py); then a
#          quickstart row's 8 seeds as members through `ablate sweep` (trials/h; the ratio when the sweep part ran too)
#
# Logs, one folder a part, are packed after each part into $OUT/gpu-check.tar.gz (default OUT: gpu-check-out/; with
# `all`, a run cut short still returns what finished), beside $OUT/summary.txt, the headline figures. --tiny rehearses
# every part on a CPU at toy sizes (tests/integration/test_gpu_check.py runs it). On the GPU machine, from a
# checkout prepared by ../shared/gpu/prepare.sh: bash .device/on-device.sh bash benchmarks/gpu_check.sh all
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
part=${1:-all}
tiny=0
[[ "${2:-}" == "--tiny" ]] && tiny=1
[[ $part == all ]] && part=sync,speed,train,sweep,members,profile
IFS=, read -ra parts <<<"$part"  # a comma list runs those parts in order: several fit one device call
for p in "${parts[@]}"; do
  case $p in
    speed | train | sweep | sync | members | profile) ;;
    *)
      echo "usage: bash benchmarks/gpu_check.sh speed|train|sweep|sync|members|profile|all|PART,PART,... [--tiny]" >&2
      exit 2
      ;;
  esac
done
out=$(mkdir -p "${OUT:-gpu-check-out}" && cd "${OUT:-gpu-check-out}" && pwd)
work=$(mktemp -d /tmp/gpu-check.XXXXXX)
logs=$work/logs  # every log lands here; $OUT gets two files only, the tarball and summary.txt (a device call returns 8)
mkdir -p "$logs"
trap 'rm -rf "$work"' EXIT
export PYTHONUNBUFFERED=1 WANDB_MODE=${WANDB_MODE:-offline} WANDB_SILENT=true
export ABLATE_CACHE=${ABLATE_CACHE:-$work/cache}  # one tokenizer cache for every run of this check
if command -v ablate >/dev/null; then ablate=(ablate); else ablate=(python -m ablate.cli); fi
if ((tiny)); then device=cpu precision=fp32 lit_precision=32 n_pack=2; else device=cuda precision=bf16 lit_precision=bf16-mixed n_pack=${TRIALS_PER_GPU:-8}; fi
PART_LIMIT=${PART_LIMIT:-235}  # seconds a part may take; a command left unfinished is cut, its log kept

say() { echo "$*" | tee -a "$logs/summary.txt"; }

pack() {  # the finished parts' folders and the summary, into one tarball
  tar -czf "$out/gpu-check.tar.gz.tmp" -C "$logs" . && mv "$out/gpu-check.tar.gz.tmp" "$out/gpu-check.tar.gz"
  cp "$logs/summary.txt" "$out/summary.txt"
}

deadline() { echo $(($(date +%s) + PART_LIMIT)); }
left() { local s=$(($1 - $(date +%s))); echo $((s > 5 ? s : 5)); }

run_logged() {  # run_logged LOG DEADLINE CMD...: the command's output to LOG, cut at the deadline
  local log=$1 end=$2
  shift 2
  echo "\$ $*" >>"$log"
  timeout --signal=INT --kill-after=15 "$(left "$end")" "$@" >>"$log" 2>&1
  local rc=$?
  [[ $rc -ne 0 ]] && echo "[exit $rc]" >>"$log"
  return $rc
}

machine() {
  python - <<'EOF'
import platform, torch
name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu"
print(f"card: {name}; torch {torch.__version__}; CUDA {torch.version.cuda}; python {platform.python_version()}")
EOF
}

part_speed() {
  local dir=$logs/speed end
  end=$(deadline)
  mkdir -p "$dir"
  local steps=(--steps 20 --warmup 5 --rounds 3) osteps=(--steps 200 --warmup 50 --rounds 3)  # rounds alternate which arm runs first
  ((tiny)) && steps=(--steps 2 --warmup 1 --rounds 1 --memory-steps 1) osteps=(--steps 5 --warmup 2)
  run_logged "$dir/overhead.log" "$end" python benchmarks/step_overhead.py --device "$device" --set "train.precision=$lit_precision" \
    "${osteps[@]}" --json "$dir/overhead.json"
  local data=(data.dataset=multi30k data.vocab_size=8000 data.max_tokens=16384)
  ((tiny)) && data=(data.dataset=multi30k data.vocab_size=2000 data.max_len=64 data.max_tokens=256 model.enc_layers=1 model.dec_layers=1 model.d_model=64
    model.d_ff=128 model.heads=4)
  run_logged "$dir/base.log" "$end" python benchmarks/train_throughput.py --device "$device" --precision "$precision" --fused \
    --config experiments/base.yaml --set "${data[@]}" "${steps[@]}" --json "$dir/base.json"
  run_logged "$dir/big.log" "$end" python benchmarks/train_throughput.py --device "$device" --precision "$precision" --fused \
    --config experiments/base.yaml experiments/big.yaml --set "${data[@]}" "${steps[@]}" --json "$dir/big.json"
  # compiled: the faster of compiled and eager is each model's figure (inductor's CPU build is too slow for --tiny)
  ((tiny)) || run_logged "$dir/big-compiled.log" "$end" python benchmarks/train_throughput.py --device "$device" --precision "$precision" \
    --fused --compile --config experiments/base.yaml experiments/big.yaml --set "${data[@]}" "${steps[@]}" --json "$dir/big-compiled.json"
  python benchmarks/gpu_check_report.py speed "$dir" | tee -a "$logs/summary.txt"
}

part_train() {
  local dir=$logs/train end smi=""
  end=$(deadline)
  mkdir -p "$dir"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 >"$dir/nvidia-smi.csv" 2>&1 &
    smi=$!
  fi
  local small=(experiments/multi30k-small.yaml "train.precision=$lit_precision" train.max_time=150)
  ((tiny)) && small=(experiments/quickstart.yaml train.max_steps=6 train.val_every_steps=3 train.val_max_sentences=8 data.max_tokens=512)
  run_logged "$dir/small.log" "$end" "${ablate[@]}" train "${small[@]}" logging.progress=false "out_dir=$work/small"
  [[ -n $smi ]] && kill "$smi" 2>/dev/null
  cp "$work/small/summary.json" "$dir/small-summary.json" 2>/dev/null
  # big on Multi30k: what ablate train reaches on a big model, validation excluded from the clock by SpeedCallback
  local big=(experiments/base.yaml experiments/big.yaml data.dataset=multi30k data.vocab_size=8000 "train.precision=$lit_precision"
    train.max_time=45 train.val_every_steps=100000 train.val_bleu=false train.eval_record=false)
  ((tiny)) && big=(experiments/quickstart.yaml train.max_steps=4 train.val_every_steps=100000 train.val_bleu=false data.max_tokens=512)
  run_logged "$dir/big.log" "$end" "${ablate[@]}" train "${big[@]}" logging.progress=false "out_dir=$work/big"
  cp "$work/big/summary.json" "$dir/big-summary.json" 2>/dev/null
  python benchmarks/gpu_check_report.py train "$dir" | tee -a "$logs/summary.txt"
}

sweep_file() {  # sweep_file NAME SEEDS EXTRA: one sweep file, the same rows and overrides for both arms
  cat <<EOF
name: $1
base: $root/experiments/quickstart.yaml
objective: {metric: val/bleu, direction: maximize}
basis: {stop: steps, weights: final}
variants:
  base: {}
seeds: [$2]
overrides: {train.precision: $lit_precision, train.max_steps: $steps, train.val_every_steps: $steps, train.num_threads: 1$tiny_overrides}
out_dir: $work/$1
$3
EOF
}

part_sweep() {
  local dir=$logs/sweep end steps=150 tiny_overrides="" sequential="1, 2, 3"
  end=$(deadline)
  ((tiny)) && steps=4 tiny_overrides=", train.val_max_sentences: 8, logging.wandb: false" sequential="1, 2"
  mkdir -p "$dir"
  # warm the tokenizer cache, as a study past its first trial has it
  run_logged "$dir/warm.log" "$end" "${ablate[@]}" train experiments/quickstart.yaml train.max_steps=1 train.val_every_steps=1 \
    train.val_max_sentences=2 logging.wandb=false logging.progress=false "out_dir=$work/warm"
  sweep_file gpu-check-sequential "$sequential" "workers: 1" >"$dir/sequential.yaml"
  sweep_file gpu-check-packed "$(seq -s ', ' 1 $((2 * n_pack)))" "trials_per_gpu: $n_pack" >"$dir/packed.yaml"
  run_logged "$dir/sequential.log" "$end" "${ablate[@]}" sweep "$dir/sequential.yaml" --workers 1
  local packed=("$dir/packed.yaml")
  ((tiny)) && packed+=(--workers "$n_pack")  # on a CPU trials_per_gpu is ignored: as many workers instead
  run_logged "$dir/packed.log" "$end" "${ablate[@]}" sweep "${packed[@]}"
  python benchmarks/gpu_check_report.py sweep "$dir" "$work/gpu-check-sequential/study.db" "$work/gpu-check-packed/study.db" \
    | tee -a "$logs/summary.txt"
}

part_sync() {
  local dir=$logs/sync end
  end=$(deadline)
  mkdir -p "$dir"
  local marks=(-m gpu)
  ((tiny)) && marks=(-m slow)  # the CPU form of the same check (a host-read detector)
  run_logged "$dir/pytest.log" "$end" python -m pytest -q -rA -p no:cacheprovider "${marks[@]}" tests/unit/run/test_host_sync.py
  say "sync: $(tail -1 "$dir/pytest.log")"
}

part_profile() {
  local dir=$logs/profile end
  end=$(deadline)
  mkdir -p "$dir"
  local args=(--config experiments/multi30k-table3-gpu.yaml --set "train.precision=$lit_precision" --warmup 20 --steps 10)
  ((tiny)) && args=(--config experiments/quickstart.yaml --set data.max_tokens=256 logging.wandb=false --warmup 2 --steps 2)
  for k in 1 8; do
    ((tiny)) && ((k > 1)) && k=2
    run_logged "$dir/members-$k.log" "$end" python benchmarks/profile_step.py --device "$device" --members "$k" "${args[@]}" \
      --out "$dir/members-$k"
    say "profile: $(grep -h '^per step' "$dir/members-$k.log" || echo "members $k: missing")"
  done
}

part_members() {
  local dir=$logs/members end
  end=$(deadline)
  mkdir -p "$dir"
  local sizes=(8 16) args=(--config experiments/multi30k-table3-gpu.yaml --steps 20 --rounds 3 --threads 4)
  local packed=(--processes auto --config experiments/multi30k-table3-gpu.yaml --steps 20 --rounds 3)
  ((tiny)) && sizes=(2) args=(--config experiments/quickstart.yaml --steps 2 --rounds 1 --memory-steps 1 data.max_tokens=256)
  ((tiny)) && packed=(--processes 2 --config experiments/quickstart.yaml --steps 2 --rounds 1 data.max_tokens=256)
  for k in "${sizes[@]}"; do
    local memory=()
    [[ -f $dir/packed.log ]] && memory=(--no-memory)  # peak memory once, at the first K: the part's minutes go to the gates
    run_logged "$dir/members-$k.log" "$end" python benchmarks/members.py --members "$k" --device "$device" --precision "$precision" \
      "${args[@]}" "${memory[@]}" --json "$dir/members-$k.json"
    # after the first K: the same row's runs packed as trials_per_gpu auto packs them, N processes at once (the >= 2x gate)
    [[ -f $dir/packed.log ]] || run_logged "$dir/packed.log" "$end" python benchmarks/packed_runs.py --device "$device" \
      --precision "$precision" "${packed[@]}" --json "$dir/packed.json"
  done
  python benchmarks/gpu_check_report.py members "$dir" | tee -a "$logs/summary.txt"
  # End to end: a row's 8 seeds as one member model through `ablate sweep` (each member its own trial, run directory and
  # final decoding); against the sweep part's one-at-a-time study when it ran in this call (`gpu_check.sh sweep,members`).
  local steps=150 tiny_overrides="" seeds="1, 2, 3, 4, 5, 6, 7, 8"
  ((tiny)) && steps=4 tiny_overrides=", train.val_max_sentences: 8, logging.wandb: false" seeds="1, 2"
  sweep_file gpu-check-members "$seeds" "members: 8" >"$dir/members-sweep.yaml"
  run_logged "$dir/members-sweep.log" "$end" "${ablate[@]}" sweep "$dir/members-sweep.yaml"
  python benchmarks/gpu_check_report.py members-sweep "$dir" "$work/gpu-check-sequential/study.db" "$work/gpu-check-members/study.db" \
    | tee -a "$logs/summary.txt"
  python benchmarks/gpu_check_report.py members-vs-packed "$dir" "$work/gpu-check-members/study.db" "$work/gpu-check-packed/study.db" \
    | tee -a "$logs/summary.txt"
}

say "gpu check $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'): $(machine)"
for p in "${parts[@]}"; do
  started=$(date +%s)
  "part_$p"
  say "$p: $(($(date +%s) - started)) s"
  pack
done
echo "logs: $out/gpu-check.tar.gz"
