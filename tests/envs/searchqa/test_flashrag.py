"""FlashRAG / Search-R1 data: QA and corpus jsonl files, and tasks over them."""

import json
import re

import pytest

from agentcredit.config import ConfigError
from agentcredit.envs.searchqa.engine import TEMPLATES, SearchQAEnv
from agentcredit.envs.searchqa.flashrag import FlashRAGFormatError, load_corpus, load_qa
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.searchqa.tasks import build_tasks


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "nq"
    folder.mkdir()
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl"):
        _write(folder / name, [
            {"id": "q0", "question": "where is velmor?", "golden_answers": ["Arvenia",
                                                                            "Republic of Arvenia"]},
            "",
            {"id": "q1", "question": "who founded sostia?", "golden_answers": "Ada Brenn"},
        ])
    corpus = _write(tmp_path / "corpus.jsonl", [
        {"id": "0", "contents": '"Velmor"\nVelmor is a city in Arvenia.'},
        {"id": "1", "contents": '"Sostia"\nSostia was founded by Ada Brenn.\nIn 1400.'},
    ])
    return folder, corpus


def test_qa_and_corpus_files_load(dataset):
    folder, corpus = dataset
    records = load_qa(folder / "dev.jsonl")
    assert [(r.qid, r.question, r.golden_answers) for r in records] == [
        ("q0", "where is velmor?", ("Arvenia", "Republic of Arvenia")),
        ("q1", "who founded sostia?", ("Ada Brenn",))]
    passages = load_corpus(corpus)
    assert [(p.doc_id, p.title, p.text) for p in passages] == [
        ("0", '"Velmor"', "Velmor is a city in Arvenia."),
        ("1", '"Sostia"', "Sostia was founded by Ada Brenn.\nIn 1400.")]


@pytest.mark.parametrize(("line", "says"), [
    ("{not json", "is not a JSON object"),
    ("[1, 2]", "holds list, expected an object"),
    ('{"question": "q"}', "needs 'question' (text) and 'golden_answers'"),
    ('{"question": "q", "golden_answers": []}', "non-empty list"),
])
def test_a_bad_line_names_its_file_and_number(tmp_path, line, says):
    path = _write(tmp_path / "bad.jsonl", [{"question": "ok", "golden_answers": ["a"]}, line])
    with pytest.raises(FlashRAGFormatError, match=f"bad.jsonl:2 .*{re.escape(says)}"):
        load_qa(path)


def test_a_missing_file_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="pass an existing FlashRAG jsonl file"):
        load_corpus(tmp_path / "missing.jsonl")


def test_flashrag_tasks_play_over_local_bm25(dataset):
    folder, corpus = dataset
    config = SearchQAConfig(data_dir=str(folder), corpus_file=str(corpus))
    tasks = build_tasks("valid", config)
    assert [(t.task_id, t.task_type, t.instruction) for t in tasks] == [
        ("searchqa-valid-00000", "nq", "where is velmor?"),
        ("searchqa-valid-00001", "nq", "who founded sostia?")]
    env = SearchQAEnv()
    obs = env.reset(tasks[1])
    assert obs.admissible_actions == TEMPLATES
    obs, *_ = env.step("<search> who founded sostia </search>")
    assert obs.text.startswith('<information>Doc 1(Title: "Sostia") Sostia was founded by')
    _, reward, _, info = env.step("<answer> ada brenn </answer>")
    assert reward == 1.0 and info.won
    assert env.verifier(tasks[1]).atoms[0].atom_id == "answer"
    with pytest.raises(ValueError, match="no expert"):
        env.expert(tasks[1])


def test_a_dataset_without_passages_to_search_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="set corpus_file .* or retriever_url"):
        SearchQAConfig(data_dir=str(tmp_path))
