"""ADRS and its privileged baselines in the training loop (issue 5, docs/adrs.md §5), on the fake
corridor.

Every method name trains; skill text reaches a rollout or evaluation prompt only for
``skill_prompt`` / ``skill_grpo`` / ``skill_grpo*``; ADRS with ``η = 0`` trains exactly
like GRPO; the teacher pass leaves the behaviour snapshot untouched; the SFT skill
mixing and the embedded tokenizer corpus; the probe gap at every evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agentcredit.cli import main
from agentcredit.config import load_config
from agentcredit.envs.suites import environment_spec, update_environment
from agentcredit.rollout.policy import HFPolicy
from agentcredit.run.directory import RunDirectory
from agentcredit.skills import SKILL_HEADER
from agentcredit.train import credit_inputs
from agentcredit.train.loop import train
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring import teacher
from agentcredit.train.warm_start import start_policy

RUN = (
    "run.updates=1", "run.eval_every=0", "run.checkpoint_every=1",
    "sft.epochs=40", "sft.batch_size=4", "sft.lr=0.01", "sft.skill_share=0.5",
    "rollout.group_size=3", "rollout.tasks_per_update=2",
    "optim.lr=1e-3", "optim.mini_batches=2", "optim.micro_batch_size=4",
)
GUIDE = "Walk the corridor zanzibar room by room until you see the apple."


def latest_checkpoint(run_dir: Path) -> Path:
    """The run's newest complete checkpoint folder."""
    return RunDirectory(run_dir).latest_checkpoint()


@pytest.fixture
def skills_root(tmp_path, fake_suite) -> Iterator[Path]:
    """Skill texts for the fake environment's two task types, and its action words."""
    folder = tmp_path / "skills" / "fake"
    folder.mkdir(parents=True)
    (folder / "guide.md").write_text(GUIDE + "\n")
    (folder / "type0.md").write_text("Type zero: the apple is often to the right; take it.")
    (folder / "type1.md").write_text("Type one: the apple may be to the left; take it.")
    before = environment_spec("fake").action_words
    update_environment("fake", action_words=frozenset({"go", "take"}))
    yield folder.parent
    update_environment("fake", action_words=before)


