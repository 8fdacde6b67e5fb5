"""The vendored build: every module compiled at both levels, the zip whole and checked, imports from it alone."""
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

SRC = "/app/src"
ZIP = "/app/dist/vendor.zip"


def sources():
    for root, _, files in os.walk(SRC):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def test_every_module_is_compiled_at_both_levels():
    missing = [
        (path, level)
        for path in sources()
        for level in ("", 1)
        if not os.path.exists(importlib.util.cache_from_source(path, optimization=level))
    ]
    assert not missing, missing[:5]


def test_the_zip_holds_the_tree_and_reads_back():
    with zipfile.ZipFile(ZIP) as z:
        assert z.testzip() is None
        names = set(z.namelist())
        infos = z.infolist()
    assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in infos)
    on_disk = {
        os.path.relpath(os.path.join(root, f), SRC) for root, _, files in os.walk(SRC) for f in files
    }
    assert names == on_disk


def test_the_checksum():
    line = open("/app/dist/SHA256SUMS").read().split()
    assert line[1] == "vendor.zip"
    assert line[0] == hashlib.sha256(open(ZIP, "rb").read()).hexdigest()


@pytest.mark.parametrize(
    "code",
    [
        "import json; assert json.loads(json.dumps({'a': [1, 2.5, None]})) == {'a': [1, 2.5, None]}",
        "import email.message; m = email.message.EmailMessage(); m['To'] = 'a@b.c'; m.set_content('hi'); assert 'a@b.c' in m.as_string()",
        "import urllib.parse as p; assert p.urlsplit('https://x.y/p?q=1').query == 'q=1'",
        "import xml.dom.minidom as d; assert d.parseString('<a><b/></a>').documentElement.tagName == 'a'",
        "import asyncio; assert asyncio.run(asyncio.sleep(0, 'done')) == 'done'",
        "import tomllib; assert tomllib.loads('a = 1')['a'] == 1",
        "import collections; assert collections.Counter('abca')['a'] == 2",
        "import html; assert html.unescape('&amp;') == '&'",
    ],
)
def test_modules_import_from_the_zip_alone(code):
    # The zip first on the path; each module must come from it.
    check = (
        f"import sys; sys.path.insert(0, {ZIP!r}); {code}; "
        "import importlib; mods = [m for m in sys.modules.values() if getattr(m, '__file__', None)]; "
        "name = " + repr(code.split()[1].split('.')[0].rstrip(';')) + "; "
        f"assert sys.modules[name].__file__.startswith({ZIP!r}), sys.modules[name].__file__"
    )
    subprocess.run([sys.executable, "-I", "-c", check], check=True)
