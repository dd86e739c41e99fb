#!/usr/bin/env python3
"""Checks a run's predictions.jsonl with the official SWE-bench package's
own code: the loader its evaluation uses for predictions, and the function
that matches predictions to instances (which refuses ids the dataset lacks).

Usage: check-predictions.py INSTANCES.jsonl PREDICTIONS.jsonl
  INSTANCES.jsonl   the SWE-bench instance lines the run read
  PREDICTIONS.jsonl predictions.jsonl from the run folder

Needs `pip install swebench` (not a dependency of onebash or its tests).
Exits 0 when every prediction loads and matches an instance.
"""
import sys

from swebench.harness.run_evaluation import get_dataset_from_preds
from swebench.harness.utils import get_predictions_from_file

instances, predictions_path = sys.argv[1], sys.argv[2]
predictions = get_predictions_from_file(predictions_path, instances, "test")
for prediction in predictions:
    for key in ("instance_id", "model_name_or_path", "model_patch"):
        if key not in prediction:
            sys.exit(f"prediction {prediction.get('instance_id')} has no {key}")
by_id = {p["instance_id"]: p for p in predictions}
if len(by_id) != len(predictions):
    sys.exit("two predictions share an instance_id")
dataset = get_dataset_from_preds(
    instances, "test", None, by_id, "onebash-check", rewrite_reports=False, exclude_completed=False
)
print(f"{len(predictions)} predictions load with swebench and match {len(dataset)} instances")
