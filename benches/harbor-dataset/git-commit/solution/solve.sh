#!/bin/bash
set -e
git add NOTES.md
git commit -qm "Add notes"
