"""docs/design.md matches the code: its registry tables list exactly what is registered
(estimators with their configs and inputs, auxiliary losses, methods, ``INPUTS``), its
records table names every field of each record, and every ``docs/<file>.md §N`` or
``docs/<file>.md, "Section"`` a source file cites exists."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import agentcredit
from agentcredit.config.methods import METHODS
from agentcredit.credit import estimator_names, get_estimator
from agentcredit.credit.aux_losses import aux_loss_names, get_aux_loss
from agentcredit.credit.registry import CLAIMS, INPUTS

ROOT = Path(agentcredit.__file__).parent
DOCS = ROOT.parents[1] / "docs"
DESIGN = (DOCS / "design.md").read_text()


def table(text: str, header: str) -> list[list[str]]:
    """The body rows of the markdown table whose header row starts ``| header |``, as cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def ticked(cell: str) -> list[str]:
    """The ``backticked`` names of a cell, in order."""
    return re.findall(r"`([^`]+)`", cell)


def test_the_estimator_table_lists_every_registered_estimator_with_its_config_inputs_claims():
    listed = {}
    for names, configs, inputs, claims in table(DESIGN, "estimator"):
        for name in ticked(names):
            listed[name] = (set(ticked(configs)), set(ticked(inputs)), set(ticked(claims)))
    assert sorted(listed) == estimator_names()
    for name, (configs, inputs, claims) in listed.items():
        estimator = get_estimator(name)
        assert claims == set(estimator.claims), name
        assert estimator.config_cls.__name__ in configs, name
        default = estimator.inputs(estimator.config_cls())
        # the inputs of the default config, and any a setting adds, named from INPUTS
        assert default <= inputs and inputs & set(INPUTS) == inputs - {"gate=L1"}, name


def test_the_inputs_the_design_names_are_the_registrys():
    (written,) = re.findall(r"`INPUTS = \(([^)]*)\)`", DESIGN)
    assert tuple(re.findall(r'"(\w+)"', written)) == INPUTS


def test_the_claims_the_design_names_are_the_registrys():
    (written,) = re.findall(r"`CLAIMS = \(([^)]*)\)`", DESIGN)
    assert tuple(re.findall(r'"(\w+)"', written)) == CLAIMS


def test_the_auxiliary_loss_table_lists_every_registered_loss_with_its_inputs():
    listed = {name: set(ticked(inputs)) for names, inputs in table(DESIGN, "auxiliary loss")
              for name in ticked(names)}
    assert sorted(listed) == sorted(aux_loss_names())
    for name, inputs in listed.items():
        assert inputs == set(get_aux_loss(name).needs), name


def test_the_method_table_lists_every_named_method():
    listed = {name for names, _ in table(DESIGN, "method") for name in ticked(names)}
    assert listed - {"skill_grpo*"} == set(METHODS)


def test_the_records_table_names_each_records_module_and_every_field():
    for names, module, what in table(DESIGN, "record"):
        path = ticked(module)[0].removesuffix(".py").replace("/", ".")
        loaded = importlib.import_module(f"agentcredit.{path}")
        for name in ticked(names):
            record = getattr(loaded, name)  # the record lives where the table says
            if name in ("Step", "Trajectory", "RolloutTrace", "Task"):
                continue  # described in words (their docstrings list the fields)
            if dataclasses.is_dataclass(record):
                words = set(re.findall(r"\w+", what))
                missing = [f.name for f in dataclasses.fields(record) if f.name not in words]
                assert not missing, f"{name}: {missing} not in docs/design.md's records table"


#: ``docs/<file>.md §N.M`` or ``docs/<file>.md, "Section"`` (a line break may split either)
CITATION = re.compile(r'docs/(\w+)\.md(?:,?\s+§(\d+(?:\.\d+)*)|,\s+"([^"]+)")')


def sections(doc: str) -> tuple[set[str], list[str], set[str]]:
    """A doc's section numbers, its heading texts, and the backticked first cells of its
    tables (a row a docstring may cite, as docs/design.md's folder table)."""
    text = (DOCS / f"{doc}.md").read_text()
    headings = [h.strip() for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)]
    numbers = {m.group(1) for h in headings if (m := re.match(r"§?(\d+(?:\.\d+)*)\.?\s", h))}
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE))
    return numbers, headings, rows


def cited_missing(text: str) -> list[str]:
    """Every citation in ``text`` whose section does not exist."""
    missing = []
    for doc, number, name in CITATION.findall(text):
        if not (DOCS / f"{doc}.md").is_file():
            missing.append(f"docs/{doc}.md")
            continue
        numbers, headings, rows = sections(doc)
        if number:
            if number not in numbers:
                missing.append(f"docs/{doc}.md §{number}")
        elif name not in rows and not any(h == name or re.match(re.escape(name) + r"\W", h)
                                          for h in headings):
            missing.append(f'docs/{doc}.md, "{name}"')
    return missing


def test_every_docs_section_a_source_file_cites_exists():
    missing = {str(path.relative_to(ROOT)): found for path in sorted(ROOT.rglob("*.py"))
               if (found := cited_missing(path.read_text()))}
    assert missing == {}


def test_the_citation_check_sees_a_missing_section():
    assert cited_missing('see docs/design.md, "Key records" and docs/vict.md §4.99') == [
        'docs/design.md, "Key records"', "docs/vict.md §4.99"]
    assert cited_missing('docs/vict.md §4.8, docs/design.md,\n    "Records", docs/verl.md, '
                         '"Launch", docs/design.md, "credit/"') == []
