"""The text of generated transcripts: system prompts, math problems, chains of thought.

Contract: pure functions of the `random.Random` they are given (or of nothing), so a transcript
is fixed by its group's seed. The strings are non-ASCII on purpose (escapes, surrogate pairs,
RTL, control characters), as real transcripts are; `_huge_text()` is the ~200 KB runaway
generation with a NUL that readers must survive.
"""

from __future__ import annotations

import random


_SYSTEM_PROMPTS = (
    "Solve the problem step by step. Answer with a single number inside \\boxed{}.",
    "Tu es un assistant qui r\u00e9sout des probl\u00e8mes \u2014 "
    "r\u00e9ponds en fran\u00e7ais si possible.",
    "You are a careful mathematician. Put the final answer in \\boxed{}.",
)
_TOOL_SYSTEM_PROMPT = ("You are a helpful assistant with access to a calculator tool. "
                       "Use it when arithmetic is non-trivial.")
_THOUGHTS = (
    "Let's restate the quantities carefully.",
    "Multiply first, then add \u2014 order of operations matters.",
    "Double-check units (km/h) before answering.",
    "I might be overcomplicating this; simplify.",
    "Check: emoji: \U0001F600\U0001F680\U0001F9E0\U0001F44D\U0001F3FD",
    "Check: \u7b54\u6848\u662f 42\u3002",
    "Check: \u0627\u0644\u062c\u0648\u0627\u0628 \u0647\u0648 \u0664\u0662",
    "Check: zero-width\u200bjoiner\u200d and NBSP\u00a0here",
    "Check: \u2211_{k=1}^{n} k = n(n+1)/2",
    "Check: \u041e\u0442\u0432\u0435\u0442: \u0441\u043e\u0440\u043e\u043a \u0434\u0432\u0430.",
    "Check: na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u2014 "
    "\u201cquotes\u201d \u2018single\u2019 \u2026",
    "Check: ANSI \x1b[31mred\x1b[0m escape",
    "Check: backslashes \\n \\t \\\\ and a JSON-looking {\"a\": [1, 2]}",
    "Check: HTML <b>bold</b> & entities &amp; stay text",
)


def _problem(rng: random.Random) -> tuple[str, int, str]:
    """(question, answer, calculator expression)."""
    kind = rng.randrange(5)
    a, b, c = rng.randint(2, 99), rng.randint(2, 60), rng.randint(1, 20)
    if kind == 0:
        hours = rng.randint(2, 12)
        return (f"A train travels {a * hours} km in {hours} hours. "
                "What is its average speed in km/h?", a, f"{a * hours}/{hours}")
    if kind == 1:
        return (f"Ana has {a} coins and buys {c} boxes of {b} more. How many coins now?",
                a + b * c, f"{a}+{b}*{c}")
    if kind == 2:
        return f"Compute {a} \u00d7 {b} \u2212 {c}.", a * b - c, f"{a}*{b}-{c}"
    if kind == 3:
        return (f"Un magasin vend {a} pommes par jour pendant {c} jours. Combien au total\u00a0?",
                a * c, f"{a}*{c}")
    return (f"\u5c0f\u660e\u6709 {a} \u4e2a\u82f9\u679c\uff0c\u53c8\u4e70\u4e86 {b} \u4e2a\u3002"
            "\u73b0\u5728\u6709\u591a\u5c11\u4e2a\uff1f", a + b, f"{a}+{b}")


def _thinking(rng: random.Random, answer: int) -> str:
    lines = [f"Step {i + 1}: {rng.choice(_THOUGHTS)}" for i in range(rng.randint(2, 5))]
    return "\n".join(lines) + f"\nSo the answer is {answer}."


def _huge_text() -> str:
    """A ~200 KB runaway generation with a NUL in the middle (seen in real transcripts)."""
    chunk = "The answer is 42. \u00c9tape suivante\u2026 0123456789abcdef\n"
    half = (chunk * (102_400 // len(chunk) + 1))[:102_400]  # 2 x 100 KiB of text
    return half + "\x00" + half + "\\boxed{42}"
