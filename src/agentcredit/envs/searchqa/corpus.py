"""Passages: the unit of retrieval, in the FlashRAG / Search-R1 corpus schema.

A corpus line of FlashRAG and Search-R1 is ``{"id": ..., "contents": ...}``
whose ``contents`` holds the title on its first line and the text after it;
``Passage.contents`` and ``Passage.from_contents`` convert both ways. Generated
passages also carry, for the embedded agent's suggested actions
(``engine.SearchQAEnv.admissible_actions``), the titles of the entities they link
to and the answerable spans they contain; real corpora have neither.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Passage:
    """One retrievable passage.

    Attributes:
        doc_id: the corpus id (a string; FlashRAG ids are numbers written as text).
        title: the first line of ``contents``.
        text: the rest of ``contents``.
        links: titles of the passages about entities this one mentions (generated only).
        spans: short strings of this passage an answer could be (generated only).
    """

    doc_id: str
    title: str
    text: str
    links: tuple[str, ...] = ()
    spans: tuple[str, ...] = ()

    @property
    def contents(self) -> str:
        """``title`` and ``text`` as one FlashRAG ``contents`` string."""
        return f"{self.title}\n{self.text}"

    @classmethod
    def from_contents(cls, doc_id: str, contents: str) -> Passage:
        """The passage of a FlashRAG ``contents`` string (title on the first line)."""
        title, _, text = contents.partition("\n")
        return cls(str(doc_id), title.strip(), text.strip())
