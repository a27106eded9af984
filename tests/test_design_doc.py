"""docs/design.md matches the code where it names code.

- Registries and records: its registry tables list exactly what is registered (estimators
  with their configs and inputs, auxiliary losses, methods, ``INPUTS``, ``CLAIMS``), and its
  records table names every field of each record.
- Modules. Every ``.py`` name it writes exists: a path (``train/loop.py``,
  ``tests/run/test_directory.py``) ends the path of a file of the repository's code
  (``src/``, ``tests/``, ``benchmarks/``, ``examples/``); a bare name (``loop.py``) is a
  module under the folder whose tree line or folder-table row names it, or, in the prose,
  a file anywhere in that code. Every module is named in the lists the design gives: each
  folder whose line of the ``src/agentcredit/`` tree lists file names lists exactly the
  modules directly in it (``__init__.py`` aside), and each folder with a row in the folder
  table names in that row every module directly in it. The folders the tree and the table
  describe by concept alone (the environments' engines ``envs/<name>/``, ``credit/vict/``,
  ``credit/adrs/``) have their modules in their own docs.
- Numbers: each number it states about the code equals the constant that holds it
  (``NUMBERS``).
- Citations: every ``docs/<file>.md §N`` or ``docs/<file>.md, "Section"`` that a file of
  ``src/``, ``tests/``, ``benchmarks/`` or ``examples/`` cites exists, and every module, function
  or class a docstring of ``src/`` cites by its dotted name (````train.scoring.tree_forward````)
  exists.
- Statements: what ``credit/`` imports (the layout block's line), the auxiliary losses the PPO
  stage adds (the registry's), and the settings that choose the episodes per game at evaluation
  (those ``train.build.episodes_per_split`` reads).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import agentcredit
from agentcredit.config import TrainConfig, load_config
from agentcredit.config.methods import METHODS
from agentcredit.credit import estimator_names, get_estimator
from agentcredit.credit.aux_losses import aux_loss_names, get_aux_loss
from agentcredit.credit.registry import CLAIMS, INPUTS
from agentcredit.train.build import POOL, episodes_per_split

from .test_import_graph import CONFIG_MODULES_MAX, _graph

ROOT = Path(agentcredit.__file__).parent
REPO = ROOT.parents[1]
DOCS = REPO / "docs"
DESIGN = (DOCS / "design.md").read_text()
#: the folders of the repository's code, where a module design.md names must be
CODE = ("src", "tests", "benchmarks", "examples")


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


def test_every_docs_section_the_code_cites_exists():
    """Every citation in ``src/``, ``tests/``, ``benchmarks/`` and ``examples/`` (this file's
    deliberately missing sections aside)."""
    missing = {str(path.relative_to(REPO)): found for path in _code_files()
               if path != Path(__file__) and (found := cited_missing(path.read_text()))}
    assert missing == {}


def test_the_citation_check_sees_a_missing_section():
    assert cited_missing('see docs/design.md, "Key records" and docs/vict.md §4.99') == [
        'docs/design.md, "Key records"', "docs/vict.md §4.99"]
    assert cited_missing('docs/vict.md §4.8, docs/design.md,\n    "Records", docs/verl.md, '
                         '"Launch", docs/design.md, "credit/"') == []


def _code_files() -> list[Path]:
    return sorted(path for folder in CODE for path in (REPO / folder).rglob("*.py"))


#: a file name ending in ``.py``, bare or with folders (``loop.py``, ``train/loop.py``)
PY_NAME = re.compile(r"(?<![\w./-])((?:\w+/)*\w+\.py)\b")


def missing_modules(text: str, folder: Path, files: list[str]) -> list[str]:
    """The ``.py`` names in ``text`` that name no file: a name with folders must end the path
    of one of ``files`` (posix paths), a bare name must be a file under ``folder``."""
    under = folder.as_posix().rstrip("/") + "/"
    return [name for name in PY_NAME.findall(text)
            if not any(f.endswith("/" + name) and ("/" in name or f.startswith(under))
                       for f in files)]


def modules_in(folder: Path) -> set[str]:
    """The module files directly in ``folder``, ``__init__.py`` aside."""
    return {path.name for path in folder.glob("*.py") if path.name != "__init__.py"}


def tree_lines(text: str) -> dict[str, str]:
    """The text of each folder's lines in the ``src/agentcredit/`` tree block of ``text``, by
    the folder's path under ``src/agentcredit`` (``""`` for the top-level modules' line)."""
    block = re.search(r"^```\nsrc/agentcredit/\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    lines, stack, folder = {}, [], ""
    for line in block.group(1).splitlines():
        indent = len(line) - len(line.lstrip())
        named = re.match(r" *(\w+)/(?:\s+(.*))?$", line)
        if named and indent < 10:  # a folder's line, two spaces deeper per level
            stack = [*stack[:indent // 2 - 1], named.group(1)]
            folder, line = "/".join(stack), named.group(2) or ""
        elif indent <= 2:  # the top-level modules
            stack, folder = [], ""
        lines[folder] = f"{lines.get(folder, '')} {line.strip()}"
    return lines


def folder_rows(text: str) -> dict[str, str]:
    """The text of each row of the folder table of ``text`` (``| folder / module |``), by its
    first cell's folder (``train``, ``integrations/verl``) or ``""`` for a module's row."""
    rows = {}
    for first, *rest in table(text, "folder / module"):
        folder = ticked(first)[0].rstrip("/") if first.strip().endswith("/`") else ""
        rows[folder] = f"{rows.get(folder, '')} {first if not folder else ''} {' '.join(rest)}"
    return rows


def outside_lists(text: str) -> str:
    """``text`` without the tree block and the folder table: the prose."""
    text = re.sub(r"^```\nsrc/agentcredit/\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| folder / module |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n".join(lines[:start] + lines[end:])


def named_but_missing(text: str) -> list[str]:
    """Every ``.py`` name of a design text that names no file (module notes)."""
    files = [f"/{path.relative_to(REPO).as_posix()}" for path in _code_files()]
    missing = []
    for folder, line in [*tree_lines(text).items(), *folder_rows(text).items()]:
        missing += missing_modules(line, Path("/src/agentcredit", folder), files)
    return missing + missing_modules(outside_lists(text), Path("/"), files)


def unlisted(text: str) -> dict[str, list[str]]:
    """By folder, the modules directly in a folder that its tree line (when it lists file
    names) or its folder-table row leaves out, and the tree's names of files not there."""
    out = {}
    for folder, line in tree_lines(text).items():
        listed = {name for name in PY_NAME.findall(line) if "/" not in name}
        if listed and (wrong := sorted(listed ^ modules_in(ROOT / folder))):
            out[f"tree: {folder or 'src/agentcredit'}"] = wrong
    for folder, row in folder_rows(text).items():
        named = set(PY_NAME.findall(row))
        if folder and (left := sorted(m for m in modules_in(ROOT / folder)
                                      if m not in named and f"{folder}/{m}" not in named)):
            out[f"row: {folder}/"] = left
    return out


