"""The ALFWorld extra is optional: without the GPL engine packages the CLI and WebShop work."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Runs in a fresh interpreter in which importing the ALFWorld stack fails, as it does after
# `pip install agentcredit` without `[alfworld]`.
BLOCKED_RUN = textwrap.dedent("""
    import importlib.abc, sys

    class NoEngine(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("alfworld", "textworld", "fast_downward", "tatsu"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
            return None

    sys.meta_path.insert(0, NoEngine())
    from agentcredit.cli import main
    code = main(sys.argv[1:])
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("alfworld", "textworld"))
    assert not loaded, loaded
    print("torch loaded:", "torch" in sys.modules)
    raise SystemExit(code)
""")


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKED_RUN, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False)


def test_help_runs_without_the_engine_and_without_torch(tmp_path):
    done = subprocess.run([sys.executable, "-c", BLOCKED_RUN.replace(
        "code = main(sys.argv[1:])", "code = 0\ntry:\n    main(['--help'])\nexcept SystemExit as e:"
        "\n    code = e.code")], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 0, done.stderr
    assert "agentcredit" in done.stdout
    assert "torch loaded: False" in done.stdout


@pytest.mark.slow
def test_a_webshop_run_trains_without_the_engine(tmp_path):
    # 30 training goals: their demonstrations play in this process (a pool starts from 32)
    done = _run("train", "run.updates=1", "run.eval_every=0", "run.eval_at_start=false",
                "run.progress=false",
                "sft.epochs=1", "rollout.max_steps=3", "rollout.group_size=2",
                "rollout.tasks_per_update=2", "rollout.max_new_tokens=12",
                "model.tiny.hidden_size=32", "model.tiny.num_hidden_layers=1",
                "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=1",
                "model.tiny.intermediate_size=64",
                "env=webshop", "env.webshop.num_products=50", "env.webshop.goals_per_product=1",
                "env.webshop.valid_goals=10", "env.webshop.test_goals=10",
                f"run.output_dir={tmp_path}", "run.name=shop", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "shop" / "checkpoints" / "update_00001").is_dir()
