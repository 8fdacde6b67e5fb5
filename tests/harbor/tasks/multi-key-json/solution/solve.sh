#!/bin/bash
touch a.txt b.txt
echo "oracle was here" > /tmp/agent-notes.txt
mkdir -p out && echo result > out/result.txt