@pytest.fixture
def run(tiny_fake_run, skills_root):
    """``run(root, name, *extra)``: train the tiny run with the fake skills; its config and
    metrics records."""
    def train_run(root: Path, name: str, *extra: str):
        config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={root}",
                                    f"run.name={name}", f"skills.root={skills_root}", *extra])
        train(config, echo=lambda _: None)
        return config, [json.loads(line) for line in
                        (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    return train_run


@pytest.fixture
def prompts_seen(monkeypatch):
    """Every prompt the policy samples from, decoded, by sampling temperature."""
    seen: dict[float, list[str]] = {}
    generate = HFPolicy.generate

    def recording(self, prompts, *, temperature, **kwargs):
        seen.setdefault(temperature, []).extend(self.tokenizer.decode(p) for p in prompts)
        return generate(self, prompts, temperature=temperature, **kwargs)

    monkeypatch.setattr(HFPolicy, "generate", recording)
    return seen


TRAIN_T, EVAL_T = 1.0, 0.4  # the rollout and evaluation temperatures of RUN

# method name → (skill in training rollout prompts, skill in evaluation prompts, update keys)
METHOD_CASES = {
    "grpo": (False, False, ()),
    "adrs": (False, False, ("time/teacher", "credit/gate_mean.L2", "credit/q_hat_abs_gt1_share",
                            "credit/token_advantage_abs_mean")),
    "adrs/gigpo/L3": (False, False, ("time/teacher", "credit/gate_mean.L3",
                                     "credit/backbone/mean_abs_step_advantage")),
    "adrs/grpo/L1": (False, False, ("time/teacher", "credit/gate_mean.L1")),
    "adrs/grpo/off": (False, False, ("time/teacher", "credit/gate_token_mean")),
    "opsd": (False, False, ("time/teacher", "ppo/aux_loss", "ppo/opsd_gap")),
    "sdar": (False, False, ("time/teacher", "ppo/aux_loss", "ppo/sdar_gap",
                            "ppo/sdar_gate_mean")),
    "skill_sd": (False, False, ("time/teacher", "ppo/aux_loss", "ppo/skill_sd_gap",
                                "ppo/skill_sd_k3")),
    "opsd_only": (False, False, ("time/teacher", "ppo/aux_loss", "ppo/opsd_gap")),
    "rlsd": (False, False, ("time/teacher", "credit/token_advantage_abs_mean")),
    "vanilla": (None, False, ()),
    "skill_prompt": (None, True, ()),
    "skill_grpo": (True, False, ()),
    "skill_grpo*": (True, True, ()),
}


def method_overrides(case: str) -> list[str]:
    method, *rest = case.split("/")
    backbone_gate = ([f"credit.options.backbone={rest[0]}", f"credit.options.gate={rest[1]}"]
                     if rest else [])
    return [f"method={method}", *backbone_gate]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(METHOD_CASES))
def test_each_method_name_trains_and_shows_the_skill_only_in_its_own_prompts(
        case, run, prompts_seen, tmp_path):
    in_rollouts, in_eval, update_keys = METHOD_CASES[case]
    _, records = run(tmp_path, case.replace("/", "_").replace("*", "_star"),
                     *method_overrides(case))
    updates = [r for r in records if r["kind"] == "update"]
    evals = [r for r in records if r["kind"] == "eval"]
    if in_rollouts is None:  # skill_prompt: the SFT policy, evaluated once, never trained
        assert updates == [] and TRAIN_T not in prompts_seen and len(evals) == 1
    else:
        (update,) = updates
        assert all(key in update for key in update_keys), set(update_keys) - set(update)
        assert ("time/teacher" in update) == (
            case.startswith(("adrs", "opsd", "sdar", "skill_sd", "rlsd")))
        assert prompts_seen[TRAIN_T]
        assert [SKILL_HEADER in p for p in prompts_seen[TRAIN_T]] == \
            [in_rollouts] * len(prompts_seen[TRAIN_T])
        assert len(evals) == 2
    assert [SKILL_HEADER in p for p in prompts_seen[EVAL_T]] == \
        [in_eval] * len(prompts_seen[EVAL_T])
    if case not in ("grpo", "vanilla"):  # every run that uses skills logs the probe gap
        assert all({"eval/probe_gap/action", "eval/probe_gap/object", "eval/probe_gap/other"}
                   <= set(r) for r in evals)


def _without(records: list[dict], *prefixes: str) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(prefixes)} for r in records]


