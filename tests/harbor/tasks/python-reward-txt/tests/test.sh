#!/bin/bash
id -un > /logs/verifier/user.txt
python3 /tests/test_calc.py
