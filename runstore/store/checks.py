"""`Checks`: the `Store` methods of health rules — checks, notifications, watching.

Contract: each method is one call into `runstore.health`: `check` (the fired rows as a polars
DataFrame) and `check_result` (the whole `health.evaluate.CheckResult`: the rows, the rules
chosen, how many runs each rule checked and fired for, the one-line summary and each row as
an `Alert`) evaluate the rules `runstore check` chooses; `notifier` is the webhook sender of
the URLs given and runstore.toml's (None when there are none: the webhook client is then
never imported); `watch` and `watcher` ingest paths again and again and evaluate the rules
after each pass (`health.watch`). polars is imported only by `check`; a check of threshold
and trend rules imports neither polars nor pyarrow (`check_result(arrow=False)`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .base import StoreBase

if TYPE_CHECKING:
    import polars as pl

    from ..health.evaluate import CheckResult
    from ..health.notify import Notifier
    from ..health.watch import Watcher


class Checks(StoreBase):
    """Health rules: checks, notifications and watches."""

    def check(self, *, threshold: float | None = None, rules: Iterable[Any] | None = None,
              runs: str | None = None, since_step: int | None = None,
              default_rules: bool | None = None,
              config: bool | str | os.PathLike[str] = True) -> "pl.DataFrame":
        """Health rules over live metrics: one row per (run, rule) that fires.

        Columns: `run_name, rule, first_step, last_step, steps_over, longest_streak, peak,
        latest, status` (`run_name` is the run as shown: its `run_label`). The default rule is KL v1 or v2 (either spelling) above `threshold`
        (else runstore.toml's `[check] threshold`, else the `kl_threshold` setting, else
        0.01), with `kl_health`'s semantics. `rules` adds `health.rules.Rule`s,
        `health.trends.TrendRule`s or text such as `"optim/entropy < 0.05"` or the trend
        rules `"drop(env/all/reward/total) > 0.2"`, `"rise(time/total) > 2"`,
        `"stale > 30"`; `default_rules=False` drops the KL rule; `runs` is a scope
        (`runstore.analysis.runs`); `since_step` ignores earlier steps. `config=True` also reads the
        `[[check.rule]]`s of the runstore.toml beside the store or in the working directory
        (`False`: none; a path: that file). A rule naming a metric that no run has logged
        raises `UnknownKey` (a misspelt rule would never fire); `check_result` returns the same rows
        with per-rule counts and the CLI's one-line summary. See docs/checks.md.

        Example:
            >>> store.check()[["run_name", "rule", "first_step", "steps_over"]].rows()
            [('gsm8k_tool_rl/sweep/lr_1e-3/seed_0', 'kl_sample_train_v1|v2 > 0.01', 22, 8)]
            >>> store.check(since_step=100).height
            0
            >>> store.check(rules=["optim/entrpy < 0.5"])
            Traceback (most recent call last):
            runstore.errors.UnknownKey: no run in the store logs optim/entrpy (rule 'optim/entrpy < 0.5'); did you mean optim/entropy? (runstore sql "select distinct key from metrics_raw order by 1" lists every key)
        """
        return self.check_result(threshold=threshold, rules=rules, runs=runs,
                                 since_step=since_step, default_rules=default_rules,
                                 config=config, arrow=False).frame()

    def check_result(self, *, threshold: float | None = None,
                     rules: Iterable[Any] | None = None, runs: str | None = None,
                     since_step: int | None = None, default_rules: bool | None = None,
                     config: bool | str | os.PathLike[str] = True,
                     arrow: bool = True) -> "CheckResult":
        """`runstore check`'s whole answer: the rows `check` returns (`rows`, `table`,
        `frame()`), the rules chosen (`rules`), for each how many runs it checked and fired
        for (`checked`, `fired`), the runs in scope (`runs`), each row's run_id (`run_ids`)
        and `Alert` (`alerts()`), and `summary()`, the one line the CLI prints. Options as in
        `check`; `arrow=False` keeps the rows as plain Python rows when the rules allow
        (threshold rules only), so the check imports no pyarrow.

        Example:
            >>> result = store.check_result()
            >>> result.summary()
            'kl_sample_train_v1|v2 > 0.01 fired for 1 of 13 runs (11 checked, 2 without KL)'
            >>> result.checked, result.fired, [a.first_step for a in result.alerts()]
            ((11,), (1,), [22])
        """
        from ..health.evaluate import check

        return check(self, threshold=threshold, rules=rules, runs=runs, since_step=since_step,
                     default_rules=default_rules, config=config, arrow=arrow)

    def notifier(self, urls: Sequence[str] = (), *, renotify: bool = False,
                 on_warning: Callable[[str], None] | None = None) -> "Notifier | None":
        """The webhook sender (`health.notify.Notifier`) for `urls` (`--notify`, else
        `$RUNSTORE_NOTIFY`) and runstore.toml's `[check] notify` list, recording in this store
        what it posts (so a firing is posted once across processes; `renotify` posts every
        firing again); None when there is no URL. Close it (`close()`, or use it as a context
        manager) to wait for the posts in flight."""
        from ..health.config import store_config

        configured = store_config(self).notify
        if not urls and not configured:
            return None  # the webhook client is not even imported (~8 ms of a quick check)
        from ..health.notify import Notifier
        from ..health.urls import urls as chosen_urls

        chosen = chosen_urls(urls, config=configured)
        if not chosen:
            return None
        return Notifier(chosen, store=str(self.path), root=self.path, renotify=renotify,
                        on_warning=on_warning)

    def watch(self, paths: Sequence[str | os.PathLike[str]], *, interval: float | None,
              **options: Any) -> int:
        """Ingest `paths` every `interval` seconds (once when None) until Ctrl-C or SIGTERM,
        evaluating `check`'s rules after each pass and handing each firing that starts to
        `on_alert` (`health.watch.watch`, which lists the options); the number of passes."""
        from ..health.watch import watch

        return watch(self, paths, interval=interval, **options)  # type: ignore[arg-type]

    def watcher(self, paths: Sequence[str | os.PathLike[str]], **options: Any) -> "Watcher":
        """One watch's state, whose `run_pass()` ingests `paths` and evaluates the rules once
        (`health.watch.Watcher`: what `runstore ui --watch` runs in a thread of its own). A
        pass that fails for a reason the next may not meet raises one of the watcher's
        `TRANSIENT` exceptions."""
        from ..health.watch import Watcher

        return Watcher(self, paths, **options)  # type: ignore[arg-type]
