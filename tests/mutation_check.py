"""Break one mechanism at a time and see what catches it: the tests, the CI gate, or nothing.

Not part of the default test run (it takes minutes per break). Each break is a small, realistic
edit a refactor could make, applied to a scratch copy of this checkout (tracked and untracked,
non-ignored files, uncommitted edits included, as they were when the script started); the copy then
runs

- the tests: ``python -m pytest -x -q``, the fast tier first, then the integration tier (caught = a
  failure in either);
- the CI gate: ``harness run <suites> --profile ci`` and ``harness gate`` against the committed
  baselines (caught = a failed trial or a regression).

Usage (from the repository root)::

    python tests/mutation_check.py                     # every break, tests and gate
    python tests/mutation_check.py --only vocab-no-split-rows --skip-tests
    python tests/mutation_check.py --only results-id-unbound --skip-gate --tests tests/test_received_folder.py
    python tests/mutation_check.py --list

Every break's ``old`` text must occur exactly once in its file, so a refactor that moves the code
makes the script stop with the stale break's name instead of silently testing nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS_DIR = ROOT.parent / "shared" / "seeds"


@dataclass(frozen=True)
class Break:
    name: str
    area: str  # the mechanism or part it breaks
    path: str
    old: str
    new: str
    suites: tuple[str, ...]  # the suites whose CI profile should notice (empty: gating/statistics code)
    what: str


BREAKS = (
    Break("vocab-no-split-rows", "vocab", "harness/tasks/vocab/mechanism/pooling.py",
          "    if hit.numel() == 0:\n", "    if True:\n", ("vocab",),
          "the split pooled forward never reads its split rows (always the shared bag)"),
    Break("vocab-permuted-index", "vocab", "harness/tasks/vocab/task.py",
          "        return top_pairs(candidates, scores, size)\n",
          "        return top_pairs(candidates, rng.permutation(scores), size)\n", ("vocab",),
          "the interference index takes a permutation of the measured scores"),
    Break("vocab-gate-ignored", "vocab", "harness/tasks/vocab/mechanism/pooling.py",
          "        hit_weight = hit_weight * split.gate().index_select(0, hit_row)\n",
          "        hit_weight = hit_weight * 1.0\n", ("vocab",),
          "gated mode ignores its gates (a split row replaces the shared row outright)"),
    Break("routing-uniform-weights", "routing", "harness/tasks/routing/mechanism/precision_router.py",
          "        return uncertainty / (uncertainty.sum(dim=1, keepdim=True) + self.eps)\n",
          "        return torch.ones_like(uncertainty) / uncertainty.shape[1]\n", ("routing",),
          "the precision router pools uniformly instead of by precision"),
    Break("routing-projector-mean", "routing", "harness/tasks/routing/mechanism/msa.py",
          "        return cosine.mean(dim=2).amax(dim=1)\n", "        return cosine.mean(dim=2).mean(dim=1)\n",
          ("routing",), "the RouterProjector pools query tokens by mean instead of max"),
    Break("er2-compressed-zero", "er2", "harness/tasks/er2/mechanism/er2.py",
          "            return projected, gate, gain * gate * projected\n",
          "            return projected, gate, 0.0 * projected\n", ("er2", "er2_mqar"),
          "the compressed residual memory contributes nothing to the output"),
    Break("er2-decay-one-token-late", "er2", "harness/tasks/er2/mechanism/ops/chunk.py",
          "    scale = split(log_decay).cumsum(dim=3).exp()  # c_t: decay from the chunk start to t inclusive\n",
          "    scale = (split(log_decay).cumsum(dim=3) - split(log_decay)).exp()\n", ("er2", "er2_mqar"),
          "the chunked recurrence applies each token's decay one token late"),
    Break("er2-state-bytes-fp32", "er2", "harness/tasks/er2/mechanism/er2.py",
          "        memory_bytes = self.storage_dtype.itemsize\n", "        memory_bytes = 4\n", ("er2", "er2_mqar"),
          "recurrent state bytes counted as fp32 whatever the storage dtype"),
    Break("stats-sign-flipped", "statistics", "harness/analysis/stats/paired_stats.py",
          "    differences = treated - controlled\n", "    differences = controlled - treated\n",
          ("vocab",), "paired differences computed as control minus treatment"),
    Break("stats-dof-off-by-one", "statistics", "harness/analysis/stats/paired_stats.py",
          "    return float(scipy.stats.t.isf(level, n - 1))\n",
          "    return float(scipy.stats.t.isf(level, n))\n", ("vocab",),
          "the deciding t interval uses n instead of n - 1 degrees of freedom (too narrow)"),
    Break("stats-holm-unscaled", "statistics", "harness/analysis/stats/paired_stats.py",
          '    return _adjusted(p_values, "holm")\n',
          "    return [float(p) for p in p_values]\n", ("vocab",),
          "Holm's adjustment forgets to scale the p-values"),
    Break("gate-direction-ignored", "gating", "harness/gating/values.py",
          "    passed = sign * (current.value - value) >= -tolerance\n",
          "    passed = current.value - value >= -tolerance\n", (),
          "the gate treats every quality metric as higher-is-better"),
    Break("gate-bytes-not-exact", "gating", "harness/gating/values.py",
          '    return Judged(current.value == reference.value, "must be equal")\n',
          '    return Judged(abs(current.value - reference.value) <= 0.5 * abs(reference.value), "must be equal")\n', (),
          "bytes may move by half their value"),
    # Kinds the list above lacked (leaks, wrong sets, caches, training loops,
    # seeding, resume, claims, the gate's bookkeeping).
    Break("er2-causal-mask-leak", "er2", "harness/tasks/er2/mechanism/ops/chunk.py",
          "    inclusive = torch.ones(n, n, dtype=torch.bool, device=k.device).tril().repeat(groups, 1)\n",
          "    inclusive = torch.ones(n, n, dtype=torch.bool, device=k.device).tril(1).repeat(groups, 1)\n",
          ("er2", "er2_mqar"), "the chunked read mask lets each token read the next token's write (future leak)"),
    Break("routing-precision-inverted", "routing", "harness/tasks/routing/mechanism/precision_router.py",
          "        return 1.0 / (combined + self.eps)\n", "        return combined\n", ("routing",),
          "the precision router weights tokens by precision instead of uncertainty"),
    Break("vocab-split-rows-untrained", "vocab", "harness/tasks/vocab/training.py",
          "    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)\n",
          "    optimizer = torch.optim.Adam([model.table], lr=config.lr)\n", ("vocab",),
          "the optimiser is built on the shared table only: split rows and gates never step"),
    Break("vocab-contested-wrong-set", "vocab", "harness/tasks/vocab/task.py",
          '        ranks["contested_"] = (forward, backward, contested)\n',
          '        ranks["contested_"] = (forward, backward, ~contested)\n', ("vocab",),
          "contested_acc1 is computed over the uncontested test pairs (mask inverted)"),
    Break("routing-recall-k-off-by-one", "routing", "harness/tasks/routing/evaluation.py",
          '        f"recall@{k}": float((ranks <= k).double().mean()),\n',
          '        f"recall@{k}": float((ranks < k).double().mean()),\n', ("routing",),
          "recall@k counts the top k - 1 documents"),
    Break("routing-bank-names-leak", "routing", "harness/tasks/routing/task.py",
          '        training_names, bank_names = split_names(layout, [params.backbone.docs, params.bank_size], '
          'ctx.stream("names"))\n',
          '        training_names = split_names(layout, [params.backbone.docs], ctx.stream("names"))[0]\n'
          '        bank_names = split_names(layout, [params.bank_size], ctx.stream("names"))[0]\n', ("routing",),
          "the held-out bank's entity names are drawn apart from the training names, from the same stream "
          "(the bank reuses training names)"),
    Break("seed-purpose-truncated", "spine", "harness/services/seeding.py",
          "    text = json.dumps([int(seed), *(str(part) for part in purpose)])\n",
          "    text = json.dumps([int(seed), *(str(part) for part in purpose[:1])])\n", ("vocab",),
          "a derived seed reads only the first purpose part (vocab's train and test streams coincide)"),
    Break("cache-key-without-seed", "spine", "harness/services/cache.py",
          '        {"format": CACHE_FORMAT, "task": task, "version": task_version, "kind": kind, "seed": seed,\n',
          '        {"format": CACHE_FORMAT, "task": task, "version": task_version, "kind": kind,\n', ("vocab",),
          "the per-seed artifact cache is keyed without the seed (every seed loads seed 0's artifact)"),
    Break("resume-failed-as-finished", "spine", "harness/store.py",
          '        return {trial_id: r for trial_id, r in records.items() if r.finished}\n',
          "        return dict(records)\n", (), "resume treats a stored failed trial as finished and never reruns it"),
    Break("allocation-stops-validity-arms", "allocation", "harness/execution/allocation.py",
          "    validity = results.stored.validity\n", "    validity = None\n", (),
          "a sequential run stops the validity controls' arms while validity is read again at the last look"),
    Break("claims-ni-no-reference", "claims", "harness/analysis/decide/claims.py",
          "    if reference is not None and not reference.established:\n",
          "    if not test.directional and reference is not None and not reference.established:\n", (),
          "a non-inferiority claim passes without its established reference effect"),
    Break("claims-ni-margin-sign", "claims", "harness/analysis/claim_tests/non_inferior.py",
          "        return -margin\n", "        return margin\n", (),
          "non-inferiority tests against +margin (better side) instead of -margin"),
    Break("claims-superior-margin-ignored", "claims", "harness/analysis/claim_tests/superior.py",
          "        return margin\n", "        return 0.0\n", (),
          "a superiority claim's practical margin is ignored (a gain below it passes)"),
    Break("stats-pairs-by-position", "statistics", "harness/analysis/stats/paired_stats.py",
          "        np.array([control[k] for k in keys], dtype=np.float64),\n",
          "        np.array([v for v in control.values() if _finite(v)][: len(keys)], dtype=np.float64),\n", (),
          "control values paired by position, not by seed (wrong pairs once a seed fails on one side)"),
    Break("gate-ignores-failed-trials", "gating", "harness/gating/gate.py",
          "            self.regressions or self.missing_in_run or self.failed_trials or self.missing_trials "
          "or self.dropped_seeds\n",
          "            self.regressions or self.missing_in_run or self.missing_trials or self.dropped_seeds\n", (),
          "the gate passes a run with failed trials (it lists them but does not fail)"),
    # the five breaks that once got past both the tests and the gate
    Break("stats-bh-not-bh", "statistics", "harness/analysis/stats/paired_stats.py",
          '    return _adjusted(p_values, "fdr_bh")\n',
          '    return _adjusted(p_values, "fdr_by")\n', (),
          "the exploratory q-values are Benjamini-Yekutieli's, not Benjamini-Hochberg's"),
    Break("gate-claims-skipped-without-speed", "gating", "harness/gating/gate.py",
          "    not_gated = {identity for identity, v in stored.items() if not speed and _speed_value(results, v)}\n",
          "    not_gated = {identity for identity, v in stored.items() if not speed and (_speed_value(results, v) "
          "or CHECK_KINDS[v.check].holds_claim)}\n", (),
          "a profile that does not gate speed skips every claim check"),
    Break("routing-sharp-exponent-is-temperature", "routing", "harness/tasks/routing/routers.py",
          "            router.power = 1.0 / sharp_temperature\n",
          "            router.power = sharp_temperature\n", ("routing",),
          "precision_sharp raises the weights to the temperature instead of its inverse"),
    Break("summary-counts-undetermined", "analysis", "harness/analysis/decide/verdicts.py",
          "        return self.status in (VALID, UNDECLARED)\n",
          "        return self.status in (VALID, UNDECLARED, UNDETERMINED)\n", (),
          "the summary's totals count the claims of a suite whose validity is undetermined"),
    Break("gate-markdown-hides-flipped-claim", "gating", "harness/gating/gate_report.py",
          "    if not check.passed:\n        return True\n",
          "    if check.check == \"claim\":\n        return check.near_boundary\n"
          "    if not check.passed:\n        return True\n", (),
          "the gate's Markdown leaves out a claim that flipped to FAIL"),
    # what keeps a received folder data and the outputs unforgeable
    Break("gate-contrast-one-sided", "gating", "harness/gating/values.py",
          "    if not _direction_certain(reference.value, reference.spread):\n",
          "    if True:\n", (),
          "contrasts the baseline is sure of are gated one way only (an arm that jumped passes)"),
    Break("gate-unaccounted-values-pass", "gating", "harness/gating/gate.py",
          "    for identity in [i for i in reference if i not in accounted]:\n",
          "    for identity in []:\n", (),
          "a baseline value the gate made no check of passes quietly"),
    Break("claim-flip-always-near", "gating", "harness/analysis/compare/claim_moves.py",
          "    return any(abs(t - edge * c) <= NEAR_T for c in critical)\n",
          "    return True\n", (),
          "gate and compare call every claim flip the statistic explains 'near the boundary', however far"),
    Break("claim-estimate-move-ignored", "gating", "harness/analysis/compare/claim_moves.py",
          "    beyond = abs(change) > tolerance\n",
          "    beyond = False\n", (),
          "a claim whose estimate moved far passes the gate and compare while its label holds"),
    Break("git-reads-the-suite-tree", "provenance", "harness/execution/runner.py",
          "    env = environment(device)  # the git state of the harness checkout: a suite's own tree is never read\n",
          "    env = environment(device)\n    from harness.tracking.environment import git_diff as _gd\n"
          "    _gd(suite.source.parent)\n", (),
          "the git state is read in the tree holding the suite (its configured programs run)"),
    Break("store-keeps-foreign-locations", "tracking", "harness/tracking/sqlite_store.py",
          "                if location == expected or not expected.startswith(new_prefix + \"/\"):\n",
          "                if location == expected or not expected.startswith(new_prefix + \"/\") or \"://\" in location "
          "and not location.startswith(\"file:\"):\n", (),
          "a received store's server artifact location is kept (run and reproduce upload there)"),
    Break("tracker-unconfined", "tracking", "harness/tracking/mlflow_tracker.py",
          "        self.confined = confined and artifact_root is not None\n",
          "        self.confined = False\n", (),
          "the tracker logs to whatever artifact location a store names"),
    Break("metric-names-unchecked", "suite", "harness/core/metrics.py",
          "    if isinstance(key, str) and METRIC_KEY.fullmatch(key):\n",
          "    if isinstance(key, str):\n", (),
          "claim metric names with markup, escapes or newlines are accepted"),
    Break("markdown-names-raw", "analysis", "harness/analysis/present/markdown_tables.py",
          "    return _MARKUP.sub(r\"\\\\\\1\", plain(text))\n",
          "    return str(text)\n", (),
          "stored names reach the Markdown summary and gate report unescaped"),
    # the integrity the hostile probe asked for: claims, trial sets, received folders, provenance, bounds
    Break("claims-superior-tie-passes", "claims", "harness/analysis/claim_tests/superior.py",
          "    strict = True  # an exact tie is not better, it fails\n", "    strict = False\n", (),
          "superior passes on an exactly zero difference (an arm identical to its control)"),
    Break("stale-trials-analysed", "store", "harness/suite/stored.py",
          "            return trial_id in self.trial_ids\n",
          "            return True\n", (),
          "report, gate, plan and reproduce read trials of another expansion or other seeds"),
    Break("design-lock-ignored", "store", "harness/suite/design.py",
          "    if not changed or not holds_trials:\n",
          "    if True:\n", (),
          "a run with another design (seeds, claims, schedule) mixes its trials into a locked folder"),
    Break("incomplete-run-never-marked", "store", "harness/store.py",
          '        write_text_atomic(self.path / INCOMPLETE_FILE, f"harness run started by process {os.getpid()}\\n")\n',
          "        pass\n", (),
          "a run that ends before every trial is stored leaves a folder that reads as a result"),
    Break("cache-hash-unrecorded", "provenance", "harness/tasks/base.py",
          '        self._record("cache", kind, {"key": key, "loaded": artifact.loaded, "sha256": artifact.sha256,\n',
          '        self._record("cache", kind, {"key": key, "loaded": artifact.loaded,\n', (),
          "a trial's details do not name the bytes of the cache artifact it loaded (a replaced one is invisible)"),
    Break("kernel-loaded-by-path", "provenance", "harness/tasks/er2/mechanism/ops/fused_decode.py",
          "    kernel = _load(trusted[0])\n",
          "    os.close(trusted[0])\n    kernel = ctypes.CDLL(str(library))\n", (),
          "the ER2 kernel is loaded by its path after the check (a swapped folder's library runs)"),
    Break("cached-file-trusted-whoever-wrote-it", "provenance", "harness/core/files.py",
          "        if info.st_uid == os.getuid() and not info.st_mode & 0o022:\n", "        if True:\n", (),
          "a cached kernel or store template that others can write (or another user owns) is used"),
    Break("regular-file-links-followed", "received", "harness/core/files.py",
          "        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)\n",
          "        fd = os.open(path, flags | os.O_NONBLOCK, mode)\n", (),
          "a trial, suite or lock file that is a symbolic link is opened (and a lock created) through the link"),
    Break("report-through-linked-folder", "received", "harness/analysis/present/run_report.py",
          "        if folder.is_symlink():  # a received folder's report/ may point anywhere: never written through\n"
          "            folder.unlink()\n",
          "        pass\n", (),
          "a received folder's symlinked report/ is written through"),
    Break("results-id-unbound", "tracking", "harness/tracking/mlflow_tracker.py",
          '    return hashlib.sha256(f"{value}\\n{os.path.realpath(run_dir)}".encode()).hexdigest()[:32]\n',
          "    return value\n", (),
          "a copied folder (or an edited results-id) shares the original's id and deletes its runs"),
    Break("mirror-trusts-markers-on-shared-store", "tracking", "harness/tracking/mlflow_tracker.py",
          "    if tracker.shared:\n        return False\n",
          "", (),
          "runs another folder deleted in a shared store are never logged again (the markers are believed)"),
    Break("nan-curve-step-mirrored", "tracking", "harness/tracking/mlflow_tracker.py",
          "                if value is not None  # a NaN point, stored as null\n",
          "", (),
          "a NaN curve step (stored as null) crashes every mirror of its trial"),
    Break("task-chdir-kept", "spine", "harness/execution/executor.py",
          "        if os.getcwd() != cwd:\n            os.chdir(cwd)\n",
          "        pass\n", (),
          "a task's os.chdir outlives its trial (later trials and the store write elsewhere)"),
    Break("run-sigint-not-restored", "spine", "harness/cli/run_commands.py",
          "    signal.signal(signal.SIGINT, _interrupt)\n",
          "", (),
          "harness run started in the background (SIGINT ignored) cannot be stopped with Ctrl-C"),
    Break("gettext-catalogs-unchecked", "provenance", "harness/tasks/vocab/gettext.py",
          "        if digest != file.hash.value:\n",
          "        if False:\n", (),
          "a replaced gettext catalog is used under the installed release's name"),
    Break("planner-unbounded", "statistics", "harness/analysis/stats/sequential_design.py",
          "    rows = max(1, SIMULATION_BYTES // (3 * 8 * width))  # draws, sums and squares\n",
          "    rows = paths\n", (),
          "the sequential planner draws every simulated path at once (memory grows with the seeds)"),
    # nine that got past both the tests and the gate (tests/test_fresh_breaks.py, tests/test_code_hash.py)
    Break("design-lock-without-claims", "store", "harness/suite/resolved_suite.py",
          "for key in DESIGN_KEYS[1:-1]},",
          'for key in DESIGN_KEYS[1:-1]}, "claims": [],', (),
          "the design lock leaves out the claims: a rerun with changed claims reuses the folder's trials"),
    Break("superseded-matched-by-arm", "store", "harness/execution/runner.py",
          "    current = {(t.arm_label, t.point_label, t.seed): t.trial_id for t in trials}\n"
          "    superseded = [r for r in records.values()\n"
          "                  if current.get((r.arm_label, r.point_label, r.seed), r.trial_id) != r.trial_id]\n",
          "    current = {(t.arm, t.point_label, t.seed): t.trial_id for t in trials}\n"
          "    superseded = [r for r in records.values()\n"
          "                  if current.get((r.arm, r.point_label, r.seed), r.trial_id) != r.trial_id]\n", (),
          "stored trials are matched to this run's by arm, not arm label: a swept arm's variants supersede each other"),
    Break("code-hash-skips-c-sources", "provenance", "harness/tasks/source.py",
          'NATIVE_SUFFIXES = (".c", ".cpp", ".cu", ".h")\n', 'NATIVE_SUFFIXES = (".cpp", ".cu", ".h")\n', (),
          "the code hash skips .c sources: an edit to a task's C kernel reuses its trials"),
    Break("summary-valid-counts-undetermined", "analysis", "harness/analysis/present/run_summary.py",
          "    valid = sum(1 for s in summaries if s.analysis.validity.status in (VALID, UNDECLARED))\n",
          "    valid = sum(1 for s in summaries if s.analysis.validity.status in (VALID, UNDECLARED, UNDETERMINED))\n",
          (), "the totals count a suite whose validity is undetermined as valid"),
    Break("gate-zero-spread-default-tolerance", "gating", "harness/gating/values.py",
          "    if baseline_spread is not None and current_spread is not None:\n",
          "    if baseline_spread and current_spread:\n", (),
          "a value every seed agreed on (zero spread) is gated with the suite's default tolerance"),
    Break("mirror-drops-zeros", "tracking", "harness/tracking/trial_view.py",
          "        return value is not None and not (value == 0 and self._informational(key))\n",
          "        return bool(value) and not self._informational(key)\n", (),
          "the MLflow mirror drops every final metric whose value is 0.0"),
    Break("export-arm-columns-swapped", "analysis", "harness/analysis/present/trial_table.py",
          '                    "arm": trial.arm, "arm_label": trial.arm_label,',
          '                    "arm": trial.arm_label, "arm_label": trial.arm,', (),
          "harness export swaps the arm and arm-label columns"),
    Break("history-interval-swapped", "analysis", "harness/analysis/present/claim_history.py",
          '    return f"[{format_value(point.low)}, {format_value(point.high)}]"\n',
          '    return f"[{format_value(point.high)}, {format_value(point.low)}]"\n', (),
          "harness history prints each interval with its ends swapped"),
    # the hostile probe's foreign code, fail-open design lock, forged tuning lock and defeated timeout
    Break("tune-lock-choice-unchecked", "suite", "harness/suite/tuning_plan.py",
          "        check_choice(lock, spec.tune, suite, name, tuning, entry)\n", "", (),
          "a tuning lock's chosen params are applied without checking them against its own per-seed grid values"),
    Break("design-lock-fails-open", "store", "harness/suite/design.py",
          "        if not holds_trials:\n            return  # nothing was analysed under it: the run writes its own\n",
          "        return\n", (),
          "trials whose suite.json is emptied or damaged are reused under whatever design the next run brings"),
    Break("received-task-imported", "received", "harness/tasks/__init__.py",
          "    if name in registered or name in registered.values() or name in trusted:\n", "    if True:\n", (),
          "reproduce imports whatever module a received record names"),
    Break("cwd-on-import-path", "received", "harness/__main__.py",
          "sys.path[:] = _without_current_folder(sys.path)\n", "", (),
          "python -m harness imports modules from the current folder (a received folder's planted module)"),
    Break("plugin-import-unguarded", "plugins", "harness/tasks/plugins.py",
          "    except Exception as exc:\n", "    except ArithmeticError as exc:\n", (),
          "a task plugin that raises at import crashes harness list with a traceback"),
    Break("plugin-exit-not-contained", "plugins", "harness/tasks/plugins.py",
          "exit_refused(PluginExit), ", "contextlib.nullcontext(), ", (),
          "a task plugin that calls os._exit(0) at import ends harness list or run with status 0"),
    Break("plugin-clash-first-wins", "plugins", "harness/tasks/__init__.py",
          "    if clash:\n", "    if False:\n", (),
          "two packages registering one task name: the first on the path wins, silently"),
    Break("task-posix-exit-uncontained", "spine", "harness/core/processes.py",
          "    os._exit = posix._exit = refuse\n", "    os._exit = refuse\n", (),
          "a task calling posix._exit(0) mid-trial ends the run with status 0"),
    Break("task-code-package-only", "provenance", "harness/tasks/source.py",
          '    return _is_owned(module, package) or not _versioned_elsewhere(module.partition(".")[0])\n',
          "    return _is_owned(module, package)\n", (),
          "an edit to a helper module outside the task's package reuses the stored trials"),
    Break("trial-timeout-in-process", "spine", "harness/execution/parallel.py",
          "    if timeout_s is None or declared.remote or declared.in_workers:\n", "    if True:\n", (),
          "--trial-timeout is an in-process alarm only: a task that ignores SIGALRM runs on"),
    Break("late-trial-stored-finished", "spine", "harness/execution/executor.py",
          "    if status is Status.FINISHED and timeout_s is not None and elapsed > timeout_s:  # it caught or ignored the alarm\n",
          "    if False:\n", (),
          "a trial that catches the timeout and finishes late is stored as finished"),
    Break("numeric-mode-unpinned", "spine", "harness/core/numeric.py",
          "        environ.update(pins())\n",
          "        environ.update({})\n", (),
          "the deterministic numeric mode pins no ISA level: torch, MKL and oneDNN pick this CPU's best kernels"),
    Break("margin-fail-hides-direction", "statistics", "harness/analysis/claim_tests/superior.py",
          "        if margin > 0 and low > 0:\n", "        if margin > 0 and low > margin:\n", (),
          "a superiority claim surely better than 0 but short of its margin reads FAIL like one surely not better"),
    Break("timing-in-quality-family", "statistics", "harness/analysis/claim_tests/contract.py",
          '        return TIMING_FAMILY if spec.kind == "speed" else QUALITY_FAMILY\n', "        return QUALITY_FAMILY\n", (),
          "speed claims share the quality claims' Holm family, so timing noise makes quality claims harder to pass"),
    Break("premises-unspent-across-looks", "statistics", "harness/analysis/decide/looks.py",
          "    return design.levels(design.looks if design.sequential else taken, claim_alpha(results.confidence))"
          "[len(taken) - 1]\n",
          "    return claim_alpha(results.confidence)\n", (),
          "a sequential design reads premises and validity at the unadjusted level at every look"),
    Break("skew-guard-off", "statistics", "harness/analysis/decide/claims.py",
          "    return smallest_one_sided_sign_flip_p(result.n) > level or flip <= level\n", "    return True\n", (),
          "a claim that only the t test decides (skewed differences) is decided anyway"),
    Break("cannot-fail-control-unnamed", "statistics", "harness/analysis/decide/verdicts.py",
          "    return ceiling is not None and len(values) >= 2 and all(v == ceiling for v in values)\n",
          "    return False\n", (),
          "a positive control at its metric's ceiling on every seed (an oracle) passes as a control that could fail"),
    Break("validity-never-futile", "statistics", "harness/analysis/decide/verdicts.py",
          "    if futility is None or not futility.futile:\n", "    if True:\n", (),
          "a positive control too weak to be shown by max_seeds keeps a sequential run adding seeds to UNDETERMINED"),
    Break("superseded-never-restored", "store", "harness/execution/runner.py",
          "    back = folder.restorable([t.trial_id for t in trials if t.trial_id not in records])\n",
          "    back: dict[str, TrialRecord] = {}\n", (),
          "a reverted edit reruns every trial whose record sits in trials/superseded/ under the same id"),
    Break("redesign-records-restored", "store", "harness/store.py",
          "            if trial_id in redesigned or not path.is_file():\n",
          "            if not path.is_file():\n", (),
          "records --redesign set aside (run before the design was fixed) come back into the new design's analysis"),
    # the declared skewness bound and its calibrated critical values (tests/test_skew_calibration.py)
    Break("skew-bound-ignored", "statistics", "harness/analysis/stats/sequential_design.py",
          "        return nominal_levels(looks, alpha, self.spending, self.skew_bound)\n",
          "        return nominal_levels(looks, alpha, self.spending)\n", (),
          "a design that declares a skewness bound decides on the normal-theory critical values"),
    Break("skew-bound-not-stored", "statistics", "harness/analysis/stats/sequential_design.py",
          "        return cls(first, spec.max_seeds, spec.batch, spec.spending, spec.futility, spec.futility_from, "
          "spec.skew_bound)\n",
          "        return cls(first, spec.max_seeds, spec.batch, spec.spending, spec.futility, spec.futility_from)\n", (),
          "the skewness bound a results folder's design declares is not read back, so its run decides without it"),
    Break("skew-bound-unhashed", "store", "harness/suite/schema.py",
          "        if self.skew_bound is None:\n            stored.pop(\"skew_bound\", None)\n",
          "        stored.pop(\"skew_bound\", None)\n", (),
          "the declared skewness bound is left out of the stored design (and its hash), so a run never reads it"),
    Break("skew-calibration-not-cumulative", "statistics", "harness/analysis/stats/skew_calibration.py",
          "            allowed = math.floor(INFLATION * spent[k] * CALIBRATION_PATHS) - crossed\n",
          "            allowed = math.floor(INFLATION * spent[k] * CALIBRATION_PATHS)\n", (),
          "each look is calibrated as if no earlier look had spent anything (the error adds up over the looks)"),
    Break("skew-calibration-trusts-t-early", "statistics", "harness/analysis/stats/skew_calibration.py",
          "                    value = max(value, float(np.nextafter(survivors.max(), np.inf)))\n",
          "                    value = floors[k]\n", (),
          "an early look too small to calibrate keeps the normal-theory boundary (2.6x the level over looks 3-12)"),
    Break("skew-calibration-below-t", "statistics", "harness/analysis/stats/skew_calibration.py",
          "                    value = max(value, float(np.partition(survivors, rank)[rank]))\n",
          "                    value = float(np.partition(survivors, rank)[rank])\n", (),
          "a calibrated critical value may fall below t's, so normal data err beyond the level"),
    Break("skew-premises-uncalibrated", "statistics", "harness/analysis/decide/looks.py",
          "    return design.levels(design.looks if design.sequential else taken, claim_alpha(results.confidence))"
          "[len(taken) - 1]\n",
          "    return Schedule(design.first, design.max_seeds, design.batch, design.spending).levels(\n"
          "        design.looks if design.sequential else taken, claim_alpha(results.confidence))[len(taken) - 1]\n", (),
          "premises and validity are read at the normal-theory levels under a declared skewness bound"),
    Break("skew-check-one-sided", "statistics", "harness/analysis/stats/skew_calibration.py",
          "    pooled = float(np.mean([abs(g) for g, _ in measured]))\n",
          "    pooled = float(np.mean([g for g, _ in measured]))\n", (),
          "the pooled skewness lets sets skewed one way cancel sets skewed the other (a run beyond its bound passes)"),
    # the statistics taken from scipy and statsmodels (tests/test_library_statistics.py)
    Break("stats-sign-flip-doubled", "statistics", "harness/analysis/stats/paired_stats.py",
          '        (data,), statistic, permutation_type="samples", vectorized=True, alternative="greater",\n',
          '        (data,), statistic, permutation_type="samples", vectorized=True, alternative="two-sided",\n', (),
          "the sign-flip p-values count both tails of the permutation distribution (twice the p, the guard too strict)"),
    Break("stats-sign-flip-pairs", "statistics", "harness/analysis/stats/paired_stats.py",
          '        (data,), statistic, permutation_type="samples", vectorized=True, alternative="greater",\n',
          '        (data,), statistic, permutation_type="independent", vectorized=True, alternative="greater",\n', (),
          "the sign-flip test permutes the values instead of flipping their signs"),
    Break("stats-t-interval-level", "statistics", "harness/analysis/stats/paired_stats.py",
          "        test = scipy.stats.ttest_1samp(data, 0.0)\n        interval = test.confidence_interval(confidence)\n",
          "        test = scipy.stats.ttest_1samp(data, 0.0)\n"
          "        interval = test.confidence_interval(1.0 - 2.0 * (1.0 - confidence))\n", ("vocab",),
          "the t interval is built at twice the error the run's confidence allows (too narrow)"),
    Break("stats-power-two-sided", "statistics", "harness/analysis/stats/paired_stats.py",
          '    return float(TTestPower().power(effect_in_sd, n, alpha, alternative="larger"))\n',
          '    return float(TTestPower().power(effect_in_sd, n, alpha, alternative="two-sided"))\n', (),
          "the one-sided claims' power (MDE, planning) is a two-sided test's"),
)


def snapshot(destination: Path) -> None:
    """Tracked and untracked non-ignored files of this checkout, as they are on disk now: every break
    starts from this copy, so edits made while the script runs do not leak into it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def apply(one: Break, repo: Path) -> None:
    path = repo / one.path
    text = path.read_text(encoding="utf-8")
    if text.count(one.old) != 1:
        raise SystemExit(f"break {one.name!r} is stale: its text occurs {text.count(one.old)} times in {one.path}")
    path.write_text(text.replace(one.old, one.new), encoding="utf-8")


