"""The stand-in server's "model" (STAND-IN, no language model): a deterministic completion rule.

The fixture dumps record outputs made with this rule, so that a replay against the stand-in
server at temperature 0 reproduces them exactly, and a server told to diverge does not.
"""

from __future__ import annotations


def tokenize(text: str) -> list[int]:
    return [ord(char) % 1000 for char in text]


def complete(input_ids: list[int], max_new_tokens: int) -> tuple[list[int], str]:
    """(output_ids, text) for a prompt: the same every time for the same prompt and length."""
    seed = sum(input_ids)
    output_ids = [(seed + 7 * step) % 1000 for step in range(max_new_tokens)]
    return output_ids, "".join(chr(97 + token % 26) for token in output_ids)
