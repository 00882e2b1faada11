"""Names the dead-code check (``vulture``, configured in pyproject.toml) cannot see being used.

Each is used from outside the package's own Python code: by torch or numpy, by pydantic or the suite
file, by a test as the reference a fast path is checked against, or by a task author.
"""
_.writeable  # numpy's read-only flag on the cached null paths
_.extra_repr  # torch prints it in a module's repr
_.kernel_unavailable  # why the fused decode kernel did not build, for whoever inspects a decoder
ProgressHandle  # the protocol named in a string annotation (services/training_loop.py)

include  # a suite file's key, read by name
token_names  # the vocab corpus's words, read by the workload tests

# found through the task registry (harness.tasks), never imported by name
ER2Task
RoutingTask
VocabTask

# found through the executor registry (harness.execution.registry), never imported by name
Auto
Parallel
Ray
Serial

# references and seed ports the tests check the mechanisms against
_.auxiliary_losses
delta_token_reference
precondition_reference
pooled_split_reference
mask_tokens
equip_model_with_precision_routing
compare_routing_strategies

check_task_contract  # for task authors: the test `harness new-task` writes calls it

_bound_only_when_declared  # pydantic calls it when a sequential block is stored (suite/schema.py)

# click calls them on the lazily loaded command group (harness.cli)
_.list_commands
_.get_command

# fields of a stored document that harness writes (core/stored_fields.as_stored, by name) and reads back by no name
_.created_at
_.task_untracked_sha256

# fields of a stored document read together (evidence/single_run's invocation, as one tuple), never by name
_.git_diff_sha256
_.packages_sha256
_.harness_version

# keys of the numeric environment (core/trial_environment.NumericEnvironment), compared field by field, never by name
_.deterministic_algorithms
