"""ALFWorld's ``game.tw-pddl`` files: read one and check it has what every reader needs.

The engine loads a game from it, the verifier and the demonstrator read the
PDDL problem, and the official loader reads the grammar; all go through
``read_game_file``, so a missing or broken file fails the same way everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

_GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")


class GameFileError(ValueError):
    """A game file is missing, unreadable or not an ALFWorld ``game.tw-pddl``."""


def read_game_file(path: str | Path) -> dict:
    """Load and check a ``game.tw-pddl`` file; errors name the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise GameFileError(f"game file not found: {path}") from err
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GameFileError(f"game file {path} is not valid JSON ({err}); regenerate it "
                            "or delete its folder so the generator rebuilds it") from err
    missing = [k for k in _GAME_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise GameFileError(f"game file {path} lacks {missing}; it is not an ALFWorld "
                            "game.tw-pddl file")
    return data