def test_every_module_the_design_names_exists():
    assert named_but_missing(DESIGN) == []


def test_the_design_lists_every_module_of_the_folders_whose_modules_it_lists():
    assert unlisted(DESIGN) == {}


def test_the_module_checks_see_a_missing_and_an_unlisted_module():
    doc = DESIGN.replace("  run/             a run on disk: directory.py,",
                         "  run/             a run on disk: ghost.py,")
    doc = doc.replace("`tests/test_import_graph.py` checks", "`tests/gone.py` checks")
    before = named_but_missing(DESIGN)
    assert [name for name in named_but_missing(doc) if name not in before] == [
        "ghost.py", "tests/gone.py"]
    assert unlisted(doc)["tree: run"] == ["directory.py", "ghost.py"]


#: each number docs/design.md states about the code: the sentence, the number its group,
#: and the constant it must equal
NUMBERS = [
    (r"importing `config/` loads at most (\d+) of the package's modules", CONFIG_MODULES_MAX),
]


def stated_numbers(text: str) -> list[tuple[str, int, int]]:
    """``(sentence, number written, constant)`` of each of ``NUMBERS`` in ``text``; a sentence
    written other than once is reported with ``-1``."""
    out = []
    for sentence, constant in NUMBERS:
        found = re.findall(sentence.replace(" ", r"\s+"), text)
        out.append((sentence, int(found[0]) if len(found) == 1 else -1, constant))
    return out


def test_each_number_the_design_states_is_the_constant_it_names():
    assert [(s, n) for s, n, constant in stated_numbers(DESIGN) if n != constant] == []


def test_the_number_check_sees_a_changed_number_and_a_lost_sentence():
    most = f"at most {CONFIG_MODULES_MAX}"
    changed = DESIGN.replace(f"{most} of", f"at most {CONFIG_MODULES_MAX + 1} of")
    assert stated_numbers(changed)[0][1:] == (CONFIG_MODULES_MAX + 1, CONFIG_MODULES_MAX)
    assert stated_numbers("")[0][1] == -1


#: a dotted name of the package that a docstring cites in double backticks
#: (````train.scoring.tree_forward````, ````credit.hcapo.hindsight_rollouts````); ``scoring.``
#: is short for ``train.scoring.``
CODE_NAME = re.compile(r"``((?:agentcredit\.)?(?:train|credit|rollout|run|envs|verifier|skills|"
                       r"report|integrations|testing|config|scoring)\.[\w.]*\w)``")
#: first parts that are also a config section or the config itself: ````rollout.max_steps````
#: is a setting, not code, when ``rollout/`` has no such module or name
SETTINGS = {field.name for field in dataclasses.fields(TrainConfig)} | {"config"}
#: the suffixes of a file's name (````train.jsonl````), which is not code either
FILE_SUFFIXES = {"json", "jsonl", "yaml", "yml", "md", "txt", "gz", "pt", "py", "safetensors"}


