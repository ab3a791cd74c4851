#!/usr/bin/env bash
# Reproduce docs/results.md: Spot-the-diff Tables 4 and 5 (and the §5 alignment study) on the
# synthetic benchmark, every model trained on the CPU.
#
#   scripts/reproduce_results.sh                 # every run of RUNS, end to end (~1 h on 2 CPU cores)
#   WORK=/tmp/res EPOCHS=8 scripts/reproduce_results.sh
#   RUNS="nn-paper capt-paper ddla-uniform" JOBS=1 REPETITION_GUARD=0 scripts/reproduce_results.sh
#
# A *run* is a model with settings (the table below): the paper's baselines (issue 12) next to
# the stronger variants this project first had, so both orderings can be read off one table.
#
#   run                    model          settings beyond training/<model>-synth.yaml
#   nn-paper               nn             pair_difference: false (the paper's [F1, F2]); selection: paper (a random sentence)
#   nn-typical             nn             selection: typical (the consensus sentence; the first release's nn)
#   nn-multi-paper         nn-multi       pair_difference: false
#   nn-multi               nn-multi       (with the |F2 - F1| channel)
#   capt-paper             capt           pair_difference: false
#   capt                   capt           (with the F2 - F1 channel)
#   capt-masked            capt-masked
#   capt-multi             capt-multi
#   ddla-uniform           ddla-uniform   selection: paper (a random cluster for one sentence)
#   ddla-uniform-largest   ddla-uniform   selection: largest; the weights of ddla-uniform, not retrained
#   ddla                   ddla
#   nn                     nn             the code's defaults (selection: paper, with the difference)
#
# Environment: RUNS (default: all but `nn`), WORK, DATA, EPOCHS (12; per run EPOCHS_<run with _
# for ->), BUDGET_S (420; per run BUDGET_S_<run>), SEED (0), JOBS (2 runs side by side; 1 = one
# at a time), NICE ("nice -n 19": the machine is shared), REPETITION_GUARD (unset: the models'
# default, 3; 0 = off, what the runs before the guard decoded with).
#
# Steps (each is skipped when its output already exists, so an interrupted run can be restarted):
#   1. data      spotdiff data synth (1000 pairs, 224 px, seed 0: 800/100/100) + data prepare
#   2. train     nn runs are fitted once; gradient runs train two at a time (JOBS), one CPU thread
#                each, with --epochs and a wall-clock cap (SIGINT: the loop saves last.pt;
#                best.pt is the best validation CIDEr reached, §4 early stopping). Runs that only
#                change a decoding setting (nn-typical, ddla-uniform-largest) copy the checkpoint
#                of their base run with that setting.
#   3. eval      spotdiff eval --model M --weights RUN/best.pt --dataset DATA --split test, and for
#                models told a sentence count (nn-multi, ddla-uniform, ddla) eval --gold-count
#                --protocol multi (the paper's Table 5 protocol, §3.3) into eval-gold/
#   4. extras    alignment precision on gold sentences (§5) with chance, learned prior weights and
#                cluster-mask statistics on the 7x7 grid (when a ddla run is there)
#   6. bootstrap $WORK/bootstrap.md: paired bootstrap intervals of CIDEr-D differences
#   7. tables    $WORK/tables.md (the numbers of docs/results.md)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/parallel.sh
source scripts/parallel.sh

SPOTDIFF=${SPOTDIFF:-.venv/bin/spotdiff}
PY=${PY:-.venv/bin/python}
WORK=${WORK:-runs/results}            # runs/ is git-ignored
DATA=${DATA:-$WORK/synth-1000x224-seed0}
EPOCHS=${EPOCHS:-12}                  # upper bound; patience 4 (the recipes) may stop sooner
BUDGET_S=${BUDGET_S:-420}             # training wall-clock budget per model (7 min)
SEED=${SEED:-0}
JOBS=${JOBS:-2}
NICE=${NICE:-nice -n 19}
RUNS=${RUNS:-nn-paper nn-typical nn-multi-paper nn-multi capt-paper capt capt-masked capt-multi ddla-uniform ddla-uniform-largest ddla}
mkdir -p "$WORK/logs" "$WORK/recipes"

