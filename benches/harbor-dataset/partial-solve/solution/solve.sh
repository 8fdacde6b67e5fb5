#!/bin/bash
touch left.txt
echo "ran out of ideas" >&2
exit 3
