#!/bin/bash
PYTHONDONTWRITEBYTECODE=1 python3 /tests/test_calc.py
