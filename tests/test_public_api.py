"""The public API for a trainer of one's own: ``agentcredit``'s re-exports and the README's
"Credit in your own trainer" snippets, run as written."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import agentcredit

README = Path(__file__).resolve().parents[1] / "README.md"


def _snippets() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Credit in your own trainer", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def _run(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102  (the README's own code)
    return namespace


def test_the_package_reexports_the_registry_the_batch_and_every_methods_config():
    from agentcredit.credit.adrs import ADRSConfig
    from agentcredit.credit.batch import CreditBatch
    from agentcredit.credit.registry import get_estimator

    assert agentcredit.CreditBatch is CreditBatch
    assert agentcredit.ADRSConfig is ADRSConfig
    assert agentcredit.get_estimator is get_estimator
    for name in ("GRPOConfig", "RLOOConfig", "GiGPOConfig", "VICTConfig", "RLSDConfig",
                 "SALTConfig", "HCAPOConfig", "ProxMOConfig", "estimator_names"):
        assert name in dir(agentcredit) and getattr(agentcredit, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Trainer'"):
        agentcredit.Trainer  # noqa: B018


def test_importing_agentcredit_loads_no_torch():
    code = "import sys, agentcredit; assert 'torch' not in sys.modules, 'torch loaded'"
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_the_readme_has_the_three_snippets_gigpo_adrs_vict():
    snippets = _snippets()
    assert [re.search(r'get_estimator\("(\w+)"\)', s).group(1) for s in snippets] == \
        ["gigpo", "adrs", "vict"]


def test_the_readme_gigpo_snippet_credits_the_shared_hall_state_by_its_return_to_go():
    result = _run(_snippets()[0])["result"]
    adv = result.step_advantages
    assert adv.shape == (7,)
    # episode level: returns (1, 0, 1) -> (+1/√2, −√2, +1/√2) with population std √2/3
    episode = torch.tensor([1, 1, 1, -2, -2, 1, 1]) / 2 ** 0.5
    # step level (γ = 0.95): "start" holds t=0 of all three rollouts, returns-to-go
    # (γ², 0, γ); "hall" holds t=1 of the first two, (γ, 0) -> ±1; "kitchen" steps stand alone
    g = 0.95
    start = torch.tensor([g * g, 0.0, g], dtype=torch.float64)
    start = (start - start.mean()) / start.std(correction=0)
    step = torch.tensor([start[0], 1.0, 0.0, start[1], -1.0, start[2], 0.0])
    assert torch.allclose(adv.double(), (episode + step).double(), atol=1e-4)


def test_the_readme_adrs_snippet_keeps_each_steps_mean_token_advantage_at_its_step_advantage():
    ns = _run(_snippets()[1])
    result, batch = ns["result"], ns["batch"]
    assert result.step_advantages.tolist() == pytest.approx([1.0, 1.0, -1.0, -1.0], abs=1e-5)
    tokens = result.token_advantages
    assert tokens.shape == (7,)
    per_step = torch.zeros(4, dtype=torch.float64).index_add_(0, batch.tokens.token_step,
                                                               tokens.double())
    counts = torch.bincount(batch.tokens.token_step).double()
    assert torch.allclose(per_step / counts, result.step_advantages.double(), atol=1e-5)
    assert not torch.allclose(tokens.double(), result.step_advantages.double()
                              [batch.tokens.token_step])  # the teacher moved tokens apart


def test_the_readme_vict_snippet_credits_the_winning_rollouts_proof_steps():
    result = _run(_snippets()[2])["result"]
    adv = result.step_advantages
    assert adv.shape == (4,)
    assert adv[0] > 0 and adv[1] > 0 and (adv[2:] < 0).all()
