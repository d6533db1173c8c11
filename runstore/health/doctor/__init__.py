"""The doctor: what went wrong in each run, where, with the evidence in numbers, and what to try.

Contract: the catalogue (`catalogue.CATALOGUE`) is one finding per documented SQL file of
`sql/doctor/` (`kl_spike`, `reward_stuck`, ... `eval_gap`), composed in one tuple as sqlglot
composes its optimizer's rules; `config.doctor_config` gives each finding's thresholds (its
defaults, overridden by runstore.toml's `[doctor.NAME]`); `diagnose(store, runs)` runs their
statements, two at a time, and returns a `Diagnosis`: the findings that fire, worst first, each with
its evidence, what to try and the statement that shows the evidence, and the runs each
finding could not judge and why. `Store.doctor` and `runstore doctor` are this. Reading only.
docs/doctor.md documents every finding.
"""

from .catalogue import CATALOGUE, NAMES, SEVERITIES, Finding
from .diagnose import ROW_COLUMNS, SHOWN_COLUMNS, Diagnosis, diagnose

__all__ = ["CATALOGUE", "NAMES", "ROW_COLUMNS", "SEVERITIES", "SHOWN_COLUMNS", "Diagnosis",
           "Finding", "diagnose"]
