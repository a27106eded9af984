"""Retrieval: the BM25 index, and the Search-R1 retrieval-server client against a local
server started on the loopback address."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentcredit.envs.base import Task
from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.engine import SearchQAEnv
from agentcredit.envs.searchqa.questions import Question
from agentcredit.envs.searchqa.retrieval import BM25Retriever, RetrievalError
from agentcredit.envs.searchqa.server import ServerRetriever

from ..hostile_server import KINDS as HOSTILE_KINDS
from ..hostile_server import HostileServer

DOCS = [{"id": "11", "contents": '"Velmor"\nVelmor is a city in Arvenia.'},
        {"id": "12", "contents": '"Arvenia"\nArvenia is a country.'}]


def test_bm25_ranks_the_passage_with_the_rarer_terms_first_and_breaks_ties_by_order():
    passages = [Passage("0", "Arvenia", "a country"), Passage("1", "Velmor", "a city in Arvenia"),
                Passage("2", "Velmor", "a city in Arvenia"), Passage("3", "Sostia", "a country")]
    index = BM25Retriever(passages)
    assert index.ranked("velmor", 3) == [1, 2]  # the two equal passages, in corpus order
    assert index.ranked("the country of arvenia", 2)[0] == 0  # both of its terms
    assert index.ranked("of the a", 3) == []  # only stop words
    assert index.ranked("zebra", 3) == []


class _Server:
    """A Search-R1-like retrieval server; ``script`` says how to answer each request."""

    def __init__(self, script):
        self.script, self.bodies = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append((self.path, body))
                how = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                if how == "slow":
                    time.sleep(0.5)
                    how = "scores"
                code, payload = {
                    "scores": (200, json.dumps({"result": [[{"document": d, "score": 1.0}
                                                            for d in DOCS]]})),
                    "plain": (200, json.dumps({"result": [DOCS]})),
                    "error": (500, "{}"),
                    "garbage": (200, "<html>not json</html>"),
                    "schema": (200, json.dumps({"documents": []})),
                }[how]
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/retrieve"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(*script):
        servers.append(_Server(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _client(url, **kw):
    waits = []
    return ServerRetriever(url, sleep=waits.append, **kw), waits


def test_the_client_posts_queries_and_topk_and_reads_titles_from_contents(serve):
    server = serve("scores")
    client, _ = _client(server.url)
    passages = client.search("where is velmor", 3)
    assert server.bodies == [("/retrieve", {"queries": ["where is velmor"], "topk": 3,
                                            "return_scores": True})]
    assert [(p.doc_id, p.title, p.text) for p in passages] == [
        ("11", '"Velmor"', "Velmor is a city in Arvenia."),
        ("12", '"Arvenia"', "Arvenia is a country.")]


def test_the_client_reads_results_without_scores(serve):
    client, _ = _client(serve("plain").url)
    assert [p.doc_id for p in client.search("q", 1)] == ["11"]


def test_failures_are_retried_with_doubling_backoff(serve):
    server = serve("error", "garbage", "scores")
    client, waits = _client(server.url, retries=3, backoff_s=0.5)
    assert len(client.search("q", 3)) == 2
    assert len(server.bodies) == 3 and waits == [0.5, 1.0]


@pytest.mark.parametrize(("how", "reason"), [("error", "HTTP 500"), ("garbage", "not valid JSON"),
                                             ("schema", "not {'result'"),
                                             ("slow", "did not answer")])
def test_a_server_that_keeps_failing_raises_retrieval_error_with_the_reason(serve, how, reason):
    server = serve(how)
    client, waits = _client(server.url, retries=2, timeout_s=0.2)
    with pytest.raises(RetrievalError, match=reason):
        client.search("q", 3)
    assert len(server.bodies) == 3 and waits == [0.5, 1.0]


def _closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/retrieve"


def test_an_unreachable_server_becomes_an_observation():
    question = Question("Where is Velmor?", ("Arvenia",), "nq", (), ())
    url = _closed_port_url()
    task = Task("searchqa-test-00000", "searchqa", "test", question.text, "nq",
                {"corpus": {}, "question": question.to_json(),
                 "retrieval": {"kind": "server", "url": url, "timeout_s": 1.0, "retries": 0}})
    env = SearchQAEnv()
    env.reset(task)
    obs, _, done, info = env.step("<search> Velmor </search>")
    assert obs.text.startswith(f"<information>Search failed: the retrieval server at {url} did "
                               "not answer")
    assert info.valid and not done


def test_a_bad_server_url_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="http://127.0.0.1:8000/retrieve"):
        ServerRetriever("127.0.0.1:8000/retrieve")


@pytest.mark.parametrize("kind", sorted(set(HOSTILE_KINDS) - {"ok"}))
def test_a_hostile_retrieval_server_becomes_an_observation_within_the_timeout(kind):
    question = Question("Where is Velmor?", ("Arvenia",), "nq", (), ())
    with HostileServer(kind) as server:
        task = Task("searchqa-test-00000", "searchqa", "test", question.text, "nq",
                    {"corpus": {}, "question": question.to_json(),
                     "retrieval": {"kind": "server", "url": server.url(), "timeout_s": 0.5,
                                   "retries": 0}})
        env = SearchQAEnv()
        env.reset(task)
        began = time.monotonic()
        obs, _, done, info = env.step("<search> Velmor </search>")
        elapsed = time.monotonic() - began
    assert obs.text.startswith(f"<information>Search failed: the retrieval server at "
                               f"{server.url()} "), obs.text[:300]
    assert len(obs.text) < 500 and info.valid and not done
    assert elapsed < 1.5
