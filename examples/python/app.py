"""An example cordon plugin written in Python: the `word_count` tool.

It counts the lines, words and characters of a text file of the workspace, as `wc` does.
componentize-py turns this module into a WebAssembly component of the `plugin` world in
wit/cordon.wit: the class `Tool` below implements the exported `tool` interface. The plugin
reads the workspace with ordinary Python file I/O; its manifest, word_count.toml, grants it the
workspace read-only, so that is all it can see.

Build it (see docs/plugins.md, "Writing a plugin in Python"):

    componentize-py -d ../../wit -w plugin componentize app -o word_count.wasm
"""

import json
import os

from wit_world import exports
from wit_world.imports.types import (
    Context,
    Counter,
    Declaration,
    Display,
    Kind,
    Location,
    Outcome,
)

NAME = "word_count"

DESCRIPTION = (
    "Count the lines, words and characters of a text file of the workspace, as `wc` does. "
    "`path` is relative to the workspace root. Words are runs of non-whitespace characters; "
    "a last line without a newline still counts as a line."
)

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "File path, relative to the workspace root.",
        }
    },
    "required": ["path"],
    "additionalProperties": False,
}


def outcome(output: str, failed: bool = False, locations=None) -> Outcome:
    return Outcome(
        output=output,
        trailer=None,
        omitted_bytes=0,
        failed=failed,
        locations=locations or [],
        diff=None,
    )


def resolve(root: str, given: str) -> str:
    """`given` resolved against `root`, or ValueError when it leaves the workspace."""
    if not given:
        raise ValueError("the path is empty: give a file path relative to the workspace root")
    if given.startswith("~"):
        raise ValueError(f'{given} is outside the workspace: "~" is not expanded')
    path = os.path.normpath(os.path.join(root, given))
    if path != root and not path.startswith(root.rstrip("/") + "/"):
        raise ValueError(
            f"{given} is outside the workspace ({root}); only paths inside it can be used."
        )
    return path


def plural(n: int, singular: str, many: str) -> str:
    return f"{n} {singular if n == 1 else many}"


class Tool(exports.Tool):
    def tools(self, cwd: str) -> list[Declaration]:
        return [
            Declaration(
                name=NAME,
                description=DESCRIPTION,
                input_schema=json.dumps(SCHEMA),
                kind=Kind.READ,
                display=Display(icon="🧮", key_argument="path", preview_output=True),
                counter=Counter(
                    key="file_ops", icon="📝", singular="file op", plural="file ops"
                ),
            )
        ]

    def call(self, name: str, input: str, context: Context) -> Outcome:
        if name != NAME:
            return outcome(f"this plugin has no tool named {name!r}", failed=True)
        given = json.loads(input)["path"]
        try:
            path = resolve(context.cwd, given)
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
        except ValueError as e:
            # Lexical refusals (from resolve) and text that is not UTF-8 (UnicodeDecodeError).
            if isinstance(e, UnicodeDecodeError):
                return outcome(f"{given} is not UTF-8 text; word_count counts text files only", True)
            return outcome(str(e), failed=True)
        except FileNotFoundError:
            return outcome(f"{given} does not exist", failed=True)
        except IsADirectoryError:
            return outcome(f"{given} is a directory, not a file; give the path of a file", True)
        except OSError as e:
            return outcome(f"{given}: {e.strerror or e}", failed=True)
        lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        words = len(text.split())
        output = (
            f"{given}: {plural(lines, 'line', 'lines')}, {plural(words, 'word', 'words')}, "
            f"{plural(len(text), 'character', 'characters')}"
        )
        return outcome(output, locations=[Location(path=path, line=None)])
