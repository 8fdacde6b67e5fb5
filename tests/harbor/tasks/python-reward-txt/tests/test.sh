#!/bin/bash
id -un > /logs/verifier/user.txt
echo "$HOME" > /logs/verifier/home.txt
python3 /tests/test_calc.py
