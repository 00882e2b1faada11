"""Task ``er2``: distil one attention layer of a small LM into ER2 layers and compare residual modes.

Per seed a teacher LM is trained once, and its capture of the distillation pool and the reference scores
(teacher, zeroed layer) at each evaluation context computed once: cached, shared by the arms (``shared``).
An ``er2`` arm trains its layer on the teacher's captured q/k/v -> attention output at the training
context, is evaluated at each evaluation context, swapped into the frozen LM for held-out NLL, and
measured for state bytes and speed against SDPA (prefill, and decode from a carried state). Control
arms train nothing: the teacher's own layer (upper bound), a sliding-window attention whose KV cache has
the ER2 state's bytes (same-bytes exact memory), the layer zeroed, and on recall the guess-from-context
baseline.
Every arm reports what zeroing the probed layer costs, the range the arms move in.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from harness.measure.memory import tensor_bytes
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.mechanism.ops.attention import local_window_attention
from harness.tasks.base import Metric, ParetoView, Task, TrialContext, training_budget_metrics
from harness.tasks.er2.consistency import decode_prefill_agreement
from harness.tasks.er2.constructed import ConstructedRecallWorkload, ConstructedTeacher, load_metrics
from harness.tasks.er2.distill import Capture, budget_metrics, cosine, distil_step, fidelity, output_fidelity
from harness.tasks.er2.seed_batch import distil_seeds_step
from harness.tasks.er2.positions import fed_capture, fed_mixer
from harness.tasks.er2.params import ConstructedTeacherParams, ER2Params, PasskeyParams, RecallParams, TextParams
from harness.tasks.er2.recipe import LATE_SPAN, Convergence, late_fall
from harness.tasks.er2.speed import decode_latencies, prefill_speeds, training_speed
from harness.tasks.er2.shared import arm_comparison, pool_capture, zeroed_reference
from harness.tasks.er2.teacher import Mixer, TeacherLM, TeacherRecipe, frozen_teacher, train_teacher, zero_layer
from harness.tasks.er2.workloads import PasskeyWorkload, RecallWorkload, TextWorkload, Workload, capture

CONTEXT = "context (tokens)"
LOAD = "bindings per sequence"
KV_BYTES = 2  # the teacher's KV cache is fp16
# a distilled layer's scores reported once, at the training context
TRAIN_CONTEXT_SCORES = ("hard_teacher_nmse", "gate_mean", "gate_auroc", "effective_gain_abs_mean")


def make_workload(spec: TextParams | PasskeyParams | RecallParams) -> TextWorkload | PasskeyWorkload | RecallWorkload:
    """The workload its params describe (here, not in workloads.py, which params.py reaches: no circle)."""
    if spec.kind == "passkey":
        return PasskeyWorkload(spec.weight, spec.short_context)
    if spec.kind == "recall":
        return RecallWorkload(spec.pairs, spec.keys, spec.teacher_pairs)
    return TextWorkload()


class ER2Task(Task):
    name = "er2"
    # 5: decode runs the fused C kernel where it builds (decode_fused), eager latency beside it
    # 6: the converged schedule, a learning rate of the residual gain's own, qk_positions
    # 7: the constructed MQAR teacher, scored per load; budget/* and at_bound/gain on every distilled arm
    # 8: the fixed-budget schedule and stop_on; the gain kept inside its clamp after every update; a gate
    #    per residual_gate (the compressed_gate1 and raw_gated ablations); gate_auroc, effective gain
    # 9: params nested (teacher, workload, speed); values and defaults as in 8. Later added within 9, no value
    #    changed: gate_init (default the seed's 0.2) and the info metric loss_late_fall
    version = "9"
    Params = ER2Params
    description = "ER2 layer distilled from a small LM's attention: compressed vs raw residual memory"
    metrics = (
        Metric(name="nmse", direction="lower", unit="ratio", kind="quality",
               description="output MSE / teacher output energy, per context", key=True, axis=CONTEXT),
        Metric(name="cosine", direction="higher", unit="cosine", kind="quality",
               description="mean cosine to the teacher's head outputs, per context", axis=CONTEXT),
        Metric(name="hard_teacher_nmse", direction="lower", unit="ratio", kind="quality",
               description="NMSE weighted toward the base's worst 25% (train context)", key=True),
        Metric(name="nll", direction="lower", unit="nats/token", kind="quality",
               description="held-out NLL with the layer swapped into the frozen LM", axis=CONTEXT),
        Metric(name="teacher_nll", direction="none", unit="nats/token", kind="info",
               description="held-out NLL of the unchanged teacher", axis=CONTEXT),
        Metric(name="nll_delta", direction="lower", unit="nats/token", kind="quality",
               description="mean per-document NLL increase over the teacher", key=True, axis=CONTEXT),
        Metric(name="recall", direction="higher", unit="accuracy", kind="quality",
               description="recall / passkey workloads: answers (asked digits) right with the layer swapped in",
               key=True, axis=CONTEXT),
        Metric(name="train_context_recall", direction="higher", unit="accuracy", kind="quality",
               description="recall / passkey workloads: recall at the training context (one key across a sweep of contexts)"),
        Metric(name="teacher_recall", direction="none", unit="accuracy", kind="info",
               description="recall / passkey workloads: answers right by the teacher", axis=CONTEXT),
        Metric(name="guess_recall", direction="none", unit="accuracy", kind="info",
               description="recall: expected recall of answering with a value drawn from those in the context; passkey: a random digit",
               axis=CONTEXT),
        Metric(name="zero_layer_nll_cost", direction="none", unit="nats/token", kind="info",
               description="NLL increase over the teacher when its probe layer is zeroed: the range the arms move in",
               key=True, axis=CONTEXT),
        Metric(name="zero_layer_recall", direction="none", unit="accuracy", kind="info",
               description="recall / passkey workloads: recall with the probe layer zeroed", axis=CONTEXT),
        Metric(name="window_tokens", direction="none", unit="tokens", kind="info",
               description="window arm: tokens of KV cache in the ER2 state's bytes"),
        Metric(name="state_bytes", direction="lower", unit="bytes", kind="memory",
               description="recurrent state measured from returned tensors (batch 1)", key=True,
               pairs_with="kv_cache_bytes"),
        Metric(name="kv_cache_bytes", direction="none", unit="bytes", kind="memory",
               description="teacher's fp16 KV cache of the probe layer (2*T*Hkv*D*2)", axis=CONTEXT),
        Metric(name="state_to_kv_ratio", direction="lower", unit="ratio", kind="memory",
               description="state bytes / KV-cache bytes, per context", axis=CONTEXT),
        Metric(name="break_even_context", direction="lower", unit="tokens", kind="memory",
               description="first context whose KV cache reaches the state size"),
        Metric(name="prefill_tokens_per_s", direction="higher", unit="tokens/s", kind="speed",
               description="layer prefill, one sequence", axis=CONTEXT),
        Metric(name="sdpa_prefill_tokens_per_s", direction="none", unit="tokens/s", kind="speed",
               description="causal SDPA prefill on the same shapes", axis=CONTEXT),
        Metric(name="prefill_speedup", direction="higher", unit="ratio", kind="speed",
               description="layer / SDPA prefill throughput", axis=CONTEXT),
        Metric(name="prefill_crossover_context", direction="lower", unit="tokens", kind="speed",
               description="context where SDPA's prefill cost per token reaches the layer's (proportional from the longest context)"),
        Metric(name="decode_latency_s", direction="lower", unit="s", kind="speed",
               description="one token from a carried state (the decoder's step: the fused C kernel where it builds)"),
        Metric(name="decode_eager_latency_s", direction="lower", unit="s", kind="speed",
               description="the same token through the eager (tensor-op) step"),
        Metric(name="decode_fused", direction="none", unit="fraction", kind="info",
               description="1 when decode_latency_s timed the fused C kernel"),
        Metric(name="sdpa_decode_latency_s", direction="none", unit="s", kind="speed",
               description="one token of SDPA over the full KV cache", axis=CONTEXT),
        Metric(name="decode_speedup", direction="higher", unit="ratio", kind="speed",
               description="SDPA / layer decode latency", axis=CONTEXT),
        Metric(name="decode_crossover_context", direction="lower", unit="tokens", kind="speed",
               description="KV-cache length where SDPA decode gets as slow as the layer's (proportional from the longest context)"),
        Metric(name="train_tokens_per_s", direction="higher", unit="tokens/s", kind="speed",
               description="forward+backward at the training shape", key=True),
        Metric(name="decode_agrees", direction="higher", unit="fraction", kind="quality",
               description="1 when token-by-token decode of the trained layer equals its chunked forward (held-out, train context)"),
        Metric(name="decode_prefill_max_error", direction="none", unit="ratio", kind="info",
               description="largest |decode - chunked forward| / forward RMS on held-out q/k/v at the train context"),
        Metric(name="gate_mean", direction="none", unit="probability", kind="info",
               description="mean applied gate (raw: 1, none: 0)"),
        Metric(name="gate_auroc", direction="none", unit="fraction", kind="info",
               description="learned gate: AUROC of the gate for the hard positions it is trained to pick out (the base's worst "
               "quarter per head; held-out, train context); 0.5 is a gate that does not tell them apart"),
        Metric(name="effective_gain_abs_mean", direction="none", unit="gain", kind="info",
               description="mean |applied gain| x gate over held-out positions: the correction's actual scale (train context)"),
        Metric(name="residual_gain_abs_mean", direction="none", unit="gain", kind="info",
               description="mean |residual gain| after training"),
        Metric(name="base_half_life_median", direction="none", unit="tokens", kind="info",
               description="median base-memory retention half-life"),
        Metric(name="residual_half_life_median", direction="none", unit="tokens", kind="info",
               description="median residual-memory retention half-life"),
        Metric(name="final_train_loss", direction="none", unit="loss", kind="info",
               description="transfer loss at the last step"),
        Metric(name="loss_late_fall", direction="none", unit="fraction", kind="info",
               description=f"relative fall of the transfer loss over the last {LATE_SPAN:.0%} of the distillation steps "
               "(1 - window mean / the window before): near 0 once the arm has converged"),
        Metric(name="distil_steps", direction="none", unit="steps", kind="info",
               description="distillation steps run (the converged schedule stops itself)"),
        Metric(name="distil_converged", direction="none", unit="fraction", kind="info",
               description="1 when the converged schedule's criterion held before its cap (cosine: 0)"),
        *training_budget_metrics("optimizer steps the distilled arm trained",
                                 "sequences the distilled arm trained on (steps x batch)"),
        Metric(name="at_bound/gain", direction="none", unit="fraction", kind="info",
               description="fraction of the residual gains at or past the clamp (no gradient there); 0 without a residual"),
        Metric(name="load_recall", direction="higher", unit="accuracy", kind="quality",
               description="constructed teacher: recall at the training context with this many bindings per sequence",
               key=True, axis=LOAD),
        Metric(name="load_teacher_recall", direction="none", unit="accuracy", kind="info",
               description="constructed teacher: the teacher's recall per load", axis=LOAD),
        Metric(name="load_guess_recall", direction="none", unit="accuracy", kind="info",
               description="constructed teacher: recall of guessing a value shown in the context, per load", axis=LOAD),
        Metric(name="load_recall_min", direction="higher", unit="accuracy", kind="quality",
               description="constructed teacher: the lowest recall over the loads"),
        Metric(name="load_recall_drop", direction="none", unit="fraction", kind="info",
               description="constructed teacher: recall lost from the lightest load to the heaviest, relative to the lightest"),
    )
    # MQAR under load: each arm's recall against the bytes it keeps (none < raw = compressed = window)
    pareto_views = (ParetoView("state_bytes", "train_context_recall", "recall at the training context against state bytes"),
                    ParetoView("state_bytes", "load_recall", "recall per load against state bytes"))
    smoke_params = {
        "train_context": 32, "eval_multiples": [1, 2], "steps": 3, "batch": 2, "train_pool": 4, "eval_batch": 2,
        "eval_documents": 3, "teacher.steps": 3, "teacher.model_dim": 16, "teacher.num_heads": 2,
        "teacher.num_kv_heads": 1, "feature_dim": 8, "residual_dim": 4, "code_rank": 2, "speed.min_time": 0.001,
        "speed.contexts": [64, 128],
    }

    def run(self, params: ER2Params, ctx: TrialContext) -> Mapping[str, float]:
        setup = self._setup(params, ctx)
        if params.layer != "er2":
            return self._control(params, *setup, ctx)
        metrics = self._train(params, *setup, ctx)
        return self._evaluated(params, *setup, ctx, metrics)

    # Seeds of a distilled arm train as one layer (seed_batch.py) under a fixed or cosine schedule; a
    # converged schedule stops each seed at its own step, and control arms train nothing: those run
    # their seeds one after another.
    seed_batching = True

    def run_seeds(self, params: ER2Params, contexts: Sequence[TrialContext]) -> list[Mapping[str, float]]:
        if params.layer != "er2" or params.schedule == "converged":
            results = []
            for ctx in contexts:
                ctx.seed_globals()
                results.append(self.run(params, ctx))
            return results
        setups, states = [], []
        for ctx in contexts:
            ctx.seed_globals()
            setups.append(self._setup(params, ctx))
            states.append(torch.get_rng_state())  # after each seed's set-up, as run() would continue from
        trained = self._train_together(params, setups, contexts)
        results = []
        for setup, ctx, metrics, state in zip(setups, contexts, trained, states):
            torch.set_rng_state(state)
            results.append(self._evaluated(params, *setup, ctx, metrics))
        return results

    def _setup(self, params: ER2Params, ctx: TrialContext) -> tuple[Workload, TeacherLM | ConstructedTeacher, ER2Layer]:
        """The seed's workload, its teacher (trained once per seed, cached) and the arm's layer, initialised
        from the seed's global generator (built in every arm: the window arm's cache gets its state bytes)."""
        if params.layer == "guess" and params.workload.kind != "recall":
            raise ValueError("the guess-from-context baseline exists only on the recall workload")
        workload = ConstructedRecallWorkload(params.loads, params.workload.keys) if params.teacher.kind == "constructed" \
            else make_workload(params.workload)
        teacher = self._teacher(params, workload, ctx)
        layer = ER2Layer(
            teacher.config.num_heads, teacher.config.num_kv_heads, teacher.config.head_dim,
            feature_dim=params.feature_dim, residual_dim=params.residual_dim, code_rank=params.code_rank,
            chunk_size=params.chunk_size, conv_kernel=params.conv_kernel, residual_mode=params.residual_mode,
            state_dtype=params.state_dtype, gate_mode=params.residual_gate, gain_limit=params.gain_limit,
            gate_init=params.gate_init,
        ).to(ctx.device)
        return workload, teacher, layer

    def _evaluated(self, params: ER2Params, workload: Workload, teacher: TeacherLM, layer: ER2Layer,
                   ctx: TrialContext, metrics: dict[str, float]) -> dict[str, float]:
        """A distilled layer's training figures with its quality, state bytes, speed and retention."""
        device = ctx.device
        metrics.update(self._quality(params, workload, teacher, fed_mixer(layer, params.qk_positions, teacher.config.rope_base),
                                     ctx, er2=layer))
        metrics.update(self._memory(params, layer, device))
        if params.speed.measure:
            contexts, min_time = list(params.speed.contexts), params.speed.min_time
            metrics.update(prefill_speeds(layer, contexts, device, min_time, ctx.stream("speed", "prefill")))
            metrics.update(decode_latencies(layer, contexts, device, min_time, ctx.stream("speed", "decode")))
            metrics["train_tokens_per_s"] = training_speed(
                layer, params.batch, params.train_context, device, min_time, ctx.stream("speed", "train")
            )
        stats = layer.retention_statistics()
        ctx.logger.record("retention", stats)
        metrics["residual_gain_abs_mean"] = stats.get("residual_gain_abs_mean", 0.0)
        metrics["base_half_life_median"] = stats["base_half_life_median"]
        if "residual_half_life_median" in stats:
            metrics["residual_half_life_median"] = stats["residual_half_life_median"]
        return metrics

    def _control(self, params: ER2Params, workload: Workload, teacher: TeacherLM,
                 layer: ER2Layer, ctx: TrialContext) -> dict[str, float]:
        """A control arm: nothing is trained, the probe layer is replaced (or kept) and scored like the arms."""
        metrics: dict[str, float] = {}
        mixer: Mixer | None = None  # teacher and guess: the unchanged LM
        if params.layer == "zero":
            mixer = zero_layer
        elif params.layer == "window":
            per_token = 2 * layer.num_kv_heads * layer.head_dim * KV_BYTES
            window = max(1, layer.recurrent_state_bytes(1) // per_token)
            metrics.update(window_tokens=float(window), state_bytes=float(window * per_token))
            groups = layer.groups

            def mixer(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
                return local_window_attention(q, k, v, window, groups)

        metrics.update(self._quality(params, workload, teacher, mixer, ctx))
        return metrics

    def _teacher(self, params: ER2Params, workload: Workload, ctx: TrialContext) -> TeacherLM | ConstructedTeacher:
        """Trained once per seed and shared by the arms (cached); or constructed, nothing to train."""
        spec = params.teacher
        if isinstance(spec, ConstructedTeacherParams):
            return ConstructedTeacher(workload.layout, spec.code_dim, spec.temperature).to(ctx.device)
        config = spec.config(workload.vocab_size)
        context = spec.context or max(params.eval_contexts)
        batches, data_id = workload.teacher_data(spec.batch, context)
        recipe = TeacherRecipe(config=config, steps=spec.steps, batch=spec.batch, context=context, lr=spec.lr,
                               data_id=data_id)
        return ctx.cached(
            "teacher", asdict(recipe),
            build=lambda: train_teacher(recipe, batches, ctx),
            restore=lambda state: frozen_teacher(config, state, ctx),
        )

    def _distillation(self, params: ER2Params, workload: Workload, teacher: TeacherLM,
                      ctx: TrialContext) -> tuple[Callable[[int], Capture], Convergence | None, Callable[[int], float]]:
        """The seed's batches, drawn from one teacher pass over a fixed pool (the same for every arm), the
        stop rule and the learning-rate schedule."""
        data = ctx.stream("distil-batches")
        pool_tokens, _ = workload.training_batch(params.train_pool, params.train_context, data)
        pool = fed_capture(pool_capture(ctx, teacher, pool_tokens), params.qk_positions, teacher.config.rope_base)

        def next_capture(_: int) -> Capture:
            rows = torch.randint(0, params.train_pool, (params.batch,), generator=data).to(ctx.device)
            return {name: tensor[rows] for name, tensor in pool.items()}

        if params.schedule == "cosine":
            return next_capture, None, cosine(params.steps)
        watch = params.stop_on if params.schedule == "converged" else ()
        stop = Convergence(params.steps, params.stop_window, params.stop_tolerance, params.decay_steps, watch)
        return next_capture, stop, stop.rate

    def _train(self, params: ER2Params, workload: Workload, teacher: TeacherLM,
               layer: ER2Layer, ctx: TrialContext) -> dict[str, float]:
        """Distil the seed's layer (``distill.distil_step``: the reference the seed batch is checked against)."""
        next_capture, stop, rate = self._distillation(params, workload, teacher, ctx)
        layer.train()
        update = distil_step(layer, next_capture, params.lr, rate, params.gain_lr_scale)
        losses: list[float] = []

        def step(index: int) -> dict[str, float]:
            values = update(index)
            losses.append(values["loss"])
            return values

        final = ctx.fit(params.steps, step, name="distil", until=stop)
        layer.eval()
        converged = stop is not None and stop.converged_at is not None
        if stop is not None:
            ctx.logger.record("convergence", {"converged_at": stop.converged_at, "decay_start": stop.decay_start,
                                              "last_change": stop.last_change})
        steps = final.get("steps_run", float(params.steps))
        return {"final_train_loss": final["loss"], "loss_late_fall": late_fall(losses), "distil_steps": steps,
                "distil_converged": float(converged),
                **budget_metrics(layer, steps, params.batch)}

    def _train_together(self, params: ER2Params, setups: Sequence[tuple[Workload, TeacherLM, ER2Layer]],
                        contexts: Sequence[TrialContext]) -> list[dict[str, float]]:
        """Distil every seed's layer as one (``seed_batch``), a fixed budget each: what ``_train`` records, per seed."""
        plans = [self._distillation(params, workload, teacher, ctx) for (workload, teacher, _), ctx in zip(setups, contexts)]
        layers = [layer for _, _, layer in setups]
        for layer in layers:
            layer.train()
        update = distil_seeds_step(layers, [capture for capture, _, _ in plans], params.lr, plans[0][2],
                                   params.gain_lr_scale)
        losses: list[list[float]] = [[] for _ in layers]

        def step(index: int) -> list[dict[str, float]]:
            values = update(index)
            for seen, value in zip(losses, values):
                seen.append(value["loss"])
            return values

        finals = TrialContext.fit_seeds(contexts, params.steps, step, name="distil")
        results = []
        for layer, final, seen, (_, stop, _), ctx in zip(layers, finals, losses, plans, contexts):
            layer.eval()
            if stop is not None:  # a fixed budget: the rule never fires, the decay starts at its place
                stop.decay_start = params.steps - params.decay_steps
                ctx.logger.record("convergence", {"converged_at": None, "decay_start": stop.decay_start,
                                                  "last_change": stop.last_change})
            results.append({"final_train_loss": final["loss"], "loss_late_fall": late_fall(seen),
                            "distil_steps": float(params.steps), "distil_converged": 0.0,
                            **budget_metrics(layer, params.steps, params.batch)})
        return results

    def _quality(self, params: ER2Params, workload: Workload, teacher: TeacherLM, mixer: Mixer | None,
                 ctx: TrialContext, er2: ER2Layer | None = None) -> dict[str, float]:
        """Fidelity to the teacher's layer output and the swapped LM's scores at each evaluation context,
        with the cost of zeroing the layer on the same sequences (the range the arms move in)."""
        metrics: dict[str, float] = {}
        guess = params.layer == "guess"
        for context in params.eval_contexts:
            tokens = workload.held_out_batch(params.eval_batch, context, ctx.stream("held-out", context)).to(ctx.device)
            captured = capture(teacher, tokens)
            if er2 is not None:
                captured = fed_capture(captured, params.qk_positions, teacher.config.rope_base)
                scores = fidelity(er2, captured)
            elif not guess:
                replaced = captured["out"] if mixer is None else mixer(captured["q"], captured["k"], captured["v"])
                scores = output_fidelity(replaced, captured["out"])
            else:
                scores = {}
            metrics.update({f"{name}@{context}": scores[name] for name in ("nmse", "cosine") if name in scores})
            if context == params.train_context and er2 is not None:
                metrics.update({name: scores[name] for name in TRAIN_CONTEXT_SCORES if name in scores})
                metrics.update(decode_prefill_agreement(er2, captured["q"], captured["k"], captured["v"]))

            # the teacher's and the zeroed layer's scores are the same for every arm: once per seed
            reference = zeroed_reference(ctx, workload, params.workload.model_dump(mode="json"), teacher, context,
                                         params.eval_documents)
            comparison = arm_comparison(ctx, workload, teacher, mixer, reference, context, params.eval_documents)
            zeroed = reference.summary()
            metrics[f"zero_layer_nll_cost@{context}"] = zeroed["nll_delta"]
            if "recall" in zeroed:
                metrics[f"zero_layer_recall@{context}"] = zeroed["recall"]
            ctx.logger.record(f"per_document@{context}", comparison.per_document())
            summary = comparison.summary()
            if guess:  # the baseline's answers replace the LM's; its NLL is not defined
                summary = {"recall": summary["guess_recall"], "teacher_recall": summary["teacher_recall"]}
            metrics.update({f"{key}@{context}": value for key, value in summary.items()})
            if context == params.train_context and "recall" in summary:
                metrics["train_context_recall"] = summary["recall"]
        if params.teacher.kind == "constructed":
            metrics.update(load_metrics(workload, teacher, mixer, guess, params.train_context, params.eval_documents,
                                        ctx.device, ctx.stream("load-eval")))
        return metrics

    def _memory(self, params: ER2Params, layer: ER2Layer, device) -> dict[str, float]:
        q = torch.zeros(1, layer.num_heads, 3, layer.head_dim, device=device)
        kv = torch.zeros(1, layer.num_kv_heads, 3, layer.head_dim, device=device)
        with torch.no_grad():
            _, state = layer(q, kv, kv, return_state=True)
        measured = tensor_bytes(state)
        if measured != layer.recurrent_state_bytes(1):
            raise RuntimeError(f"returned state holds {measured} bytes, recurrent_state_bytes says {layer.recurrent_state_bytes(1)}")
        per_token = 2 * layer.num_kv_heads * layer.head_dim * KV_BYTES  # K and V
        metrics = {"state_bytes": float(measured), "break_even_context": float(math.ceil(measured / per_token))}
        for context in params.eval_contexts:
            metrics[f"kv_cache_bytes@{context}"] = float(per_token * context)
            metrics[f"state_to_kv_ratio@{context}"] = measured / (per_token * context)
        return metrics