def environment(repo: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_WAIT_POLICY="PASSIVE", MPLBACKEND="Agg")
    if SEEDS_DIR.is_dir():
        env.setdefault("HARNESS_SEEDS_DIR", str(SEEDS_DIR))
    return env


TEST_TIERS = ("not slow and not integration", "integration and not slow")  # together: the default test run


def tests_catch(repo: Path, only: list[str] | None = None) -> bool:
    """Both test tiers, the fast one first: a break a unit test catches is known in minutes, not
    after the subprocess-heavy integration tier. ``only``: these test files or node ids instead, in
    both tiers (a quick check that the tests written for a break catch it; the whole run may catch more)."""
    for tier in TEST_TIERS:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", tier,
                               *(only or ())], cwd=repo, env=environment(repo), capture_output=True, text=True)
        if proc.returncode not in (0, 5):  # 5: the tier selected no test
            return True
    return False


def gate_catches(repo: Path, suites: tuple[str, ...], profile: str) -> bool:
    env = environment(repo)
    results = repo / "results" / "mutation"
    caught = False
    for suite in suites:
        run = subprocess.run([sys.executable, "-m", "harness", "run", f"suites/{suite}.yaml", "--profile", profile,
                              "--results", str(results), "--no-mlflow"], cwd=repo, env=env, capture_output=True,
                             text=True)
        gated = subprocess.run([sys.executable, "-m", "harness", "gate", str(results / suite / profile)], cwd=repo,
                               env=env, capture_output=True, text=True)
        if run.returncode == 2 or gated.returncode == 2:
            raise SystemExit(f"{suite}: usage error in the CI run or gate:\n{run.stderr}{gated.stdout}{gated.stderr}")
        caught = caught or run.returncode != 0 or gated.returncode != 0
    return caught