@pytest.mark.slow
def test_adrs_with_eta_zero_trains_exactly_like_grpo_and_default_eta_does_not(
        run, tmp_path):
    two = ("run.updates=2", "run.eval_at_start=false")
    _, grpo = run(tmp_path, "grpo", "method=grpo", "optim.clip_high=0.28", *two)
    _, adrs0 = run(tmp_path, "adrs0", "method=adrs", "credit.options.eta=0", *two)
    _, adrs = run(tmp_path, "adrs", "method=adrs", *two)
    noise = ("time/", "tokens/", "credit/", "eval/probe_gap/", "sft/seconds")
    assert any(r.get("ppo/grad_norm", 0) > 0 for r in grpo)  # a real update happened
    assert _without(adrs0, *noise) == _without(grpo, *noise)
    weights = [load_file(latest_checkpoint(tmp_path / name) / "policy" / "model.safetensors")
               for name in ("grpo", "adrs0")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert _without(adrs, *noise) != _without(grpo, *noise)  # η > 0 changes the update


def test_the_teacher_pass_scores_without_grad_and_leaves_the_snapshot_unchanged(
        run, tmp_path, monkeypatch):
    calls = []
    original = credit_inputs.teacher_logprobs

    def checked(model, *args, **kwargs):
        before = {k: v.clone() for k, v in model.state_dict().items()}
        out = original(model, *args, **kwargs)
        calls.append(not out.requires_grad
                     and all(p.grad is None for p in model.parameters())
                     and all(torch.equal(before[k], v) for k, v in model.state_dict().items()))
        return out

    monkeypatch.setattr(credit_inputs, "teacher_logprobs", checked)
    run(tmp_path, "sdar", "method=sdar", "run.updates=2", "run.eval_at_start=false")
    assert calls == [True, True]


@pytest.mark.slow
def test_sft_skill_mixing_prefixes_a_share_of_demonstration_copies_and_fits_the_tokenizer(
        run, tmp_path, monkeypatch):
    seen = {}
    run_sft = start_policy.run_sft

    def capture(model, samples, *args, **kwargs):
        seen[len(seen)] = samples
        return run_sft(model, samples, *args, **kwargs)

    monkeypatch.setattr(start_policy, "run_sft", capture)
    no_rl = ("run.updates=0", "run.eval_at_start=false")
    config, _ = run(tmp_path, "mixed", *no_rl)
    run(tmp_path, "plain", "sft.skill_share=0", *no_rl)
    _, tokenizer = load_policy(str(config.run_dir / "reference"), "cpu", torch.float32)
    mixed, plain = seen[0], seen[1]
    n = len(plain)  # 4 train tasks, one demonstration each
    assert n == 4 and len(mixed) == n + 2  # share 0.5
    assert [t.task.task_id for t in mixed[:n]] == [t.task.task_id for t in plain]
    has_skill = [all(SKILL_HEADER in tokenizer.decode(s.prompt_ids) for s in t.steps)
                 for t in mixed]
    assert has_skill == [False] * n + [True] * 2
    # the skill texts are in the embedded tokenizer's corpus: no byte-by-byte spelling
    assert len(tokenizer.encode(" zanzibar", add_special_tokens=False)) == 1
    assert len(tokenizer.encode(" qzvkxjwp", add_special_tokens=False)) > 2


def test_eval_cli_shows_skills_only_for_the_skill_prompt_method(run, tmp_path,
                                                                prompts_seen, capsys):
    config, _ = run(tmp_path, "trained", "run.eval_at_start=false")
    prompts_seen.clear()
    assert main(["eval", "--checkpoint", str(config.run_dir)]) == 0
    assert prompts_seen[EVAL_T] and not any(SKILL_HEADER in p for p in prompts_seen[EVAL_T])
    prompts_seen.clear()
    assert main(["eval", "--checkpoint", str(config.run_dir), "method=skill_prompt"]) == 0
    assert prompts_seen[EVAL_T] and all(SKILL_HEADER in p for p in prompts_seen[EVAL_T])
    assert '"eval/valid_seen/success"' in capsys.readouterr().out


def test_a_method_without_skill_texts_for_its_environment_stops_with_one_line(
        tiny_fake_run, tmp_path, capsys):
    status = main(["train", *tiny_fake_run, *RUN, f"run.output_dir={tmp_path}", "method=adrs"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err
    assert err.startswith("error: no skill texts for environment 'fake': agentcredit ships "
                          "skill texts for ")
    assert err.endswith("only; set skills.root=DIR to a folder holding fake/guide.md and one "
                        "fake/<task_type>.md per task type")
    assert "site-packages" not in err and "src/agentcredit" not in err  # not into the install


def test_the_teacher_scores_with_the_pre_update_policy_of_the_same_update_not_the_reference(
        run, tmp_path, monkeypatch):
    from agentcredit.train import update as update_module

    def snapshot(model) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    scored, updated = [], []
    teacher, update = credit_inputs.teacher_logprobs, update_module.ppo_update

    def scoring(model, *args, **kwargs):
        scored.append(snapshot(model))
        return teacher(model, *args, **kwargs)

    def updating(model, *args, **kwargs):
        updated.append(snapshot(model))  # the weights the update starts from
        return update(model, *args, **kwargs)

    monkeypatch.setattr(credit_inputs, "teacher_logprobs", scoring)
    monkeypatch.setattr(update_module, "ppo_update", updating)
    run(tmp_path, "adrs", "method=adrs", "run.updates=2", "run.eval_at_start=false")
    assert len(scored) == len(updated) == 2
    assert not all(torch.equal(scored[0][k], scored[1][k]) for k in scored[0])  # it moved
    for teacher_weights, policy_weights in zip(scored, updated, strict=True):
        assert all(torch.equal(teacher_weights[k], policy_weights[k]) for k in policy_weights)


def test_adrs_presets_carry_the_papers_settings_per_environment():
    alfworld = load_config(None, ["method=adrs"])
    webshop = load_config(None, ["method=adrs_webshop"])
    assert alfworld.optim.clip_high == webshop.optim.clip_high == 0.28
    assert {k: alfworld.credit.options[k] for k in ("eta", "scope", "gate", "gate_norm")} == \
        {"eta": 0.1, "scope": "global", "gate": "L2", "gate_norm": True}
    assert {k: webshop.credit.options[k] for k in ("eta", "scope", "gate", "gate_norm")} == \
        {"eta": 0.02, "scope": "per_step", "gate": "L2", "gate_norm": False}
    assert not alfworld.eval.skills and not alfworld.rollout.skills


@pytest.mark.parametrize("method", ["adrs", "adrs_webshop", "opsd", "sdar", "skill_sd",
                                    "opsd_only", "rlsd"])
def test_evaluation_skills_are_refused_for_every_method_with_a_privileged_teacher(method):
    with pytest.raises(ValueError, match="eval.skills = true .* set eval.skills=false"):
        load_config(None, [f"method={method}", "eval.skills=true"])


@pytest.mark.parametrize("method", ["skill_prompt", "skill_grpo*"])
def test_evaluation_skills_stay_allowed_for_the_skill_prompt_baselines(method):
    assert load_config(None, [f"method={method}"]).eval.skills


@pytest.mark.slow
def test_without_policy_gradient_only_the_distillation_and_the_entropy_bonus_move_the_weights(
        run, tmp_path):
    quiet = ("method=opsd_only", "optim.kl_coef=0", "optim.aux_coef=0")
    _, records = run(tmp_path, "silent", *quiet)
    (update,) = [r for r in records if r["kind"] == "update"]
    assert update["ppo/grad_norm"] == 0.0
    _, records = run(tmp_path, "entropy", *quiet, "optim.entropy_coef=0.1")
    (update,) = [r for r in records if r["kind"] == "update"]
    assert update["ppo/grad_norm"] > 0.0
    _, records = run(tmp_path, "distil", "method=opsd_only", "optim.kl_coef=0")
    (update,) = [r for r in records if r["kind"] == "update"]
    assert update["ppo/grad_norm"] > 0.0


@pytest.mark.parametrize("method", ["adrs", "hcapo"])
def test_the_privileged_passes_score_at_the_rollout_temperature(method, run, tmp_path,
                                                                monkeypatch):
    """The teacher (ADRS, and the probe gap at each evaluation) and the hindsight pass (HCAPO)
    score ``softmax(z/T)`` at the rollout temperature, as the student's log-probs are."""
    seen = []
    score = teacher.score_trees

    def recording(*args, temperature=1.0, **kwargs):
        seen.append(temperature)
        return score(*args, temperature=temperature, **kwargs)

    monkeypatch.setattr(teacher, "score_trees", recording)
    run(tmp_path, f"tempered_{method}", f"method={method}", "rollout.temperature=0.5")
    assert seen and set(seen) == {0.5}
