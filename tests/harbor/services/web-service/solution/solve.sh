#!/bin/bash
# The oracle: Python's urllib honours no_proxy as curl does.
python3 -c 'import os, urllib.request; print(urllib.request.urlopen(os.environ["API_URL"] + "/word").read().decode(), end="")' > word.txt