declare -A MODEL=(
  [nn]=nn [nn-paper]=nn [nn-typical]=nn [nn-multi]=nn-multi [nn-multi-paper]=nn-multi
  [capt]=capt [capt-paper]=capt [capt-masked]=capt-masked [capt-multi]=capt-multi
  [ddla-uniform]=ddla-uniform [ddla-uniform-largest]=ddla-uniform [ddla]=ddla
)
declare -A SETTINGS=(  # model_config lines added to the recipe
  [nn-paper]="pair_difference: false" [nn-multi-paper]="pair_difference: false"
  [capt-paper]="pair_difference: false"
)
declare -A DERIVED=(   # run -> "base run|setting=value": same weights, another decoding setting
  [nn-typical]="nn|selection=typical" [ddla-uniform-largest]="ddla-uniform|selection=largest"
)
for run in $RUNS; do
  [ -n "${MODEL[$run]:-}" ] || { echo "unknown run '$run' (known: ${!MODEL[*]})" >&2; exit 2; }
done

# -- 1. data ------------------------------------------------------------------------------------
if [ ! -f "$DATA/synth.json" ]; then
  $NICE "$SPOTDIFF" data synth --out "$DATA" --pairs 1000 --seed 0 --size 224
fi
OMP_NUM_THREADS=1 $NICE "$SPOTDIFF" data prepare "$DATA" --backbone efficientnet_lite0 --device cpu   # no-op when cached

# -- 2. train -----------------------------------------------------------------------------------
recipe_of() {  # RUN -> a recipe: training/<model>-synth.yaml plus the run's model_config lines
  local run=$1 out="$WORK/recipes/$1.yaml"
  cp "training/${MODEL[$run]}-synth.yaml" "$out"   # model_config: is the last block of each
  [ -n "${SETTINGS[$run]:-}" ] && echo "  ${SETTINGS[$run]}" >> "$out"
  if [ -n "${REPETITION_GUARD:-}" ] && [ "${MODEL[$run]#nn}" = "${MODEL[$run]}" ]; then
    echo "  repetition_guard: $REPETITION_GUARD" >> "$out"
  fi
  echo "$out"
}

