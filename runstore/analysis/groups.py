"""Which group each run belongs to, for `compare --group-by`: by keys, by seeds, or one per run.

Contract: `groups(store, runs=None, group_by=None)` returns one row per run in scope:
`run_id, run_name, run_label, group` and, when grouping by keys, one column per key (named
by it). Ordered by the group keys' exact values (numbers as numbers, NaN after them, a
missing value last), then `group`, then `run_label`. `group_rows` is the same as plain Python
rows (`query.rows.Rows`, no polars): the one definition, which `groups` types as a frame.
Runs are told apart by `run_id` throughout; two runs that share a name are two groups, never
one.

* `group_by=None`: every run is its own group, labelled by its `run_label` (its `run_name`,
  with a run_id prefix when two runs share it; what W&B and TensorBoard draw with grouping
  off).
* a key or a list of keys: runs with equal values share a group. A key is a run column
  (`RUN_COLUMNS`: `model_name`, `learning_rate`, `kind`; these names always mean the column,
  which ingest takes from config.json) or a flattened config key (`dataset_builder.group_size`).
  A config key's column holds numbers when every run in scope that has it holds a JSON
  number (doubles: an integer past 2**53 as the nearest one), strings when every one holds a
  JSON string, else the value's JSON text, a number written as its label shows it. Values
  group as `runstore diff` compares them (`comparable`, the one definition of two equal
  config values): numbers by their exact value (1 and 1.0 together; 2**60 and 2**60 + 1
  apart, though one double holds both), anything else by its JSON text. A run that lacks the
  key has null there and groups with the other runs lacking it (label `(missing)`). The label
  is `key=value, ...` (`learning_rate=0.0001`), a number as the runs write it
  (`value_labels`): the integer, exactly, when one of them writes it as an integer
  (`seed=1152921504606846977`), else its double as `format_value` shows it (`1` for 1.0). A
  key that no run in the store has is a `UsageError` naming the closest keys.
* `"auto"`: runs whose flattened configs are equal once the seed-like keys are set aside share
  a group (the runs of one sweep point that differ only by seed), so `compare` shows mean ±
  band over seeds. Seed-like, by the last part of the key (case-insensitive; a quoted part,
  `"data.seed"`, is one part):
  `seed` or a name ending in `_seed` (`seed`, `dataset_builder.seed`, `shuffle_seed`), and
  the per-run names and paths `SEED_LIKE_NAMES` (`log_path`, `log_dir`, `wandb_name`,
  `run_name`, `session_name`). Anything else — `wandb_project`, `load_checkpoint_path`,
  `model_name` — is a real difference. Values compare and show as for keys (numbers by their
  exact value); a key missing from a run differs from any value. The label names the fewest
  keys that tell the groups in scope apart, chosen greedily (the key that separates the most
  groups first, then the one most groups have): `learning_rate=0.0001, num_groups_to_log=1`;
  `all runs` when only seeds differ. There are no key columns in this mode (they would be every key
  that differs anywhere). W&B and Aim have no such mode (their grouping is by chosen keys); it
  is what their users do by hand when they group by every key but the seed.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from typing import TYPE_CHECKING, Any, Iterable, Sequence, Union

from ..errors import UsageError
from ..ingest.normalize.config import split_key
from ..query.rows import records
from ..query.statements.frames import config_rows_query
from .runs import Scope, scope_ids, scoped_runs

if TYPE_CHECKING:
    import polars as pl

    from ..query.reader import Reader
    from ..query.rows import Rows

RUN_COLUMNS = ("model_name", "learning_rate", "kind")
SEED_LIKE_NAMES = ("log_path", "log_dir", "wandb_name", "run_name", "session_name")
AUTO = "auto"
MISSING = "(missing)"
GroupBy = Union[str, Sequence[str], None]


def is_seed_like(key: str) -> bool:
    """Whether `auto` grouping sets `key` aside (see the module).

    >>> [is_seed_like(k) for k in ("seed", "dataset_builder.seed", "shuffle_seed",
    ...                            "log_path", "wandb_project", "seeds", "seed_schedule",
    ...                            '"data.seed"', '"x.y".seed')]
    [True, True, True, True, False, False, False, False, True]
    """
    try:
        last = split_key(key)[-1].lower()
    except UsageError:  # not a flattened key (a store's keys always are): its last dotted part
        last = key.rsplit(".", 1)[-1].lower()
    return last == "seed" or last.endswith("_seed") or last in SEED_LIKE_NAMES


def group_keys(group_by: GroupBy) -> list[str] | None:
    """`group_by` as a list of keys, `[AUTO]`, or None (one group per run)."""
    if group_by is None:
        return None
    try:
        items = [group_by] if isinstance(group_by, str) else list(group_by)
    except TypeError:  # the Python API takes any value
        items = []
    if not items or not all(isinstance(k, str) and k for k in items):
        raise UsageError(f"group_by is a key, a list of keys or 'auto', got {group_by!r}")
    if AUTO in items and len(items) > 1:
        raise UsageError("group_by 'auto' groups by every config key but the seeds; give it "
                         "alone")
    return list(dict.fromkeys(items))


def comparable(text: str, num: float | None) -> tuple[str, Any]:
    """A config value (`config.value`, its JSON text, and `config.value_num`) as grouping and
    `runstore diff` compare it: the one definition of "two config values are equal". A number
    by its exact value (1 and 1.0 equal, 2**60 and 2**60 + 1 not, NaN equal to NaN), anything
    else by its JSON text (`value_num` is set for booleans too: true is not 1).

    >>> comparable("1", 1.0) == comparable("1.0", 1.0), comparable("true", 1.0)
    (True, ('t', 'true'))
    >>> [comparable(str(n), 2.0 ** 60) for n in (2 ** 60, 2 ** 60 + 1)]
    [('n', 1152921504606846976), ('n', 1152921504606846977)]
    """
    if num is None or text in ("true", "false"):
        return ("t", text)
    if num != num:  # NaN
        return ("n", "nan")
    # `value_num` is a double: exact for every float and every integer below 2**53, the
    # nearest one (or ±inf) past it. There the integer's JSON text gives its value. Python
    # compares and hashes an int and a float by their exact values, so 2**60 still equals
    # 2.0**60 and 1 equals 1.0.
    if not -_EXACT < num < _EXACT and _INTEGER.fullmatch(text):
        return ("n", int(text))
    return ("n", num)


_EXACT = 2.0 ** 53  # every integer of smaller magnitude is a double
_INTEGER = re.compile(r"-?[0-9]+")  # a JSON integer (a float's text has `.`, `e` or a token)


def value_labels(values: Iterable[tuple[str, float | None]]) -> dict[tuple[str, Any], str]:
    """How a label shows each distinct value (`comparable`) among config values (`config.value`,
    `config.value_num` pairs), so that equal values show alike: a number as its runs write
    it, the integer when one of them writes it as an integer (exactly:
    `1152921504606846977`; `1` for 1 and 1.0), else its double as `format_value` shows it
    (`0.0001`, `1` for 1.0, `NaN`); anything else as its JSON text.

    >>> value_labels([("1.0", 1.0), ("1", 1.0), ("1152921504606846977", 2.0 ** 60)]).values()
    dict_values(['1', '1152921504606846977'])
    """
    labels: dict[tuple[str, Any], str] = {}
    for text, num in values:
        value = comparable(text, num)
        if value[0] == "n" and _INTEGER.fullmatch(text):
            labels[value] = text  # JSON writes an integer one way: every run here writes this
        elif value not in labels:
            labels[value] = format_value(float(value[1])) if value[0] == "n" else text
    return labels


def format_value(v: Any) -> str:
    """A group value as labels show it: numbers as written in Python (`0.0001`, `3e-05`,
    whole numbers without `.0`), strings bare, a missing value `(missing)`. A config number
    comes here through `value_labels`, unless a run writes it as an integer (shown exactly)."""
    if v is None:
        return MISSING
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return "NaN" if math.isnan(v) else repr(v)
    return str(v)


def groups(store: "Reader", *, runs: Scope = None, group_by: GroupBy = None,
           reserved: Sequence[str] = ()) -> "pl.DataFrame":
    """One row per run in scope with its group (see the module), as a polars DataFrame:
    `group_rows`'s rows, typed (a group key's column Float64 when it holds numbers, else
    String). `reserved` names columns the caller adds, which a group key may not be named."""
    import polars as pl

    rows = group_rows(store, runs=runs, group_by=group_by, reserved=reserved)
    schema = {c: pl.Float64 if numeric else pl.String
              for c, numeric in zip(rows.column_names, rows.numeric)}
    return pl.DataFrame(rows.data, schema=schema, orient="row")


def group_rows(store: "Reader", *, runs: Scope = None, group_by: GroupBy = None,
               reserved: Sequence[str] = ()) -> "Rows":
    """The rows of `groups` as plain Python rows (`query.rows.Rows`): `run_id, run_name,
    run_label, group` and the group keys, each key column `numeric` when it holds numbers
    (else text). The one definition of the groups; `compare` reads them so, without polars."""
    from ..query.rows import Rows

    keys = group_keys(group_by)
    ids = scope_ids(store, runs)  # resolved once: the runs and their configs read it
    scoped = scoped_runs(store, ids)
    base = [row[:3] for row in scoped.data]  # run_id, run_name, run_label
    names = ["run_id", "run_name", "run_label", "group"]
    if keys is None:
        return Rows(names, [False] * 4, [(*b, b[2]) for b in base])
    if keys == [AUTO]:
        return Rows(names, [False] * 4, _auto(store, ids, base))
    clash = [k for k in keys if k in ("run_id", "run_name", "run_label", "group", *reserved)]
    if clash:
        raise UsageError(f"cannot group by {clash[0]!r}: the result has a column of that name")
    cells, numeric = _key_cells(store, ids, scoped, keys)
    data = []
    for b, row in zip(base, cells):
        label = ", ".join(f"{k}={shown}" for k, (_, shown, _) in zip(keys, row))
        # Ordered by each key's exact value (numbers as numbers, NaN after them, a missing
        # value last), then group, run_label and run_id.
        order = (*(o for _, _, o in row), label, b[2], b[0])
        data.append((order, (*b, label, *(value for value, _, _ in row))))
    data.sort(key=lambda pair: pair[0])
    return Rows([*names, *keys], [False] * 4 + numeric, [row for _, row in data])


def _sort_key(value: Any) -> tuple[Any, ...]:
    """`value` (a number or text, or None) in the order groups sort: numbers by value, NaN
    after every number, a missing value last."""
    if value is None:
        return (2, 0)
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    return (0, value)


def _exact(value: tuple[str, Any]) -> Any:
    """A `comparable` number's exact value (an int or a float; NaN for its "nan")."""
    return math.nan if value[1] == "nan" else value[1]


