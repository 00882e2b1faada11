"""The stored documents (suite.json, the trial record, baseline, tuning lock, design lock, ledger, bundle header,
run summary, a trial's environment, a baseline's environment) are read through the declarative reader
(harness/core/stored_fields.py), so the code that holds them indexes no dict: every read by key (``x[key]``,
``x["name"]``; not a list index, a slice or a type) and every ``.get(`` call there is counted, whatever it reads
(an upper bound on the reads of the raw document), and there is none. A lookup the code needs of a dict it
builds itself is written so that it is not one (a scan, a set, a zip); a new read of a document's key by name
fails here."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "harness"
# each document's modules; names confine the count to those classes or functions (the rest of gating/values.py
# computes a run's values, the rest of suite/tuning_plan.py resolves the suite's tune block, the rest of
# evidence/bundle.py reads the bundle's other lines, the rest of the evidence modules read the bundle's suite,
# the rest of suite/schema.py declares the suite file, whose pydantic reader reads pydantic's own error reports
# by key in _first_error). A trial record's metrics, curves and details are keyed by the task's own names: the
# analysis looks values up by those, which are not the record's keys.
DOCUMENTS = {
    "suite.json": (("suite/stored.py", ()),
                   ("suite/schema.py", ("section_from_stored", "sequential_from_stored", "StoredSequential",
                                        "_read_sequential")),
                   ("suite/registered_design.py", ("analysed_value", "analysed_fields")),
                   ("suite/resolved_suite.py", ("locked_design", "stored")),
                   ("suite/design.py", ("design_record", "_SuiteDesign", "seeds_registered")),
                   ("analysis/decide/looks.py", ("run_design", "stored_schedule")),
                   ("analysis/present/summary_json.py", ("run_summary",)),
                   ("cli/run_commands.py", ("_suite_header", "validate")),
                   ("evidence/audit.py", ("pooled_skewness", "_moved", "_directions")),
                   ("evidence/single_run.py", ("top_up",)),
                   ("evidence/registration.py", ("registered_digest", "suite_record")),
                   ("evidence/bundle.py", ("SuiteLine", "encode", "parse")),
                   ("execution/runner.py", ("stored_suite", "_save_suite")),
                   ("core/metrics.py", ("from_stored", "_read_as"))),
    "trial record": (("core/record.py", ()), ("store.py", ("read_trial",)), ("reproduction/sources.py", ("check_record",)),
                     ("evidence/bundle.py", ("TrialLine", "_trial"))),
    "baseline": (("gating/baseline.py", ()), ("gating/values.py", ("GatedValue", "trial_environments")),
                 ("gating/numeric_modes.py", ("refuse_baseline_mode",))),
    "baseline environment": (("gating/values.py", ("BaselineEnvironment", "_joined", "sizes_text")),
                             ("core/trial_environment.py", ("NumericEnvironment",)),
                             ("gating/gate.py", ("environment_differences", "_refuse_other_executor",
                                                 "_refuse_other_seed_batch")),
                             ("gating/numeric_modes.py", ("refuse_other_mode",))),
    "tuning lock": (("suite/tuning_lock.py", ()), ("suite/tuning_plan.py", ("check_choice", "_values"))),
    "design lock": (("suite/design.py", ()),),
    "ledger": (("evidence/ledger.py", ()),),
    "bundle header": (("evidence/bundle.py", ("BundleHeader", "encode", "parse")),),
    "run summary": (("analysis/present/stored_summary.py", ()),
                    ("evidence/bundle_verdicts.py", ("verdicts_of", "claim_name", "claim_verdict")),
                    ("evidence/programme.py", ("claim_sealings", "_differences")),
                    ("evidence/audit.py", ("pooled_skewness",))),
    "trial environment": (("core/trial_environment.py", ()), ("publish/runs.py", ("published_run",)),
                          ("tracking/history.py", ("stored_claim_history",)), ("tracking/trial_view.py", ("workload",)),
                          ("evidence/audit.py", ("_check_commits", "_check_registered")),
                          ("evidence/seal.py", ("_registration",)), ("evidence/single_run.py", ("runs_of", "_Invocation")),
                          ("execution/runner.py", ("_why_superseded",)),
                          ("tracking/mlflow_tracker.py", ("convention_tags",)), ("reproduction/reproduce.py", ("_threads",)),
                          ("reproduction/reproduction_text.py", ("_harness_revision", "_task_revision", "_revision")),
                          ("core/record.py", ("seed_batch",)), ("gating/values.py", ("trial_environments", "BaselineEnvironment")),
                          ("gating/numeric_modes.py", ("refuse_baseline_mode",)), ("gating/baseline.py", ("of_run",))),
}
TYPES = {"tuple", "dict", "list", "set", "frozenset", "type"}  # tuple[int, ...] names a type, reads nothing


def _is_index(node: ast.expr) -> bool:
    """A list index or slice (``seeds[0]``, ``seeds[-1]``, ``seeds[1:]``), not a read by key."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Slice) or (isinstance(node, ast.Constant) and isinstance(node.value, int))


def dict_reads(tree: ast.AST) -> list[int]:
    """Line numbers of each read by key (not a store, an index or a type) and each ``.get(`` call."""
    annotations = [node.annotation for node in ast.walk(tree) if isinstance(node, (ast.AnnAssign, ast.arg))]
    annotations += [node.returns for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    typed = {id(inner) for annotation in annotations if annotation is not None for inner in ast.walk(annotation)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and id(node) not in typed:
            names_a_type = isinstance(node.value, ast.Name) and (node.value.id in TYPES or node.value.id[:1].isupper())
            if not names_a_type and not _is_index(node.slice):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            lines.append(node.lineno)
    return sorted(lines)


def document_reads(document: str) -> dict[str, list[int]]:
    """``{module: lines}`` of the dict reads in a document's code."""
    reads = {}
    for path, within in DOCUMENTS[document]:
        tree = ast.parse((PACKAGE / path).read_text())
        parts = [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in within]
        assert len(parts) == len(within), (path, within)  # a renamed part must be named here again
        reads[path] = sorted(line for part in (parts or [tree]) for line in dict_reads(part))
    return reads


def test_the_count_sees_reads_by_key_and_not_indexes_or_types():
    source = ("a = d['k']\nb = d.get('k')\nd['k'] = 1\nc: tuple[int, ...] = ()\ne = s[1:] + s[0] + s[-1]\n"
              "f = rows[i][key]\nKey = tuple[str, int]\ndef g(x: dict[str, Any]) -> Mapping[str, Any]: return x[k]\n")
    assert dict_reads(ast.parse(source)) == [1, 2, 6, 6, 8]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_no_document_is_read_by_key(document):
    reads = document_reads(document)
    assert not any(reads.values()), reads
