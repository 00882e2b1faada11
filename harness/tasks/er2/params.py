"""ER2's params: the distilled layer and its recipe at the top, the teacher, the workload and the
speed measurement as nested models (a suite sets one of their fields as ``teacher.steps: 400``).

The teacher and the workload are discriminated unions on ``kind``: each kind carries only its own
fields, so a recall-only field on the text workload is refused where it is written.
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Discriminator, Field, Tag, model_validator

from harness.tasks.er2.mechanism.er2 import GAIN_LIMIT, GATE_MODES, INITIAL_GATE
from harness.tasks.er2.mechanism.ops.common import MAX_CHUNK
from harness.tasks.base import TaskParams
from harness.tasks.er2.constructed import temperature_problem
from harness.tasks.er2.data import PASSKEY_SPAN
from harness.tasks.er2.recipe import WATCHABLE
from harness.tasks.er2.teacher import TeacherConfig
from harness.tasks.param_paths import kind_or

Positive = Annotated[int, Field(ge=1)]


class TextParams(TaskParams):
    """pydoc bytes."""
    kind: Literal["text"] = "text"


class PasskeyParams(TaskParams):
    """pydoc bytes with a pass key to retrieve from anywhere in the window (a non-local probe layer)."""
    kind: Literal["passkey"] = "passkey"
    weight: float = Field(20.0, gt=0, description="passkey: the teacher's loss weight on the asked digits (text: 1)")
    short_context: int = Field(64, ge=1, description="passkey: every other teacher step trains on windows this long")


class RecallParams(TaskParams):
    """Multi-query associative recall."""
    kind: Literal["recall"] = "recall"
    pairs: int = Field(8, ge=1, description="recall: bindings per sequence")
    # keys and values each; small, as in MQAR, so the teacher learns in ~1k steps
    keys: int = Field(16, ge=1, description="recall: keys (and values) to draw from")
    # MQAR under load: the teacher trains on a mixture, each sequence drawing its bindings
    # log-uniformly from (low, high), so one teacher per seed serves every point of a bindings sweep
    # (its cache key names the mixture, not the point). None: the teacher trains at `pairs`.
    teacher_pairs: tuple[Positive, Positive] | None = Field(
        None, description="recall: the trained teacher's range of bindings")
    # Constructed teacher: the loads (bindings per sequence) scored within each trial; the arms distil on a
    # log-uniform mixture from the lightest to the heaviest. None: `pairs` alone.
    loads: tuple[Positive, ...] | None = Field(
        None, min_length=1, description="recall, constructed teacher: the loads scored")

    @model_validator(mode="after")
    def _consistent(self) -> "RecallParams":
        if self.pairs > self.keys:
            raise ValueError(f"workload.pairs ({self.pairs}) exceeds workload.keys ({self.keys})")
        heaviest = max(self.loads or [0])
        if heaviest > self.keys:
            raise ValueError(f"workload.loads reaches {heaviest} bindings, above workload.keys ({self.keys})")
        if self.teacher_pairs is not None:
            low, high = self.teacher_pairs
            if low > high:
                raise ValueError(f"workload.teacher_pairs ({low}, {high}): low exceeds high")
            if high > self.keys:
                raise ValueError(f"workload.teacher_pairs reaches {high} bindings, above workload.keys ({self.keys})")
        return self


WorkloadParams = Annotated[
    Union[Annotated[TextParams, Tag("text")], Annotated[PasskeyParams, Tag("passkey")],
          Annotated[RecallParams, Tag("recall")]],
    Discriminator(kind_or("text")),
]

# the teacher's architecture: these fields build its TeacherConfig as they are
ARCHITECTURE = ("model_dim", "num_layers", "num_heads", "num_kv_heads", "probe_layer")


class TrainedTeacherParams(TaskParams):
    """A small LM trained on the workload (GQA, RoPE)."""
    kind: Literal["trained"] = "trained"
    steps: int = Field(200, ge=1)
    batch: int = Field(2, ge=1)
    lr: float = Field(3e-3, gt=0)
    # None: the teacher trains at the longest evaluation context. Recall teachers learn the
    # induction circuit far faster on short sequences (fewer distractors per answer) and are
    # then asked to extrapolate, like the arms.
    context: int | None = Field(None, ge=2)
    model_dim: int = Field(64, ge=2)
    num_layers: int = Field(2, ge=1)
    num_heads: int = Field(4, ge=1)
    num_kv_heads: int = Field(2, ge=1)
    probe_layer: int = Field(1, ge=0, description="the teacher layer distilled, below teacher.num_layers")

    @model_validator(mode="after")
    def _consistent(self) -> "TrainedTeacherParams":
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"teacher.num_heads ({self.num_heads}) must be a multiple of teacher.num_kv_heads "
                             f"({self.num_kv_heads})")
        if self.model_dim % self.num_heads or (self.model_dim // self.num_heads) % 2:
            raise ValueError(f"teacher.model_dim ({self.model_dim}) must be teacher.num_heads ({self.num_heads}) times "
                             "an even head dim (rotary embeddings pair the head dims)")
        if self.probe_layer >= self.num_layers:
            raise ValueError(f"teacher.probe_layer ({self.probe_layer}) must be below teacher.num_layers "
                             f"({self.num_layers})")
        return self

    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads

    def config(self, vocab_size: int) -> TeacherConfig:
        """The teacher's architecture for a workload's vocabulary."""
        return TeacherConfig(vocab_size=vocab_size, **{name: getattr(self, name) for name in ARCHITECTURE})


class ConstructedTeacherParams(TaskParams):
    """Recall only: one attention head set by hand to recall exactly at any load (constructed.py)."""
    kind: Literal["constructed"] = "constructed"
    code_dim: int = Field(32, ge=2, description="constructed: the head dim its key and value codes live in")
    temperature: float = Field(
        40.0, gt=0, description="constructed: softmax temperature, checked against the exact-recall bound")

    @property
    def head_dim(self) -> int:
        return self.code_dim


TeacherParams = Annotated[
    Union[Annotated[TrainedTeacherParams, Tag("trained")], Annotated[ConstructedTeacherParams, Tag("constructed")]],
    Discriminator(kind_or("trained")),
]


class SpeedParams(TaskParams):
    """Prefill and decode against SDPA, and training throughput."""
    measure: bool = True
    min_time: float = Field(0.1, gt=0)
    contexts: tuple[Positive, ...] = Field((512, 2048, 8192), min_length=1)


class ER2Params(TaskParams):
    workload: WorkloadParams = TextParams()
    # er2: the distilled layer; teacher: the probe layer unchanged (upper bound); window: sliding-window
    # attention with the ER2 state's bytes of KV cache; zero: the layer removed; guess (recall only):
    # answer with a value drawn from the context.
    layer: Literal["er2", "teacher", "window", "zero", "guess"] = "er2"
    residual_mode: Literal["none", "raw", "compressed"] = "compressed"
    # the query gate on the correction: None: the mode's own (compressed learned, raw one); the ablations
    # compressed_gate1 (one) and raw_gated (learned) cross them
    residual_gate: Literal[GATE_MODES] | None = None
    gain_limit: float = Field(GAIN_LIMIT, gt=0, allow_inf_nan=False,
                              description="the clamp on |residual gain| (the seed's 1.5)")
    gate_init: float = Field(INITIAL_GATE, gt=0, lt=1, description="a learned gate's starting probability (the seed's 0.2)")
    state_dtype: Literal["fp16", "fp32"] = "fp16"
    feature_dim: int = Field(32, ge=1)
    residual_dim: int = Field(8, ge=0)
    code_rank: int = Field(4, ge=1, description="rank of the residual code (compressed mode), at most the head dim")
    conv_kernel: int = Field(4, ge=1)
    chunk_size: int = Field(32, ge=1, le=MAX_CHUNK)
    # converged: warm-up, constant rate until the values in stop_on converge (window means over
    # stop_window steps change by less than stop_tolerance, relative), then decay_steps of linear decay;
    # steps is the cap. fixed: the same warm-up / constant / decay schedule over exactly `steps` steps,
    # the same budget for every arm. cosine: the original study's fixed count of steps under a cosine.
    schedule: Literal["converged", "fixed", "cosine"] = "cosine"
    steps: int = Field(120, ge=1)
    stop_on: tuple[Literal[WATCHABLE], ...] = Field(("loss", "gain"), min_length=1,
                                                    description="converged schedule: the values its stop rule watches")
    stop_window: int = Field(50, ge=1)
    stop_tolerance: float = Field(0.01, gt=0)
    decay_steps: int = Field(50, ge=1)
    batch: int = Field(8, ge=1)
    train_pool: int = Field(64, ge=1)
    lr: float = Field(2e-3, gt=0)
    gain_lr_scale: float = Field(1.0, gt=0, description="the residual gain's learning rate / lr")
    # rotated: the layer gets q/k as the probe's attention uses them (after RoPE); unrotated: before RoPE
    qk_positions: Literal["rotated", "unrotated"] = "rotated"
    train_context: int = Field(128, ge=2)
    eval_multiples: tuple[Positive, ...] = Field((1, 2, 4), min_length=1)
    eval_batch: int = Field(8, ge=1)
    eval_documents: int = Field(16, ge=1)
    teacher: TeacherParams = TrainedTeacherParams()
    speed: SpeedParams = SpeedParams()

    @model_validator(mode="after")
    def _consistent(self) -> "ER2Params":
        if self.schedule != "cosine" and self.steps <= self.decay_steps:
            raise ValueError(f"steps ({self.steps}), the budget of the {self.schedule} schedule, must exceed decay_steps "
                             f"({self.decay_steps})")
        if self.residual_gate is not None and self.residual_mode == "none":
            raise ValueError(f"residual_gate {self.residual_gate!r} needs a residual memory; residual_mode 'none' has "
                             "no correction to gate")
        if self.residual_mode == "compressed" and self.code_rank > self.head_dim:
            raise ValueError(f"code_rank ({self.code_rank}) exceeds the head dim ({self.head_dim})")
        workload, teacher_context = self.workload, self.teacher_context
        if isinstance(workload, PasskeyParams):
            shortest = min(self.train_context, teacher_context or self.train_context, workload.short_context)
            if shortest < PASSKEY_SPAN:
                raise ValueError(f"a pass key and its question need contexts of at least {PASSKEY_SPAN} tokens "
                                 f"(train_context {self.train_context}, teacher.context {teacher_context}, "
                                 f"workload.short_context {workload.short_context})")
        if isinstance(workload, RecallParams):
            self._check_recall(workload)
        if isinstance(self.teacher, ConstructedTeacherParams):
            self._check_constructed()
        elif isinstance(workload, RecallParams) and workload.loads is not None:
            raise ValueError("workload.loads applies to the constructed teacher only (teacher.kind: constructed)")
        return self

    def _check_recall(self, workload: RecallParams) -> None:
        """Every load the recall workload draws must fit the contexts it is drawn at."""
        shortest = min(self.train_context, self.teacher_context or self.train_context)
        if 2 * workload.pairs + 2 > shortest:
            raise ValueError(f"{workload.pairs} recall pairs need contexts of at least {2 * workload.pairs + 2} "
                             f"tokens (train_context {self.train_context}, teacher.context {self.teacher_context})")
        heaviest = max(workload.loads or [0])
        if 2 * heaviest + 2 > self.train_context:
            raise ValueError(f"workload.loads reaches {heaviest} bindings, which need a train_context of at least "
                             f"{2 * heaviest + 2} tokens (it is {self.train_context})")
        if workload.teacher_pairs is not None:
            if isinstance(self.teacher, ConstructedTeacherParams):
                raise ValueError("workload.teacher_pairs trains a teacher: the constructed teacher is set by hand")
            high = workload.teacher_pairs[1]
            context = self.teacher_context or max(self.eval_contexts)
            if 2 * high + 2 > context:
                raise ValueError(f"workload.teacher_pairs reaches {high} bindings, which need a teacher context of at "
                                 f"least {2 * high + 2} tokens (it is {context})")

    def _check_constructed(self) -> None:
        """Recall only, nothing to un-rotate, and a temperature that recalls the heaviest load exactly."""
        if not isinstance(self.workload, RecallParams):
            raise ValueError(f"teacher.kind: constructed exists for the recall workload only (workload.kind is "
                             f"{self.workload.kind})")
        if self.qk_positions != "rotated":
            raise ValueError("the constructed teacher's q/k carry no rotation: qk_positions must stay 'rotated' "
                             "(the q/k the probe attends with)")
        problem = temperature_problem(self.teacher.temperature, max(self.loads), self.workload.keys, self.teacher.code_dim)
        if problem:
            raise ValueError(problem)

    @property
    def teacher_context(self) -> int | None:
        """The trained teacher's context (None: the longest evaluation context); None for the constructed one."""
        return self.teacher.context if isinstance(self.teacher, TrainedTeacherParams) else None

    @property
    def loads(self) -> tuple[int, ...]:
        """The bindings per sequence the arms are scored at (recall)."""
        workload = self.workload
        if not isinstance(workload, RecallParams):
            return ()
        return tuple(workload.loads) if workload.loads is not None else (workload.pairs,)

    @property
    def head_dim(self) -> int:
        """The probe layer's head dim: the constructed teacher's code dim, or the trained teacher's."""
        return self.teacher.head_dim

    @property
    def eval_contexts(self) -> list[int]:
        return [self.train_context * m for m in self.eval_multiples]

