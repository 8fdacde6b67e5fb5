"""slugkit, installed: its slugify against a reference, and its command."""
import random
import re
import subprocess
import unicodedata

import pytest

import slugkit


def reference(text, max_length=60):
    words = []
    word = ""
    for ch in unicodedata.normalize("NFKD", text):
        if ord(ch) < 128 and (ch.isalnum()):
            word += ch.lower()
        elif unicodedata.category(ch) == "Mn":
            continue
        elif word:
            words.append(word)
            word = ""
    if word:
        words.append(word)
    slug = "-".join(words)
    if len(slug) <= max_length:
        return slug
    out = ""
    for w in words:
        if len(out) + len(w) + (1 if out else 0) > max_length:
            break
        out = f"{out}-{w}" if out else w
    return out or slug[:max_length]


ALPHABET = "abcXYZ019 -_/.,!?éèüñçÅØ–—'\"\t"


def cases(n, seed):
    r = random.Random(seed)
    return [("".join(r.choice(ALPHABET) for _ in range(r.randint(0, 90))), r.choice([10, 30, 60])) for _ in range(n)]


@pytest.mark.parametrize("text,limit", cases(1500, 1))
def test_against_reference(text, limit):
    assert slugkit.slugify(text, limit) == reference(text, limit)


@pytest.mark.parametrize("text,expected", [
    ("Hello, World!", "hello-world"),
    ("  Café au lait  ", "cafe-au-lait"),
    ("naïve résumé", "naive-resume"),
    ("---", ""),
    ("C++ / Rust", "c-rust"),
])
def test_examples(text, expected):
    assert slugkit.slugify(text) == expected


def test_slugs_are_clean():
    for text, limit in cases(5000, 2):
        s = slugkit.slugify(text, limit)
        assert len(s) <= limit
        assert re.fullmatch(r"([a-z0-9]+(-[a-z0-9]+)*)?", s), s


def test_the_installed_command():
    out = subprocess.run(["slugkit-cli", "/code/titles.txt"], capture_output=True, text=True, check=True)
    titles = open("/code/titles.txt", encoding="utf-8").read().splitlines()
    assert out.stdout.splitlines() == [reference(t) for t in titles]
    assert open("/code/slugs.txt").read() == out.stdout
