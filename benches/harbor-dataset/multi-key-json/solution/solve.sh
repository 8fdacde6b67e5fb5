#!/bin/bash
for f in a b c; do echo "$f.txt" > "$f.txt"; done
