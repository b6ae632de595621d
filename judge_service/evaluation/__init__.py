"""``judge-service eval``: scoring a judge on traces with known labels (docs/serving.md,
"Command line").

* `records`: reading ProcessBench and gold-span records into rollouts to judge;
* `segment`: a ProcessBench trace's steps as token ranges;
* `metrics`: ProcessBench F1, token-level span precision/recall, boundary error;
* `report`: REPORT.json from the records and their results.
"""