def run_break(one: Break, base: Path, args: argparse.Namespace) -> dict[str, object]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutation-{one.name}-") as folder:
        repo = Path(folder) / "repo"
        shutil.copytree(base, repo)
        apply(one, repo)
        tests = None if args.skip_tests else tests_catch(repo, args.tests)
        gate = None if args.skip_gate or not one.suites else gate_catches(repo, one.suites, args.profile)
    row = {"break": one.name, "area": one.area, "what": one.what, "tests": tests, "gate": gate,
           "either": bool(tests) or bool(gate), "seconds": round(time.monotonic() - started, 1)}
    mark = {True: "caught", False: "MISSED", None: "-"}
    print(f"{one.name:<28} tests {mark[tests]:<7} gate {mark[gate]:<7} ({row['seconds']} s)", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="names of the breaks to run (default: all)")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-gate", action="store_true")
    parser.add_argument("--tests", nargs="+", metavar="PATH",
                        help="run only these test files or node ids (both tiers) instead of the whole test suite")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--list", action="store_true", help="list the breaks and exit")
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args()
    chosen = [b for b in BREAKS if not args.only or b.name in args.only]
    unknown = set(args.only or ()) - {b.name for b in BREAKS}
    if unknown:
        raise SystemExit(f"unknown break(s): {', '.join(sorted(unknown))}")
    if args.list:
        for one in chosen:
            print(f"{one.name:<28} {one.area:<11} {one.what}")
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="mutation-base-") as base_folder:
        base = Path(base_folder) / "repo"
        snapshot(base)
        for one in chosen:
            rows.append(run_break(one, base, args))
    gated = [r for r in rows if r["gate"] is not None]
    print(f"\n{sum(r['either'] for r in rows)} of {len(rows)} breaks caught by tests or gate; the gate alone caught "
          f"{sum(bool(r['gate']) for r in gated)} of the {len(gated)} it ran on")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
