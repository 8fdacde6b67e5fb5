#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
set -e
cat > src/slugkit/__init__.py <<'PY'
"""URL slugs."""
import re
import unicodedata

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str, max_length: int = 60) -> str:
    """Lower-case ASCII words of `text` joined by `-`: accents dropped
    (NFKD), any run of other characters a single separator, none at either
    end, cut at `max_length` on a word boundary when it can be (else hard)."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
    slug = _SEPARATORS.sub("-", plain.lower()).strip("-")
    if len(slug) <= max_length:
        return slug
    cut = slug[: max_length + 1].rfind("-")
    return slug[:cut] if cut > 0 else slug[:max_length]
PY
# Build and install it as a developer would, offline.
pip install --quiet --no-index --no-build-isolation --no-deps . > /dev/null
cd /tmp && slugkit-cli /code/titles.txt > /code/slugs.txt