def _config_rows(store: "Reader", ids: list[str] | None,
                 keys: Sequence[str] | None) -> list[dict[str, Any]]:
    """run_id, key, value (JSON text), value_num, value_str of the config leaves of the runs
    `ids` (None: every run)."""
    sql, params = config_rows_query(ids, keys=keys is not None)
    if keys is not None:
        params["keys"] = list(keys)
    return records(store, sql, params)


_Cell = tuple[Any, str, tuple[Any, ...]]  # a run's value of a group key, its label, its order


def _key_cells(store: "Reader", ids: list[str] | None, scoped: "Rows",
               keys: list[str]) -> tuple[list[tuple[_Cell, ...]], list[bool]]:
    """Per run of `scoped`, in its order, a cell per key: its value in the key's column (see
    the module), how the label shows it and where it sorts (`_sort_key` of its exact value);
    and whether each key's column holds numbers."""
    at = {name: i for i, name in enumerate(scoped.column_names)}
    wanted = [k for k in keys if k not in RUN_COLUMNS]
    rows = _config_rows(store, ids, wanted) if wanted else []
    found: dict[str, dict[str, _Cell]] = {}
    numeric: dict[str, bool] = {}
    for key in wanted:
        part = [r for r in rows if r["key"] == key]
        if not part:
            _require_config_key(store, key)
        if part and all(r["value_str"] is not None for r in part):
            found[key] = {r["run_id"]: (r["value_str"], r["value_str"], (0, r["value_str"]))
                          for r in part}
            numeric[key] = False
            continue
        labels = value_labels((r["value"], r["value_num"]) for r in part)
        values = {r["run_id"]: (comparable(r["value"], r["value_num"]), r["value_num"])
                  for r in part}
        numeric[key] = bool(part) and all(v[0] == "n" for v, _ in values.values())
        if numeric[key]:
            # A double in the column (the nearest one, for an integer past 2**53); the label
            # and the order are the exact value's.
            found[key] = {run: (num, labels[v], _sort_key(_exact(v)))
                          for run, (v, num) in values.items()}
        else:  # JSON text, a number written as its label shows it, so equal ones group
            found[key] = {run: (labels[v], labels[v], (0, labels[v]))
                          for run, (v, _) in values.items()}
    for key in keys:
        if key in RUN_COLUMNS:
            numeric[key] = scoped.numeric[at[key]]
    missing: _Cell = (None, MISSING, _sort_key(None))

    def run_column(value: Any) -> _Cell:
        return (value, format_value(value), _sort_key(value))

    cells = [tuple(run_column(row[at[k]]) if k in RUN_COLUMNS else found[k].get(row[0], missing)
                   for k in keys) for row in scoped.data]
    return cells, [numeric[k] for k in keys]


