#!/bin/bash
echo "$MARK" > mark.txt
echo "failing on purpose" >&2
exit 3