derive_one() {  # RUN: best.pt of its base run with one decoding setting changed
  local run=$1 base=${DERIVED[$1]%%|*} change=${DERIVED[$1]#*|}
  [ -f "$WORK/runs/$run/best.pt" ] && return 0
  train_one "$base"
  mkdir -p "$WORK/runs/$run"
  "$PY" - "$WORK/runs/$base/best.pt" "$WORK/runs/$run/best.pt" "$change" <<'PY'
import sys
import torch
src, dst, change = sys.argv[1:]
key, value = change.split("=")
data = torch.load(src, map_location="cpu", weights_only=True)
data["config"][key] = value
torch.save(data, dst)
PY
  cp "$WORK/runs/$base.seconds" "$WORK/runs/$run.seconds"
}

train_one() {  # RUN: one run in $WORK/runs/RUN, wall time in $WORK/runs/RUN.seconds
  local run=$1 dir="$WORK/runs/$1" start key=${1//-/_} recipe
  [ -n "${DERIVED[$run]:-}" ] && { derive_one "$run"; return 0; }
  [ -f "$dir/best.pt" ] && return 0
  rm -rf "$dir"; mkdir -p "$WORK/runs"
  recipe=$(recipe_of "$run")
  local epochs_var="EPOCHS_$key" budget_var="BUDGET_S_$key"
  start=$(date +%s)
  # One thread per run: two runs share the 2 cores without oversubscribing them.
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout -s INT "${!budget_var:-$BUDGET_S}" \
    $NICE "$SPOTDIFF" train --model "${MODEL[$run]}" --data "$DATA" --recipe "$recipe" --out "$dir" \
      --epochs "${!epochs_var:-$EPOCHS}" --seed "$SEED" --device cpu > "$WORK/logs/train-$run.log" 2>&1 || true
  echo $(( $(date +%s) - start )) > "$dir.seconds"
  [ -f "$dir/best.pt" ] || { echo "training $run produced no best.pt: see $WORK/logs/train-$run.log" >&2; exit 1; }
}


fitted=() trained=() derived=()
for run in $RUNS; do
  if [ -n "${DERIVED[$run]:-}" ]; then derived+=("$run")
  elif [ "${MODEL[$run]#nn}" != "${MODEL[$run]}" ]; then fitted+=("$run")
  else trained+=("$run"); fi
done
for run in ${fitted[@]+"${fitted[@]}"}; do train_one "$run"; done   # no gradient steps: fit once (seconds)
in_parallel train_one ${trained[@]+"${trained[@]}"}
for run in ${derived[@]+"${derived[@]}"}; do train_one "$run"; done

# -- 3. eval (test split, both protocols; the gold-count protocol where a model takes a count) ----
eval_one() {
  local run=$1 m=${MODEL[$1]}
  if [ ! -f "$WORK/eval/$run/results.json" ]; then
    OMP_NUM_THREADS=1 $NICE "$SPOTDIFF" eval --model "$m" --weights "$WORK/runs/$run/best.pt" --dataset "$DATA" \
      --split test --device cpu --out "$WORK/eval/$run" > "$WORK/logs/eval-$run.log" 2>&1
  fi
  case $m in nn-multi|ddla|ddla-uniform)
    [ -f "$WORK/eval-gold/$run/results.json" ] && return 0
    OMP_NUM_THREADS=1 $NICE "$SPOTDIFF" eval --model "$m" --weights "$WORK/runs/$run/best.pt" --dataset "$DATA" \
      --split test --device cpu --gold-count --protocol multi --out "$WORK/eval-gold/$run" \
      > "$WORK/logs/eval-gold-$run.log" 2>&1 ;;
  esac
}
# shellcheck disable=SC2086
in_parallel eval_one $RUNS

# -- 4. extras ----------------------------------------------------------------------------------
cat > "$WORK/extras.py" <<'PY'
"""DDLA-specific numbers that `spotdiff eval` does not print (saved to WORK/extras.json)."""
import json
import sys
from pathlib import Path

import numpy as np
import torch

from spotdiff_cli.captioners.checkpoint import load_checkpoint
from spotdiff_cli.captioners.spot_the_diff.common import soft_iou
from spotdiff_cli.data import load_dataset
from spotdiff_cli.data.cache import load_analysis
from spotdiff_cli.evaluate.protocols import alignment_hit
from spotdiff_cli.train.batches import _keep_clusters, load_training_data

work, root = Path(sys.argv[1]), Path(sys.argv[2])
names = [n for n in ("ddla", "ddla-uniform") if (work / "runs" / n / "best.pt").is_file()]
torch.set_grad_enabled(False)
test = load_dataset(root, "test", require_images=True)
out: dict = {}


def boxes_of(pair_id: str) -> np.ndarray:
    """Image-pixel (x, y, w, h) boxes of the clusters the models see, in batch slot order."""
    entry = load_analysis(root, "test", pair_id)
    keep = _keep_clusters(entry["salience"], 10)
    return entry["bboxes"][keep].astype(np.float32) * float(entry["scale"])


# (a) Alignment precision on gold sentences (§5: argmax_k P(z=k|X) P(S|z=k,X) per gold sentence,
#     every annotator's sentences, test split). A predicted cluster hits when its box has IoU >= 0.3
#     with the sentence's change (before, after or union box), as `spotdiff eval` counts hits.
#     Chance = the expected hit rate of a uniformly random cluster (hits / K per sentence), and
#     1/K averaged (the paper's kind of chance).  Only sentences of changed pairs with >= 1 cluster.
for name in names:
    model, _ = load_checkpoint(str(work / "runs" / name / "best.pt"), "cpu")
    model.eval()
    data = load_training_data(root, "test", model.vocab, max_clusters=10)
    gold_by_id = {p.id: {c.get("sentence", i): c for i, c in enumerate(p.gold)} for p in test.pairs}
    hits = n = 0
    chance_hits = inv_k = oracle = prior_top_hits = prior_top_n = 0.0
    index_hits = index_n = 0
    for index, pair in enumerate(data.pairs):
        changes = gold_by_id.get(pair.id) or {}
        k = len(pair.cluster_ids)
        if not changes or k == 0:
            continue
        boxes = boxes_of(pair.id)
        batch = data.batch([(index, a) for a in range(len(pair.annotations))])
        aligned = model.align(batch)
        for a in range(len(pair.annotations)):
            for s in range(int(batch["sentence_valid"][a].sum())):
                change = changes.get(s)
                if change is None:
                    continue
                hit_k = [alignment_hit(tuple(b), change) for b in boxes]
                n += 1
                hits += hit_k[int(aligned[a, s])]
                chance_hits += sum(hit_k) / k
                inv_k += 1.0 / k
                oracle += any(hit_k)
                gold_k = int(batch["gold_alignment"][a, s])
                if gold_k >= 0:
                    index_n += 1
                    index_hits += int(aligned[a, s]) == gold_k
        if model.prior is not None:  # single-sentence decoding's cluster: the prior's argmax
            from spotdiff_cli.captioners.spot_the_diff.ddla import ClusterView

            view = ClusterView(batch)
            top = int(model.log_prior(view)[0].argmax())
            prior_top_n += 1
            prior_top_hits += any(alignment_hit(tuple(boxes[top]), c) for c in changes.values())
    entry = {
        "sentences": n, "precision": hits / n, "chance_random_cluster": chance_hits / n,
        "chance_1_over_K": inv_k / n, "oracle_any_cluster_hits": oracle / n,
        "gold_index_sentences": index_n, "gold_index_accuracy": index_hits / max(1, index_n),
    }
    if model.prior is not None:
        entry["prior_weights"] = [round(float(w), 4) for w in model.prior.weight.flatten()]
        entry["prior_argmax_hits_a_change"] = prior_top_hits / max(1, prior_top_n)
    out[f"alignment/{name}"] = entry
    print(name, json.dumps(entry), flush=True)

# (b) Cluster masks on the 7x7 grid: how distinct are two clusters of the same pair?
data = load_training_data(root, "test", load_checkpoint(str(work / "runs" / names[0] / "best.pt"), "cpu")[0].vocab, max_clusters=10)
ious, cells, ks = [], [], []
for pair in data.pairs:
    m = torch.from_numpy(pair.masks).flatten(1)
    ks.append(m.shape[0])
    cells += (m > 0.5).sum(1).tolist()
    for i in range(m.shape[0]):
        for j in range(i + 1, m.shape[0]):
            ious.append(float(soft_iou(m[i], m[j])))
ious = np.array(ious)
out["grid_masks"] = {
    "pairs": len(data.pairs), "mean_clusters_per_pair": float(np.mean(ks)),
    "share_pairs_without_cluster": float(np.mean(np.array(ks) == 0)),
    "mean_cells_above_0.5_of_49": float(np.mean(cells)),
    "cluster_pairs": int(ious.size), "mean_soft_iou": float(ious.mean()),
    "share_soft_iou_above_0.3": float((ious > 0.3).mean()), "share_soft_iou_above_0.5": float((ious > 0.5).mean()),
}
print("grid", json.dumps(out["grid_masks"]), flush=True)

(work / "extras.json").write_text(json.dumps(out, indent=2) + "\n")
PY
if [ ! -f "$WORK/extras.json" ] && { [ -f "$WORK/runs/ddla/best.pt" ] || [ -f "$WORK/runs/ddla-uniform/best.pt" ]; }; then
  OMP_NUM_THREADS=1 $NICE "$PY" "$WORK/extras.py" "$WORK" "$DATA"
fi

# -- 6. paired bootstrap: is a CIDEr-D difference larger than the test split's noise? ----------
$NICE "$PY" - "$WORK" "$DATA" <<'PY' > "$WORK/bootstrap.md"
"""Paired bootstrap (10,000 resamples of the 100 test pairs) of per-pair CIDEr-D differences
(spotdiff_cli.evaluate.paired_bootstrap, what `spotdiff eval --compare` runs), for the pairs of
runs below that are both there. "eval-gold/" runs: the gold-count multi-sentence protocol."""
import json
import sys
from pathlib import Path

import numpy as np

from spotdiff_cli.data import load_dataset
from spotdiff_cli.evaluate import paired_bootstrap
from spotdiff_cli.evaluate.metrics import score_captions

work, root = Path(sys.argv[1]), sys.argv[2]
test = load_dataset(root, "test", require_images=False)
ids = [p.id for p in test.pairs]
refs = {"single": {p.id: [s for s in p.sentences if s.strip()] for p in test.pairs},
        "multi": {p.id: [" ".join(s for s in a if s.strip()) for a in p.annotations] for p in test.pairs}}


def per_pair(run, protocol):
    sentences: dict = {}
    single = run / "predictions-single.json"  # the single protocol's own sentence, when decoded apart
    path = single if protocol == "single" and single.is_file() else run / "predictions.json"
    for item in json.loads(path.read_text()):  # one entry per sentence, in order
        sentences.setdefault(str(item["image_id"]), []).append(item["caption"])
    hyps = {i: (sentences[i][0] if protocol == "single" else " ".join(sentences[i])) for i in ids}
    scores = score_captions(refs[protocol], hyps, ("CIDEr",), "auto").per_item["CIDEr"]
    return np.array([scores[i] for i in ids] if isinstance(scores, dict) else scores, float)


e, g = work / "eval", work / "eval-gold"
comparisons = [
    ("single", e / "ddla", e / "capt"), ("single", e / "ddla", e / "capt-paper"),
    ("single", e / "ddla", e / "ddla-uniform"), ("single", e / "ddla", e / "ddla-uniform-largest"),
    ("single", e / "ddla-uniform", e / "ddla-uniform-largest"), ("single", e / "capt", e / "capt-paper"),
    ("single", e / "nn-typical", e / "nn-paper"), ("single", e / "capt-paper", e / "ddla-uniform"),
    ("multi", e / "ddla", e / "capt-multi"), ("multi", e / "ddla", e / "ddla-uniform"),
    ("multi", e / "nn-multi", e / "nn-multi-paper"),
    ("multi", g / "ddla", g / "ddla-uniform"), ("multi", g / "ddla-uniform", e / "capt-multi"),
]
print("| protocol | A | B | CIDEr-D A − B | 95 % interval | share of resamples with A > B |\n|---|---|---|---:|---|---:|")
cache = {}
for protocol, a, b in comparisons:
    if not ((a / "predictions.json").is_file() and (b / "predictions.json").is_file()):
        continue
    for run in (a, b):
        cache.setdefault((protocol, run), per_pair(run, protocol))
    boot = paired_bootstrap(cache[(protocol, a)], cache[(protocol, b)], resamples=10000, seed=0)
    name = lambda r: r.name + (" (gold T)" if r.parent.name == "eval-gold" else "")
    print(f"| {protocol} | {name(a)} | {name(b)} | {boot.difference:+.3f} | [{boot.low:+.3f}, "
          f"{boot.high:+.3f}] | {boot.share_a_greater:.2f} |")
PY

# -- 7. tables ----------------------------------------------------------------------------------
$NICE "$PY" - "$WORK" "$RUNS" <<'PY' | tee "$WORK/tables.md"
import json
import sys
from pathlib import Path

cols = ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "CIDEr", "ROUGE-L"]
head = "| Run | B-1 | B-2 | B-3 | B-4 | METEOR | CIDEr-D | ROUGE-L | {} |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
work, runs = Path(sys.argv[1]), sys.argv[2].split()


