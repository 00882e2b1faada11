"""``--trial-timeout`` holds whatever the task does with the alarm: with a limit, every trial runs in a worker
process that is killed once the trial runs past it (a task that ignores SIGALRM), and a trial that catches
the alarm and finishes late is failed, never stored as finished."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness import api

pytestmark = pytest.mark.integration  # worker processes

STUBBORN = textwrap.dedent('''
    import signal
    import time

    from toy_task import ToyTask


    class IgnoresAlarm(ToyTask):
        def run(self, params, ctx):
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            time.sleep(30)  # what a stuck trial does, bounded so that a harness without the kill still ends
            return super().run(params, ctx)


    class CatchesAlarm(ToyTask):
        def run(self, params, ctx):
            try:
                time.sleep(30)
            except BaseException:
                pass  # the timeout, swallowed by a bare except
            time.sleep(0.5)
            return {"accuracy": 0.5, "loss": 0.7}  # finished well before the kill, but past the limit
''')


@pytest.mark.parametrize("task, executor, says", [
    ("IgnoresAlarm", "serial", "and did not stop (it ignored or caught the alarm): its process was killed"),
    ("IgnoresAlarm", "auto", "and did not stop (it ignored or caught the alarm): its process was killed"),
    ("CatchesAlarm", "serial", "(it caught or ignored the alarm and ended after"),
])
def test_a_task_that_ignores_or_catches_the_timeout_still_fails_by_it(tmp_path, monkeypatch, task, executor, says):
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    monkeypatch.syspath_prepend(str(tmp_path))  # the worker processes inherit the path
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: s\ntask: stubborn:{task}\nseeds: [0]\nparams: {{steps: 5}}\narms:\n  a: {{}}\n")
    ran = api.run(suite, api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1, trial_timeout=1.0,
                                        executor=executor))
    assert ran.exit_code == 1  # a failed trial
    (path,) = (tmp_path / "r" / "s" / "default" / "trials").glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "failed" and record["error"].startswith("TrialTimeout: the trial ran past "
                                                                       "--trial-timeout 1s")
    assert says in record["error"]
    assert not (tmp_path / "r" / "s" / "default" / "run.incomplete").exists()  # the run went on and completed