def _bound(body: list[ast.stmt]) -> set[str]:
    """The names a module's or a class's body binds: definitions, assignments, imports."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def cites_code_that_is_gone(name: str) -> bool:
    """Whether the dotted ``name`` names a module, or a name in a module (a class's attribute
    after it), that the package does not have; a setting (``SETTINGS``) or a file's name
    (``FILE_SUFFIXES``) is never gone."""
    parts = name.removeprefix("agentcredit.").split(".")
    if parts[-1] in FILE_SUFFIXES:
        return False
    if parts[0] == "scoring":
        parts = ["train", *parts]
    path, depth = ROOT, 0
    while depth < len(parts) and path.is_dir():
        if (path / parts[depth]).is_dir():
            path = path / parts[depth]
        elif (path / f"{parts[depth]}.py").is_file():
            path = path / f"{parts[depth]}.py"
        else:
            break
        depth += 1
    if depth == len(parts):
        return False
    body = ast.parse((path / "__init__.py" if path.is_dir() else path).read_text()).body
    if parts[depth] not in _bound(body):
        return not (path.is_dir() and depth == 1 and parts[0] in SETTINGS)
    owner = next((node for node in body if isinstance(node, ast.ClassDef)
                  and node.name == parts[depth]), None)
    return owner is not None and depth + 1 < len(parts) and parts[depth + 1] not in _bound(
        owner.body)


def test_every_name_the_code_cites_exists():
    gone = {str(path.relative_to(REPO)): names for path in sorted(ROOT.rglob("*.py"))
            if (names := [name for name in CODE_NAME.findall(path.read_text())
                          if cites_code_that_is_gone(name)])}
    assert gone == {}


def test_the_name_check_sees_a_gone_module_function_and_method_but_not_a_setting():
    cited = ("``scoring.token_logprobs`` ``train.ppo.score_steps`` ``credit.result.CreditResult"
             ".per_step`` ``train.ppo.ppo_update`` ``credit.result.CreditResult.per_token`` "
             "``rollout.max_steps`` ``config.json`` ``train.jsonl``")
    assert [name for name in CODE_NAME.findall(cited) if cites_code_that_is_gone(name)] == [
        "scoring.token_logprobs", "train.ppo.score_steps", "credit.result.CreditResult.per_step"]


def layout_mismatch(text: str, folder: str, graph: dict[str, set[str]]
                    ) -> tuple[list[str], list[str]]:
    """For ``folder``'s line of the layout block (``credit/  → verifier/, config/schema.py,
    …``, notes in parentheses aside): the modules outside it that ``folder`` imports and the
    line leaves out, and the targets the line names that ``folder`` never imports."""
    (line,) = re.findall(rf"^{re.escape(folder)} +→ (.*)$", text, re.MULTILINE)
    named = [target.strip() for target in re.sub(r"\([^)]*\)", "", line).split(",")]
    targets = {f"agentcredit.{t.removesuffix('/').removesuffix('.py').replace('/', '.')}": t
               for t in named}
    package = f"agentcredit.{folder.removesuffix('/')}"

    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    imported = {dep for module, deps in graph.items() if under(module, package)
                for dep in deps if not under(dep, package)}
    return (sorted(dep for dep in imported if not any(under(dep, t) for t in targets)),
            sorted(t for prefix, t in targets.items()
                   if not any(under(dep, prefix) for dep in imported)))


def test_the_layout_names_exactly_what_credit_imports():
    """Imports inside functions included (``tests/test_import_graph.py``'s graph)."""
    assert layout_mismatch(DESIGN, "credit/", _graph()) == ([], [])


def test_the_layout_check_sees_an_import_left_out_and_one_never_made():
    graph = {"agentcredit.credit.registry": {"agentcredit.plugins", "agentcredit.credit.batch"},
             "agentcredit.credit.batch": {"agentcredit.verifier.trace"}}
    text = "credit/        → verifier/, config/schema.py (a note, with a comma)\n"
    assert layout_mismatch(text, "credit/", graph) == (["agentcredit.plugins"],
                                                       ["config/schema.py"])


def stage(name: str) -> str:
    """The ``in → out`` cell of the stage ``name`` in the table of one update."""
    (row,) = [row for row in table(DESIGN, "stage") if row[0] == name]
    return row[2]


def test_the_ppo_stage_names_every_registered_auxiliary_loss():
    (listed,) = re.findall(r"the auxiliary loss \(([^)]*)\)", stage("PPO update"))
    assert sorted(ticked(listed)) == sorted(aux_loss_names())


def test_the_evaluate_stage_names_the_settings_that_choose_the_episodes_per_game():
    """Each named setting is read for its split (pool or not), with hand-picked values."""
    named = [key for key in ticked(stage("evaluate")) if "episodes" in key]
    assert named == ["eval.episodes_per_game", "eval.pool_episodes_per_game"]
    config = load_config(None, ["eval.episodes_per_game=2", "eval.pool_episodes_per_game=3"])
    assert episodes_per_split(config, ["valid_seen", POOL]) == {"valid_seen": 2, POOL: 3}
