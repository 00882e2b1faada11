"""A trial's environment read typed: the dirty flags are bools (None where not recorded or outside git),
keys the harness does not read are kept as written, and what the writer gives reads back to itself."""
from __future__ import annotations

import torch

from harness.core.stored_fields import as_stored
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.tracking.environment import environment


def test_the_dirty_flags_read_as_bools_and_unknown_ones_as_none():
    assert TrialEnvironment.of({"git_dirty": "true"}).git_dirty is True
    assert TrialEnvironment.of({"git_dirty": "false"}).git_dirty is False
    assert TrialEnvironment.of({}).git_dirty is None  # a record written before it was recorded
    assert TaskEnvironment.of({"task_git_dirty": "none"}).task_git_dirty is None  # the task is in no git checkout
    assert TaskEnvironment.of({"task_untracked_files": "a.py b.py"}).untracked
    assert not TaskEnvironment.of({}).untracked


def test_a_fresh_environment_is_written_as_strings_with_only_the_keys_set():
    written = as_stored(TrialEnvironment(git_commit="c" * 40, git_dirty=True, device_name="cpu", rest={"torch": "2"}))
    assert written == {"git_commit": "c" * 40, "git_dirty": "true", "device": "", "device_name": "cpu", "cpu_model": "",
                       "torch_threads": "", "torch": "2"}  # no run id, no peak: a key a record may lack stays absent
    assert as_stored(TaskEnvironment(task_git_dirty=None))["task_git_dirty"] == "none"


def test_what_the_writer_gives_reads_back_to_itself():
    written = environment(torch.device("cpu"))
    read = TrialEnvironment.of(written)
    assert as_stored(read) == written and all(isinstance(value, str) for value in written.values())
    assert read.git_dirty in (True, False) and written["git_dirty"] == str(read.git_dirty).lower()
    assert read.peak_fp32_flops is not None and "torch" in read.rest
