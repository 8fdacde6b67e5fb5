#!/bin/bash
if [ ! -s out.txt ] && ! grep -q "exit 0" status.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