def _require_config_key(store: "Reader", key: str) -> None:
    """`UsageError` when no run in the store has config key `key`, naming the closest."""
    known = [r["key"] for r in records(store, "select distinct key from config order by key")]
    if key in known:
        return  # some run outside the scope has it: here every run lacks it
    close = difflib.get_close_matches(key, [*RUN_COLUMNS, *known], n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UsageError(f"no run has config key {key!r} to group by{hint} (group by a run column "
                     f"{', '.join(RUN_COLUMNS)}, a dotted config key, or 'auto'; "
                     "`runstore diff RUN RUN --all` lists a run's keys)")


def _auto(store: "Reader", ids: list[str] | None,
          base: list[tuple[str, str, str]]) -> list[tuple[str, str, str, str]]:
    """`run_id, run_name, run_label, group` of each run of `base`: groups of runs whose
    configs differ only in seed-like keys, by group, then run_label and run_id."""
    norm: dict[str, dict[str, Any]] = {b[0]: {} for b in base}
    rows = [r for r in _config_rows(store, ids, None) if not is_seed_like(r["key"])]
    for r in rows:
        norm[r["run_id"]][r["key"]] = comparable(r["value"], r["value_num"])
    signatures = {run: tuple(sorted(values.items())) for run, values in norm.items()}
    distinct = list(dict.fromkeys(signatures.values()))
    naming = _naming_keys([dict(sig) for sig in distinct])
    written: dict[str, list[tuple[str, float | None]]] = {k: [] for k in naming}
    for r in rows:
        if r["key"] in written:
            written[r["key"]].append((r["value"], r["value_num"]))
    shown = {k: value_labels(pairs) for k, pairs in written.items()}

    def label(sig: tuple) -> str:
        values = dict(sig)
        if not naming:
            return "all runs"
        return ", ".join(f"{k}={_shown(values.get(k), shown[k])}" for k in naming)

    names = {sig: label(sig) for sig in distinct}
    grouped = [(*b, names[signatures[b[0]]]) for b in base]
    return sorted(grouped, key=lambda r: (r[3], r[2], r[0]))


def _naming_keys(configs: list[dict[str, Any]]) -> list[str]:
    """The keys a label names: the fewest that tell the configs apart, chosen greedily (the key
    that separates the most pairs not yet told apart first; of those, the one most configs
    have, then the first by name).

    >>> _naming_keys([{"lr": 1, "a": 1, "b": 1}, {"lr": 2, "a": 2, "b": 1}, {"lr": 3, "b": 2}])
    ['lr']
    >>> _naming_keys([{"lr": 1, "x": 1}, {"lr": 1, "x": 2}, {"lr": 2, "x": 1}])
    ['lr', 'x']
    """
    keys = sorted({k for c in configs for k in c})
    pairs = {(i, j) for i in range(len(configs)) for j in range(i + 1, len(configs))}
    chosen: list[str] = []
    while pairs:
        def splits(k: str) -> int:
            return sum(configs[i].get(k) != configs[j].get(k) for i, j in pairs)
        best = max(keys, key=lambda k: (splits(k), sum(k in c for c in configs),
                                        [-ord(c) for c in k]), default=None)
        if best is None or splits(best) == 0:
            break  # equal configs never reach here: signatures are distinct
        chosen.append(best)
        pairs = {(i, j) for i, j in pairs if configs[i].get(best) == configs[j].get(best)}
    return chosen


def _shown(value: tuple[str, Any] | None, labels: dict[tuple[str, Any], str]) -> str:
    """An `auto` label's value: `value_labels`' (`labels`), a JSON string bare, a missing
    value `(missing)`."""
    if value is None:
        return MISSING
    text = labels[value]
    if value[0] == "t" and text.startswith('"'):
        try:
            return str(json.loads(text))
        except ValueError:
            pass
    return text
