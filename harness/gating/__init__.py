"""Baselines and the CI gate: did this run regress against the committed reference?

What is compared, and how, follows what is stable across runs of the same code:
- quality metrics (with a direction): arm mean over seeds, and each contrast's mean paired
  difference (treatment - control, the mechanism's own effect), each allowed to worsen by at most
  SPREAD_Z standard errors of the difference between the baseline's and this run's means, the
  standard errors measured over seeds and stored with the baseline; with one seed there is no
  spread, and the suite's tolerance applies (``gate.tolerances`` by key or family, else
  ``gate.default_tolerance``; defaults in ``suite.schema.GateSpec``), absolute, in the metric's unit;
  improvements always pass;
- claims: by their evidence (``analysis.compare.claim_moves``): the estimate may move by at most
  SPREAD_Z standard errors of the difference, and a result may change only near its decision
  boundary (a warning), where float noise flips it; a claim on a speed
  metric is gated only where speed is, and where it is not, speed claims also leave the Holm family
  of the claims the gate reads (else timing noise moves their adjusted p-values, and their results);
- memory metrics (bytes and other deterministic sizes): exactly equal;
- speed metrics: never absolute (timings move with machine load), only as the ratio of a
  contrast's treatment mean to its control's mean measured in the same run, allowed to worsen by
  a relative tolerance (the suite's tolerance when it names the key or family, else the suite's
  ``gate.speed_tolerance``); a profile whose timings are too small
  to mean anything (smoke) sets ``gate.speed: false`` and its speed ratios are not gated; neither
  are those of a run whose trials ran concurrently (Ray), in the baseline or in the gated run.
A baseline belongs to one suite, profile, device class, seed set and sweep: gating across them
is refused (exit 2), as is a baseline that is empty or malformed (an unknown check, a value that
is not a finite number). The gate cannot pass vacuously: comparing zero checks fails, and so does
a trial of the baseline missing from the run, a value missing, or a seed dropped from a value
because its metric is missing or NaN in this run; each is named in the output. A baseline is
saved only from a complete run (every declared trial finished) that holds something to gate.

Baselines travel between machines (saved on one CPU, gated on another), so each records the numeric
environment its values came from (``core.trial_environment.NumericEnvironment``: CPU model, the vector
ISA torch dispatched to, thread count, torch build, kernel determinism). When a check fails and that
environment differs from the run's, the gate names the differences as a possible cause instead of
leaving a reader to suspect the code.

Modules: ``values`` (what is gated, measured the same way in a baseline and in a run; ``CHECK_KINDS``, one
row per kind of check: how it is measured and judged), ``baseline``
(the committed file: save, load, check), ``gate`` (a run against its baseline), ``gate_report`` (the gate's
result as Markdown and JUnit for CI).
"""
from pathlib import Path

DEFAULT_BASELINES_DIR = Path("baselines")  # relative to where a command runs; here so the CLI reads it without the stack