def row(name, scores, last):
    return f"| {name} | " + " | ".join(f"{scores[c]:.3f}" for c in cols) + f" | {last} |"


def get(d, protocol):
    return next(r for r in d["results"] if r["protocol"] == protocol and r["group"] == "all")


def load(folder, run):
    path = work / folder / run / "results.json"
    return json.loads(path.read_text()) if path.is_file() else None


print("Table 4 (single sentence, test split)\n")
print(head.format("Perplexity"))
for run in runs:
    if "multi" in run or (d := load("eval", run)) is None:
        continue
    print(row(run, get(d, "single")["scores"], "–" if d["perplexity"] is None else f"{d['perplexity']:.2f}"))
print("\nTable 5 (multi-sentence; ddla rows: the count head's sentence count; (gold T): eval --gold-count)\n")
print(head.format("LenRatio"))
for run in runs:
    if run.startswith("capt") and run != "capt-multi" or run.startswith("nn") and "multi" not in run:
        continue
    for folder, suffix in (("eval", ""), ("eval-gold", " (gold T)")):
        if (d := load(folder, run)) is not None:
            r = get(d, "multi")
            print(row(run + suffix, r["scores"], f"{r['len_ratio']:.3f}"))
extras = work / "extras.json"
if extras.is_file():
    extras = json.loads(extras.read_text())
    print("\nAlignment on gold sentences (§5)\n")
    print("| Run | sentences | precision | chance (random cluster) | 1/K averaged | any cluster hits | gold-index accuracy | prior argmax hits a change | prior weights w |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for m in ("ddla-uniform", "ddla"):
        if (a := extras.get(f"alignment/{m}")) is None:
            continue
        top = a.get("prior_argmax_hits_a_change")
        print(f"| {m} | {a['sentences']} | {a['precision']:.3f} | {a['chance_random_cluster']:.3f} | "
              f"{a['chance_1_over_K']:.3f} | {a['oracle_any_cluster_hits']:.3f} | {a['gold_index_accuracy']:.3f} | "
              f"{'–' if top is None else f'{top:.3f}'} | {a.get('prior_weights', '– (uniform)')} |")
    print("\nGrid masks (test split):", json.dumps(extras["grid_masks"]))
print("\n`spotdiff eval` alignment precision (generated sentences' clusters vs any change of the pair):")
for run in runs:
    if (d := load("eval", run)) is not None and d.get("alignment_count"):
        print(f"- {run}: {d['alignment_precision']:.3f} over {d['alignment_count']} sentences")
print("\nTraining wall time:")
for run in runs:
    seconds, log = work / "runs" / f"{run}.seconds", work / "runs" / run / "log.jsonl"
    if not seconds.is_file():
        continue
    if not log.is_file():  # a derived run: its base run's weights with another decoding setting
        print(f"- {run}: the weights of another run, not trained again")
        continue
    hist = [json.loads(l)["validation"] for l in log.read_text().splitlines() if '"validation"' in l] if log.is_file() else []
    best = max(hist, key=lambda h: h["CIDEr"]) if hist else {}
    print(f"- {run}: {float(seconds.read_text()):.0f} s, {len(hist)} validation(s), best val CIDEr "
          f"{best.get('CIDEr', float('nan')):.3f} at epoch {best.get('epoch')}")
PY
