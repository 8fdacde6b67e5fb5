#!/bin/bash
# The task's solution: the step "final" has none of its own.
echo three > three.txt
